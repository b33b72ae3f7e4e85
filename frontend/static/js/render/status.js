// The connection indicator and the model label.
import { byId } from '../dom.js';

const WORDS = { connecting: 'Connecting', reconnecting: 'Offline', open: 'Online', refused: 'Refused' };

export class ConnectionStatus {
  constructor({ onRetry }) {
    this.element = byId('connection');
    this.text = byId('connection-text');
    this.word = byId('connection-word'); // the short form, shown on phones
    this.retry = byId('reconnect-now');
    this.retry.addEventListener('click', onRetry);
    this.countdown = null;
  }

  show({ state, retryInMs }) {
    clearInterval(this.countdown);
    this.countdown = null;
    this.element.dataset.state = state;
    this.word.textContent = WORDS[state] ?? state;
    this.retry.hidden = state !== 'reconnecting' || retryInMs === null;
    if (state === 'reconnecting' && retryInMs !== null) {
      const until = Date.now() + retryInMs;
      const tick = () => {
        const seconds = Math.max(0, Math.ceil((until - Date.now()) / 1000));
        this.text.textContent = seconds > 0 ? `Reconnecting in ${seconds} s…` : 'Reconnecting…';
      };
      tick();
      this.countdown = setInterval(tick, 500);
      return;
    }
    this.text.textContent = {
      connecting: 'Connecting…',
      reconnecting: 'Reconnecting…',
      open: 'Connected',
      refused: 'Connection refused',
    }[state] ?? state;
  }
}

/** The model a message sent now would use (`chosen`, else the server's default). */
export function showModel({ model: fallback, provider }, chosen) {
  const model = chosen ?? fallback;
  const offline = provider === 'offline';
  byId('model-name').textContent = model;
  byId('model-note').textContent = offline ? 'offline demo' : provider;
  byId('model-chip').title = offline
    ? 'The built-in offline demo model. Set LOOPWIRE_LLM_BASE_URL, LOOPWIRE_LLM_API_KEY and LOOPWIRE_LLM_MODEL to use a real one.'
    : `Model ${model} via ${provider}`;
  byId('model-chip').dataset.provider = provider;
  byId('model-info-name').textContent = model;
  byId('model-info-provider').textContent = offline ? 'built-in offline demo model' : provider;
  byId('offline-note').hidden = !offline;
  byId('empty-offline').hidden = !offline;
}
