// The account's webhook signing secret (GET/POST/DELETE /site/v1/webhook-secret): its state, create, rotate and end.

import { errorBox, h, say } from './dom.js';
import { call, errText, v1 } from './http.js';
import { showOnce } from './keys.js';
import { current } from './lifecycle.js';
import { fmtTime } from './time.js';

/** The signing panel of the page of generation `gen`: rotate and end after a confirmation; a new secret is shown once. */
export function signingPanel(gen) {
  const s = {
    gen: gen,
    signing: false,
    pending: null, // the action waiting for its confirmation
    state: h('p', { testid: 'signing-state', 'aria-live': 'polite' }),
    error: errorBox('signing-error'),
    out: h('div', { class: 'new-key', testid: 'signing-new', 'aria-live': 'polite' }),
    make: h('button', { type: 'button', testid: 'signing-rotate' }),
    end: h('button', { type: 'button', class: 'danger', testid: 'signing-end', text: 'End signing', hidden: true }),
    confirmText: h('span', { class: 'hint' }),
    yes: h('button', { type: 'button', class: 'danger', testid: 'signing-confirm' }),
  };
  const no = h('button', { type: 'button', class: 'secondary', text: 'Cancel' });
  s.confirmRow = h('div', { class: 'actions', hidden: true, role: 'group', 'aria-label': 'Confirm' }, s.confirmText, s.yes, no);
  s.wrap = h('div', { testid: 'signing', 'aria-busy': 'true' },
    h('p', { class: 'hint', text: 'With a secret, every webhook carries webhook-id, webhook-timestamp and webhook-signature (Standard Webhooks v1), which any Standard Webhooks library verifies. Without one, deliveries are unsigned.' }),
    s.state, h('div', { class: 'actions' }, s.make, s.end), s.confirmRow, s.error, s.out);
  s.make.addEventListener('click', () => {
    if (!s.signing) run(s, 'rotate');
    else ask(s, 'rotate', 'A new secret signs from now on; the current one also signs for 24 hours, time for your receivers to move.', 'Rotate now');
  });
  s.end.addEventListener('click', () => ask(s, 'end', 'Both secrets are forgotten at once and webhooks go out unsigned.', 'End signing now'));
  s.yes.addEventListener('click', () => { if (s.pending) run(s, s.pending); });
  no.addEventListener('click', () => { s.confirmRow.hidden = true; s.pending = null; });
  load(s);
  return s.wrap;
}

function show(s, d) {
  s.signing = !!d.signing;
  let text = 'Webhooks are not signed.';
  if (s.signing) {
    text = 'Webhooks are signed with a secret made ' + fmtTime(d.createdAt) + '.';
    if (d.previousUntil) text += ' The secret it replaced also signs until ' + fmtTime(d.previousUntil) + '.';
  }
  say(s.state, text);
  s.state.setAttribute('data-signing', s.signing ? 'true' : 'false');
  s.make.textContent = s.signing ? 'Rotate secret' : 'Create secret';
  s.end.hidden = !s.signing;
  s.wrap.setAttribute('aria-busy', 'false');
}

async function load(s) {
  try {
    const r = await call('GET', v1('webhook-secret'));
    if (current(s.gen)) show(s, r.data || {});
  } catch (e) {
    if (current(s.gen)) say(s.error, errText(e));
  }
}

function ask(s, what, text, label) {
  s.pending = what;
  say(s.confirmText, text);
  s.yes.textContent = label;
  s.confirmRow.hidden = false;
}

async function run(s, what) {
  const buttons = [s.make, s.end, s.yes];
  s.confirmRow.hidden = true;
  s.pending = null;
  buttons.forEach((b) => { b.disabled = true; });
  say(s.error, '');
  s.out.replaceChildren();
  try {
    if (what === 'end') {
      await call('DELETE', v1('webhook-secret'));
    } else {
      const r = await call('POST', v1('webhook-secret'));
      showOnce(s.out, 'New signing secret:', (r.data && r.data.secret) || '', 'signing-secret', 'Copy it now into your receivers: it is not shown again.');
    }
    await load(s);
  } catch (e) {
    say(s.error, errText(e));
  } finally {
    buttons.forEach((b) => { b.disabled = false; });
  }
}
