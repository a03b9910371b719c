// Alert deletes that can be undone: a confirmed delete waits UNDO_MS, its row saying so with an Undo button.

import { confirmDialog } from './dialog.js';
import { h, say } from './dom.js';
import { capital } from './format.js';
import { call, errText } from './http.js';

const UNDO_MS = 6000; // a confirmed alert delete waits this long for Undo

// A confirmed delete waits UNDO_MS before it is sent, so Undo honestly takes it back: the alert
// stays, and can still fire, until then. Its row says so meanwhile. The wait goes on on any page
// of the site; closing the tab or signing out sends every waiting delete at once.
const pendingDeletes = new Map(); // DELETE path -> {run, timer, until}

/** Whether the delete of `path` waits. */
export function deleteWaits(path) { return pendingDeletes.has(path); }

function scheduleDelete(path, what, reload, error) {
  const p = { timer: 0, until: Date.now() + UNDO_MS, run: null };
  p.run = async (keepalive) => {
    clearTimeout(p.timer);
    if (pendingDeletes.get(path) !== p) return;
    pendingDeletes.delete(path);
    try {
      await call('DELETE', path, undefined, keepalive);
    } catch (e) {
      if (e.status !== 404) say(error, 'Could not delete ' + what + ': ' + errText(e));
    }
    reload();
  };
  p.timer = setTimeout(() => p.run(false), UNDO_MS);
  pendingDeletes.set(path, p);
  reload();
}

function undoDelete(path, reload) {
  const p = pendingDeletes.get(path);
  if (p) clearTimeout(p.timer);
  pendingDeletes.delete(path);
  reload();
}

/** Sends every waiting delete now (`keepalive`: as the page goes). */
export function flushDeletes(keepalive) { return Promise.all(Array.from(pendingDeletes.values()).map((p) => p.run(keepalive))); }
window.addEventListener('pagehide', () => { flushDeletes(true); });

/** A delete button for one alert row: asks first, naming the alert; then the delete waits for Undo. */
export function deleteButton(testid, what, path, reload, error) {
  const del = h('button', { type: 'button', class: 'danger', testid: testid, 'aria-label': 'Delete ' + what, text: 'Delete' });
  del.addEventListener('click', async () => {
    say(error, '');
    const ok = await confirmDialog({
      title: 'Delete ' + what.split(':')[0] + '?', text: 'Delete ' + what + '? You can undo it for ' + UNDO_MS / 1000 + ' s.', yes: 'Delete',
    });
    if (ok) scheduleDelete(path, what, reload, error);
  });
  return del;
}

/** The row of an alert whose delete waits: what goes, when, and Undo. */
export function pendingRow(attrs, cols, what, path, reload) {
  const p = pendingDeletes.get(path);
  const secs = Math.max(1, Math.ceil((p.until - Date.now()) / 1000));
  const undo = h('button', { type: 'button', class: 'secondary', testid: 'undo-delete', text: 'Undo' });
  undo.addEventListener('click', () => undoDelete(path, reload));
  return h('tr', Object.assign({ 'data-pending-delete': 'true', class: 'pending' }, attrs),
    h('td', { colspan: cols, class: 'wrap' }, h('span', { text: capital(what) + ' is deleted in ' + secs + ' s (it can still fire until then). ' }), undo));
}
