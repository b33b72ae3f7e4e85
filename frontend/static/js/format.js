// Formatting helpers shared by the renderers.

export function formatDuration(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return '';
  if (ms < 1) return '<1 ms';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function formatSeconds(seconds) {
  if (!Number.isFinite(seconds)) return '';
  if (seconds < 90) return `${Math.round(seconds)} seconds`;
  return `${Math.round(seconds / 60)} minutes`;
}

function inline(value) {
  if (Array.isArray(value)) return `[${value.map(inline).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    const fields = Object.entries(value).map(([key, item]) => `${JSON.stringify(key)}: ${inline(item)}`);
    return `{${fields.join(', ')}}`;
  }
  return JSON.stringify(value) ?? String(value);
}

/**
 * Pretty JSON for arguments and results: on one line when that is at most
 * `inlineUpTo` characters, indented otherwise. Strings are shown as they came.
 */
export function prettyJson(value, { inlineUpTo = 0 } = {}) {
  if (typeof value === 'string') return value;
  try {
    const short = inline(value);
    if (short.length <= inlineUpTo) return short;
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
}

export function plural(count, one, many = `${one}s`) {
  return `${count} ${count === 1 ? one : many}`;
}

export function formatNumber(n) {
  return new Intl.NumberFormat('en').format(n);
}

/** A file's size for people: `512 bytes`, `12.3 KB`, `4.5 MB`. */
export function formatBytes(n) {
  if (n < 1000) return `${n} bytes`;
  if (n < 1_000_000) return `${(n / 1000).toFixed(1)} KB`;
  return `${(n / 1_000_000).toFixed(1)} MB`;
}
