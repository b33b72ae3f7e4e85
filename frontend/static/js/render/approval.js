// The approval dialog for `tool_approval_request`: tool, description, pretty
// arguments, Approve / Reject with an optional reason. Requests queue up;
// one is shown at a time. `onDecide(request, decision)`, where `decision` is
// `{approved, reason, arguments?, remember?}`.
//
// Approve may change the call: "Edit arguments" turns the arguments into a
// JSON box, and what is approved then runs with what it holds (sent only when
// it differs from the model's). JSON that does not parse is caught here;
// arguments that do not fit the tool are refused by the server
// (`invalid_answer`), so the dialog stays open, its buttons held, until the
// server has taken the edit (`dismiss`) or refused it (`refused`). "Always
// allow" remembers the tool for this conversation or for all of the user's
// (`remember`).
//
// A request `in_doubt` is a call that was running when the server running it
// stopped: nobody can tell whether it took effect. The dialog says so, and
// its buttons are Run again / Don't run (declining reports it as a call that
// may have run; no reason is sent). Such a call runs as it was or not at
// all: it cannot be edited or always allowed.
//
// A request with `untrusted_sources` comes from a run that had read text the
// user did not write (documents, files, other systems): the dialog warns that
// the call may have been asked for there, and lists what was read. "Always
// allow" then says it applies from the next run on: such a run asks anyway.
//
// A request may name the later calls of the same reply that will ask too
// (`also`). They are listed under the request's own controls, each with
// Approve / Reject / Ask later (the default). Approve or Reject sends each
// row decided here first, in list order, then the request's own decision
// (the server takes a decision ahead only while the request waits);
// Approve all approves them all. A row decided here never comes back as a
// request of its own, unless the server refused the decision; then it is
// asked as usual. A row left to Ask later is asked when its turn comes.
import { byId, h } from '../dom.js';
import { prettyJson } from '../format.js';

const IN_DOUBT =
  "This may already have run when the server restarted: nobody can tell whether it took effect. Run again does it once more; Don't run leaves it as it is.";

/** JSON with object keys sorted: equal for equal values, whatever the key order. */
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonical(value[key])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

const CHOICES = [
  ['approve', 'Approve'],
  ['reject', 'Reject'],
  ['later', 'Ask later'],
];

/** The list of calls asked in the same reply (`also`), each with its choice. */
class AlsoAsked {
  constructor() {
    this.section = byId('approval-also');
    this.list = byId('approval-also-list');
    this.rows = [];
  }

  show(items) {
    const total = items.length + 1;
    this.rows = items.map((item, index) => row(item, `${index + 2} of ${total}`));
    this.list.replaceChildren(...this.rows.map((r) => r.element));
    this.section.hidden = items.length === 0;
  }

  get size() {
    return this.rows.length;
  }

  /** The rows decided here and not sent yet, in order: `[{item, approved}]`. */
  decided() {
    return this.rows
      .filter((r) => !r.sent)
      .map((r) => ({ item: r.item, choice: r.inputs.find((input) => input.checked)?.value }))
      .filter(({ choice }) => choice === 'approve' || choice === 'reject')
      .map(({ item, choice }) => ({ item, approved: choice === 'approve' }));
  }

  approveAll() {
    for (const r of this.rows) if (!r.sent) r.inputs[0].checked = true;
  }

  /** The decision on `callId` went out: it cannot be changed any more. */
  sent(callId) {
    const r = this.rows.find((candidate) => candidate.item.tool_call_id === callId);
    if (!r) return;
    r.sent = true;
    r.element.dataset.sent = 'true';
    r.status.hidden = false;
    for (const input of r.inputs) input.disabled = true;
  }

  setBusy(busy) {
    for (const r of this.rows) for (const input of r.inputs) input.disabled = busy || r.sent;
  }
}

/** One row of the list: the call, its arguments and its choice (`which`: "2 of 3"). */
function row(item, which) {
  const name = `approval-also-${item.tool_call_id}`;
  const inputs = CHOICES.map(([value]) => h('input', { type: 'radio', name, value, checked: value === 'later' }));
  const options = CHOICES.map(([value, text], index) =>
    h('label', { class: 'approval-also-option', dataset: { choice: value } }, inputs[index], text),
  );
  const status = h('span', { class: 'approval-also-sent', text: 'Decision sent', hidden: true });
  const element = h(
    'li',
    { class: 'approval-also-item', dataset: { callId: item.tool_call_id } },
    h('p', { class: 'approval-also-head' }, h('code', { text: item.tool_name }), status),
    h('p', { class: 'approval-also-description', text: item.description || 'No description.' }),
    h('pre', { class: 'code approval-also-args', tabindex: '0', 'aria-label': `Arguments of ${item.tool_name} (${which})`, text: prettyJson(item.arguments) }),
    h(
      'fieldset',
      { class: 'approval-also-choice' },
      h('legend', { class: 'visually-hidden', text: `Your decision on ${item.tool_name} (${which})` }),
      ...options,
    ),
  );
  return { item, element, inputs, status, sent: false };
}

