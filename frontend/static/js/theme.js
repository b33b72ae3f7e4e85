// Light, dark, or the system's: a choice kept in localStorage and applied as
// `data-theme` on <html> (the stylesheets' colours follow `color-scheme`).
// The code highlighting's two stylesheets follow the same choice.
import { byId } from './dom.js';

const KEY = 'loopwire.theme';
const ORDER = ['system', 'light', 'dark'];
const OPPOSITE = { light: 'dark', dark: 'light' };
const LABELS = { system: 'Theme: as the system', light: 'Theme: light', dark: 'Theme: dark' };
const SYSTEM_MEDIA = { light: '(prefers-color-scheme: light)', dark: '(prefers-color-scheme: dark)' };

export class Theme {
  constructor({ storage = window.localStorage } = {}) {
    this.storage = storage;
    this.button = byId('theme-button');
    this.sheets = { light: byId('code-light'), dark: byId('code-dark') };
    let saved = null;
    try {
      saved = storage.getItem(KEY);
    } catch {
      saved = null;
    }
    this.apply(ORDER.includes(saved) ? saved : 'system');
    this.button.addEventListener('click', () => this.choose(this.next()));
  }

  /** What a click chooses: every click changes what is seen. From the
   * system's theme it goes to the other one, then to the system's own
   * (chosen, so it stays when the system changes), then back. */
  next() {
    const system = window.matchMedia(SYSTEM_MEDIA.dark).matches ? 'dark' : 'light';
    if (this.current === 'system') return OPPOSITE[system];
    if (this.current === OPPOSITE[system]) return system;
    return 'system';
  }

  choose(theme) {
    this.apply(theme);
    try {
      this.storage.setItem(KEY, theme);
    } catch {
      // storage disabled: the choice lasts until the reload
    }
  }

  apply(theme) {
    this.current = theme;
    const root = document.documentElement;
    if (theme === 'system') delete root.dataset.theme;
    else root.dataset.theme = theme;
    for (const [scheme, sheet] of Object.entries(this.sheets)) {
      sheet.media = theme === 'system' ? SYSTEM_MEDIA[scheme] : theme === scheme ? 'all' : 'not all';
    }
    this.button.dataset.theme = theme;
    this.button.setAttribute('aria-label', LABELS[theme]);
    this.button.title = `${LABELS[theme]} (click to change)`;
  }
}
