// The toolbar under the message box: agent mode, strategy, max steps (capped
// by the server), a run's token budget (empty: the server's; capped by it),
// the tools popover (read-only, tool selection with effect
// badges) and the model. Changes are saved in `settings` (localStorage) and
// apply to the next message.
import { byId, h } from '../dom.js';
import { formatNumber } from '../format.js';
import { formatCost } from './budget.js';

const MODE_NOTES = {
  agent: 'Agent loop: reason → act → observe, step by step, with the selected tools.',
  tools: 'Chat with tools: the model may call the selected tools, then answers.',
  retrieve: 'Documents: your message is searched in the chosen data sources, then answered with citations.',
  plain: 'Plain chat: one streamed reply, no tools.',
};

/** People's names for the built-in strategies (others show their own name). */
const STRATEGIES = {
  react: ['Reason · act · observe', 'Every step reasons, calls tools, then judges the results.'],
  plan_execute: ['Plan, then execute', 'Makes a plan first, then carries out each step, re-planning when needed.'],
  act: ['Tools until done', 'Calls tools until it can answer, without separate reasoning calls.'],
  llm_only: ['No tools', 'Answers step by step without calling tools.'],
  retrieve: ['Search documents', 'Searches your documents for the message, then answers citing them.'],
};

/** A run's budget fields (by their `BudgetLimits` name): empty is the server's. */
const BUDGET_FIELDS = {
  tokens: {
    id: 'run-budget',
    setting: 'budgetTokens',
    whole: true,
    name: 'token limit',
    title: 'Token budget of a run',
    placeholder: formatNumber,
    amount: (n) => `${formatNumber(n)} tokens`,
    problem: "The token budget must be a whole number of tokens above 0, or empty for the server's.",
  },
  cost_usd: {
    id: 'run-budget-cost',
    setting: 'budgetCost',
    whole: false,
    name: 'cost limit',
    title: 'Cost budget of a run, in US dollars',
    placeholder: String,
    amount: formatCost,
    problem: "The cost budget must be an amount of dollars above 0, or empty for the server's.",
  },
};

function badges(effect) {
  const list = [effect.read_only ? ['read-only', 'safe'] : ['writes', 'warn']];
  if (effect.idempotent) list.push(['idempotent', 'plain']);
  if (effect.requires_approval) list.push(['needs approval', 'warn']);
  if (effect.finalize) list.push(['can finish', 'plain']);
  return list.map(([text, kind]) => h('span', { class: `badge badge-${kind}`, text }));
}

function option(value, text, title, selected) {
  const element = h('option', { value, text, title });
  element.selected = selected;
  return element;
}

export class Toolbar extends EventTarget {
  constructor({ settings }) {
    super();
    this.settings = settings;
    this.info = null;
    this.agentMode = byId('agent-mode');
    this.strategy = byId('strategy');
    this.maxSteps = byId('max-steps');
    this.maxStepsChip = byId('max-steps-chip');
    this.maxStepsNote = byId('max-steps-note');
    this.budgets = {};
    this.budgetCaps = {};
    this.budgetProblems = {};
    for (const [field, spec] of Object.entries(BUDGET_FIELDS)) {
      const input = byId(spec.id);
      this.budgets[field] = { input, chip: byId(`${spec.id}-chip`), note: byId(`${spec.id}-note`), spec };
      input.value = settings[spec.setting] === null ? '' : String(settings[spec.setting]);
      input.addEventListener('input', () => this.budgetRead(field, false));
      input.addEventListener('change', () => this.budgetRead(field, true));
    }
    this.readOnly = byId('read-only');
    this.toolList = byId('tool-options');
    this.toolsCount = byId('tools-count');
    this.toolsButton = byId('tools-button');
    this.modeNote = byId('mode-note');
    this.model = byId('model-select');
    this.sourcesButton = byId('sources-button');
    this.sourcesCount = byId('sources-count');
    this.sourceList = byId('source-options');
    this.popovers = [byId('tools-popover'), byId('model-popover'), byId('sources-popover')];
    this.sourceList.addEventListener('change', (event) => this.sourceChanged(event.target));

    this.agentMode.checked = settings.agentMode;
    this.readOnly.checked = settings.readOnly;
    this.agentMode.addEventListener('change', () => this.update({ agentMode: this.agentMode.checked }));
    this.readOnly.addEventListener('change', () => this.update({ readOnly: this.readOnly.checked }));
    this.strategy.addEventListener('change', () => this.update({ strategy: this.strategy.value }));
    this.model.addEventListener('change', () => this.update({ model: this.model.value }));
    this.maxSteps.addEventListener('change', () => this.stepsChanged());
    this.maxSteps.addEventListener('input', () => this.stepsTyped());
    this.toolList.addEventListener('change', (event) => this.toolChanged(event.target));
    byId('tools-all').addEventListener('click', () => this.setAllTools(true));
    byId('tools-none').addEventListener('click', () => this.setAllTools(false));
  }

