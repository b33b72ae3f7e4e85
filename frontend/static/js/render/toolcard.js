// One tool call: name, status, duration, arguments, result or error.
import { h, icon, spinner } from '../dom.js';
import { formatDuration, prettyJson } from '../format.js';

const INLINE_JSON_CHARS = 120; // short payloads read best on one (wrapped) line

const STATUS_TEXT = {
  running: 'Running',
  approval: 'Awaiting approval',
  done: 'Done',
  failed: 'Failed',
  blocked: 'Blocked',
  timeout: 'Timed out',
  rate_limited: 'Rate-limited',
  rejected: 'Rejected',
  cancelled: 'Cancelled',
};

export class ToolCard {
  constructor({ tool_call_id, tool_name, arguments: args }) {
    this.callId = tool_call_id;
    this.name = tool_name;
    this.statusEl = h('span', { class: 'tool-status' });
    this.durationEl = h('span', { class: 'tool-duration' });
    this.argsEl = h('pre', { class: 'code' });
    this.outcome = h('div', { class: 'tool-block tool-outcome', hidden: true });
    this.element = h(
      'li',
      { class: 'tool-card', dataset: { callId: tool_call_id, tool: tool_name } },
      h(
        'div',
        { class: 'tool-head' },
        icon('tool', 'tool-icon'),
        h('code', { class: 'tool-name', text: tool_name }),
        this.statusEl,
        this.durationEl,
      ),
      h(
        'div',
        { class: 'tool-io' },
        h('div', { class: 'tool-block' }, h('span', { class: 'tool-block-label', text: 'Arguments' }), this.argsEl),
        this.outcome,
      ),
    );
    this.setArguments(args);
    this.setStatus('running');
  }

  setArguments(args) {
    if (args === undefined) return;
    const raw = typeof args === 'string';
    this.argsEl.textContent = raw ? args : prettyJson(args, { inlineUpTo: INLINE_JSON_CHARS });
    this.argsEl.classList.toggle('code-raw', raw);
    this.argsEl.title = raw ? 'The model sent arguments that are not valid JSON' : '';
  }

  setStatus(status) {
    this.status = status;
    this.element.dataset.status = status;
    const text = STATUS_TEXT[status] ?? status;
    const busy = status === 'running' || status === 'approval';
    this.statusEl.replaceChildren(
      busy ? spinner() : icon(status === 'done' ? 'check' : 'cross'),
      h('span', { text }),
    );
  }

  awaitApproval() {
    this.setStatus('approval');
  }

  approvalDecided(decision) {
    if (this.status !== 'approval') return;
    if (decision.approved) this.setStatus('running');
    else this.setStatus('rejected');
  }

  complete({ result, duration_ms }) {
    this.setStatus('done');
    this.durationEl.textContent = formatDuration(duration_ms);
    this.showOutcome('Result', prettyJson(result, { inlineUpTo: INLINE_JSON_CHARS }), false);
  }

  fail({ error, status, duration_ms }) {
    this.setStatus(status);
    this.durationEl.textContent = formatDuration(duration_ms);
    this.showOutcome(status === 'cancelled' ? 'Note' : 'Error', error, true);
  }

  /** The run ended while this call was still open (e.g. replay cut short). */
  abandon() {
    if (this.status === 'running' || this.status === 'approval') this.setStatus('cancelled');
  }

  showOutcome(label, text, isError) {
    this.outcome.hidden = false;
    this.outcome.classList.toggle('tool-error', isError);
    this.outcome.replaceChildren(
      h('span', { class: 'tool-block-label', text: label }),
      h('pre', { class: 'code', text }),
    );
  }
}
