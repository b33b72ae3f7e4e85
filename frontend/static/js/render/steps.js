// One step of the reason → act → observe loop (or one round of tool mode).
import { h, icon, spinner } from '../dom.js';
import { setMarkdown } from '../markdown.js';
import { thinkingBlock } from './thinking.js';

const PHASE_LABELS = { reason: 'Reason', act: 'Act', observe: 'Observe' };

export class StepView {
  constructor(step, maxSteps, { agent }) {
    this.step = step;
    this.agent = agent;
    this.badge = h('span', { class: 'step-badge' });
    this.stateEl = h('span', { class: 'step-state' });
    this.phases = h('div', { class: 'phases' });
    this.act = null;
    /** Phase blocks a thinking opened before the phase itself showed: kind → {block, body}. */
    this.waiting = new Map();
    this.element = h(
      'li',
      { class: 'step', dataset: { step: String(step) } },
      h('div', { class: 'step-head' }, this.badge, this.stateEl),
      this.phases,
    );
    this.setMax(maxSteps);
    this.setState('running');
  }

  setMax(maxSteps) {
    this.maxSteps = maxSteps;
    const label = this.agent ? 'Step' : 'Round';
    this.badge.textContent = maxSteps ? `${label} ${this.step} / ${maxSteps}` : `${label} ${this.step}`;
  }

  setState(state) {
    this.state = state;
    this.element.dataset.state = state;
    if (state === 'running') {
      this.stateEl.replaceChildren(spinner(), h('span', { class: 'visually-hidden', text: 'in progress' }));
    } else {
      this.stateEl.replaceChildren();
    }
  }

  /** The body of the phase `kind` showing now: the block its thinking opened, or a new one. */
  phase(kind, label) {
    const waiting = this.waiting.get(kind);
    this.waiting.delete(kind);
    return waiting?.body ?? this.newPhase(kind, label).body;
  }

  newPhase(kind, label, before = null) {
    const body = h('div', { class: 'phase-body' });
    const block = h(
      'div',
      { class: `phase phase-${kind}`, dataset: { phase: kind } },
      h('span', { class: 'phase-label', text: label }),
      body,
    );
    this.phases.insertBefore(block, before);
    return { block, body };
  }

  /**
   * A reasoning model's thinking (`thinking` frame) in phase `phase`, folded
   * at the top of that phase's block. It comes before what the call leads to
   * (`agent_reason`, `tool_start`, `agent_observe`), so the block is opened
   * now and that frame fills it.
   */
  thought(frame) {
    const kind = frame.phase in PHASE_LABELS ? frame.phase : 'reason';
    let waiting = this.waiting.get(kind);
    if (!waiting) {
      waiting = this.newPhase(kind, this.agent || kind !== 'act' ? PHASE_LABELS[kind] : 'Tools');
      this.waiting.set(kind, waiting);
    }
    waiting.body.append(thinkingBlock({ ...frame, phase: kind }));
  }

  /** A thinking shown elsewhere first (tool mode: above the answer) that led to this step's tool calls. */
  adopt(element) {
    this.actList().before(element);
  }

  reason({ content, control }) {
    const body = this.phase('reason', 'Reason');
    const prose = content?.trim() || control?.plan || '';
    if (prose) body.append(markdownBlock(prose));
    if (control?.plan && control.plan.trim() !== prose.trim()) {
      body.append(keyValue('Plan', control.plan));
    }
    if (control?.finish) body.append(keyValue('Decision', 'Finish — the answer is ready'));
    if (!prose && !control) body.append(h('p', { class: 'muted', text: '(no reasoning text)' }));
  }

  /** The list tool cards and questions go into, created on first use. */
  actList() {
    if (!this.act) {
      this.act = h('ul', { class: 'act-list' });
      this.phase('act', this.agent ? 'Act' : 'Tools').append(this.act);
    }
    return this.act;
  }

  observe({ content, control }) {
    if (!this.act) {
      // a thinking may have opened the observe block already: the act comes before it
      const act = this.waiting.get('act')?.body ?? this.newPhase('act', 'Act', this.waiting.get('observe')?.block).body;
      this.waiting.delete('act');
      act.append(h('p', { class: 'muted', text: 'No tool call in this step.' }));
      this.act = h('ul', { class: 'act-list' });
    }
    const body = this.phase('observe', 'Observe');
    const prose = content?.trim() || control?.observation || '';
    if (prose) body.append(markdownBlock(prose));
    if (control && control.should_continue === false) {
      body.append(keyValue('Decision', 'Done — no further step needed'));
    }
  }

  /** The user's words told to the run at this step (`agent_interjection`). */
  interjection({ content, input_id: inputId }) {
    this.phases.append(
      h(
        'p',
        { class: 'step-steer', dataset: { inputId }, role: 'note' },
        icon('loop'),
        h('span', { class: 'step-steer-who', text: 'You: ' }),
        h('span', { class: 'step-steer-text', text: content }),
      ),
    );
  }

  note(text, kind = 'warn') {
    this.phases.append(h('p', { class: `step-note step-note-${kind}` }, icon('alert'), h('span', { text })));
  }
}

function markdownBlock(text) {
  const div = h('div', { class: 'md' });
  setMarkdown(div, text);
  return div;
}

function keyValue(key, value) {
  return h('p', { class: 'phase-kv' }, h('span', { class: 'phase-key', text: key }), h('span', { text: value }));
}

/** A `request_input` question inside the act phase, and what became of it. */
export class QuestionCard {
  constructor({ question, question_id }) {
    this.questionId = question_id;
    this.answerEl = h('p', { class: 'question-answer' });
    this.element = h(
      'li',
      { class: 'question-card', dataset: { questionId: question_id } },
      h('div', { class: 'question-card-head' }, icon('question'), h('span', { text: 'Asked you' })),
      h('p', { class: 'question-card-text', text: question }),
      this.answerEl,
    );
    this.setState('waiting');
  }

  setState(state, text = '') {
    this.state = state;
    this.element.dataset.state = state;
    const labels = {
      waiting: ['Waiting for your answer…', ''],
      answered: ['You answered: ', text],
      timeout: ['No answer in time — the agent went on without one.', ''],
      withdrawn: ['Withdrawn — the run ended before an answer.', ''],
      unknown: ['Answered.', ''],
    };
    const [lead, value] = labels[state];
    const parts = [h('span', { class: 'question-answer-lead', text: lead })];
    if (value) parts.push(h('strong', { text: value }));
    this.answerEl.replaceChildren(...parts);
  }
}
