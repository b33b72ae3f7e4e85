// "Share": read-only links to the open conversation. The header's Share
// button (shown once the conversation is stored, and only when the server
// allows sharing) opens a dialog: "Create link" makes one
// (`POST /api/conversations/{id}/shares`) and shows it in a read-only field
// with Copy; below, the conversation's links, newest first, each with its
// date and "Stop sharing" (`DELETE /api/shares/{share_id}`). A link shows
// the conversation as it was when it was made.
import { call } from '../conversations.js';
import { byId, h } from '../dom.js';

const WHEN = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

const sharesOf = (id) => `/api/conversations/${encodeURIComponent(id)}/shares`;

export function createShare(id) {
  return call(sharesOf(id), { method: 'POST' });
}

export function listShares(id) {
  return call(sharesOf(id));
}

export function stopSharing(shareId) {
  return call(`/api/shares/${encodeURIComponent(shareId)}`, { method: 'DELETE' });
}

export class ShareDialog {
  /** `enabled`: the server allows sharing (else the button stays hidden). */
  constructor({ enabled }) {
    this.enabled = enabled;
    this.id = null;
    this.loads = 0;
    this.button = byId('share-button');
    this.dialog = byId('share-dialog');
    this.link = byId('share-link');
    this.url = byId('share-url');
    this.copy = byId('share-copy');
    this.create = byId('share-create');
    this.list = byId('share-list');
    this.empty = byId('share-empty');
    this.status = byId('share-status');
    this.button.addEventListener('click', () => this.open());
    this.create.addEventListener('click', () => this.make());
    this.copy.addEventListener('click', () => this.copyLink());
    // the page's own keys (Escape stops a run) stay out of the dialog
    this.dialog.addEventListener('keydown', (event) => event.stopPropagation());
  }

  /** The conversation shown, once it is stored (null: none to share). */
  setConversation(id) {
    if (id !== this.id && this.dialog.open) this.dialog.close();
    this.id = id;
    this.button.hidden = !(this.enabled && id);
  }

  open() {
    if (!this.id) return null;
    this.link.hidden = true;
    this.status.hidden = true;
    if (!this.dialog.open) this.dialog.showModal();
    return this.refresh();
  }

  async refresh() {
    const ticket = ++this.loads;
    try {
      const { shares } = await listShares(this.id);
      if (ticket === this.loads) this.show(shares);
    } catch (error) {
      if (ticket === this.loads) this.failed(`The links could not be loaded: ${error.message}`);
    }
  }

  show(shares) {
    this.dialog.dataset.count = String(shares.length);
    this.list.replaceChildren(...shares.map((share) => this.item(share)));
    this.empty.hidden = shares.length > 0;
  }

  item(share) {
    const when = WHEN.format(new Date(share.created_at * 1000));
    const stop = h('button', { type: 'button', class: 'button button-danger', text: 'Stop sharing', 'aria-label': `Stop sharing the link made ${when}` });
    stop.addEventListener('click', () => this.stop(share, stop));
    return h(
      'li',
      { class: 'share-item', dataset: { shareId: share.id } },
      h('div', { class: 'share-item-text' }, h('span', { text: `Made ${when}` }), h('span', { class: 'share-item-url', text: share.url, title: share.url })),
      stop,
    );
  }

  async make() {
    this.create.disabled = true;
    this.status.hidden = true;
    try {
      const share = await createShare(this.id);
      this.url.value = share.url;
      this.link.hidden = false;
      this.url.focus();
      this.url.select();
    } catch (error) {
      this.failed(`No link was made: ${error.message}`);
    } finally {
      this.create.disabled = false;
    }
    await this.refresh();
  }

  async copyLink() {
    let said = 'Link copied.';
    try {
      await navigator.clipboard.writeText(this.url.value);
    } catch {
      this.url.select();
      said = 'Could not copy: the link is selected, copy it with Ctrl+C.';
    }
    this.say(said);
  }

  async stop(share, button) {
    button.disabled = true;
    try {
      await stopSharing(share.id);
    } catch (error) {
      button.disabled = false;
      this.failed(`Still shared: ${error.message}`);
      return;
    }
    if (this.url.value === share.url) this.link.hidden = true;
    await this.refresh();
    this.say('That link no longer works.');
    if (this.dialog.open && !this.dialog.contains(document.activeElement)) this.create.focus();
  }

  say(text) {
    this.status.hidden = false;
    this.status.dataset.kind = 'info';
    this.status.textContent = text;
  }

  failed(text) {
    this.status.hidden = false;
    this.status.dataset.kind = 'error';
    this.status.textContent = text;
  }
}
