// Forms: labelled controls, numbers sent as typed, and one submission with its busy button and the server's refusal in the form's words.

import { h, say } from './dom.js';
import { errText, Raw } from './http.js';

const DECIMAL = /^-?(0|[1-9]\d*)(\.\d+)?$/; // a funding level may be negative

let fieldSeq = 0;

/** A labelled control: {wrap, input}. kind is 'select' (with options [[value, text]]), 'textarea', or an input type. */
export function field(label, name, kind, opts) {
  const o = opts || {};
  const id = 'f' + (++fieldSeq) + '-' + name;
  let input;
  if (kind === 'select') {
    input = h('select', { id: id, name: name, testid: o.testid });
    for (const [value, text] of o.options) input.append(h('option', { value: value, text: text }));
    if (o.value !== undefined) input.value = o.value;
  } else if (kind === 'textarea') {
    input = h('textarea', { id: id, name: name, testid: o.testid, placeholder: o.placeholder, rows: o.rows || 3, maxlength: o.maxlength, spellcheck: 'false' });
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

// The API's field names a refusal may name besides the one it is about, in the site's words.
const FIELD_WORDS = [
  ['min_usd', 'minimum wall value (USD)'], ['max_dist_pct', 'maximum distance from price (%)'],
  ['min_age_s', 'minimum age (s)'], ['cooldown_s', 'quiet time after a firing'], ['webhook_url', 'webhook URL'],
  ['telegramChatId', 'Telegram chat id'], ['within_pct', 'within %'], ['min_strength', 'minimum strength'],
  ['max_fires', 'most firings'], ['expires_at', 'end time'], ['webhook_format', 'webhook format'],
];

/** A message with the API's field names in the site's words ("min_usd" becomes "minimum wall value (USD)"). */
export function inWords(message) {
  let m = message;
  for (const [name, words] of FIELD_WORDS) m = m.split("'" + name + "'").join(words).split(name).join(words);
  return m.replace(/^missing field /, 'Missing: ').replace(/, or null\b/, ', or empty');
}

// How the API's refusals name the field they are about: "missing field 'price'", "field 'note'
// must be a string", "invalid expires_at 'soon': …", "unknown symbol 'X' on binance",
// "cooldown_s must be …" (the field's name first), "unknown placeholder '{{x}}' in message; …".
const MISSING = /^missing field '([A-Za-z_]+)'/;
const NAMED = [/^field '([A-Za-z_]+)'/, /^(?:invalid|unknown) ([A-Za-z_]+) '/, /^([A-Za-z_]+) /, /^unknown [a-z]+ '[^']*' in ([A-Za-z_]+)\b/];
const TYPED_SHOWN_MAX = 40; // characters of a typed value repeated in a refusal

/** The visible, labelled control of `form` a refusal is about, or null. */
function refusedControl(form, message) {
  if (!form) return null;
  for (const re of [MISSING].concat(NAMED)) {
    const m = re.exec(message);
    const c = m ? form.elements.namedItem(m[1]) : null;
    if (c instanceof Element && c.labels && c.labels.length && !c.closest('[hidden]')) return { control: c, lead: m[0], re: re };
  }
  return null;
}

function labelOfControl(c) { return c.labels[0].textContent.replace(/ \(optional\)$/, ''); }

/**
 * A refusal in the form's words: the field it is about called by its label, and what was typed
 * in it when the message does not say it already. "cooldown_s must be a whole number of seconds
 * from 0 to 86400" becomes 'Quiet time after a firing (s) must be a whole number of seconds from
 * 0 to 86400 (you entered "86401")'. {text, control}: control is the field, or null.
 */
export function refusalIn(form, message) {
  const hit = refusedControl(form, message);
  if (!hit) return { text: inWords(message), control: null };
  const label = labelOfControl(hit.control);
  let text;
  if (hit.re === MISSING) text = 'Missing: ' + label + inWords(message.slice(hit.lead.length));
  else if (hit.re === NAMED[1] || hit.re === NAMED[3]) text = label + ': ' + inWords(message);
  else text = label + inWords(message.slice(hit.lead.length - (hit.re === NAMED[2] ? 1 : 0)));
  const typed = hit.control.tagName === 'SELECT' || hit.control.type === 'checkbox' ? '' : hit.control.value.trim();
  if (typed && !message.includes(typed)) {
    const shown = typed.length > TYPED_SHOWN_MAX ? typed.slice(0, TYPED_SHOWN_MAX) + '…' : typed;
    text += ' (you entered "' + shown + '")';
  }
  return { text: text, control: hit.control };
}

let errorSeq = 0;

/**
 * Shows a refusal in `box`: beside the field it is about (marked invalid, described by it and
 * focused), else where the box stands in the form. `clearRefusal` puts it back.
 */
export function showRefusal(form, box, message) {
  const r = refusalIn(form, message);
  say(box, r.text);
  const wrap = r.control ? r.control.closest('.field, .check') : null;
  if (!wrap) return;
  if (!box.id) box.id = 'refusal-' + (++errorSeq);
  if (!box.home) box.home = { parent: box.parentNode, before: box.nextSibling };
  wrap.append(box);
  r.control.setAttribute('aria-invalid', 'true');
  const described = (r.control.getAttribute('aria-describedby') || '').split(' ').filter((x) => x && x !== box.id);
  r.control.setAttribute('aria-describedby', described.concat(box.id).join(' '));
  r.control.focus();
}

/** Empties `box`, back in its place in the form, and its field no longer marked invalid. */
export function clearRefusal(form, box) {
  say(box, '');
  if (form) {
    form.querySelectorAll('[aria-invalid="true"]').forEach((c) => {
      c.removeAttribute('aria-invalid');
      const rest = (c.getAttribute('aria-describedby') || '').split(' ').filter((x) => x && x !== box.id);
      if (rest.length) c.setAttribute('aria-describedby', rest.join(' ')); else c.removeAttribute('aria-describedby');
    });
  }
  if (box.home && box.home.parent) box.home.parent.insertBefore(box, box.home.before && box.home.before.parentNode === box.home.parent ? box.home.before : null);
}

/**
 * One form submission: the button busy meanwhile, old messages cleared, a refusal shown in the
 * form's words beside the field it is about (`showRefusal`).
 */
export async function submitting(submit, error, status, work) {
  submit.disabled = true;
  clearRefusal(submit.form, error);
  if (status) say(status, '');
  try {
    await work();
  } catch (e) {
    showRefusal(submit.form, error, errText(e));
  } finally {
    submit.disabled = false;
  }
}
