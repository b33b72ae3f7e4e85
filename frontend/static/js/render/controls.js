// The agent controls panel: agent mode, max steps (capped by the server),
// read-only, tool selection with effect badges. Changes are saved in
// `settings` (localStorage) and apply to the next message.
import { byId, h } from '../dom.js';

const MODE_NOTES = {
  agent: 'Agent loop: reason → act → observe, step by step, with the selected tools.',
  tools: 'Chat with tools: the model may call the selected tools, then answers.',
  plain: 'Plain chat: one streamed reply, no tools.',
};

function badges(effect) {
  const list = [effect.read_only ? ['read-only', 'safe'] : ['writes', 'warn']];
  if (effect.idempotent) list.push(['idempotent', 'plain']);
  if (effect.requires_approval) list.push(['needs approval', 'warn']);
  if (effect.finalize) list.push(['can finish', 'plain']);
  return list.map(([text, kind]) => h('span', { class: `badge badge-${kind}`, text }));
}

export class ControlsPanel {
  constructor({ settings }) {
    this.settings = settings;
    this.info = null;
    this.agentMode = byId('agent-mode');
    this.maxSteps = byId('max-steps');
    this.maxStepsNote = byId('max-steps-note');
    this.readOnly = byId('read-only');
    this.toolList = byId('tool-options');
    this.modeNote = byId('mode-note');
    this.panel = byId('agent-panel');
    this.toggle = byId('panel-toggle');

    this.agentMode.checked = settings.agentMode;
    this.readOnly.checked = settings.readOnly;
    this.agentMode.addEventListener('change', () => this.update({ agentMode: this.agentMode.checked }));
    this.readOnly.addEventListener('change', () => this.update({ readOnly: this.readOnly.checked }));
    this.maxSteps.addEventListener('change', () => this.stepsChanged());
    this.toolList.addEventListener('change', (event) => this.toolChanged(event.target));
    byId('tools-all').addEventListener('click', () => this.setAllTools(true));
    byId('tools-none').addEventListener('click', () => this.setAllTools(false));
    this.toggle.addEventListener('click', () => this.setOpen(this.panel.dataset.open !== 'true'));
    byId('panel-close').addEventListener('click', () => this.setOpen(false, true));
    document.addEventListener('pointerdown', (event) => {
      const inside = this.panel.contains(event.target) || this.toggle.contains(event.target);
      if (!inside && this.isOpenAsDrawer) this.setOpen(false);
    });
  }

  /** The server's description arrived (page config or session_ready). */
  setInfo(info) {
    this.info = info;
    const { max_steps_cap: cap, default_max_steps: fallback } = info.limits;
    this.maxSteps.max = String(cap);
    this.maxSteps.value = String(this.settings.stepsFor(info.limits));
    this.maxStepsNote.textContent = `Default ${fallback}, server cap ${cap}.`;
    const tools = JSON.stringify(info.tools);
    if (tools !== this.renderedTools) {
      this.renderedTools = tools; // unchanged tools keep their focus and state
      this.renderTools(info.tools);
    }
    this.refresh();
  }

  renderTools(tools) {
    const items = tools.map((tool) => {
      const id = `tool-opt-${tool.name}`;
      const input = h('input', { type: 'checkbox', id, value: tool.name, 'aria-describedby': `${id}-desc` });
      input.checked = !this.settings.disabledTools.has(tool.name);
      return h(
        'li',
        { class: 'tool-option', dataset: { tool: tool.name, readOnly: String(tool.effect.read_only) } },
        input,
        h(
          'div',
          { class: 'tool-option-main' },
          h('label', { for: id }, h('code', { class: 'tool-option-name', text: tool.name })),
          h('span', { class: 'badges' }, badges(tool.effect)),
          h('p', { class: 'tool-option-desc', id: `${id}-desc`, text: tool.summary || tool.description }),
        ),
      );
    });
    if (items.length === 0) items.push(h('li', { class: 'panel-note', text: 'This server has no tools.' }));
    this.toolList.replaceChildren(...items);
  }

  update(changes) {
    Object.assign(this.settings, changes);
    this.settings.save();
    this.refresh();
  }

  stepsChanged() {
    const cap = Number(this.maxSteps.max) || Infinity;
    const value = Number.parseInt(this.maxSteps.value, 10);
    const steps = Number.isFinite(value) ? Math.min(Math.max(1, value), cap) : null;
    if (steps === null) {
      this.maxSteps.value = this.info ? String(this.info.limits.default_max_steps) : '';
    } else {
      this.maxSteps.value = String(steps);
      if (value > cap) this.maxStepsNote.textContent = `Capped at ${cap}: the server allows no more.`;
    }
    this.update({ maxSteps: steps });
  }

  toolChanged(input) {
    if (input.type !== 'checkbox') return;
    if (input.checked) this.settings.disabledTools.delete(input.value);
    else this.settings.disabledTools.add(input.value);
    this.update({});
  }

  setAllTools(on) {
    for (const input of this.toolList.querySelectorAll('input[type=checkbox]')) {
      input.checked = on;
      if (on) this.settings.disabledTools.delete(input.value);
      else this.settings.disabledTools.add(input.value);
    }
    this.update({});
  }

  refresh() {
    this.maxSteps.disabled = !this.settings.agentMode;
    this.toolList.dataset.readOnly = String(this.settings.readOnly);
    if (this.info) this.modeNote.textContent = MODE_NOTES[this.settings.modeFor(this.info)];
  }

  setOpen(open, returnFocus = false) {
    this.panel.dataset.open = String(open);
    this.toggle.setAttribute('aria-expanded', String(open));
    if (open) this.agentMode.focus();
    else if (returnFocus) this.toggle.focus();
  }

  get isOpenAsDrawer() {
    return this.panel.dataset.open === 'true' && getComputedStyle(this.toggle).display !== 'none';
  }
}
