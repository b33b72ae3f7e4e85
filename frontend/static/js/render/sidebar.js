// The conversations sidebar: "New chat", the list (newest first; the one on
// screen marked), rename in place, delete. Items are links (`/c/<id>`), so
// they open in a new tab too; a plain click switches without a reload.
// Under 900px it is a drawer; above, it can be collapsed. What it asks for
// goes out as callbacks: onOpen(id), onNew(), onRename(id, title), onDelete(id).
// The search box above the list asks the server (`GET /api/conversations?q=`)
// as you type, and lists what matches, each with the words found marked.
import { byId, h, icon } from '../dom.js';
import { searchConversations, urlOf } from '../conversations.js';
import { withTag } from './origins.js';

const COLLAPSED_KEY = 'loopwire.sidebar_collapsed';
const NARROW = window.matchMedia('(max-width: 900px)');
const UNTITLED = 'New conversation';
const SEARCH_DELAY_MS = 200;

export class Sidebar {
  constructor({ onOpen, onNew, onRename, onDelete, onExport = () => {}, originTag = () => null, origins = () => null, storage = window.localStorage }) {
    this.callbacks = { onOpen, onNew, onRename, onDelete, onExport };
    /** A row's tag saying which kind of client started it, and the origins listed (`render/origins.js`). */
    this.originTag = originTag;
    this.origins = origins;
    this.storage = storage;
    this.element = byId('sidebar');
    this.list = byId('conversation-list');
    this.empty = byId('conversation-empty');
    this.status = byId('conversation-status');
    this.toggle = byId('sidebar-toggle');
    this.newButton = byId('new-chat');
    this.items = [];
    this.hidden = new Set();
    this.searchBox = byId('conversation-query');
    this.heading = byId('conversations-title');
    this.found = null;
    /** What matches the search box's words (null: no search). */
    this.searching = null;
    this.currentId = null;
    this.editing = null;

    this.newButton.addEventListener('click', () => {
      this.closeDrawer();
      onNew();
    });
    this.toggle.addEventListener('click', () => this.setOpen(!this.isOpen));
    this.list.addEventListener('click', (event) => this.clicked(event));
    document.addEventListener('pointerdown', (event) => {
      const inside = this.element.contains(event.target) || this.toggle.contains(event.target);
      if (!inside && NARROW.matches) this.closeDrawer();
    });
    NARROW.addEventListener('change', () => this.layout());
    this.layout();
    this.searchBox.addEventListener('input', () => this.searchSoon());
    byId('conversation-search').addEventListener('submit', (event) => {
      event.preventDefault();
      this.searchNow();
    });
    this.searchBox.addEventListener('keydown', (event) => {
      if (event.key !== 'Escape' || !this.searchBox.value) return;
      event.stopPropagation(); // clears the search; a second Esc closes the drawer
      this.searchBox.value = '';
      this.searchNow();
    });
  }

  // ---------------------------------------------------------------- search

  searchSoon() {
    clearTimeout(this.searchTimer);
    this.searchTimer = setTimeout(() => this.searchNow(), SEARCH_DELAY_MS);
  }

  async searchNow() {
    clearTimeout(this.searchTimer);
    const q = this.searchBox.value.trim();
    this.searching = q || null;
    if (!q) {
      this.found = null;
      this.render();
      return;
    }
    try {
      const { items } = await searchConversations(q, undefined, this.origins());
      if (this.searching !== q) return; // typed on meanwhile
      this.found = items;
      this.render();
    } catch (error) {
      if (this.searching === q) this.failed(error.message);
    }
  }

  // ---------------------------------------------------------------- open / collapse

  get isOpen() {
    return this.element.dataset.open === 'true';
  }

  /** Open or close: the drawer when narrow, collapse (remembered) when wide. */
  setOpen(open) {
    this.element.dataset.open = String(open);
    this.toggle.setAttribute('aria-expanded', String(open));
    document.body.dataset.sidebar = open ? 'open' : 'closed';
    this.coverChat(open && NARROW.matches);
    if (!NARROW.matches) {
      try {
        this.storage.setItem(COLLAPSED_KEY, open ? '0' : '1');
      } catch {
        // storage disabled: the choice lasts until the reload
      }
    }
    if (open && NARROW.matches) this.newButton.focus();
  }

  closeDrawer() {
    if (NARROW.matches && this.isOpen) this.setOpen(false);
  }

  get isOpenAsDrawer() {
    return NARROW.matches && this.isOpen;
  }

  layout() {
    let collapsed = false;
    try {
      collapsed = this.storage.getItem(COLLAPSED_KEY) === '1';
    } catch {
      collapsed = false;
    }
    const open = NARROW.matches ? false : !collapsed;
    this.element.dataset.open = String(open);
    this.toggle.setAttribute('aria-expanded', String(open));
    document.body.dataset.sidebar = open ? 'open' : 'closed';
    this.coverChat(false);
  }

  /** The drawer covers the chat: nothing under it can be reached meanwhile
   * (by a tap, Tab or a screen reader) until it closes. */
  coverChat(covered) {
    const chat = document.getElementById('chat');
    if (chat) chat.inert = covered;
  }

  // ---------------------------------------------------------------- the list

  /** The server's list (newest first) and the conversation on screen. */
  show(items, currentId = this.currentId) {
    this.items = items;
    this.currentId = currentId;
    this.render();
  }

