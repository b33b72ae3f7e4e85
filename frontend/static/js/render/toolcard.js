// One tool call: name, status, duration, arguments, result or error. A call
// the user approved with arguments of their own says so ("edited by you"),
// shows the arguments it ran with, and keeps the model's under a disclosure.
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
    this.argsLabel = h('span', { class: 'tool-block-label', text: 'Arguments' });
    this.argsBody = h('div', { class: 'tool-args-body' }, this.argsEl);
    this.argsBlock = h('div', { class: 'tool-block tool-args' }, this.argsLabel, this.argsBody);
    this.notes = h('div', { class: 'tool-notes', hidden: true });
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
        this.notes,
        this.argsBlock,
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

  /** `decision`: the user's, or (`confirmed`) what the server took of it. */
  approvalDecided(decision) {
    if (decision.confirmed) this.showChanges(decision);
    if (this.status !== 'approval') return;
    if (decision.approved) this.setStatus('running');
    else this.setStatus('rejected');
  }

  /** The server took a "yes" that changed something (`tool_approval_decided`). */
  showChanges({ arguments: args, remember }) {
    if (args) this.showEdited(args);
    if (remember) this.note('tool-remembered', remember === 'user' ? 'Always allowed for you' : 'Always allowed in this conversation');
  }

  showEdited(args) {
    if (this.element.dataset.edited === 'true') return;
    const asked = this.argsEl.textContent;
    this.element.dataset.edited = 'true';
    this.argsLabel.replaceChildren('Arguments ', h('span', { class: 'tool-edited', text: 'edited by you' }));
    this.setArguments(args);
    const model = h('pre', { class: 'code', text: asked });
    this.argsBody.append(h('details', { class: 'tool-asked' }, h('summary', { text: 'As the model asked' }), model));
  }

  note(kind, text) {
    this.notes.hidden = false;
    this.notes.append(h('span', { class: `tool-note ${kind}`, text }));
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