/** The arguments typed in `text`: `{value}`, or `{error}` for people. */
export function parseArguments(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { error: `Not valid JSON: ${error.message}. Nothing was sent.` };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { error: 'The arguments must be a JSON object, such as {"name": "value"}. Nothing was sent.' };
  }
  return { value };
}

export class ApprovalDialog {
  constructor({ onDecide }) {
    this.dialog = byId('approval');
    this.lead = byId('approval-lead');
    this.tool = byId('approval-tool');
    this.tail = byId('approval-tail');
    this.step = byId('approval-step');
    this.description = byId('approval-description');
    this.args = byId('approval-args');
    this.argsLabel = byId('approval-args-label');
    this.editToggle = byId('approval-edit');
    this.editField = byId('approval-edit-field');
    this.editInput = byId('approval-args-input');
    this.editError = byId('approval-args-error');
    this.remember = byId('approval-remember');
    this.always = byId('approval-always');
    this.rememberTool = byId('approval-remember-tool');
    this.scopes = [...this.remember.querySelectorAll('input[type=radio]')];
    this.rememberNote = byId('approval-remember-note');
    this.also = new AlsoAsked();
    this.approveAllButton = byId('approval-approve-all');
    this.untrusted = byId('approval-untrusted');
    this.untrustedList = byId('approval-untrusted-list');
    this.reasonField = byId('approval-reason-field');
    this.reason = byId('approval-reason');
    this.approveButton = byId('approval-approve');
    this.rejectButton = byId('approval-reject');
    this.queue = [];
    /** The request whose edited "yes" the server has not taken or refused yet. */
    this.awaiting = null;
    this.onDecide = onDecide;
    this.approveButton.addEventListener('click', () => this.decide(true));
    this.rejectButton.addEventListener('click', () => this.decide(false));
    this.approveAllButton.addEventListener('click', () => this.approveAll());
    this.editToggle.addEventListener('click', () => this.setEditing(this.editField.hidden));
    this.editInput.addEventListener('input', () => this.showError(null));
    this.always.addEventListener('change', () => this.syncScopes());
    // A decision is needed: Escape does not silently dismiss the request.
    this.dialog.addEventListener('cancel', (event) => event.preventDefault());
  }

  get current() {
    return this.queue[0] ?? null;
  }

  request(frame) {
    const index = this.queue.findIndex((f) => f.tool_call_id === frame.tool_call_id);
    if (index < 0) {
      this.queue.push(frame);
      if (this.queue.length === 1) this.showCurrent();
    } else if (frame.in_doubt && !this.queue[index].in_doubt) {
      this.queue[index] = frame; // asked again: the call may have run meanwhile
      if (index === 0) this.showCurrent();
    }
  }

  showCurrent() {
    const frame = this.current;
    this.awaiting = null;
    if (!frame) {
      if (this.dialog.open) this.dialog.close();
      return;
    }
    const again = Boolean(frame.in_doubt);
    this.dialog.dataset.doubt = String(again);
    this.lead.textContent = again ? 'Run' : 'Allow';
    this.tool.textContent = frame.tool_name;
    this.tail.textContent = again ? 'again?' : 'to run?';
    this.step.textContent = frame.step ? `Step ${frame.step}` : '';
    this.description.textContent = again ? IN_DOUBT : frame.description || 'No description.';
    this.args.textContent = prettyJson(frame.arguments);
    this.editInput.value = JSON.stringify(frame.arguments ?? {}, null, 2);
    this.editToggle.hidden = again;
    this.setEditing(false);
    this.showUntrusted(frame.untrusted_sources ?? []);
    this.also.show(frame.also ?? []);
    this.approveAllButton.hidden = again || this.also.size === 0;
    this.reason.value = '';
    this.reasonField.hidden = again;
    this.remember.hidden = again;
    this.rememberTool.textContent = frame.tool_name;
    this.always.checked = false;
    this.scopes.forEach((scope, index) => (scope.checked = index === 0));
    this.syncScopes();
    this.approveButton.textContent = again ? 'Run again' : 'Approve';
    this.rejectButton.textContent = again ? "Don't run" : 'Reject';
    this.setBusy(false);
    if (!this.dialog.open) this.dialog.showModal();
    this.rejectButton.focus();
  }

  /** Show the arguments as an editable JSON box (true) or as they are (false). */
  setEditing(editing) {
    this.editField.hidden = !editing;
    this.args.hidden = editing;
    // the box's own label says what it holds: the heading says it too, once
    this.argsLabel.textContent = editing ? 'Arguments to run with (JSON)' : 'Arguments';
    this.editToggle.setAttribute('aria-expanded', String(editing));
    this.editToggle.textContent = editing ? 'Undo edits' : 'Edit arguments';
    if (!editing && this.current) this.editInput.value = JSON.stringify(this.current.arguments ?? {}, null, 2);
    this.showError(null);
    if (editing) this.editInput.focus();
  }

