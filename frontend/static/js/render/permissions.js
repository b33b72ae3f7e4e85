// "Tool permissions": the tools the user allowed to run without asking
// (`GET /api/tool-grants`), each with where it holds (this conversation,
// another one by its title, or all of them), when it was given, and a
// Revoke button (`DELETE /api/tool-grants/{id}`). A dialog opened from the
// sidebar's foot; `refresh()` reloads the list (after an "always allow",
// after a revoke, on opening).
import { call } from '../conversations.js';
import { byId, h } from '../dom.js';

const BASE = '/api/tool-grants';
const WHEN = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

export function listGrants() {
  return call(BASE);
}

export function revokeGrant(id) {
  return call(`${BASE}/${encodeURIComponent(id)}`, { method: 'DELETE' });
}

export class ToolPermissions {
  /** `currentId()`: the conversation shown; `titleOf(id)`: a conversation's title, or null. */
  constructor({ currentId, titleOf }) {
    this.dialog = byId('permissions');
    this.button = byId('permissions-button');
    this.list = byId('permissions-list');
    this.empty = byId('permissions-empty');
    this.status = byId('permissions-status');
    this.currentId = currentId;
    this.titleOf = titleOf;
    this.loads = 0;
    this.button.addEventListener('click', () => this.open());
  }

  open() {
    if (!this.dialog.open) this.dialog.showModal();
    return this.refresh();
  }

  async refresh() {
    const ticket = ++this.loads;
    try {
      const { grants } = await listGrants();
      if (ticket === this.loads) this.show(grants);
    } catch (error) {
      if (ticket === this.loads) this.failed(`The permissions could not be loaded: ${error.message}`);
    }
  }

  show(grants) {
    this.status.hidden = true;
    this.dialog.dataset.count = String(grants.length);
    this.list.replaceChildren(...grants.map((grant) => this.item(grant)));
    this.empty.hidden = grants.length > 0;
  }

  item(grant) {
    const where = this.where(grant.conversation_id);
    const revoke = h('button', {
      type: 'button',
      class: 'button button-danger',
      text: 'Revoke',
      'aria-label': `Revoke ${grant.tool}, always allowed ${where}`,
    });
    revoke.addEventListener('click', () => this.revoke(grant, revoke));
    return h(
      'li',
      { class: 'permission', dataset: { grantId: grant.id, tool: grant.tool } },
      h(
        'div',
        { class: 'permission-text' },
        h('code', { class: 'permission-tool', text: grant.tool }),
        h('span', { class: 'permission-where', text: `Always allowed ${where}` }),
        h('span', { class: 'permission-when', text: `Since ${WHEN.format(new Date(grant.created_at * 1000))}` }),
      ),
      revoke,
    );
  }

  where(conversationId) {
    if (conversationId === null) return 'in all your conversations';
    if (conversationId === this.currentId()) return 'in this conversation';
    const title = this.titleOf(conversationId);
    return title ? `in “${title}”` : 'in another conversation';
  }

  async revoke(grant, button) {
    button.disabled = true;
    try {
      await revokeGrant(grant.id);
    } catch (error) {
      this.failed(`${grant.tool} was not revoked: ${error.message}`);
      button.disabled = false;
      return;
    }
    await this.refresh();
    // the button is gone with its row: keep the keyboard in the dialog
    if (this.dialog.open && !this.dialog.contains(document.activeElement)) this.dialog.querySelector('[type=submit]').focus();
  }

  failed(message) {
    this.status.hidden = false;
    this.status.textContent = message;
  }
}
