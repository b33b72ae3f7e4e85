// The form of a question that says what its answer looks like
// (`agent_request_input.answer_schema`): one button per choice (or per
// suggestion, `examples`, when other text is welcome too), Yes and No
// for a boolean, a number box with its bounds. Anything else is answered in
// the message box, with a hint of the expected shape. The answer is the text
// the server expects: a choice as itself, any other value as JSON.
import { h } from '../dom.js';

/**
 * The form for `schema` (null when the message box is the way to answer),
 * and the hint to show; `send(content)` sends an answer.
 */
export function answerForm(schema, question, send) {
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
  if (schema.type === 'object') {
    return { form: null, hint: `Type your answer as JSON in the message box: ${shape(schema)}.` };
  }
  return { form: null, hint: null };
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
