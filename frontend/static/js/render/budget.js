// A run's budget of tokens, dollars and seconds of work on screen: the usage
// line under an answer, the warning at 80 % of a bound (with "Give more"),
// the grant that raised it, and the end at a bound (with "Continue with more
// budget" where the run's own bound may still rise; a spent daily budget
// says when it starts over).
import { h, icon } from '../dom.js';
import { formatDuration, formatNumber, plural } from '../format.js';

/** A dimension of `agent_budget_*` frames → its field in `BudgetLimits`. */
export const BUDGET_FIELD = { tokens: 'tokens', cost: 'cost_usd', time: 'time_s' };

const NAMES = { tokens: 'token budget', cost: 'cost budget', time: 'time budget' };
const WHEN = new Intl.DateTimeFormat(undefined, { timeStyle: 'short' });
const DAY_AND_WHEN = new Intl.DateTimeFormat(undefined, { weekday: 'long', hour: 'numeric', minute: '2-digit' });

/** Dollars for people: `$0.0123`, `$1.23`, `<$0.0001`. */
export function formatCost(usd) {
  if (usd === 0) return '$0';
  if (usd < 0.0001) return '<$0.0001';
  return usd < 1 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`;
}

/** An amount of `dimension`: `1,200 tokens`, `$0.5000`, `30 s`. */
export function formatAmount(dimension, amount) {
  if (dimension === 'tokens') return `${formatNumber(Math.round(amount))} tokens`;
  if (dimension === 'cost') return formatCost(amount);
  return formatDuration(amount * 1000);
}

/** When a daily budget starts over (`resets_at`, epoch s), in the reader's time. */
export function formatReset(resetsAt, now = new Date()) {
  const at = new Date(resetsAt * 1000);
  const sameDay = at.toDateString() === now.toDateString();
  return sameDay ? `today at ${WHEN.format(at)}` : `on ${DAY_AND_WHEN.format(at)}`;
}

/** The bound `limit` of `dimension` doubled, at most `cap` (null: no cap); the
 * amount to add, or null when nothing more may be given. */
export function moreOf(dimension, limit, cap) {
  let more = cap === null || cap === undefined ? limit : Math.min(limit, cap - limit);
  if (dimension === 'tokens') more = Math.floor(more);
  return more > 0 ? more : null;
}

/**
 * The usage of a run (`agent_completion.usage`) in a few words:
 * `9 LLM calls · 1,234 tokens (40 % cached) · $0.0123`. Tokens only when
 * counted (or estimated, then said so), a cost only when the server knows
 * the model's price.
 */
export function usageParts(usage) {
  if (!usage) return [];
  const parts = [];
  if (usage.llm_calls) parts.push(plural(usage.llm_calls, 'LLM call'));
  if (usage.total_tokens) {
    const notes = [];
    if (usage.cached_tokens > 0 && usage.prompt_tokens > 0) notes.push(`${Math.round((100 * usage.cached_tokens) / usage.prompt_tokens)} % cached`);
    if (usage.estimated_calls > 0) notes.push('estimated');
    parts.push(`${formatNumber(usage.total_tokens)} tokens${notes.length ? ` (${notes.join(', ')})` : ''}`);
  }
  if (typeof usage.cost_usd === 'number') parts.push(formatCost(usage.cost_usd));
  return parts;
}

/** The same, spelled out (the usage line's tooltip). */
export function usageDetail(usage) {
  if (!usage?.total_tokens) return '';
  const detail = [`${formatNumber(usage.prompt_tokens)} input tokens`];
  if (usage.cached_tokens) detail.push(`${formatNumber(usage.cached_tokens)} of them cached`);
  detail.push(`${formatNumber(usage.completion_tokens)} output tokens`);
  if (usage.reasoning_tokens) detail.push(`${formatNumber(usage.reasoning_tokens)} of them reasoning`);
  if (usage.estimated_calls) detail.push(`${plural(usage.estimated_calls, 'call')} estimated (the model server gave no count)`);
  detail.push(typeof usage.cost_usd === 'number' ? `cost ${formatCost(usage.cost_usd)}` : 'cost unknown (no price for this model)');
  return detail.join(', ');
}

/**
 * One run's budget: warnings, grants and the end at a bound, shown in the
 * run's notices. `onGrant(budget)` sends `grant_budget` (true when it went
 * out); `cap()` is the server's `limits.run_budget`.
 */
export class RunBudget {
  constructor({ notices, onGrant, cap }) {
    this.notices = notices;
    this.onGrant = onGrant;
    this.cap = cap;
    this.budget = null;
    this.reached = null;
    this.warnings = new Map();
  }

  /** `agent_start.budget` (null: the run has no bound). */
  start(budget) {
    this.budget = budget ?? null;
  }

  capOf(dimension) {
    return this.cap()?.[BUDGET_FIELD[dimension]] ?? null;
  }

  warning({ dimension, used, limit, scope, can_grant: canGrant }) {
    const share = Math.floor((100 * used) / limit);
    const whose = scope === 'day' ? `your daily ${NAMES[dimension]}` : `the ${NAMES[dimension]}`;
    const text = `${share} % of ${whose} used (${formatAmount(dimension, used)} of ${formatAmount(dimension, limit)}).`;
    const more = canGrant && this.onGrant ? moreOf(dimension, limit, this.capOf(dimension)) : null;
    const button = more === null ? null : this.grantButton(dimension, more);
    const notice = h('p', { class: 'run-notice run-notice-warn budget-warning', dataset: { dimension } }, icon('alert'), h('span', { text }), button);
    this.warnings.get(dimension)?.remove();
    this.warnings.set(dimension, notice);
    this.notices.append(notice);
  }

  grantButton(dimension, more) {
    const button = h('button', { type: 'button', class: 'link-button budget-grant' }, icon('plus'), h('span', { text: `Give more (+${formatAmount(dimension, more)})` }));
    button.addEventListener('click', () => {
      if (this.onGrant({ [BUDGET_FIELD[dimension]]: more })) button.disabled = true;
    });
    return button;
  }

  /** `agent_budget_granted`: the warnings of the bounds it raised go. */
  granted({ granted, budget }) {
    this.budget = budget;
    const raised = Object.entries(BUDGET_FIELD).filter(([, field]) => granted[field] > 0);
    for (const [dimension] of raised) {
      this.warnings.get(dimension)?.remove();
      this.warnings.delete(dimension);
    }
    const said = raised.map(([dimension, field]) => `${formatAmount(dimension, granted[field])} to ${formatAmount(dimension, budget[field])}`);
    const text = said.length ? `Budget raised by ${said.join(', ')}.` : 'The budget could not be raised: it is at the most the server allows.';
    this.notices.append(h('p', { class: 'run-notice run-notice-info budget-granted' }, icon('info'), h('span', { text })));
  }

  /** `agent_budget_reached`: the run ends at this bound. */
  reachedBound(frame) {
    this.reached = frame;
    const { dimension, used, limit, scope } = frame;
    this.warnings.get(dimension)?.remove(); // said again, as used up
    this.warnings.delete(dimension);
    for (const notice of this.warnings.values()) notice.querySelector('.budget-grant')?.remove();
    const spent = `${formatAmount(dimension, used)} of ${formatAmount(dimension, limit)}`;
    let text = `Used up the ${NAMES[dimension]} (${spent}): the agent answers with what it has so far`;
    if (scope === 'day') {
      const when = typeof frame.resets_at === 'number' ? ` It starts over ${formatReset(frame.resets_at)}.` : '';
      text = `Used up your daily ${NAMES[dimension]} (${spent}): the agent answers with what it has so far.${when}`;
    } else {
      text += this.raised() ? ', and you can continue with more budget.' : '.';
    }
    this.notices.append(h('p', { class: 'run-notice run-notice-warn budget-reached', dataset: { dimension, scope } }, icon('alert'), h('span', { text })));
  }

  /** The `agent_budget` of a run continuing this one: its bounds, the one it
   * reached doubled (at most the server's cap); null when it cannot go on. */
  raised() {
    const frame = this.reached;
    if (!frame || frame.scope !== 'run' || !frame.can_grant) return null;
    const more = moreOf(frame.dimension, frame.limit, this.capOf(frame.dimension));
    if (more === null) return null;
    const budget = {};
    for (const [key, value] of Object.entries(this.budget ?? {})) if (value !== null && value !== undefined) budget[key] = value;
    budget[BUDGET_FIELD[frame.dimension]] = frame.limit + more;
    return budget;
  }

  /** The words of the completion line for reason `budget`. */
  endText() {
    return this.reached ? `Budget used up: ${this.reached.dimension}` : 'Budget used up';
  }

  /** "Continue with more budget", for a run ended at its own bound (null: none). */
  continueButton(onContinue) {
    const budget = this.raised();
    if (!budget) return null;
    const dimension = this.reached.dimension;
    const shown = formatAmount(dimension, budget[BUDGET_FIELD[dimension]]);
    const button = h('button', { type: 'button', class: 'button button-quiet run-continue budget-continue' }, icon('plus'), h('span', { text: `Continue with more budget (${shown})` }));
    button.addEventListener('click', () => onContinue(budget));
    return button;
  }

  /** The run ended: nothing more can be given to it. */
  finish() {
    for (const notice of this.warnings.values()) notice.querySelector('.budget-grant')?.remove();
  }
}
