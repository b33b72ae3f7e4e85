// The assistant's side of one run: the live trace (steps, tool cards), notices,
// the streamed then final answer, the busy indicator and a summary line.
import { h, icon, spinner } from '../dom.js';
import { setMarkdown } from '../markdown.js';
import { RunBudget, usageDetail, usageParts } from './budget.js';
import { addCodeCopyButtons, copyButton } from './copy.js';
import { formatDuration, plural } from '../format.js';
import { FRAME, UPDATE } from '../protocol.js';
import { errorTitle } from './messages.js';
import { QuestionCard, StepView } from './steps.js';
import { thinkingBlock } from './thinking.js';
import { ToolCard } from './toolcard.js';

const COMPLETION_TEXT = {
  finished: 'Finished',
  max_steps: 'Step budget used up',
  budget: 'Budget used up',
  stopped: 'Stopped',
  rejected: 'Ended after a rejected tool',
  timeout: 'Question timed out',
  error: 'Ended with an error',
};

/** Endings after which the steps fold away into one line (the rest stay open). */
const FOLDS_AWAY = new Set(['finished', 'max_steps', 'budget']);

/** What is running after `frame`, for the busy indicator (null = unchanged). */
export function phaseAfter(frame, agent) {
  const kind = frame.type === FRAME.AGENT_UPDATE ? frame.update_type : frame.type;
  switch (kind) {
    case UPDATE.AGENT_START: return 'Starting…';
    case UPDATE.AGENT_PLAN: return 'Carrying out the plan…';
    case UPDATE.AGENT_TURN_START: return 'Reasoning…';
    case UPDATE.AGENT_REASON: return frame.control?.finish ? 'Writing the answer…' : 'Choosing an action…';
    case FRAME.TOOL_START: return `Running ${frame.tool_name}…`;
    case FRAME.TOOL_COMPLETE:
    case FRAME.TOOL_ERROR: return agent ? 'Observing…' : 'Thinking…';
    case FRAME.TOOL_APPROVAL_REQUEST: return 'Waiting for your approval';
    case UPDATE.AGENT_REQUEST_INPUT: return 'Waiting for your answer';
    case UPDATE.AGENT_OBSERVE: {
      const c = frame.control;
      return c && (c.should_continue === false || c.final_answer) ? 'Writing the answer…' : 'Continuing…';
    }
    case UPDATE.AGENT_REQUEST_INPUT_TIMEOUT:
    case UPDATE.AGENT_MAX_STEPS_REACHED:
    case UPDATE.AGENT_BUDGET_REACHED:
    case FRAME.TOKEN_STREAM: return 'Writing the answer…';
    case UPDATE.AGENT_STOPPED: return 'Stopping…';
    case FRAME.CHAT_RESPONSE:
    case UPDATE.AGENT_COMPLETION: return 'Finishing…';
    default: return null;
  }
}

/** Steps a run that used up its budget is continued with. */
export const CONTINUE_STEPS = 5;

