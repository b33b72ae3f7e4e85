// The approval dialog for `tool_approval_request`: tool, description, pretty
// arguments, Approve / Reject with an optional reason. Requests queue up;
// one is shown at a time. `onDecide(request, approved, reason)`.
//
// A request `in_doubt` is a call that was running when the server running it
// stopped: nobody can tell whether it took effect. The dialog says so, and
// its buttons are Run again / Don't run (declining reports it as a call that
// may have run; no reason is sent).
//
// A request with `untrusted_sources` comes from a run that had read text the
// user did not write (documents, files, other systems): the dialog warns that
// the call may have been asked for there, and lists what was read.
import { byId } from '../dom.js';
import { prettyJson } from '../format.js';

const IN_DOUBT =
  "This may already have run when the server restarted: nobody can tell whether it took effect. Run again does it once more; Don't run leaves it as it is.";

export class ApprovalDialog {
  constructor({ onDecide }) {
    this.dialog = byId('approval');
    this.lead = byId('approval-lead');
    this.tool = byId('approval-tool');
    this.tail = byId('approval-tail');
    this.step = byId('approval-step');
    this.description = byId('approval-description');
    this.args = byId('approval-args');
    this.untrusted = byId('approval-untrusted');
    this.untrustedList = byId('approval-untrusted-list');
    this.reasonField = byId('approval-reason-field');
    this.reason = byId('approval-reason');
    this.approveButton = byId('approval-approve');
    this.rejectButton = byId('approval-reject');
    this.queue = [];
    this.onDecide = onDecide;
    this.approveButton.addEventListener('click', () => this.decide(true));
    this.rejectButton.addEventListener('click', () => this.decide(false));
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
    this.showUntrusted(frame.untrusted_sources ?? []);
    this.reason.value = '';
    this.reasonField.hidden = again;
    this.approveButton.textContent = again ? 'Run again' : 'Approve';
    this.rejectButton.textContent = again ? "Don't run" : 'Reject';
    if (!this.dialog.open) this.dialog.showModal();
    this.rejectButton.focus();
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
  }

  decide(approved) {
    const frame = this.current;
    if (!frame) return;
    const reason = frame.in_doubt ? '' : this.reason.value.trim();
    this.onDecide(frame, approved, reason || null);
    this.dismiss(frame.tool_call_id);
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