  syncScopes() {
    for (const scope of this.scopes) scope.disabled = !this.always.checked;
  }

  showError(message) {
    this.editError.hidden = !message;
    this.editError.textContent = message ?? '';
    if (message) this.editInput.setAttribute('aria-invalid', 'true');
    else this.editInput.removeAttribute('aria-invalid');
  }

  setBusy(busy) {
    this.approveButton.disabled = busy;
    this.rejectButton.disabled = busy;
    this.approveAllButton.disabled = busy;
    this.also.setBusy(busy);
    this.dialog.setAttribute('aria-busy', String(busy));
    if (busy) this.approveButton.textContent = 'Approving…';
  }

  showUntrusted(sources) {
    this.untrustedList.replaceChildren(
      ...sources.map((source) => {
        const item = document.createElement('li');
        const where = source.origin ? `: ${source.origin}` : '';
        item.textContent = `${source.tool_name} (step ${source.step})${where}`;
        return item;
      }),
    );
    this.untrusted.hidden = sources.length === 0;
    // a run that read such text asks anyway: "always" starts with the next one
    this.rememberNote.hidden = sources.length === 0;
    if (sources.length) this.always.setAttribute('aria-describedby', 'approval-remember-note');
    else this.always.removeAttribute('aria-describedby');
  }

  /** The edited arguments when they differ from the model's; `{error}` when they do not parse. */
  editedArguments(frame) {
    if (this.editField.hidden) return {};
    const parsed = parseArguments(this.editInput.value);
    if (parsed.error) return parsed;
    return canonical(parsed.value) === canonical(frame.arguments) ? {} : { value: parsed.value };
  }

  decide(approved) {
    const frame = this.current;
    if (!frame || this.awaiting) return;
    const decision = this.decisionOn(frame, approved);
    if (decision.error) {
      this.showError(decision.error);
      this.editInput.focus();
      return;
    }
    this.decideAhead(frame);
    this.onDecide(frame, decision);
    if (!decision.arguments) {
      this.dismiss(frame.tool_call_id);
      return;
    }
    // the server checks the arguments against the tool: wait for its word
    this.awaiting = frame;
    this.setBusy(true);
  }

  /** Approve the request and every call listed with it. */
  approveAll() {
    if (!this.current || this.awaiting) return;
    this.also.approveAll();
    this.decide(true);
  }

  /** The decision the dialog shows on `frame`; `{error}` when its edit does not parse. */
  decisionOn(frame, approved) {
    if (!approved || frame.in_doubt) {
      const reason = frame.in_doubt ? '' : this.reason.value.trim();
      return { approved, reason: reason || null };
    }
    const edited = this.editedArguments(frame);
    if (edited.error) return edited;
    const decision = { approved: true, reason: null };
    if (edited.value) decision.arguments = edited.value;
    if (this.always.checked) decision.remember = this.scopes.find((scope) => scope.checked)?.value ?? 'conversation';
    return decision;
  }

  /** Send the decisions taken on the calls listed with `frame`, before its own.
   * Each goes as a request of the same run (`ahead_of` names the one asked). */
  decideAhead(frame) {
    for (const { item, approved } of this.also.decided()) {
      const request = { ...item, run_id: frame.run_id, seq: frame.seq, step: frame.step, ahead_of: frame.tool_call_id };
      this.onDecide(request, { approved, reason: null });
      this.also.sent(item.tool_call_id);
    }
  }

  /** `frame` was approved with edited arguments (`decision`) before a reload
   * and is being sent again: shown waiting for the server's word, so that a
   * refusal can be shown (only when no other request is in the dialog). */
  resent(frame, decision) {
    if (this.current) return;
    this.request(frame);
    this.setEditing(true);
    this.editInput.value = JSON.stringify(decision.arguments, null, 2);
    this.awaiting = frame;
    this.setBusy(true);
  }

  /** The server refused the edited "yes" (`message`): the request still
   * waits, shown again with the reason; the request, or null if none waited. */
  refused(message) {
    const frame = this.awaiting;
    if (!frame) return null;
    this.awaiting = null;
    this.setBusy(false);
    this.approveButton.textContent = 'Approve';
    this.showError(message);
    this.editInput.focus();
    return frame;
  }

  /** Drop the request for `callId` (answered, or the server moved on). */
  dismiss(callId) {
    const wasCurrent = this.current?.tool_call_id === callId;
    this.queue = this.queue.filter((f) => f.tool_call_id !== callId);
    if (wasCurrent) this.showCurrent();
  }

  /** The run ended: nothing can be approved any more. */
  clear() {
    this.queue = [];
    this.showCurrent();
  }
}