export class RunView {
  constructor({ mode, onGrant, onContinue, onStopAfterStep, onRetry, onGrantBudget, onContinueBudget, budgetCap }) {
    this.runId = null;
    this.agent = mode === 'agent';
    this.maxSteps = null;
    this.cap = null;
    this.steps = new Map();
    this.tools = new Map();
    this.questions = new Map();
    this.toolCount = 0;
    this.active = true;
    this.trace = null;
    this.onGrant = onGrant;
    this.onContinue = onContinue;
    this.onContinueBudget = onContinueBudget;
    this.onRetry = onRetry;
    this.retired = false;
    this.answerText = '';
    this.actions = null;
    this.stopAfterRequested = false;
    this.continueButton = null;
    /** Thinkings of tool-mode rounds shown above the answer until a tool call of their round claims them. */
    this.looseThoughts = [];
    this.pendingPlan = null;

    this.notices = h('div', { class: 'run-notices' });
    this.budget = new RunBudget({ notices: this.notices, onGrant: onGrantBudget, cap: budgetCap ?? (() => null) });
    this.answer = h('div', { class: 'answer md', hidden: true });
    this.busyText = h('span', { class: 'busy-text' });
    this.busyStep = h('span', { class: 'busy-step' });
    this.grantButton = h('button', { type: 'button', class: 'link-button busy-grant', hidden: true }, icon('plus'), h('span', { text: '5 steps' }));
    this.grantButton.setAttribute('aria-label', 'Give the agent 5 steps more');
    this.grantButton.addEventListener('click', () => this.onGrant?.(5));
    this.stopAfterButton = h('button', { type: 'button', class: 'link-button busy-stop-after', hidden: true }, icon('stop'), h('span', { text: 'Stop after this step' }));
    this.stopAfterButton.addEventListener('click', () => {
      if (onStopAfterStep?.()) this.stopAfterStepRequested();
    });
    this.busy = h('div', { class: 'busy', role: 'status' }, spinner(), this.busyText, this.busyStep, this.grantButton, this.stopAfterButton);
    this.meta = h('p', { class: 'run-meta', hidden: true });
    this.body = h('div', { class: 'turn-body' }, this.notices, this.answer, this.busy, this.meta);
    this.element = h(
      'li',
      { class: 'turn turn-assistant', dataset: { mode } },
      h('div', { class: 'turn-avatar', 'aria-hidden': 'true' }, icon('loop')),
      this.body,
    );
    this.element.setAttribute('aria-label', 'Assistant');
    this.setPhase(this.agent ? 'Starting…' : 'Thinking…');
  }

  bind(runId) {
    this.runId = runId;
    this.element.dataset.runId = runId;
  }

  // ---------------------------------------------------------------- busy

  setPhase(label) {
    if (label) this.busyText.textContent = label;
    this.element.dataset.phase = label ?? '';
  }

  updateBusyStep() {
    const step = this.currentStep;
    const where = step && this.agent ? `Step ${step.step} / ${this.maxSteps}` : '';
    this.busyStep.textContent = where && this.stopAfterRequested ? `${where} · stopping after it` : where;
    const canGrant = this.agent && this.active && this.maxSteps !== null && this.cap !== null && this.maxSteps < this.cap;
    this.grantButton.hidden = !canGrant;
    this.stopAfterButton.hidden = !(this.agent && this.active && step && !this.stopAfterRequested);
  }

  /** The graceful stop was sent: the step in progress finishes, then the run ends. */
  stopAfterStepRequested() {
    this.stopAfterRequested = true;
    this.updateBusyStep();
  }

  // ---------------------------------------------------------------- trace

  ensureTrace() {
    if (!this.trace) {
      this.traceTitle = h('span', { class: 'trace-title', text: this.agent ? 'Agent run' : 'Tool calls' });
      this.traceStats = h('span', { class: 'trace-stats' });
      this.stepList = h('ol', { class: 'steps' });
      this.trace = h(
        'details',
        { class: 'trace', open: true },
        h('summary', { class: 'trace-summary' }, this.traceTitle, this.traceStats),
        this.stepList,
      );
      this.body.prepend(this.trace);
    }
    return this.trace;
  }

  step(number) {
    let view = this.steps.get(number);
    if (!view) {
      this.ensureTrace();
      this.currentStep?.setState('done');
      view = new StepView(number, this.agent ? this.maxSteps : null, { agent: this.agent });
      this.steps.set(number, view);
      this.stepList.append(view.element);
      this.currentStep = view;
      this.updateTraceStats();
      this.updateBusyStep();
    }
    return view;
  }

  updateTraceStats() {
    if (!this.trace) return;
    const parts = [];
    if (this.agent) parts.push(this.active && this.currentStep ? `Step ${this.currentStep.step} / ${this.maxSteps}` : plural(this.steps.size, 'step'));
    if (this.toolCount) parts.push(plural(this.toolCount, 'tool call'));
    if (!this.active && this.durationMs !== undefined) parts.push(formatDuration(this.durationMs));
    this.traceStats.textContent = parts.join(' · ');
  }

  // ---------------------------------------------------------------- agent updates

