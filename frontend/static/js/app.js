// Entry point: reads the page config, builds the pieces, wires the events.
import { Connection } from './connection.js';
import { Composer } from './composer.js';
import { Controller } from './controller.js';
import {
  conversationInUrl,
  deleteConversation,
  fileUrl,
  getConversation,
  listBranches,
  listConversations,
  listFiles,
  renameConversation,
  uploadFile,
  urlOf,
} from './conversations.js';
import { byId } from './dom.js';
import { Settings, Transcript } from './state.js';
import { Theme } from './theme.js';
import { ApprovalDialog } from './render/approval.js';
import { FilesStrip } from './render/files.js';
import { QuestionBanner } from './render/banner.js';
import { MessageList } from './render/messages.js';
import { HeldList } from './render/pending.js';
import { InstructionsDialog } from './render/instructions.js';
import { ToolPermissions } from './render/permissions.js';
import { ShareDialog } from './render/share.js';
import { Sidebar } from './render/sidebar.js';
import { ConnectionStatus, showModel } from './render/status.js';
import { Toast } from './render/toast.js';
import { Toolbar } from './render/toolbar.js';
import { UsageDialog } from './render/usage.js';
import { ExportMenu, Importer } from './render/transfer.js';
import { OriginFilter } from './render/origins.js';
import { Versions } from './render/versions.js';

const config = JSON.parse(byId('lw-config').textContent);
const TOUCH = window.matchMedia('(pointer: coarse)');

new Theme();
const settings = new Settings();
const transcript = new Transcript();
const openedId = conversationInUrl();
const connection = new Connection({ path: config.ws_path, sessionId: openedId ?? undefined });
const messages = new MessageList({ list: byId('messages'), scroller: byId('scroller'), emptyState: byId('empty-state') });
const toolbar = new Toolbar({ settings });
const status = new ConnectionStatus({ onRetry: () => connection.reconnectNow() });

const input = byId('composer-input');
const banner = new QuestionBanner({ input });
const approvals = new ApprovalDialog({ onDecide: (request, decision) => controller.decide(request, decision) });
const held = new HeldList({ section: byId('held'), list: byId('held-list'), onCancel: (inputId) => controller.cancelHeld(inputId) });
const controller = new Controller({ connection, settings, transcript, messages, banner, approvals, held, info: config.info });
messages.onEdit = (runId, text) => controller.editMessage(runId, text);
controller.versions = new Versions({
  list: () => (connection.sessionId ? listBranches(connection.sessionId) : null),
  switchTo: (branchId) => controller.switchVersion(branchId),
  busy: () => controller.running,
});

const composer = new Composer({ input, controller, connection, banner, touch: TOUCH, onChange: refresh });

function focusComposer() {
  return composer.focus();
}

function refresh() {
  composer.refresh();
  document.body.dataset.running = String(controller.running);
  controller.versions.setBusy(controller.running);
  toolbar.refresh();
}

toolbar.addEventListener('notice', (event) => composer.setHint(event.detail));
byId('model-select').addEventListener('change', () => showModel(controller.info, settings.modelFor(controller.info)));

// ---------------------------------------------------------------- conversations

const toast = new Toast();
const pendingDeletes = new Set();
/** Conversations known to be stored though they may have no frames (an import). */
const storedIds = new Set();
let opening = 0;

async function refreshList() {
  try {
    const page = await listConversations(null, originFilter.origins);
    sidebar.show(page.items, connection.sessionId);
  } catch (error) {
    sidebar.failed(`Conversations could not be loaded: ${error.message}`);
  }
}

/** Show conversation `id` (null: a new chat); `push` adds a history entry. */
async function openConversation(id, { push = true } = {}) {
  const ticket = ++opening;
  if (push && window.location.pathname !== urlOf(id)) window.history.pushState(null, '', urlOf(id));
  sidebar.setCurrent(id);
  let stored = { runs: [], messages: [] };
  if (id) {
    try {
      stored = await getConversation(id);
      storedIds.add(id);
    } catch {
      // not stored (yet), or not ours: the server decides on connect
    }
  }
  if (ticket !== opening) return; // another click came first
  controller.openConversation(id, stored.runs, stored.messages);
  composer.setHint(null); // what is typed in the message box stays there
  focusComposer();
}

