// The versions of a message that an edit or a retry replaced: ‹ 2 / 3 ›
// under the user's bubble where the conversation forks. The server keeps
// each version (a branch); a click asks it to switch (`switch_branch`), and
// the `branch_switched` frame that follows redraws the conversation.
import { h } from '../dom.js';

export class Versions {
  /**
   * `list()` resolves to the forks (`GET …/branches`), `switchTo(branchId)`
   * sends the switch and returns true when it went out, `busy()` says a run
   * is under way (no switching then).
   */
  constructor({ list, switchTo, busy }) {
    this.list = list;
    this.switchTo = switchTo;
    this.busy = busy;
    this.forks = [];
    this.asked = 0;
  }

  /** Ask the server where the conversation forks, then show it on `runs`' bubbles. */
  async refresh(runs) {
    const asked = ++this.asked;
    let forks = [];
    try {
      forks = (await this.list())?.forks ?? [];
    } catch {
      forks = []; // not stored yet, or the server is away: nothing to switch to
    }
    if (asked !== this.asked) return; // a newer answer is coming
    this.forks = forks;
    this.show(runs);
  }

  show(runs) {
    for (const old of document.querySelectorAll('.versions')) old.remove();
    for (const fork of this.forks) {
      const bubble = runs.get(fork.run_id)?.userBubble;
      bubble?.querySelector('.turn-user-foot')?.prepend(this.switcher(fork));
    }
  }

  /** Buttons are disabled while a run works; the count stays readable. */
  setBusy(busy) {
    for (const button of document.querySelectorAll('.versions button')) {
      button.disabled = busy || button.dataset.edge === 'true';
    }
  }

  switcher(fork) {
    const count = fork.versions.length;
    const at = fork.current;
    const step = (label, text, to) => {
      const target = fork.versions[to];
      const button = h('button', { type: 'button', class: 'versions-step', 'aria-label': label, text });
      button.dataset.edge = String(!target);
      button.disabled = !target || this.busy();
      button.addEventListener('click', () => {
        if (!target || this.busy()) return;
        if (this.switchTo(target.branch_id)) group.classList.add('versions-switching');
      });
      return button;
    };
    const group = h(
      'div',
      { class: 'versions', role: 'group', 'aria-label': `Version ${at + 1} of ${count}` },
      step('Previous version', '‹', at - 1),
      h('span', { class: 'versions-count', text: `${at + 1} / ${count}` }),
      step('Next version', '›', at + 1),
    );
    return group;
  }
}
