// "Usage": what the user's runs used over the last 30 days (`GET /api/usage`):
// today's spending against the daily budget, a bar per day (tokens; each bar
// labelled, and the same days as a table), and a table by model with cost.
// A dialog opened from the sidebar's foot; loaded afresh on every opening.
// "Everyone" (admins: `?user=*`) shows every user's runs instead: a table by
// user, most tokens first, and the plot of everyone's days. The switch is
// shown to admins only (the page's config says the role); a 403 (a role
// taken away since the page loaded) hides it too.
import { call } from '../conversations.js';
import { byId, h } from '../dom.js';
import { formatDuration, formatNumber } from '../format.js';
import { formatCost, formatReset } from './budget.js';

export const USAGE_DAYS = 30;
const SVG_NS = 'http://www.w3.org/2000/svg';
const DAY_MS = 86_400_000;
const BAR_WIDTH = 10;
const BAR_GAP = 4;
const CHART_HEIGHT = 120;
const DAY_LABEL = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' });

export const EVERYONE = '*';
const LEADS = {
  mine: 'What your runs used in the last 30 days (days in UTC).',
  everyone: "What everyone's runs used in the last 30 days (days in UTC), by user and by day.",
};
const PRICES_NOTE = " Costs come from the server's price table: a model it has no price for has an unknown cost.";

/** `GET /api/usage` over `days`: the caller's, or everyone's (`user`: `*`). */
export function fetchUsage(days = USAGE_DAYS, user = null) {
  const query = new URLSearchParams({ days: String(days) });
  if (user) query.set('user', user);
  return call(`/api/usage?${query}`);
}

/** `by_user` rows, most tokens first (then by name). */
export function byTokens(users) {
  return [...users].sort((a, b) => b.total_tokens - a.total_tokens || a.user.localeCompare(b.user));
}

/** A UTC day (`YYYY-MM-DD`) for people: `Nov 27`. */
export function dayLabel(day) {
  return DAY_LABEL.format(new Date(`${day}T00:00:00Z`));
}

/** Every UTC day from `since` to `until` (`YYYY-MM-DD`, both included). */
export function daysBetween(since, until) {
  const days = [];
  const last = Date.parse(`${until}T00:00:00Z`);
  for (let at = Date.parse(`${since}T00:00:00Z`); at <= last; at += DAY_MS) days.push(new Date(at).toISOString().slice(0, 10));
  return days;
}

/** The sums of each model over all `days` (`GET /api/usage`'s), by name. */
export function byModel(days) {
  const models = new Map();
  for (const day of days) {
    for (const row of day.models) models.set(row.model, addSums(models.get(row.model), row));
  }
  return [...models.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([model, sums]) => ({ model, ...sums }));
}

function addSums(sums, row) {
  if (!sums) return { ...row };
  const added = { ...sums };
  for (const key of ['runs', 'llm_calls', 'estimated_calls', 'input_tokens', 'output_tokens', 'total_tokens', 'cached_tokens', 'reasoning_tokens', 'unpriced_runs', 'active_s']) {
    added[key] = (sums[key] ?? 0) + (row[key] ?? 0);
  }
  const costs = [sums.cost_usd, row.cost_usd].filter((cost) => typeof cost === 'number');
  added.cost_usd = costs.length ? costs.reduce((a, b) => a + b, 0) : null;
  return added;
}

/** A cost as the ledger knows it: unknown without a price, partial when some runs had none. */
export function costText(sums) {
  if (typeof sums.cost_usd !== 'number') return 'unknown';
  return sums.unpriced_runs > 0 ? `${formatCost(sums.cost_usd)} + unpriced` : formatCost(sums.cost_usd);
}

function svg(tag, attributes = {}, ...children) {
  const element = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, String(value));
  element.append(...children);
  return element;
}

