// An alert row's actions besides Delete: Edit (in place), Pause or Resume, Send test (its webhook now), and the word each leaves in the row.

import { openEditor } from './alert-edit.js';
import { h, say } from './dom.js';
import { inWords } from './forms.js';
import { isNum } from './format.js';
import { call, enc, errText, v1 } from './http.js';
import { pageMap } from './lifecycle.js';

const notes = pageMap(); // alert id -> {text, cls, outcome}: the last word its row's actions left
const busy = pageMap(); // alert id -> the action running ('test', 'pause'): a second press waits for it

/**
 * The Action cell of alert `a`'s row: Edit, Pause or Resume (an active alert), Send test (an
 * alert with a webhook), Delete, then the word they left. `ctx`: {cols, draw(a), reload()}.
 */
export function alertActions(a, ctx, del) {
  const buttons = [editButton(a, ctx)];
  if (a.status === 'active') buttons.push(pauseButton(a, ctx));
  if (a.webhookUrl) buttons.push(testButton(a));
  buttons.push(del);
  const note = notes().get(a.id) || { text: '', cls: '' };
  return [h('div', { class: 'row-actions' }, buttons),
    h('p', { class: 'row-note ' + note.cls, role: 'status', testid: 'alert-note', 'data-outcome': note.outcome || null, text: note.text })];
}

/** Leaves a word in alert `id`'s row: kept through redraws until the page is left or another replaces it. */
export function sayInRow(id, text, cls, outcome) {
  notes().set(id, { text: text, cls: cls || '', outcome: outcome || '' });
  const el = inRow(id, 'alert-note');
  if (!el) return;
  el.className = 'row-note ' + (cls || '');
  if (outcome) el.setAttribute('data-outcome', outcome); else el.removeAttribute('data-outcome');
  say(el, text);
}

// The control `testid` of alert `id`'s row as the page shows it now (rows are redrawn at firings).
function inRow(id, testid) {
  return document.querySelector('tr[data-alert-id="' + CSS.escape(String(id)) + '"] [data-testid="' + testid + '"]');
}

function editButton(a, ctx) {
  const b = h('button', { type: 'button', class: 'small secondary', testid: 'alert-edit-open', 'aria-label': 'Edit alert #' + a.id, text: 'Edit' });
  b.addEventListener('click', () => {
    sayInRow(a.id, '', '');
    openEditor(a, b.closest('tr'), { cols: ctx.cols, draw: ctx.draw, reload: ctx.reload, said: sayInRow });
  });
  return b;
}

// Pause or Resume: a PATCH of `paused`, the row drawn again from the answer.
function pauseButton(a, ctx) {
  const resume = !!a.paused;
  const b = h('button', {
    type: 'button', class: 'small secondary', testid: 'alert-pause', 'aria-label': (resume ? 'Resume' : 'Pause') + ' alert #' + a.id,
    text: resume ? 'Resume' : 'Pause', disabled: busy().has(a.id),
  });
  b.addEventListener('click', async () => {
    if (busy().has(a.id)) return;
    busy().set(a.id, 'pause');
    b.disabled = true;
    try {
      const r = await call('PATCH', v1('alerts/' + enc(a.id)), { paused: !resume });
      busy().delete(a.id);
      sayInRow(a.id, resume ? 'Resumed.' : 'Paused: it fires nothing until resumed.', 'status');
      const row = document.querySelector('tr[data-alert-id="' + CSS.escape(String(a.id)) + '"]:not([data-editing])');
      if (row && r.data) row.replaceWith(ctx.draw(r.data));
    } catch (e) {
      busy().delete(a.id);
      sayInRow(a.id, 'Could not ' + (resume ? 'resume' : 'pause') + ': ' + inWords(errText(e)), 'error');
    }
    const again = inRow(a.id, 'alert-pause');
    if (again) again.disabled = false;
    ctx.reload();
  });
  return b;
}

// Send test: the alert's webhook now (POST .../test, answered after the attempt, at most 10 s);
// the outcome in words in the row. A press while one is in flight is refused.
function testButton(a) {
  const running = busy().get(a.id) === 'test';
  const b = h('button', {
    type: 'button', class: 'small secondary', testid: 'alert-test', 'aria-label': 'Send a test to the webhook of alert #' + a.id,
    text: running ? 'Sending…' : 'Send test', disabled: running, 'aria-busy': running ? 'true' : null,
  });
  b.addEventListener('click', async () => {
    if (busy().has(a.id)) return;
    busy().set(a.id, 'test');
    b.disabled = true;
    b.setAttribute('aria-busy', 'true');
    say(b, 'Sending…');
    sayInRow(a.id, 'Sending a test to the webhook…', 'muted');
    try {
      const r = await call('POST', v1('alerts/' + enc(a.id) + '/test'));
      const d = r.data || {};
      sayInRow(a.id, outcomeWords(d), 'outcome-' + d.outcome, d.outcome);
    } catch (e) {
      sayInRow(a.id, 'Could not send a test: ' + inWords(errText(e)), 'error', 'error');
    }
    busy().delete(a.id);
    const again = inRow(a.id, 'alert-test') || b;
    again.disabled = false;
    again.removeAttribute('aria-busy');
    say(again, 'Send test');
  });
  return b;
}

/** A test delivery's outcome in words: "Delivered: 200 in 41 ms", "Timed out after 10 s". */
export function outcomeWords(d) {
  const ms = isNum(d.latencyMs) ? d.latencyMs + ' ms' : '? ms';
  const status = isNum(d.status) ? String(d.status) : 'no HTTP status';
  switch (d.outcome) {
    case 'delivered': return 'Delivered: ' + status + ' in ' + ms;
    case 'failed': return 'Failed: ' + status + ' in ' + ms;
    case 'timeout': return 'Timed out after ' + (isNum(d.latencyMs) ? Math.round(d.latencyMs / 1000) : 10) + ' s';
    case 'refused': return 'Refused: the receiver did not take the connection (' + ms + ')';
    case 'blocked': return 'Blocked: the webhook\'s address is not allowed here (a private or local address)';
    default: return 'Test: ' + String(d.outcome) + (isNum(d.status) ? ', ' + status : '') + ' in ' + ms;
  }
}