  /** Agent frames arrived (a replay may begin after this run's agent_start). */
  becomeAgent() {
    if (this.agent) return;
    this.agent = true;
    this.element.dataset.mode = 'agent';
    if (this.traceTitle) this.traceTitle.textContent = 'Agent run';
  }

  start({ max_steps, budget }) {
    this.becomeAgent();
    this.maxSteps = max_steps;
    this.budget.start(budget);
    this.ensureTrace();
    this.updateTraceStats();
  }

  setCap(cap) {
    this.cap = cap;
    this.updateBusyStep();
  }

  /** plan_execute's plan (a later revision replaces nothing: both stay visible). */
  plan({ steps, revision, content }) {
    const block = this.pendingPlan ?? this.planBlock();
    this.pendingPlan = null;
    block.dataset.revision = String(revision);
    block.querySelector('.step-badge').textContent = revision > 1 ? `New plan (${revision})` : 'Plan';
    if (content?.trim()) block.append(h('p', { class: 'plan-note', text: content.trim() }));
    block.append(h('ol', { class: 'plan-steps' }, steps.map((text) => h('li', { text }))));
  }

  planBlock() {
    this.ensureTrace();
    const block = h('li', { class: 'plan' }, h('div', { class: 'step-head' }, h('span', { class: 'step-badge', text: 'Plan' })));
    this.stepList.append(block);
    return block;
  }

  /**
   * A reasoning model's thinking (`thinking`), folded under the phase it
   * belongs to: in its step's reason/act/observe block, in the plan's block,
   * or (a plain chat, the final answer, a tool-mode round) above the answer.
   */
  thinking(frame) {
    const block = thinkingBlock(frame);
    if (frame.phase === 'plan') {
      if (!this.pendingPlan) this.pendingPlan = this.planBlock(); // the plan fills it
      this.pendingPlan.append(block);
    } else if (frame.step > 0 && ['reason', 'act', 'observe'].includes(frame.phase)) {
      this.step(frame.step).thought(frame);
    } else {
      this.answer.before(block);
      // in tool mode the same call may lead to tool calls (then it moves to its round)
      if (frame.phase === 'chat' && frame.step > 0) this.looseThoughts.push({ step: frame.step, block });
    }
  }

  turnStart({ step, max_steps }) {
    this.maxSteps = max_steps ?? this.maxSteps;
    this.step(step);
  }

  reason(frame) {
    this.step(frame.step).reason(frame);
  }

  observe(frame) {
    this.step(frame.step).observe(frame);
  }

  stepsGranted({ max_steps, granted }) {
    this.maxSteps = max_steps;
    for (const view of this.steps.values()) view.setMax(max_steps);
    this.updateTraceStats();
    this.updateBusyStep();
    this.notice('info', `Budget raised by ${plural(granted, 'step')} to ${max_steps}.`);
  }

  /** The user steered the run: shown in the step where it was told. */
  interjection(frame) {
    this.step(frame.step).interjection(frame);
  }

  duplicateCall({ step, tool_name }) {
    this.step(step).note(`Repeated call to ${tool_name} — the model was told it already has this result.`);
  }

  maxStepsReached({ steps }) {
    this.notice('warn', `Used up the step budget (${plural(steps, 'step')}): the agent answers with what it has so far, and you can let it continue.`);
  }

  budgetWarning(frame) {
    this.budget.warning(frame);
  }

  budgetGranted(frame) {
    this.budget.granted(frame);
  }

  budgetReached(frame) {
    this.budget.reachedBound(frame);
  }

  stopped({ step, mode }) {
    const how = mode === 'after_step' ? 'after the current step' : 'immediately';
    this.notice('stop', step ? `Stopped by you at step ${step} (${how}).` : `Stopped by you (${how}).`);
  }

  agentError({ message }) {
    this.notice('error', `The model provider failed: ${message}`);
  }

  runError({ message, error_type: errorType }) {
    this.notice('error', `${errorTitle(errorType)}: ${message}`);
  }