async function removeConversation(id) {
  const wasCurrent = id === connection.sessionId;
  const title = sidebar.titleOf(id);
  sidebar.setHidden(id, true);
  pendingDeletes.add(id);
  if (wasCurrent) openConversation(null);
  const how = await toast.show(`Deleted “${title}”`, { action: 'Undo' });
  pendingDeletes.delete(id);
  if (how === 'undo') {
    sidebar.setHidden(id, false);
    if (wasCurrent && connection.sessionId !== id) openConversation(id);
    return;
  }
  try {
    await deleteConversation(id);
  } catch (error) {
    sidebar.setHidden(id, false);
    messages.notice({ kind: 'error', title: 'Not deleted', text: error.message });
  }
  refreshList();
}

const originFilter = new OriginFilter({
  onChange: () => {
    refreshList();
    if (sidebar.searching) sidebar.searchNow();
  },
});
const exportMenu = new ExportMenu({ onError: (text) => sidebar.failed(text) });

const sidebar = new Sidebar({
  originTag: (item) => originFilter.tag(item),
  origins: () => originFilter.origins,
  onExport: (id, button) => exportMenu.toggle(button, id),
  onOpen: (id) => openConversation(id),
  onNew: () => openConversation(null),
  onRename: async (id, title) => {
    try {
      await renameConversation(id, title);
    } catch (error) {
      sidebar.failed(`Not renamed: ${error.message}`);
    }
    refreshList();
  },
  onDelete: (id) => removeConversation(id),
});

new Importer({
  onImported: (imported) => {
    storedIds.add(imported.id);
    sidebar.closeDrawer();
    refreshList();
    openConversation(imported.id);
  },
  onError: (text) => sidebar.failed(text),
});

window.addEventListener('popstate', () => openConversation(conversationInUrl(), { push: false }));
window.addEventListener('pagehide', () => {
  for (const id of pendingDeletes) deleteConversation(id, { keepalive: true }).catch(() => {});
});
byId('examples').addEventListener('click', (event) => {
  const button = event.target.closest('[data-prompt]');
  if (!button) return;
  composer.setText(button.dataset.prompt);
  composer.submit(); // an example is sent, as its button says: try it
});

// ---------------------------------------------------------------- share links

const share = new ShareDialog({ enabled: config.sharing !== false });

// ---------------------------------------------------------------- tool permissions

const permissions = new ToolPermissions({
  currentId: () => connection.sessionId,
  titleOf: (id) => sidebar.items.find((item) => item.id === id)?.title ?? null,
});
controller.addEventListener('grants-changed', () => permissions.refresh());
const instructions = new InstructionsDialog({ currentId: () => conversationInUrl() }); // stored ones only
const usage = new UsageDialog({ admin: config.admin === true });

// ---------------------------------------------------------------- files

const files = new FilesStrip({
  onUpload: async (file) => {
    const id = connection.sessionId;
    if (!id || !connection.isOpen) throw new Error('Not connected: try again once the connection is back.');
    const stored = await uploadFile(id, file);
    refreshList();
    if (connection.sessionId !== id) return null; // another conversation is shown now
    showInUrl(id, true); // the conversation exists now, if it did not
    return stored;
  },
  urlOf: (fileId) => fileUrl(connection.sessionId, fileId),
  onError: (name, message) => messages.notice({ kind: 'error', title: `“${name}” was not added`, text: message }),
});
controller.addEventListener('files', (event) => files.show(event.detail));