  /** The server's description arrived (page config or session_ready). */
  setInfo(info) {
    this.info = info;
    const { max_steps_cap: cap, default_max_steps: fallback } = info.limits;
    this.maxSteps.max = String(cap);
    this.maxSteps.value = String(this.settings.stepsFor(info.limits));
    this.maxStepsNote.textContent = this.stepsNote();
    this.stepsUnit();
    this.maxStepsChip.title = `Max steps of a run: default ${fallback}, at most ${cap}`;
    for (const field of Object.keys(BUDGET_FIELDS)) this.setBudgetCap(field, info.limits.run_budget?.[field] ?? null);
    const tools = JSON.stringify(info.tools);
    if (tools !== this.renderedTools) {
      this.renderedTools = tools; // unchanged tools keep their focus and state
      this.renderTools(info.tools);
    }
    this.renderChoices(info);
    const sources = JSON.stringify(info.data_sources ?? []);
    if (sources !== this.renderedSources) {
      this.renderedSources = sources;
      this.renderSources(info.data_sources ?? []);
    }
    this.refresh();
  }

  renderSources(names) {
    this.sourcesButton.hidden = names.length === 0;
    this.sourceList.replaceChildren(
      ...names.map((name) => {
        const id = `source-opt-${name}`;
        const input = h('input', { type: 'checkbox', id, value: name });
        input.checked = !this.settings.disabledSources.has(name);
        return h('li', { class: 'tool-option' }, input, h('label', { for: id }, h('code', { class: 'tool-option-name', text: name })));
      }),
    );
  }

  sourceChanged(input) {
    if (input.type !== 'checkbox') return;
    if (input.checked) this.settings.disabledSources.delete(input.value);
    else this.settings.disabledSources.add(input.value);
    this.update({});
  }

  renderChoices(info) {
    const strategy = this.settings.strategyFor(info);
    this.strategy.replaceChildren(
      ...info.strategies.map((name) => {
        const [label, title] = STRATEGIES[name] ?? [name, ''];
        return option(name, label, title, name === strategy);
      }),
    );
    byId('strategy-chip').hidden = info.strategies.length < 2;
    const model = this.settings.modelFor(info);
    this.model.replaceChildren(...info.models.map((name) => option(name, name, '', name === model)));
    byId('model-select-chip').hidden = info.models.length < 2;
  }

  renderTools(tools) {
    const items = tools.map((tool) => {
      const id = `tool-opt-${tool.name}`;
      const input = h('input', { type: 'checkbox', id, value: tool.name, 'aria-describedby': `${id}-desc` });
      input.checked = !this.settings.disabledTools.has(tool.name);
      return h(
        'li',
        { class: 'tool-option', dataset: { tool: tool.name, readOnly: String(tool.effect.read_only) } },
        input,
        h(
          'div',
          { class: 'tool-option-main' },
          h('label', { for: id }, h('code', { class: 'tool-option-name', text: tool.name })),
          h('span', { class: 'badges' }, badges(tool.effect)),
          h('p', { class: 'tool-option-desc', id: `${id}-desc`, text: tool.summary || tool.description }),
        ),
      );
    });
    if (items.length === 0) items.push(h('li', { class: 'popover-note', text: 'This server has no tools.' }));
    this.toolList.replaceChildren(...items);
  }

  update(changes) {
    Object.assign(this.settings, changes);
    this.settings.save();
    this.refresh();
  }

  /** What the limits are, for screen readers (the field's description). */
  stepsNote() {
    if (!this.info) return 'Server cap: —';
    const { max_steps_cap: cap, default_max_steps: fallback } = this.info.limits;
    return `Default ${fallback}, server cap ${cap}.`;
  }

  /** "1 step", "10 steps". */
  stepsUnit() {
    const unit = this.maxStepsChip.querySelector('.chip-text');
    if (unit) unit.textContent = this.maxSteps.value === '1' ? 'step' : 'steps';
  }

  /** While typing: what will happen to the number, said at once (not only
   * after leaving the field), and cleared when it fits again. */
  stepsTyped() {
    const cap = Number(this.maxSteps.max) || Infinity;
    const value = Number.parseInt(this.maxSteps.value, 10);
    let hint = null;
    if (Number.isFinite(value) && value > cap) hint = `Capped at ${cap}: the server allows no more.`;
    else if (Number.isFinite(value) && value < 1) hint = 'At least 1 step: a run needs one.';
    this.maxStepsNote.textContent = hint ?? this.stepsNote();
    this.stepsUnit();
    if (hint !== this.stepsHint) {
      this.stepsHint = hint;
      this.dispatchEvent(new CustomEvent('notice', { detail: hint }));
    }
  }