  completion({ steps, reason, usage, duration_ms }) {
    this.durationMs = duration_ms;
    const ending = reason === 'budget' ? this.budget.endText() : COMPLETION_TEXT[reason] ?? reason;
    const parts = [ending, plural(steps, 'step')];
    if (this.toolCount) parts.push(plural(this.toolCount, 'tool call'));
    parts.push(formatDuration(duration_ms));
    const used = usageParts(usage);
    const line = used.length ? h('span', { class: 'run-usage', title: usageDetail(usage) || null, text: used.join(' · ') }) : null;
    this.meta.replaceChildren(parts.join(' · '), line ? ' · ' : '', line ?? '');
    this.meta.hidden = false;
    this.element.dataset.reason = reason;
    if (reason === 'budget') this.offerMoreBudget();
    if (reason === 'max_steps' && this.onContinue && !this.continueButton && !this.retired) {
      this.continueButton = h(
        'button',
        { type: 'button', class: 'button button-quiet run-continue' },
        icon('plus'),
        h('span', { text: `Continue (+${CONTINUE_STEPS} steps)` }),
      );
      this.continueButton.addEventListener('click', () => this.onContinue(CONTINUE_STEPS));
      this.meta.after(this.continueButton);
    }
  }

  /** A plain run's footer: what its model calls used (and cost). */
  showUsage(usage) {
    const used = usageParts(usage);
    if (!used.length) return;
    const line = h('span', { class: 'run-usage', title: usageDetail(usage) || null, text: used.join(' · ') });
    this.meta.replaceChildren(line);
    this.meta.hidden = false;
  }

  /** A run ended at its own budget goes on, when the server allows more. */
  offerMoreBudget() {
    if (!this.onContinueBudget || this.continueButton || this.retired) return;
    this.continueButton = this.budget.continueButton((budget) => this.onContinueBudget(budget));
    if (this.continueButton) this.meta.after(this.continueButton);
  }

  /** A run shown from the stored history (its frames are no longer kept). */
  earlier({ status, steps }) {
    this.retire();
    const parts = ['Earlier run', status, steps ? plural(steps, 'step') : null, 'its steps are no longer kept'];
    this.meta.textContent = parts.filter(Boolean).join(' · ');
    this.meta.hidden = false;
    this.element.dataset.earlier = 'true';
  }

  /** A later run started: this one is no longer the one to continue or retry. */
  retire() {
    this.retired = true;
    this.continueButton?.remove();
    this.continueButton = null;
    this.actions?.querySelector('.turn-retry')?.remove();
  }

  // ---------------------------------------------------------------- questions

  requestInput(frame) {
    const card = new QuestionCard(frame);
    this.questions.set(frame.question_id, card);
    this.step(frame.step).actList().append(card.element);
    return card;
  }

  questionAnswered(questionId, content) {
    this.questions.get(questionId)?.setState(content === null ? 'unknown' : 'answered', content ?? '');
  }

  questionTimedOut({ question_id }) {
    this.questions.get(question_id)?.setState('timeout');
  }

  // ---------------------------------------------------------------- tools

  tool(frame) {
    let card = this.tools.get(frame.tool_call_id);
    if (!card) {
      card = new ToolCard(frame);
      this.tools.set(frame.tool_call_id, card);
      this.toolCount += 1;
      const step = this.step(frame.step ?? 1);
      this.claimThoughts(step);
      step.actList().append(card.element);
      this.updateTraceStats();
    }
    return card;
  }

  /** The tool-mode thinkings that led to `step`'s tool calls go into its round. */
  claimThoughts(step) {
    for (const { block } of this.looseThoughts.filter((t) => t.step === step.step)) step.adopt(block);
    this.looseThoughts = this.looseThoughts.filter((t) => t.step !== step.step);
  }

  toolStart(frame) {
    const card = this.tool(frame);
    card.setArguments(frame.arguments);
    card.setStatus('running');
  }

  toolComplete(frame) {
    this.tool(frame).complete(frame);
  }

  toolError(frame) {
    this.tool(frame).fail(frame);
  }

  approvalRequested(frame) {
    this.tool(frame).awaitApproval();
  }

  approvalDecided(callId, decision) {
    this.tools.get(callId)?.approvalDecided(decision);
  }

