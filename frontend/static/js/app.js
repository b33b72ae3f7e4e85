// Entry point: reads the page config, builds the pieces, wires the events.
import { Connection } from './connection.js';
import { Controller } from './controller.js';
import { byId } from './dom.js';
import { Settings, Transcript } from './state.js';
import { ApprovalDialog } from './render/approval.js';
import { QuestionBanner } from './render/banner.js';
import { ControlsPanel } from './render/controls.js';
import { MessageList } from './render/messages.js';
import { ConnectionStatus, showModel } from './render/status.js';

const config = JSON.parse(byId('lw-config').textContent);

const settings = new Settings();
const transcript = new Transcript();
const connection = new Connection({ path: config.ws_path });
const messages = new MessageList({ list: byId('messages'), scroller: byId('scroller'), emptyState: byId('empty-state') });
const controls = new ControlsPanel({ settings });
const status = new ConnectionStatus({ onRetry: () => connection.reconnectNow() });

let controller = null;
const banner = new QuestionBanner({ onAnswer: (content, questionId) => controller.answer(content, questionId) && focusComposer() });
const approvals = new ApprovalDialog({ onDecide: (callId, approved, reason) => controller.decide(callId, approved, reason) });
controller = new Controller({ connection, settings, transcript, messages, banner, approvals, info: config.info });

const composer = byId('composer');
const input = byId('composer-input');
const sendButton = byId('send-button');
const stopButton = byId('stop-button');
const stopLabel = byId('stop-label');
const newChat = byId('new-chat');
const hint = byId('composer-hint');
const defaultHint = hint.cloneNode(true).childNodes;

function focusComposer() {
  input.focus();
  return true;
}

function refresh() {
  const running = controller.running;
  const connected = connection.isOpen;
  stopButton.hidden = !running;
  stopButton.disabled = !running;
  stopLabel.textContent = controller.stopRequested ? 'Stopping…' : 'Stop';
  sendButton.disabled = running || !connected || input.value.trim() === '';
  newChat.disabled = running;
  document.body.dataset.running = String(running);
  controls.refresh();
}

function setHint(text) {
  if (text) hint.textContent = text;
  else hint.replaceChildren(...[...defaultHint].map((node) => node.cloneNode(true)));
  hint.dataset.alert = String(Boolean(text));
}

function autosize() {
  input.style.height = 'auto';
  input.style.height = `${Math.min(input.scrollHeight, 240)}px`;
}

function submit() {
  if (controller.running) {
    setHint('A run is active — wait for the answer, or press Esc to stop it.');
    return;
  }
  if (!connection.isOpen) {
    setHint('Not connected — your message stays here until the connection is back.');
    return;
  }
  if (controller.sendChat(input.value)) {
    input.value = '';
    autosize();
    setHint(null);
  }
  refresh();
}

composer.addEventListener('submit', (event) => {
  event.preventDefault();
  submit();
});
input.addEventListener('keydown', (event) => {
  if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    submit();
  }
});
input.addEventListener('input', () => {
  autosize();
  refresh();
});
stopButton.addEventListener('click', () => controller.stop());
newChat.addEventListener('click', () => {
  controller.newConversation();
  focusComposer();
});
byId('examples').addEventListener('click', (event) => {
  const button = event.target.closest('[data-prompt]');
  if (!button) return;
  input.value = button.dataset.prompt;
  autosize();
  refresh();
  focusComposer();
});

document.addEventListener('keydown', (event) => {
  if (event.key !== 'Escape' || event.defaultPrevented) return;
  if (approvals.dialog.open) return;
  if (controls.isOpenAsDrawer) {
    controls.setOpen(false, true);
  } else if (controller.running) {
    event.preventDefault();
    controller.stop();
  }
});

connection.addEventListener('status', (event) => {
  status.show(event.detail);
  refresh();
});
connection.addEventListener('ready', (event) => {
  controller.onReady(event.detail);
  showModel(event.detail.frame);
  controls.setInfo(controller.info);
});
connection.addEventListener('frame', (event) => controller.onFrame(event.detail));
connection.addEventListener('refused', (event) => controller.onRefused(event.detail));
controller.addEventListener('change', () => {
  refresh();
  if (!controller.running && hint.dataset.alert === 'true') setHint(null);
});
controller.addEventListener('run-finished', () => {
  const lost = document.activeElement === document.body || document.activeElement === stopButton;
  if (lost && !connection.replaying) focusComposer();
});
controller.addEventListener('chat-refused', (event) => {
  if (!input.value.trim()) {
    input.value = event.detail.content;
    autosize();
  }
});

showModel(config.info);
controls.setInfo(config.info);
refresh();
connection.start();
if (!window.matchMedia('(pointer: coarse)').matches) focusComposer();

// For people debugging in the console (and for the browser tests).
window.loopwire = { connection, controller, settings };