/** The files of the conversation just connected to (a new one has none). */
async function loadFiles(id, stored) {
  files.show([]);
  if (!stored) return;
  try {
    const listed = await listFiles(id);
    if (connection.sessionId === id) files.show(listed.items);
  } catch {
    // not stored yet, or gone: the strip stays empty until a files_update
  }
}

// ---------------------------------------------------------------- shortcuts

const shortcuts = byId('shortcuts');
byId('shortcuts-button').addEventListener('click', () => shortcuts.showModal());

/** The page's keyboard shortcuts (listed in the #shortcuts dialog). */
function shortcut(event) {
  const command = event.ctrlKey || event.metaKey;
  const key = event.key.toLowerCase();
  if (command && event.shiftKey && key === 'o') return () => openConversation(null);
  if (command && event.shiftKey && key === 's') return () => sidebar.setOpen(!sidebar.isOpen);
  if (command && !event.shiftKey && key === '/') return () => shortcuts.showModal();
  if (event.shiftKey && key === 'escape') return focusComposer;
  return null;
}

document.addEventListener('keydown', (event) => {
  if (event.defaultPrevented || shortcuts.open || approvals.dialog.open || permissions.dialog.open || instructions.dialog.open || usage.dialog.open) return;
  const action = shortcut(event);
  if (action) {
    event.preventDefault();
    action();
  }
});

document.addEventListener('keydown', (event) => {
  if (event.key !== 'Escape' || event.shiftKey || event.defaultPrevented) return;
  if (approvals.dialog.open || permissions.dialog.open || instructions.dialog.open || usage.dialog.open) return;
  if (toolbar.closePopover()) {
    event.preventDefault();
  } else if (sidebar.isOpenAsDrawer) {
    sidebar.setOpen(false);
    sidebar.toggle.focus();
  } else if (controller.running) {
    event.preventDefault();
    controller.stop();
  }
});

connection.addEventListener('status', (event) => {
  status.show(event.detail);
  refresh();
});
/** The address names the conversation once it is one (it has frames). */
function showInUrl(id, stored) {
  share.setConversation(stored ? id : null);
  const url = stored ? urlOf(id) : urlOf(null);
  if (window.location.pathname !== url) window.history.replaceState(null, '', url);
}

connection.addEventListener('ready', (event) => {
  const { frame } = event.detail;
  const id = frame.session_id;
  showInUrl(id, frame.last_seq > 0 || storedIds.has(id));
  sidebar.setCurrent(id);
  refreshList();
  loadFiles(id, frame.last_seq > 0);
  controller.onReady(event.detail);
  toolbar.setInfo(controller.info);
  showModel(controller.info, settings.modelFor(controller.info));
});
connection.addEventListener('frame', (event) => controller.onFrame(event.detail));
connection.addEventListener('replayed', () => controller.onReplayed());
connection.addEventListener('refused', (event) => controller.onRefused(event.detail));
controller.addEventListener('change', () => {
  refresh();
  if (!controller.running && composer.alerting) composer.setHint(null);
});
controller.addEventListener('run-started', () => {
  showInUrl(connection.sessionId, true);
  refreshList();
});
controller.addEventListener('run-finished', () => {
  refreshList();
  const lost = document.activeElement === document.body || document.activeElement === composer.stopButton;
  if (lost && !connection.replaying) focusComposer();
});
controller.addEventListener('chat-refused', (event) => composer.restore(event.detail.content));

showModel(config.info, settings.modelFor(config.info));
toolbar.setInfo(config.info);
refresh();
if (openedId) {
  // a link to a conversation: what its user said comes from the server
  getConversation(openedId)
    .then((conversation) => {
      storedIds.add(openedId);
      controller.rememberRuns(openedId, conversation.runs, conversation.messages);
    })
    .catch(() => {}) // not stored (yet), or not ours: the server decides on connect
    .finally(() => connection.start());
} else {
  connection.start();
}
if (!TOUCH.matches) focusComposer();

// For the browser tests and for debugging in the console:
// `const { connection } = await import('/static/js/app.js')`.
export { connection, controller, settings, sidebar };
