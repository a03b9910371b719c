// Forms: labelled controls, numbers sent as typed, and one submission with its busy button and the server's refusal.

import { h, say } from './dom.js';
import { errText, Raw } from './http.js';

const DECIMAL = /^(0|[1-9]\d*)(\.\d+)?$/;

let fieldSeq = 0;

/** A labelled control: {wrap, input}. kind is 'select' (with options [[value, text]]), or an input type. */
export function field(label, name, kind, opts) {
  const o = opts || {};
  const id = 'f' + (++fieldSeq) + '-' + name;
  let input;
  if (kind === 'select') {
    input = h('select', { id: id, name: name, testid: o.testid });
    for (const [value, text] of o.options) input.append(h('option', { value: value, text: text }));
    if (o.value !== undefined) input.value = o.value;
  } else {
    input = h('input', {
      id: id, name: name, type: kind, testid: o.testid, placeholder: o.placeholder,
      inputmode: o.inputmode, autocomplete: o.autocomplete || 'off', list: o.list,
      required: o.required, maxlength: o.maxlength, spellcheck: kind === 'text' ? 'false' : null,
    });
    if (o.value !== undefined) input.value = o.value;
  }
  if (kind === 'checkbox') {
    input.checked = !!o.checked;
    return { input: input, wrap: h('div', { class: 'check' }, input, h('label', { for: id, text: label })) };
  }
  const wrap = h('div', { class: 'field' }, h('label', { for: id, text: label }), input);
  if (o.hint) {
    const hintId = id + '-hint';
    wrap.append(h('span', { class: 'hint', id: hintId, text: o.hint }));
    input.setAttribute('aria-describedby', hintId);
  }
  return { input: input, wrap: wrap };
}

/** Options whose words are their values. */
export function options(values) { return values.map((v) => [v, v]); }

/** A form's number: undefined when empty, exact text when a plain decimal, else the text (the server names the problem). */
export function numberInput(input) {
  const t = input.value.trim();
  if (t === '') return undefined;
  return DECIMAL.test(t) ? new Raw(t) : t;
}

// The API's field names in a refusal, in the words of the site's forms.
const FIELD_WORDS = [
  ['min_usd', 'minimum wall value (USD)'], ['max_dist_pct', 'maximum distance from price (%)'],
  ['min_age_s', 'minimum age (s)'], ['cooldown_s', 'quiet time after a firing'], ['webhook_url', 'webhook URL'],
  ['telegramChatId', 'Telegram chat id'], ['within_pct', 'within %'], ['min_strength', 'minimum strength'],
];

/** A refusal as the server worded it, with its field names replaced by the form's labels. */
function humanize(message) {
  let m = message;
  for (const [name, words] of FIELD_WORDS) m = m.split("'" + name + "'").join(words).split(name).join(words);
  return m.replace(/^missing field /, 'Missing: ');
}

/**
 * One form submission: the button busy meanwhile, old messages cleared, a refusal shown as
 * the server worded it (field names in the form's words).
 */
export async function submitting(submit, error, status, work) {
  submit.disabled = true;
  say(error, '');
  if (status) say(status, '');
  try {
    await work();
  } catch (e) {
    say(error, humanize(errText(e)));
  } finally {
    submit.disabled = false;
  }
}