export class UsageDialog {
  /** `admin`: the signed-in user may see everyone's usage. */
  constructor({ admin = false } = {}) {
    this.dialog = byId('usage');
    this.button = byId('usage-button');
    this.today = byId('usage-today');
    this.chart = byId('usage-chart');
    this.range = byId('usage-range');
    this.days = byId('usage-days');
    this.models = byId('usage-models');
    this.status = byId('usage-status');
    this.lead = byId('usage-lead');
    this.whose = byId('usage-whose');
    this.whoseNote = byId('usage-whose-note');
    this.mine = byId('usage-mine');
    this.everyone = byId('usage-everyone');
    this.users = byId('usage-users');
    this.scope = 'mine';
    this.dialog.dataset.scope = this.scope;
    this.loads = 0;
    this.whose.hidden = !admin;
    this.button.addEventListener('click', () => this.open());
    this.mine.addEventListener('click', () => this.setScope('mine'));
    this.everyone.addEventListener('click', () => this.setScope('everyone'));
  }

  /** Switch between the user's own usage and everyone's, and load it. */
  setScope(scope) {
    this.scope = scope;
    this.mine.setAttribute('aria-pressed', String(scope === 'mine'));
    this.everyone.setAttribute('aria-pressed', String(scope === 'everyone'));
    this.dialog.dataset.scope = scope;
    return this.refresh();
  }

  open() {
    if (!this.dialog.open) this.dialog.showModal();
    return this.refresh();
  }

  async refresh() {
    const ticket = ++this.loads;
    this.dialog.dataset.state = 'loading';
    const scope = this.scope;
    try {
      const usage = await fetchUsage(USAGE_DAYS, scope === 'everyone' ? EVERYONE : null);
      if (ticket === this.loads) this.show(usage, scope);
    } catch (error) {
      if (ticket !== this.loads) return;
      if (scope === 'everyone' && error.status === 403) return this.notAdmin();
      this.failed(`Usage could not be loaded: ${error.message}`);
    }
  }

  /** Not an admin: the switch goes (for the page's life), their own usage shows. */
  notAdmin() {
    this.whose.hidden = true;
    this.whoseNote.hidden = false;
    this.whoseNote.textContent = "Only an admin can see everyone's usage; this is yours.";
    this.whoseNote.focus(); // the switch that had the focus is gone
    return this.setScope('mine');
  }

  show(usage, scope = 'mine') {
    this.status.hidden = true;
    this.lead.textContent = LEADS[scope] + PRICES_NOTE;
    byId('usage-today-section').hidden = scope === 'everyone';
    this.showUsers(scope === 'everyone' ? usage.by_user ?? [] : null);
    this.showToday(usage.today);
    this.showDays(usage);
    this.showModels(usage);
    this.dialog.dataset.state = 'loaded';
  }

  failed(message) {
    this.status.hidden = false;
    this.status.textContent = message;
    this.dialog.dataset.state = 'failed';
  }

  // ---------------------------------------------------------------- by user

  showUsers(users) {
    byId('usage-users-section').hidden = users === null;
    if (users === null) return;
    this.users.replaceChildren(...byTokens(users).map((sums) => userRow(sums)));
    this.users.closest('table').hidden = users.length === 0;
    byId('usage-users-empty').hidden = users.length > 0;
  }

  // ---------------------------------------------------------------- today

  showToday(today) {
    if (!today) {
      this.today.replaceChildren();
      return;
    }
    const { spent, budget } = today;
    const rows = [
      todayRow('Tokens', `${formatNumber(spent.tokens)} tokens`, spent.tokens, budget.tokens, (n) => `${formatNumber(n)} tokens`),
      todayRow('Cost', formatCost(spent.cost_usd), spent.cost_usd, budget.cost_usd, formatCost),
      todayRow('Time', formatDuration(spent.time_s * 1000) || '0 s', spent.time_s, budget.time_s, (s) => formatDuration(s * 1000)),
    ];
    const bounded = [budget.tokens, budget.cost_usd, budget.time_s].some((bound) => bound !== null && bound !== undefined);
    const note = bounded ? `Your daily budget starts over ${formatReset(today.resets_at)}.` : 'You have no daily budget: only each run is bounded.';
    this.today.replaceChildren(h('dl', { class: 'usage-today-list' }, rows), h('p', { class: 'usage-note', text: note }));
  }

  // ---------------------------------------------------------------- per day