  setCurrent(id) {
    this.currentId = id;
    for (const link of this.list.querySelectorAll('.conversation-link')) {
      if (link.dataset.id === id) link.setAttribute('aria-current', 'page');
      else link.removeAttribute('aria-current');
    }
  }

  /** Hide an item (a delete waiting for its undo), or show it again. */
  setHidden(id, hidden) {
    if (hidden) this.hidden.add(id);
    else this.hidden.delete(id);
    this.render();
  }

  titleOf(id) {
    return this.items.find((item) => item.id === id)?.title ?? UNTITLED;
  }

  failed(message) {
    this.status.hidden = false;
    this.status.textContent = message;
  }

  render() {
    if (this.editing !== null) return; // a rename in progress: after it
    const focused = this.focusedControl();
    const searched = this.found !== null;
    const shown = (searched ? this.found : this.items).filter((item) => !this.hidden.has(item.id));
    this.list.replaceChildren(...shown.map((item) => this.row(item)));
    this.heading.textContent = searched ? 'Found' : 'Conversations';
    this.empty.textContent = searched
      ? `Nothing found for “${this.searching}”.`
      : 'Your conversations will be listed here.';
    this.empty.hidden = shown.length > 0;
    this.status.hidden = true;
    if (focused) this.list.querySelector(focused)?.focus();
  }

  /** A selector for the list's control that has the focus (kept across renders). */
  focusedControl() {
    const active = document.activeElement;
    const row = active?.closest?.('.conversation');
    if (!row || !this.list.contains(row)) return null;
    const id = row.dataset.id;
    if (active.classList.contains('conversation-link')) return `.conversation-link[data-id="${id}"]`;
    if (active.dataset.action) return `button[data-action="${active.dataset.action}"][data-id="${id}"]`;
    return null;
  }

  row(item) {
    const title = item.title || UNTITLED;
    const link = h(
      'a',
      {
        class: 'conversation-link',
        href: urlOf(item.id),
        dataset: { id: item.id },
        'aria-current': item.id === this.currentId ? 'page' : null,
        title,
      },
      withTag(h('span', { class: 'conversation-title', text: title }), this.originTag(item)),
      item.match?.snippet ? snippet(item.match.snippet) : null,
    );
    const actions = h(
      'div',
      { class: 'conversation-actions' },
      h('button', { type: 'button', class: 'icon-button', dataset: { action: 'rename', id: item.id }, 'aria-label': `Rename “${title}”`, title: 'Rename' }, icon('pencil')),
      h('button', { type: 'button', class: 'icon-button', dataset: { action: 'export', id: item.id, title }, 'aria-label': `Export “${title}”`, title: 'Export', 'aria-haspopup': 'menu', 'aria-expanded': 'false' }, icon('download')),
      h('button', { type: 'button', class: 'icon-button icon-button-danger', dataset: { action: 'delete', id: item.id }, 'aria-label': `Delete “${title}”`, title: 'Delete' }, icon('trash')),
    );
    return h('li', { class: 'conversation', dataset: { id: item.id } }, link, actions);
  }

  clicked(event) {
    const link = event.target.closest('.conversation-link');
    if (link) {
      const plain = event.button === 0 && !event.metaKey && !event.ctrlKey && !event.shiftKey && !event.altKey;
      if (!plain) return; // a new tab or window: the browser's
      event.preventDefault();
      this.closeDrawer();
      if (link.dataset.id !== this.currentId) this.callbacks.onOpen(link.dataset.id);
      return;
    }
    const button = event.target.closest('button[data-action]');
    if (!button) return;
    const { action, id } = button.dataset;
    if (action === 'rename') this.startRename(id);
    else if (action === 'delete') this.callbacks.onDelete(id);
    else if (action === 'export') this.callbacks.onExport(id, button);
  }

  // ---------------------------------------------------------------- rename

  startRename(id) {
    const row = this.list.querySelector(`.conversation[data-id="${id}"]`);
    if (!row) return;
    const current = this.items.find((item) => item.id === id)?.title ?? '';
    const input = h('input', {
      class: 'conversation-rename',
      type: 'text',
      value: current,
      maxlength: '200',
      'aria-label': 'New title',
    });
    const form = h('form', { class: 'conversation-rename-form' }, input);
    let done = false;
    const finish = (save) => {
      if (done) return;
      done = true;
      const title = input.value.trim();
      if (save && title && title !== current) {
        const item = this.items.find((entry) => entry.id === id);
        if (item) item.title = title;
        this.callbacks.onRename(id, title);
      }
      this.editing = null;
      this.render();
      this.list.querySelector(`.conversation-link[data-id="${id}"]`)?.focus();
    };
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      finish(true);
    });
    input.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') {
        event.preventDefault();
        event.stopPropagation();
        finish(false);
      }
    });
    input.addEventListener('blur', () => finish(true));
    row.replaceChildren(form);
    this.editing = id;
    input.focus();
    input.select();
  }
}

/** A search match's text, its matched words (between « ») marked. */
function snippet(text) {
  const parts = text.split(/[«»]/);
  return h(
    'span',
    { class: 'conversation-snippet' },
    ...parts.map((part, index) => (index % 2 ? h('mark', { text: part }) : document.createTextNode(part))),
  );
}
