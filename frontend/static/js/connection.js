// The WebSocket to the server: connect, reconnect with backoff, resume.
//
// The page names itself (`?client=page`): the conversations it starts are
// tagged so, and listed apart from scripts' (`GET /api/conversations?origin=`).
// A session is resumed with `?session_id=…&last_seq=…`: the server replays
// every frame after `last_seq`, then live frames. The session id lives in
// sessionStorage, so a page reload resumes with last_seq=0 and the replay
// rebuilds the screen. Every frame whose seq is not above the last one
// applied is dropped, so nothing is ever applied twice. The replay ends with
// the frame numbered `session_ready.last_seq`; after another server took the
// conversation over from one that crashed, seqs skip ahead and no frame has
// that number, so a replay also ends once nothing has come for a moment.
//
// Events (all CustomEvent, details below):
//   status   {state, attempt, retryInMs}   state: connecting | open | reconnecting | refused
//   ready    {frame, replayUntil, changedSession}
//   frame    {frame, replaying}
//   replayed {}                            a replay ended without its last seq (see above)
//   refused  {frame}                       an error frame outside the session's sequence
//
// Who is connecting is the browser's session cookie (set by the login page;
// never a token in the URL). A handshake refused because the cookie is gone
// or expired sends the page to the login form.
import { FRAME } from './protocol.js';

const SESSION_KEY = 'loopwire.session_id';
const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 10_000;
const REFUSED_CODES = new Set([4401, 4403]);
const REPLAY_QUIET_MS = 300;

export class Connection extends EventTarget {
  constructor({ path = '/ws', storage = window.sessionStorage, sessionId = undefined } = {}) {
    super();
    this.path = path;
    this.storage = storage;
    this.sessionId = sessionId === undefined ? storage.getItem(SESSION_KEY) : sessionId;
    this.lastSeq = 0;
    this.replayUntil = 0;
    this.state = 'connecting';
    this.attempt = 0;
    this.socket = null;
    this.timer = null;
    this.replayTimer = null;
  }

  get isOpen() {
    return this.state === 'open' && this.socket?.readyState === WebSocket.OPEN;
  }

  /** True while frames the server sent before this connection are arriving. */
  get replaying() {
    return this.lastSeq < this.replayUntil;
  }

  start() {
    window.addEventListener('online', () => this.reconnectNow());
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden) this.reconnectNow();
    });
    this.open();
  }

  url() {
    const url = new URL(this.path, window.location.href);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    url.searchParams.set('client', 'page'); // what a new conversation is tagged with
    if (this.sessionId) {
      url.searchParams.set('session_id', this.sessionId);
      url.searchParams.set('last_seq', String(this.lastSeq));
    }
    return url.href;
  }

  open() {
    clearTimeout(this.timer);
    this.timer = null;
    this.setState(this.attempt === 0 ? 'connecting' : 'reconnecting');
    const socket = new WebSocket(this.url());
    this.socket = socket;
    let opened = false;
    socket.addEventListener('open', () => {
      opened = true;
    });
    socket.addEventListener('message', (event) => {
      if (socket === this.socket) this.receive(event.data);
    });
    socket.addEventListener('close', (event) => {
      if (socket !== this.socket) return;
      this.closed(event);
      if (!opened) this.checkSignedIn();
    });
  }

  /** Send one client frame; false when not connected (nothing is queued). */
  send(frame) {
    if (!this.isOpen) return false;
    this.socket.send(JSON.stringify(frame));
    return true;
  }

  /** Skip the wait of a pending reconnect. */
  reconnectNow() {
    if (this.timer !== null) this.open();
  }

  /** Forget the session and start a new one. */
  newSession() {
    this.switchTo(null);
  }

  /** Leave this session for `sessionId` (null: a new one), replayed from its start. */
  switchTo(sessionId) {
    this.sessionId = sessionId;
    if (sessionId) this.storage.setItem(SESSION_KEY, sessionId);
    else this.storage.removeItem(SESSION_KEY);
    this.lastSeq = 0;
    this.replayUntil = 0;
    clearTimeout(this.replayTimer);
    this.replayTimer = null;
    this.attempt = 0;
    const old = this.socket;
    this.socket = null;
    old?.close(1000, 'switching conversation');
    this.open();
  }

  receive(text) {
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      console.warn('loopwire: ignoring a frame that is not JSON');
      return;
    }
    if (frame.type === FRAME.SESSION_READY) {
      this.ready(frame);
    } else if (!frame.seq) {
      this.emit('refused', { frame });
    } else if (frame.seq > this.lastSeq) {
      this.lastSeq = frame.seq;
      this.emit('frame', { frame, replaying: this.replaying });
      if (this.replayTimer !== null) this.watchReplay();
    }
  }

  /** While replaying: end the replay once no frame has come for a moment. */
  watchReplay() {
    clearTimeout(this.replayTimer);
    this.replayTimer = null;
    if (!this.replaying) return;
    this.replayTimer = setTimeout(() => {
      this.replayTimer = null;
      if (!this.replaying) return;
      this.replayUntil = this.lastSeq;
      this.emit('replayed', {});
    }, REPLAY_QUIET_MS);
  }

  ready(frame) {
    const changedSession = Boolean(this.sessionId) && frame.session_id !== this.sessionId;
    if (changedSession || !frame.resumed) this.lastSeq = 0;
    this.sessionId = frame.session_id;
    this.storage.setItem(SESSION_KEY, frame.session_id);
    this.replayUntil = frame.last_seq;
    this.attempt = 0;
    this.setState('open');
    this.emit('ready', { frame, replayUntil: frame.last_seq, changedSession });
    this.watchReplay();
  }

  closed(event) {
    this.socket = null;
    clearTimeout(this.replayTimer);
    this.replayTimer = null;
    if (REFUSED_CODES.has(event.code)) {
      this.setState('refused');
      return;
    }
    const delay = Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** this.attempt);
    const retryInMs = Math.round(delay * (0.8 + Math.random() * 0.4));
    this.attempt += 1;
    this.timer = setTimeout(() => this.open(), retryInMs);
    this.setState('reconnecting', retryInMs);
  }

  /** A refused handshake may mean the sign-in ran out: then log in again. */
  async checkSignedIn() {
    try {
      const response = await fetch(new URL('/api/info', window.location.href), {
        credentials: 'same-origin',
        cache: 'no-store',
      });
      if (response.status === 401) window.location.assign('/login');
    } catch {
      // offline or the server is down: the reconnect loop goes on
    }
  }

  setState(state, retryInMs = null) {
    this.state = state;
    this.emit('status', { state, attempt: this.attempt, retryInMs });
  }

  emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }
}
