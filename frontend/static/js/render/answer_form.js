// The form of a question that says what its answer looks like
// (`agent_request_input.answer_schema`): one button per choice (or per
// suggestion, `examples`, when other text is welcome too), Yes and No
// for a boolean, a number box with its bounds, a form of labelled fields for
// an object (render/object_form.js). Anything else is answered in the
// message box. The answer is the text the server expects: a choice as
// itself, any other value as JSON.
//
// A question asked by someone other than the model (`asked_by`: an MCP
// server, in the middle of a tool call) may also be declined or dismissed;
// one that asks the person to open a page (`url`) is a link and Done.
import { h } from '../dom.js';
import { objectForm } from './object_form.js';

/**
 * What the banner shows for question `frame`: `form` (null when the message
 * box is the way to answer), `hint`, and `title` (null: the usual one).
 * `reply(content, action)` sends an answer (`action` null) or a decline /
 * dismissal (`'decline'` / `'cancel'`, no content).
 */
export function questionForm(frame, reply) {
  const send = (content) => reply(content, null);
  if (!frame.asked_by) return { ...answerForm(frame.answer_schema, frame.question, send), title: null };
  const title = `${capitalised(frame.asked_by)} asks: ${frame.question}`;
  const refusals = [
    actionButton('Decline', 'answer-decline', () => reply('', 'decline')),
    actionButton('Dismiss', 'button-quiet answer-dismiss', () => reply('', 'cancel')),
  ];
  if (frame.url) return { ...pageForm(frame, send, refusals), title };
  const { form, hint } = answerForm(frame.answer_schema, frame.question, send, refusals);
  if (form?.classList.contains('answer-object')) return { form, hint: 'Fill in the form and send it, or decline.', title };
  const actions = h('div', { class: 'answer-form answer-actions' }, ...refusals);
  return { form: form ? h('div', { class: 'answer-forms' }, form, actions) : actions, hint: hint ?? 'Type it in the message box, or decline.', title };
}

/**
 * The form for `schema` (null when the message box is the way to answer),
 * and the hint to show; `send(content)` sends an answer. `extras` go beside
 * an object form's Send answer.
 */
export function answerForm(schema, question, send, extras = []) {
  if (!schema) return { form: null, hint: null };
  if (schema.type === 'string' && Array.isArray(schema.enum)) {
    const buttons = schema.enum.map((choice) => choiceButton(String(choice), String(choice), send));
    return { form: group(question, buttons), hint: 'Pick an answer, or type it in the message box.' };
  }
  if (schema.type === 'string' && Array.isArray(schema.examples) && schema.examples.length) {
    // suggestions: one click answers, and any other text may be typed
    const buttons = schema.examples.map((choice) => choiceButton(String(choice), String(choice), send));
    return { form: group(question, buttons), hint: 'Pick one, or type another answer in the message box.' };
  }
  if (schema.type === 'boolean') {
    const buttons = [choiceButton('Yes', 'true', send), choiceButton('No', 'false', send)];
    return { form: group(question, buttons), hint: 'Pick an answer.' };
  }
  if (schema.type === 'number' || schema.type === 'integer') {
    return { form: numberForm(schema, question, send), hint: `Enter ${describe(schema)}.` };
  }
  if (schema.type === 'object' && isFlat(schema)) {
    return { form: objectForm(schema, question, send, extras), hint: 'Fill in the form and send it.' };
  }
  if (schema.type === 'object') {
    return { form: null, hint: `Type your answer as JSON in the message box: ${shape(schema)}.` };
  }
  return { form: null, hint: null };
}

/** The frame fields of an answer as this tab remembers it (`said`: the text,
 * or `{action}` for a decline or a dismissal). */
export function answerFields(said) {
  return typeof said === 'string' ? { content: said } : { content: '', action: said.action };
}