  stepsChanged() {
    const cap = Number(this.maxSteps.max) || Infinity;
    const value = Number.parseInt(this.maxSteps.value, 10);
    const steps = Number.isFinite(value) ? Math.min(Math.max(1, value), cap) : null;
    if (steps === null) {
      this.maxSteps.value = this.info ? String(this.info.limits.default_max_steps) : '';
    } else {
      this.maxSteps.value = String(steps);
    }
    let hint = null;
    if (steps !== null && value > cap) hint = `Capped at ${cap}: the server allows no more.`;
    else if (steps !== null && value < 1) hint = 'Set to 1: a run needs at least one step.';
    this.maxStepsNote.textContent = hint ?? this.stepsNote();
    this.stepsUnit();
    this.stepsHint = hint;
    this.dispatchEvent(new CustomEvent('notice', { detail: hint }));
    this.update({ maxSteps: steps });
  }

  /** The server's cap of a run (null: none) in `field`: the input's bound
   * and placeholder; the cost field shows only when the server caps cost. */
  setBudgetCap(field, cap) {
    const { input, chip, note, spec } = this.budgets[field];
    this.budgetCaps[field] = cap;
    if (cap === null) input.removeAttribute('max');
    else input.max = String(cap);
    input.placeholder = cap === null ? 'no limit' : spec.placeholder(cap);
    const server = cap === null ? `the server sets no ${spec.name}` : `the server's ${spec.amount(cap)}, its most`;
    chip.title = `${spec.title}: empty for ${server}`;
    note.textContent = `Empty: ${server}.`;
    if (field === 'cost_usd') chip.hidden = cap === null;
  }

  /** A budget field read: empty is the server's; a number above 0 (whole
   * for tokens) is kept (on leaving the field, lowered to the cap with a
   * word); anything else is refused, said at once, and blocks agent chats
   * until fixed (`settings.budgetProblem`). */
  budgetRead(field, left) {
    const { input, spec } = this.budgets[field];
    const cap = this.budgetCaps[field] ?? null;
    const raw = input.value.trim();
    const value = Number(raw);
    let amount = null;
    let hint = null;
    const bad = input.validity.badInput || (raw !== '' && !(value > 0 && (!spec.whole || Number.isInteger(value))));
    if (!bad && raw !== '') {
      amount = value;
      if (cap !== null && value > cap) {
        hint = `Capped at ${spec.amount(cap)}: the server allows no more.`;
        if (left) {
          amount = cap;
          input.value = String(cap);
        }
      }
    }
    input.setAttribute('aria-invalid', String(bad));
    this.budgetProblems[field] = bad ? spec.problem : null;
    const problems = Object.values(this.budgetProblems).filter(Boolean);
    this.settings.budgetProblem = problems.length ? problems.join(' ') : null;
    const said = bad ? spec.problem : hint;
    if (said !== this.budgetHint) {
      this.budgetHint = said;
      this.dispatchEvent(new CustomEvent('notice', { detail: said }));
    }
    if (!bad) this.update({ [spec.setting]: amount });
  }

  toolChanged(input) {
    if (input.type !== 'checkbox') return;
    if (input.checked) this.settings.disabledTools.delete(input.value);
    else this.settings.disabledTools.add(input.value);
    this.update({});
  }

  setAllTools(on) {
    for (const input of this.toolList.querySelectorAll('input[type=checkbox]')) {
      input.checked = on;
      if (on) this.settings.disabledTools.delete(input.value);
      else this.settings.disabledTools.add(input.value);
    }
    this.update({});
  }

  refresh() {
    const agent = this.settings.agentMode;
    this.maxSteps.disabled = !agent;
    for (const { input } of Object.values(this.budgets)) input.disabled = !agent;
    this.strategy.disabled = !agent;
    document.body.dataset.agentMode = String(agent);
    this.toolList.dataset.readOnly = String(this.settings.readOnly);
    if (!this.info) return;
    this.modeNote.textContent = MODE_NOTES[this.settings.modeFor(this.info)];
    const total = this.info.tools.length;
    const on = this.settings.runnableTools(this.info.tools).length;
    this.toolsCount.textContent = on === total ? String(total) : `${on}/${total}`;
    // the name starts with what the chip shows (axe: label-content-name-mismatch)
    this.toolsButton.setAttribute('aria-label', `Tools ${this.toolsCount.textContent}: ${on} of ${total} on${this.settings.readOnly ? ', read-only' : ''}`);
    this.toolsButton.dataset.readOnly = String(this.settings.readOnly);
    const sources = this.info.data_sources ?? [];
    const chosen = this.settings.selectedSources(this.info).length;
    this.sourcesCount.textContent = chosen === sources.length ? String(sources.length) : `${chosen}/${sources.length}`;
    this.sourcesButton.setAttribute('aria-label', `Documents ${this.sourcesCount.textContent}: ${chosen} of ${sources.length} data sources searched`);
  }

  /** Close an open popover (Esc is theirs first); true if one was open. */
  closePopover() {
    const open = this.popovers.find((popover) => popover.matches(':popover-open'));
    open?.hidePopover();
    return Boolean(open);
  }
}
