// The account's API keys on the settings page: rows with Revoke, the create form, and a new credential shown once.

import { confirmDialog } from './dialog.js';
import { errorBox, h, say } from './dom.js';
import { field, submitting } from './forms.js';
import { call, enc, errText } from './http.js';
import { sessionEnded } from './session.js';
import { timeEl } from './time.js';

/** The row of one key, with Revoke unless it is revoked already. */
export function keyRow(k, reload, error) {
  const cells = [
    h('td', { text: k.id }),
    h('td', { class: 'wrap', text: k.label || '' }),
    h('td', { text: k.plan }),
    h('td', null, timeEl(k.createdAt)),
    h('td', null, k.revokedAt ? ['revoked ', timeEl(k.revokedAt)] : (k.current ? 'active (this session)' : 'active')),
  ];
  const action = k.revokedAt ? '' : revokeButton(k, reload, error);
  cells.push(h('td', null, action));
  return h('tr', { 'data-key-id': k.id, 'data-current': k.current ? 'true' : null }, cells);
}

// Revoke asks first; the key of this session needs its id typed, and revoking it signs out.
function revokeButton(k, reload, error) {
  const action = h('button', { type: 'button', class: 'danger', testid: 'key-revoke', 'aria-label': 'Revoke key ' + k.id, text: 'Revoke' });
  action.addEventListener('click', async () => {
    say(error, '');
    const name = 'key #' + k.id + (k.label ? ' (' + k.label + ')' : '');
    const ok = await confirmDialog(k.current ? {
      title: 'Revoke the key of this session?',
      text: 'Revoking ' + name + ' signs you out of this site at once, and every program using it is refused from its next request. It cannot be undone.',
      yes: 'Revoke and sign out', typed: String(k.id),
    } : {
      title: 'Revoke ' + name + '?',
      text: 'Every program using ' + name + ' is refused from its next request. It cannot be undone.',
      yes: 'Revoke',
    });
    if (!ok) return;
    action.disabled = true;
    try {
      await call('DELETE', '/site/keys/' + enc(k.id));
      if (k.current) sessionEnded('The key of this session was revoked; sign in with another key.');
      else reload();
    } catch (e) {
      action.disabled = false;
      if (e.status !== 401) say(error, errText(e));
    }
  });
  return action;
}

/** The form that makes a key; the new key is shown once in `out`. */
export function keyCreateForm(out, created) {
  const label = field('Label (optional)', 'label', 'text', { maxlength: 100, placeholder: 'e.g. trading bot' });
  const error = errorBox('key-create-error');
  const submit = h('button', { type: 'submit', testid: 'key-create', text: 'Create key' });
  const form = h('form', { 'aria-label': 'New API key', novalidate: true },
    h('h3', { text: 'New key' }), h('div', { class: 'fields wide' }, label.wrap), h('div', { class: 'actions' }, submit), error);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    out.replaceChildren();
    await submitting(submit, error, null, async () => {
      const v = label.input.value.trim();
      const r = await call('POST', '/site/keys', v ? { label: v } : {});
      label.input.value = '';
      showNewKey(out, r.data || {});
      created();
    });
  });
  return form;
}

function showNewKey(out, k) {
  showOnce(out, 'New key #' + k.id + (k.label ? ' (' + k.label + ')' : '') + ', plan ' + k.plan + ':', k.key || '',
    'key-new-value', 'Copy it now: it is not shown again (the server keeps only its hash).');
}

/** A credential shown once (a new key, a signing secret), with a Copy button. */
export function showOnce(out, heading, value, testid, hint) {
  const code = h('code', { testid: testid, text: value });
  const copy = h('button', { type: 'button', class: 'secondary', text: 'Copy' });
  const copied = h('span', { class: 'hint', role: 'status' });
  copy.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(value);
      say(copied, 'Copied.');
    } catch (e) {
      say(copied, 'Select it and copy it by hand.');
    }
  });
  out.replaceChildren(h('p', null, h('strong', { text: heading })), code, h('p', { class: 'hint', text: hint }),
    h('div', { class: 'actions' }, copy, copied));
}