  // ---------------------------------------------------------------- answer

  token({ token, is_first: isFirst, is_last: isLast }) {
    if (isFirst || !this.stream) {
      this.stream = h('span', { class: 'stream-text' });
      this.answer.replaceChildren(this.stream, h('span', { class: 'caret', 'aria-hidden': 'true' }));
      this.answer.hidden = false;
      this.answer.dataset.state = 'streaming';
      this.answer.setAttribute('aria-busy', 'true');
    }
    if (token) this.stream.append(token);
    if (isLast) this.answer.querySelector('.caret')?.remove();
  }

  response({ message, sources = [], usage = null }) {
    // an agent run's usage line comes with its `agent_completion`
    if (usage && !this.agent) this.showUsage(usage);
    this.stream = null;
    setMarkdown(this.answer, message);
    addCodeCopyButtons(this.answer);
    this.answerText = message;
    this.answer.hidden = !message;
    this.answer.dataset.state = 'final';
    this.answer.removeAttribute('aria-busy');
    this.citations?.remove();
    this.citations = sources.length ? citationList(sources) : null;
    if (this.citations) this.answer.after(this.citations);
  }

  /** Under a finished answer: copy it, and (on the latest run) ask again. */
  showActions() {
    if (this.actions || !this.answerText) return;
    const retry = this.onRetry && !this.retired
      ? h('button', { type: 'button', class: 'copy-button turn-retry', 'aria-label': 'Retry: ask the same again' }, icon('retry'), h('span', { text: 'Retry' }))
      : null;
    retry?.addEventListener('click', () => this.onRetry());
    this.actions = h('div', { class: 'turn-actions' }, copyButton(() => this.answerText, { what: 'answer' }), retry);
    (this.citations ?? this.answer).after(this.actions);
  }

  notice(kind, text) {
    const name = { warn: 'alert', error: 'alert', stop: 'stop', info: 'info' }[kind] ?? 'info';
    this.notices.append(h('p', { class: `run-notice run-notice-${kind}` }, icon(name), h('span', { text })));
  }

  // ---------------------------------------------------------------- end

  finish() {
    this.active = false;
    this.element.dataset.state = 'done';
    this.currentStep?.setState('done');
    for (const card of this.tools.values()) card.abandon();
    for (const question of this.questions.values()) {
      if (question.state === 'waiting') question.setState('withdrawn');
    }
    if (this.stream) this.answer.querySelector('.caret')?.remove();
    this.answer.removeAttribute('aria-busy');
    this.busy.remove();
    this.budget.finish();
    this.showActions();
    if (this.trace) {
      // a run that did not finish keeps its steps open: where it ended matters
      this.trace.open = !FOLDS_AWAY.has(this.element.dataset.reason ?? 'finished');
      this.updateTraceStats();
    }
  }

  /** The chat never started (refused by the server). */
  discard() {
    this.element.remove();
  }
}

/** A cited document's path: a link that opens it (in a new tab), when the
 * server gave one of its own document URLs. */
function citationPath(source) {
  const url = typeof source.url === 'string' && source.url.startsWith('/api/sources/') ? source.url : null;
  if (!url) return h('span', { class: 'citation-path', text: source.path });
  return h('a', { class: 'citation-path', href: url, target: '_blank', rel: 'noopener noreferrer', title: `Open ${source.path}`, text: source.path });
}

/** The passages an answer rests on (`chat_response.sources`), numbered. */
function citationList(sources) {
  const items = sources.map((source) =>
    h(
      'li',
      { class: 'citation', title: source.excerpt || '' },
      h('span', { class: 'citation-source', text: source.source }),
      citationPath(source),
      source.location ? h('span', { class: 'citation-location', text: source.location }) : null,
      source.excerpt ? h('q', { class: 'citation-excerpt', text: source.excerpt }) : null,
    ),
  );
  return h(
    'section',
    { class: 'citations', 'aria-label': 'Sources' },
    h('h3', { class: 'citations-title', text: 'Sources' }),
    h('ol', { class: 'citations-list' }, items),
  );
}
