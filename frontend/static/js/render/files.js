// The files strip above the message box: the conversation's files (uploads
// and tools' artifacts) as download links, files being uploaded, and the
// ways to add one: the attach button (a file picker) and dropping files
// anywhere on the chat. Uploads go to `onUpload(file)`, which returns a
// promise of the stored file or throws with the server's reason.
import { byId, h, icon } from '../dom.js';
import { formatBytes } from '../format.js';

export class FilesStrip {
  constructor({ onUpload, urlOf, onError }) {
    this.onUpload = onUpload;
    this.urlOf = urlOf;
    this.onError = onError;
    this.strip = byId('files');
    this.list = byId('files-list');
    this.picker = byId('file-picker');
    this.drop = byId('drop-zone');
    this.files = [];
    this.uploading = new Map(); // a name being uploaded → its chip
    byId('attach-button').addEventListener('click', () => this.picker.click());
    this.picker.addEventListener('change', () => {
      this.add([...this.picker.files]);
      this.picker.value = '';
    });
    const chat = byId('chat');
    let depth = 0;
    chat.addEventListener('dragenter', (event) => {
      if (!carriesFiles(event)) return;
      depth += 1;
      this.drop.hidden = false;
    });
    chat.addEventListener('dragleave', () => {
      depth = Math.max(0, depth - 1);
      if (depth === 0) this.drop.hidden = true;
    });
    chat.addEventListener('dragover', (event) => {
      if (carriesFiles(event)) event.preventDefault(); // allows the drop
    });
    chat.addEventListener('drop', (event) => {
      depth = 0;
      this.drop.hidden = true;
      if (!carriesFiles(event)) return;
      event.preventDefault();
      this.add([...event.dataTransfer.files]);
    });
  }

  /** The conversation's files, as the server listed them (oldest first). */
  show(files) {
    this.files = files;
    this.render();
  }

  add(files) {
    for (const file of files) this.upload(file);
  }

  async upload(file) {
    const key = `${file.name}\u0000${Date.now()}\u0000${Math.random()}`;
    this.uploading.set(key, file.name);
    this.render();
    try {
      const stored = await this.onUpload(file);
      if (stored && !this.files.some((f) => f.id === stored.id)) this.files = [...this.files, stored];
    } catch (error) {
      this.onError(file.name, error.message);
    } finally {
      this.uploading.delete(key);
      this.render();
    }
  }

  render() {
    const chips = this.files.map((file) =>
      h(
        'li',
        { class: 'file-chip', dataset: { origin: file.origin, fileId: file.id } },
        h(
          'a',
          {
            href: this.urlOf(file.id),
            download: file.name,
            title: file.description || file.name,
            'aria-label': `Download ${file.name} (${formatBytes(file.size)}${file.origin === 'artifact' ? ', made by a tool' : ''})`,
          },
          icon(file.origin === 'artifact' ? 'tool' : 'file'),
          h('span', { class: 'file-name', text: file.name }),
          h('span', { class: 'file-size', text: formatBytes(file.size) }),
        ),
      ),
    );
    for (const name of this.uploading.values()) {
      chips.push(
        h(
          'li',
          { class: 'file-chip file-uploading', 'aria-busy': 'true' },
          h('span', { class: 'spinner', 'aria-hidden': 'true' }),
          h('span', { class: 'file-name', text: name }),
          h('span', { class: 'file-size', text: 'uploading…' }),
        ),
      );
    }
    this.list.replaceChildren(...chips);
    this.strip.hidden = chips.length === 0;
  }
}

function carriesFiles(event) {
  return [...(event.dataTransfer?.types ?? [])].includes('Files');
}
