// A question whose answer is a small object (`answer_schema.type: "object"`,
// scalar properties: what an MCP server's form asks, or the model's
// `request_input`) shown as a form: one labelled control per property, the
// required ones marked and enforced by the browser's validity checks, and
// Send answer, which sends the object's JSON text (numbers as numbers,
// empty optional fields left out).
import { h } from '../dom.js';

/** Up to this many choices are radio buttons; more are a drop-down list. */
const MAX_RADIOS = 5;

let made = 0;

/**
 * The form for object `schema`; `send(content)` sends the answer; `extras`
 * are buttons shown beside Send answer (Decline, Dismiss).
 */
export function objectForm(schema, question, send, extras = []) {
  const prefix = `answer-${++made}`;
  const required = new Set(schema.required ?? []);
  const fields = Object.entries(schema.properties ?? {}).map(([name, sub], index) =>
    field({ id: `${prefix}-${index}`, name, schema: sub ?? {}, required: required.has(name) }),
  );
  const sendButton = h('button', { type: 'submit', class: 'button button-primary answer-send', text: 'Send answer' });
  const form = h(
    'form',
    { class: 'answer-form answer-object', 'aria-label': question },
    ...fields.map((one) => one.element),
    h('div', { class: 'answer-actions' }, sendButton, ...extras),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    if (!form.reportValidity()) return;
    const value = {};
    for (const one of fields) {
      const read = one.read();
      if (read !== undefined) value[one.name] = read;
    }
    send(JSON.stringify(value));
  });
  return form;
}

/** One property: {name, element, read()} (read: undefined when left empty). */
function field(spec) {
  const { schema } = spec;
  if (Array.isArray(schema.enum)) {
    return schema.enum.length <= MAX_RADIOS && spec.required ? radioField(spec) : selectField(spec);
  }
  if (schema.type === 'boolean') return checkboxField(spec);
  if (schema.type === 'integer' || schema.type === 'number') return numberField(spec);
  return textField(spec);
}

function labelText({ name, schema }) {
  return schema.title || name;
}

/** "*" after a required field's label (the control itself says `required`). */
function marker(required) {
  return required ? h('span', { class: 'answer-required', 'aria-hidden': 'true', text: ' *' }) : null;
}

function help({ id, schema }) {
  return schema.description ? h('p', { class: 'answer-help', id: `${id}-help`, text: schema.description }) : null;
}

function described({ id, schema }) {
  return schema.description ? `${id}-help` : null;
}

/** A control with its label above it and its help text under it. */
function labelled(spec, control) {
  const label = h('label', { class: 'answer-label', for: spec.id }, labelText(spec), marker(spec.required));
  return h('div', { class: 'answer-field' }, label, control, help(spec));
}

function inputField(spec, attributes, parse) {
  const { id, schema, required } = spec;
  const input = h('input', {
    id,
    name: spec.name,
    class: 'answer-input',
    required,
    'aria-describedby': described(spec),
    value: schema.default ?? null,
    ...attributes,
  });
  const read = () => (input.value === '' ? undefined : parse(input.value));
  return { name: spec.name, element: labelled(spec, input), read };
}

function textField(spec) {
  const { schema } = spec;
  const attributes = { type: 'text', minlength: schema.minLength ?? null, maxlength: schema.maxLength ?? null };
  return inputField(spec, attributes, (value) => value);
}

function numberField(spec) {
  const { schema } = spec;
  const step = schema.type === 'integer' ? '1' : 'any';
  const attributes = { type: 'number', inputmode: schema.type === 'integer' ? 'numeric' : 'decimal', min: schema.minimum ?? null, max: schema.maximum ?? null, step };
  return inputField(spec, attributes, Number);
}

function checkboxField(spec) {
  const { id, schema } = spec;
  const box = h('input', { id, name: spec.name, type: 'checkbox', class: 'answer-checkbox', checked: schema.default === true, 'aria-describedby': described(spec) });
  const label = h('label', { class: 'answer-label answer-check', for: id }, box, h('span', { text: labelText(spec) }));
  return { name: spec.name, element: h('div', { class: 'answer-field' }, label, help(spec)), read: () => box.checked };
}

/** A required choice among a few: a radio group (one must be picked). */
function radioField(spec) {
  const { id, schema } = spec;
  const radios = schema.enum.map((choice, index) => {
    const radio = h('input', { type: 'radio', id: `${id}-${index}`, name: id, value: String(index), required: true, checked: choice === schema.default });
    return h('label', { class: 'answer-radio', for: `${id}-${index}` }, radio, h('span', { text: String(choice) }));
  });
  const legend = h('legend', { class: 'answer-label' }, labelText(spec), marker(true));
  const group = h('fieldset', { class: 'answer-field answer-radios', 'aria-describedby': described(spec) }, legend, h('div', { class: 'answer-radio-row' }, ...radios), help(spec));
  const read = () => {
    const picked = group.querySelector('input:checked');
    return picked ? schema.enum[Number(picked.value)] : undefined;
  };
  return { name: spec.name, element: group, read };
}

/** A choice among many, or an optional one (its first entry: none). */
function selectField(spec) {
  const { id, schema, required } = spec;
  const options = schema.enum.map((choice, index) => h('option', { value: String(index), selected: choice === schema.default, text: String(choice) }));
  const none = h('option', { value: '', text: required ? 'Choose…' : '—' });
  const select = h('select', { id, name: spec.name, class: 'answer-input', required, 'aria-describedby': described(spec) }, none, ...options);
  const read = () => (select.value === '' ? undefined : schema.enum[Number(select.value)]);
  return { name: spec.name, element: labelled(spec, select), read };
}
