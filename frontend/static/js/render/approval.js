// The approval dialog for `tool_approval_request`: tool, description, pretty
// arguments, Approve / Reject with an optional reason. Requests queue up;
// one is shown at a time. `onDecide(callId, approved, reason)`.
import { byId } from '../dom.js';
import { prettyJson } from '../format.js';

export class ApprovalDialog {
  constructor({ onDecide }) {
    this.dialog = byId('approval');
    this.tool = byId('approval-tool');
    this.step = byId('approval-step');
    this.description = byId('approval-description');
    this.args = byId('approval-args');
    this.reason = byId('approval-reason');
    this.rejectButton = byId('approval-reject');
    this.queue = [];
    this.onDecide = onDecide;
    byId('approval-approve').addEventListener('click', () => this.decide(true));
    this.rejectButton.addEventListener('click', () => this.decide(false));
    // A decision is needed: Escape does not silently dismiss the request.
    this.dialog.addEventListener('cancel', (event) => event.preventDefault());
  }

  get current() {
    return this.queue[0] ?? null;
  }

  request(frame) {
    if (this.queue.some((f) => f.tool_call_id === frame.tool_call_id)) return;
    this.queue.push(frame);
    if (this.queue.length === 1) this.showCurrent();
  }

  showCurrent() {
    const frame = this.current;
    if (!frame) {
      if (this.dialog.open) this.dialog.close();
      return;
    }
    this.tool.textContent = frame.tool_name;
    this.step.textContent = frame.step ? `Step ${frame.step}` : '';
    this.description.textContent = frame.description || 'No description.';
    this.args.textContent = prettyJson(frame.arguments);
    this.reason.value = '';
    if (!this.dialog.open) this.dialog.showModal();
    this.rejectButton.focus();
  }

  decide(approved) {
    const frame = this.current;
    if (!frame) return;
    const reason = this.reason.value.trim();
    this.onDecide(frame.tool_call_id, approved, reason || null);
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
