// An alert's row turned into a small form (decisions.md §16): its note, pause, end, quiet time, most firings, message and webhook format, sent as a PATCH of the fields changed.

import { errorBox, h, say } from './dom.js';
import { field, numberInput, submitting } from './forms.js';
import { fmtDuration } from './format.js';
import { call, enc, v1 } from './http.js';
import { pageMap } from './lifecycle.js';
import { fromZoneInput, toZoneInput, zoneName } from './time.js';
import { EVERY_PAIR, MESSAGE_PLACEHOLDERS, WEBHOOK_FORMATS } from './values.js';

const COOLDOWN_S_MAX = 86400; // decisions.md §16
/** The quiet times the form suggests: [seconds, words]. */
const COOLDOWNS = [[0, 'none'], [60, '1 min'], [300, '5 min'], [900, '15 min'], [3600, '1 h'], [14400, '4 h'], [86400, '1 day']];

const editors = pageMap(); // alert id -> its editor row, while open on the page shown

/** The editor row of alert `id` while it is open (a redraw keeps it, and what is typed in it), else null. */
export function editorOf(id) { return editors().get(id) || null; }

/**
 * Turns `row` (alert `a`'s) into its edit form. `ctx`: {cols, draw(a) (a row of an alert),
 * reload() (the table read again), said(id, text, cls) (a word left in the row)}.
 */
export function openEditor(a, row, ctx) {
  const f = editorFields(a);
  const error = errorBox('alert-edit-error');
  const save = h('button', { type: 'submit', testid: 'alert-edit-save', text: 'Save' });
  const cancel = h('button', { type: 'button', class: 'secondary', testid: 'alert-edit-cancel', text: 'Cancel' });
  const shown = [f.note, f.paused, f.expires, f.cooldown, f.maxFires, f.format].filter(Boolean);
  const form = h('form', { class: 'row-edit', testid: 'alert-edit', 'aria-label': 'Edit alert #' + a.id, novalidate: true },
    h('p', { class: 'row-edit-title', text: 'Edit alert #' + a.id + ' (its condition cannot change: delete it and create another)' }),
    h('div', { class: 'fields' }, shown.map((x) => x.wrap)), f.message.wrap, f.cooldownList,
    h('div', { class: 'actions' }, save, cancel), error);
  const editor = h('tr', { 'data-alert-id': a.id, 'data-editing': 'true', class: 'editing' }, h('td', { colspan: ctx.cols }, form));
  const close = (next, word) => {
    editors().delete(a.id);
    const fresh = ctx.draw(next);
    if (word) ctx.said(a.id, word, 'status');
    editor.replaceWith(fresh);
    const back = fresh.querySelector('[data-testid="alert-edit-open"]');
    if (back) back.focus();
    ctx.reload();
  };
  cancel.addEventListener('click', () => close(a, ''));
  form.addEventListener('keydown', (ev) => { if (ev.key === 'Escape') { ev.preventDefault(); close(a, ''); } });
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const body = changes(f);
    if (!Object.keys(body).length) return close(a, 'Nothing changed.');
    await submitting(save, error, null, async () => {
      const r = await call('PATCH', v1('alerts/' + enc(a.id)), body);
      close(r.data || a, 'Saved.');
    });
  });
  editors().set(a.id, editor);
  row.replaceWith(editor);
  f.note.input.focus();
}

// The form's fields, each with the value it opened with (`initial`): the pause only while the
// alert is active (an ended one cannot be paused), the most firings only for a repeating alert
// (one that does not repeat fires once), the webhook format only for an alert with a webhook.
function editorFields(a) {
  const listId = 'cooldowns-' + a.id;
  const quiet = a.symbol === EVERY_PAIR ? ' Per pair.' : '';
  const f = {
    note: field('Note', 'note', 'text', { maxlength: 500, value: a.note || '' }),
    paused: a.status === 'active' ? field('Paused (fires nothing until resumed)', 'paused', 'checkbox', { checked: !!a.paused }) : null,
    expires: field('Ends at (' + zoneName() + ')', 'expires_at', 'datetime-local', {
      value: a.expiresAt ? toZoneInput(a.expiresAt) : '', hint: 'Empty: no end. From 1 minute to 365 days ahead.',
    }),
    cooldown: field('Quiet time after a firing (s)', 'cooldown_s', 'text', {
      inputmode: 'numeric', list: listId, value: String(a.cooldownS || 0), hint: cooldownWords(a.cooldownS || 0) + quiet,
    }),
    maxFires: !a.repeat ? null : field('Most firings', 'max_fires', 'text', {
      inputmode: 'numeric', placeholder: 'no limit', value: a.maxFires ? String(a.maxFires) : '', hint: '1 to 1000; empty: no limit. It ends after that many.',
    }),
    message: field('Message', 'message', 'textarea', {
      maxlength: 1000, value: a.message || '', placeholder: 'e.g. {{symbol}} {{direction}} {{price}} on {{exchange}}',
      hint: 'Sent instead of the default sentence (Telegram, Discord and Slack webhooks, the inbox); empty: the default. Placeholders: ' +
        MESSAGE_PLACEHOLDERS.map((p) => '{{' + p + '}}').join(' '),
    }),
    format: a.webhookUrl ? field('Webhook format', 'webhook_format', 'select', {
      options: WEBHOOK_FORMATS, value: a.webhookFormat || 'json', hint: 'For a chat\'s incoming-webhook URL: Discord and Slack get the message as their text.',
    }) : null,
    cooldownList: h('datalist', { id: listId }, COOLDOWNS.map(([s, words]) => h('option', { value: String(s), label: words }))),
  };
  const hint = f.cooldown.wrap.querySelector('.hint');
  f.cooldown.input.addEventListener('input', () => {
    const s = Number(f.cooldown.input.value.trim() || 0);
    say(hint, (Number.isInteger(s) && s >= 0 && s <= COOLDOWN_S_MAX ? cooldownWords(s) : 'Seconds, 0 to 86400.') + quiet);
  });
  [f.note, f.paused, f.expires, f.cooldown, f.maxFires, f.message, f.format].filter(Boolean).forEach((x) => {
    x.initial = x.input.type === 'checkbox' ? x.input.checked : x.input.value;
  });
  return f;
}

function cooldownWords(s) { return s > 0 ? 'Seconds: ' + fmtDuration(s) + ' between two firings.' : 'Seconds; 0: none.'; }

// The PATCH body: only the fields changed since the form opened; emptied ones removed (null),
// an emptied quiet time is none (0), numbers as typed.
function changes(f) {
  const body = {};
  const changed = (x) => x && (x.input.type === 'checkbox' ? x.input.checked : x.input.value) !== x.initial;
  if (changed(f.note)) body.note = f.note.input.value === '' ? null : f.note.input.value;
  if (changed(f.paused)) body.paused = f.paused.input.checked;
  if (changed(f.expires)) {
    const v = f.expires.input.value;
    body.expires_at = v === '' ? null : fromZoneInput(v) || v;
  }
  if (changed(f.cooldown)) {
    const n = numberInput(f.cooldown.input);
    body.cooldown_s = n === undefined ? 0 : n;
  }
  if (changed(f.maxFires)) {
    const n = numberInput(f.maxFires.input);
    body.max_fires = n === undefined ? null : n;
  }
  if (changed(f.message)) body.message = f.message.input.value.trim() === '' ? null : f.message.input.value;
  if (changed(f.format)) body.webhook_format = f.format.input.value;
  return body;
}