/** How an answer is shown in the run's question card (null: not known). */
export function answerText(said) {
  if (said === null || said === undefined) return null;
  if (typeof said !== 'string') return said.action === 'decline' ? 'Declined' : 'Dismissed';
  return said === '' ? 'Done' : said;
}

/** A page to open (MCP's URL mode): a link showing its host, and Done once
 * it is done there; a page that is not http(s) is only shown, as text. */
function pageForm(frame, send, refusals) {
  const page = webPage(frame.url);
  if (!page) {
    const shown = h('p', { class: 'answer-url', text: `It names a page that cannot be opened from here: ${frame.url}` });
    return { form: h('div', { class: 'answer-forms' }, shown, h('div', { class: 'answer-form answer-actions' }, ...refusals)), hint: 'Decline or dismiss it.' };
  }
  const link = h('a', { class: 'button answer-link', href: page.href, target: '_blank', rel: 'noopener noreferrer', title: page.href }, `Open ${page.host}`, h('span', { 'aria-hidden': 'true', text: ' ↗' }));
  const done = actionButton('Done', 'button-primary answer-done', () => send(''));
  const form = h('div', { class: 'answer-forms' }, h('div', { class: 'answer-form answer-actions' }, link, done, ...refusals), h('p', { class: 'answer-url', text: page.href }));
  return { form, hint: 'Open the page, then press Done; or decline.' };
}

/** `url` as a URL when it is an http(s) page, else null. */
function webPage(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'http:' || parsed.protocol === 'https:' ? parsed : null;
  } catch {
    return null;
  }
}

function actionButton(label, extraClass, onClick) {
  const button = h('button', { type: 'button', class: `button ${extraClass}`, text: label });
  button.addEventListener('click', onClick);
  return button;
}

function capitalised(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** Every property a scalar (or none: a form that only asks to confirm). */
function isFlat(schema) {
  const scalar = (sub) => Array.isArray(sub?.enum) || ['string', 'integer', 'number', 'boolean'].includes(sub?.type);
  return Object.values(schema.properties ?? {}).every(scalar);
}

function group(question, children) {
  return h('div', { class: 'answer-form answer-choices', role: 'group', 'aria-label': question }, ...children);
}

function choiceButton(label, content, send) {
  const button = h('button', { type: 'button', class: 'button answer-choice', text: label });
  button.addEventListener('click', () => send(content));
  return button;
}

function numberForm(schema, question, send) {
  const input = h('input', {
    type: 'number',
    class: 'answer-number',
    min: schema.minimum ?? null,
    max: schema.maximum ?? null,
    step: schema.type === 'integer' ? '1' : 'any',
    required: true,
    'aria-label': `${question} (${describe(schema)})`,
  });
  const button = h('button', { type: 'submit', class: 'button button-primary answer-send', text: 'Send answer' });
  const form = h('form', { class: 'answer-form answer-number-form' }, input, button);
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    if (!input.reportValidity()) return;
    send(String(Number(input.value)));
  });
  return form;
}

/** `a whole number from 1 to 10`, `a number of at least 0`, … */
function describe(schema) {
  const what = schema.type === 'integer' ? 'a whole number' : 'a number';
  const { minimum: low, maximum: high } = schema;
  if (low !== undefined && high !== undefined) return `${what} from ${low} to ${high}`;
  if (low !== undefined) return `${what} of at least ${low}`;
  if (high !== undefined) return `${what} of at most ${high}`;
  return what;
}

/** `{"unit": "km" | "mi", "count": a whole number from 1 to 10}` */
function shape(schema) {
  const fields = Object.entries(schema.properties ?? {}).map(([name, sub]) => `"${name}": ${valueShape(sub)}`);
  return `{${fields.join(', ')}}`;
}

function valueShape(schema) {
  if (Array.isArray(schema?.enum)) return schema.enum.map((choice) => JSON.stringify(choice)).join(' | ');
  if (schema?.type === 'boolean') return 'true | false';
  if (schema?.type === 'number' || schema?.type === 'integer') return describe(schema);
  return 'text';
}