  showDays(usage) {
    const known = new Map(usage.days.map((day) => [day.day, day.totals]));
    const days = daysBetween(usage.since, usage.until).map((day) => ({ day, totals: known.get(day) ?? null }));
    const peak = Math.max(0, ...days.map((d) => d.totals?.total_tokens ?? 0));
    const most = Math.max(1, peak);
    const bars = days.map((d, index) => this.bar(d, index, most));
    const width = days.length * (BAR_WIDTH + BAR_GAP);
    const plot = svg('svg', { class: 'usage-plot', viewBox: `0 0 ${width} ${CHART_HEIGHT}`, preserveAspectRatio: 'none', role: 'group', 'aria-label': `Tokens per day, ${dayLabel(usage.since)} to ${dayLabel(usage.until)}` }, ...bars);
    this.chart.replaceChildren(plot);
    this.range.replaceChildren(h('span', { text: dayLabel(usage.since) }), h('span', { text: `most in a day: ${formatNumber(peak)} tokens` }), h('span', { text: dayLabel(usage.until) }));
    this.days.replaceChildren(...usage.days.map((day) => dayRow(day)));
    this.days.closest('table').hidden = usage.days.length === 0;
    byId('usage-days-empty').hidden = usage.days.length > 0;
  }

  bar({ day, totals }, index, most) {
    const tokens = totals?.total_tokens ?? 0;
    const height = tokens ? Math.max(2, (CHART_HEIGHT * tokens) / most) : 1;
    const label = totals ? `${dayLabel(day)}: ${formatNumber(tokens)} tokens, ${costText(totals)}` : `${dayLabel(day)}: no runs`;
    return svg(
      'rect',
      {
        class: tokens ? 'usage-bar' : 'usage-bar usage-bar-empty',
        x: index * (BAR_WIDTH + BAR_GAP) + BAR_GAP / 2,
        y: CHART_HEIGHT - height,
        width: BAR_WIDTH,
        height,
        rx: 1.5,
        role: 'img',
        'aria-label': label,
        'data-day': day,
        'data-tokens': tokens,
      },
      svg('title', {}, label),
    );
  }

  // ---------------------------------------------------------------- per model

  showModels(usage) {
    const models = byModel(usage.days);
    const rows = models.map((sums) => modelRow(sums.model, sums));
    if (models.length > 1) rows.push(modelRow('All models', usage.totals, 'usage-total'));
    this.models.replaceChildren(...rows);
    this.models.closest('table').hidden = models.length === 0;
    byId('usage-models-empty').hidden = models.length > 0;
  }
}

function todayRow(name, shown, spent, bound, format) {
  const hasBound = bound !== null && bound !== undefined;
  const value = h('dd', { class: 'usage-today-value', text: hasBound ? `${shown} of ${format(bound)}` : shown });
  if (hasBound) {
    const meter = h('meter', { min: '0', max: String(bound), value: String(Math.min(spent, bound)), low: String(0.8 * bound), high: String(0.8 * bound), optimum: '0', 'aria-label': `${name} used today` });
    value.append(meter);
  }
  return h('div', { class: 'usage-today-row', dataset: { what: name.toLowerCase() } }, h('dt', { text: name }), value);
}

function userRow(sums) {
  return h(
    'tr',
    { dataset: { user: sums.user } },
    h('th', { scope: 'row', text: sums.user }),
    h('td', { text: formatNumber(sums.runs) }),
    h('td', { text: formatNumber(sums.total_tokens) }),
    h('td', { text: costText(sums) }),
  );
}

function dayRow({ day, totals }) {
  return h(
    'tr',
    { dataset: { day } },
    h('th', { scope: 'row', text: dayLabel(day) }),
    h('td', { text: formatNumber(totals.runs) }),
    h('td', { text: formatNumber(totals.total_tokens) }),
    h('td', { text: costText(totals) }),
  );
}

function modelRow(name, sums, extraClass = '') {
  const estimated = sums.estimated_calls > 0 ? ` (${formatNumber(sums.estimated_calls)} estimated)` : '';
  return h(
    'tr',
    { class: extraClass || null, dataset: { model: name } },
    h('th', { scope: 'row', text: name }),
    h('td', { text: formatNumber(sums.runs) }),
    h('td', { text: `${formatNumber(sums.llm_calls)}${estimated}` }),
    h('td', { text: formatNumber(sums.input_tokens) }),
    h('td', { text: formatNumber(sums.cached_tokens) }),
    h('td', { text: formatNumber(sums.output_tokens) }),
    h('td', { text: costText(sums) }),
  );
}
