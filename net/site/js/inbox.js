// The inbox held in the page: entries read and pushed, the unread badge, and alerts muted in this browser.

import { isNum } from './format.js';
import { call, v1 } from './http.js';
import { loadPrefs, savePrefs } from './prefs.js';
import { state } from './state.js';

export const INBOX_LIMIT = 100; // entries per read of the inbox ("Show older" reads the next 100)
const INBOX_KEEP = 5000; // entries held in the page; past it the oldest are forgotten
const NEWER_PAGES = 10; // reads of INBOX_LIMIT back from the newest, at most, to reach the newest held

/** Reads the newest entries into the inbox: true, or the error. */
export async function loadInbox() {
  const session = state.session;
  try {
    const r = await call('GET', v1('inbox', { limit: INBOX_LIMIT }));
    if (state.session !== session) return true;
    addInbox(Array.isArray(r.data) ? r.data : [], false);
    state.inboxRead = true;
    return true;
  } catch (e) {
    return e;
  }
}

/** The newest entry id held once the inbox was read this session (0: it was empty), else null. */
export function inboxCursor() {
  if (!state.inboxRead) return null;
  let max = 0;
  state.inbox.forEach((e, id) => { if (id > max) max = id; });
  return max;
}

let reading = null;
let readAgain = false;

/**
 * Reads the entries newer than the newest held into the inbox, shown as fresh (the stream
 * announced them, or it was closed a while). Coalesced: calls while a read runs make one more
 * read after it, so a burst of entries reads the inbox once or twice.
 */
export function readNewer() {
  if (reading) {
    readAgain = true;
    return reading;
  }
  reading = (async () => {
    do {
      readAgain = false;
      await readAfter(inboxCursor());
    } while (readAgain && state.session);
    reading = null;
  })();
  return reading;
}

// Pages back from the newest entry until one at or below `top` (null: one page), a short
// page, or NEWER_PAGES reads; a failed read is left to the next announcement or reconnect.
async function readAfter(top) {
  const session = state.session;
  let before;
  for (let i = 0; i < NEWER_PAGES && session; i++) {
    let r;
    try { r = await call('GET', v1('inbox', { limit: INBOX_LIMIT, before: before })); } catch (e) { return; }
    if (state.session !== session) return;
    const got = Array.isArray(r.data) ? r.data.filter((e) => e && isNum(e.id)) : [];
    addInbox(got, true);
    if (before === undefined) state.inboxRead = true;
    if (got.length < INBOX_LIMIT || top === null || got.some((e) => e.id <= top)) return;
    before = Math.min(...got.map((e) => e.id));
  }
}

let renderInbox = () => {};

/** How the held entries are drawn on Notifications (`inbox-view`'s, registered when it loads). */
export function drawInboxWith(fn) {
  renderInbox = fn;
}

/** Adds entries not held yet (`live`: pushed now, shown as fresh), forgetting the oldest past INBOX_KEEP. */
export function addInbox(entries, live) {
  let added = false;
  for (const e of entries) {
    if (!e || !isNum(e.id) || state.inbox.has(e.id)) continue;
    state.inbox.set(e.id, e);
    if (live) e._fresh = true;
    added = true;
  }
  if (!added) return;
  if (state.inbox.size > INBOX_KEEP) {
    const ids = Array.from(state.inbox.keys()).sort((a, b) => a - b);
    ids.slice(0, ids.length - INBOX_KEEP).forEach((id) => state.inbox.delete(id));
  }
  if (state.page === 'notifications') {
    renderInbox();
    markSeen();
  }
  updateBadge();
}

function unreadCount() {
  let n = 0;
  state.inbox.forEach((e, id) => { if (id > state.lastSeen && !isMuted(e)) n++; });
  return n;
}

// Muting: an alert's entries hidden from Notifications and the unread count, in this browser
// (kept in localStorage per account; the alert still fires, and its entries are kept).

/**
 * The alert an entry belongs to, as "api:12" (an `alert.*` entry: every alert the API lists, the
 * site's density alerts included), "market:4", or "density:3" (a firing of a density alert from
 * before they became wall alerts); '' for none.
 */
export function muteKey(e) { return e.alertId === null || e.alertId === undefined ? '' : (e.kind.startsWith('alert.') ? 'api' : e.kind.split('.')[0]) + ':' + e.alertId; }
export function mutedSet() { return new Set(state.session ? loadPrefs('muted.' + state.session.accountId, []) : []); }
export function isMuted(e) { const k = muteKey(e); return !!k && state.muted.has(k); }
export function setMuted(key, on) {
  if (on) state.muted.add(key); else state.muted.delete(key);
  if (state.session) savePrefs('muted.' + state.session.accountId, Array.from(state.muted));
  updateBadge();
  renderInbox();
}

/** Every held entry is seen (kept per account). */
export function markSeen() {
  let max = state.lastSeen;
  state.inbox.forEach((e, id) => { if (id > max) max = id; });
  if (max !== state.lastSeen && state.session) {
    state.lastSeen = max;
    savePrefs('seen.' + state.session.accountId, max);
  }
  updateBadge();
}

/** The header's unread count. */
export function updateBadge() {
  const n = state.session ? unreadCount() : 0;
  const badge = document.getElementById('unread-count');
  const link = document.getElementById('nav-notifications');
  badge.textContent = String(n);
  badge.hidden = n === 0;
  if (n) link.setAttribute('aria-label', 'Notifications, ' + n + ' unread');
  else link.removeAttribute('aria-label');
}
