// Live updates: the page's one event stream (`/site/v1/stream`: the account's `alerts` and the page's market channels), firing listeners, the refusal back-off.

import { say } from './dom.js';
import { call, q } from './http.js';
import { inboxCursor, readNewer } from './inbox.js';
import { onLeave } from './lifecycle.js';
import { state } from './state.js';

const FIRING_COALESCE_MS = 250; // a burst of firings redraws a page's alert tables once
const REOPEN_FIRST_MS = 3000; // the wait after a refusal, doubling after each one in a row
const REOPEN_MAX_MS = 60000;
const NO_CHANNELS = { channels: [], onMessage: null, status: null };

// The market channels the page shown wants, whom their messages go to, and its status.
let wanted = NO_CHANNELS;
let settling = false;

/**
 * Runs `fn` after each entry of the stream's `alerts` (an alert fired, a pair was delisted)
 * while the page stays: tables of alerts redraw their statuses and counts without a reload.
 * Bursts are coalesced: at most one run per FIRING_COALESCE_MS.
 */
export function onFiring(fn) {
  let timer = 0;
  const listener = () => {
    if (timer) return;
    timer = setTimeout(() => { timer = 0; fn(); }, FIRING_COALESCE_MS);
  };
  state.firingListeners.add(listener);
  onLeave(() => {
    clearTimeout(timer);
    state.firingListeners.delete(listener);
  });
}

/**
 * The page's market channels on the page's one stream: `onMessage` gets each of their messages
 * while the page stays, and the stream is opened again at once with `alerts` and `channels`.
 * The answer's `live()` says whether that stream is open now and `waiting()` whether it is
 * open or coming (the page polls what it would otherwise push while neither); `close()` (or
 * leaving the page) gives the channels up. `window.rampartStream` is it, for the browser test.
 */
export function marketStream(channels, onMessage) {
  const key = keyOf(channels);
  const status = { messages: 0 };
  status.live = () => wanted.status === status && streamIs(key, (es) => es.readyState === EventSource.OPEN);
  status.waiting = () => wanted.status === status && (streamIs(key, (es) => es.readyState !== EventSource.CLOSED) || held());
  status.close = () => release(status);
  wanted = { channels: channels.slice(), onMessage: onMessage, status: status };
  window.rampartStream = status;
  settle(true); // opened again even with the same channels: their first messages are the page's
  onLeave(() => release(status));
  return status;
}

/**
 * The page names its market channels shortly (`marketStream`, once a read says which): until
 * then the stream is left as it is, not opened for `alerts` alone as the last page's channels
 * are given up and then again for this page's. The answer is a status as `marketStream`'s, its
 * `waiting()` true (a stream is coming).
 */
export function streamComing() {
  const status = { messages: 0, live: () => false, waiting: () => true };
  status.close = () => release(status);
  wanted = { channels: wanted.channels, onMessage: null, status: status, coming: true };
  window.rampartStream = status;
  onLeave(() => release(status));
  return status;
}

// The page gives its channels up: the stream carries `alerts` alone unless the next page
// (drawn before this runs) asks for channels of its own.
function release(status) {
  if (wanted.status !== status) return;
  wanted = NO_CHANNELS;
  if (window.rampartStream === status) window.rampartStream = null;
  if (settling) return;
  settling = true;
  queueMicrotask(() => {
    settling = false;
    settle(false);
  });
}

function keyOf(channels) { return ['alerts'].concat(channels).join(','); }

function streamIs(key, test) {
  return typeof EventSource !== 'undefined' && !!state.stream && state.streamKey === key && test(state.stream);
}

// No stream yet, but one is coming: the session's first read of the inbox has not ended.
function held() {
  return typeof EventSource !== 'undefined' && !!state.session && !state.stream && !state.streamReady;
}

/**
 * Starts the session's stream once `firstRead` (the session's first read of the inbox) has
 * ended, so that it resumes after the newest entry read; until the session ends, a stream is
 * open on every page.
 */
export function startStream(firstRead) {
  closeStream();
  const session = state.session;
  firstRead.finally(() => {
    if (state.session !== session) return;
    state.streamReady = true;
    settle(true);
  });
}

/** Closes the stream (sign-out, the session ended). */
export function closeStream() {
  if (state.stream) state.stream.close();
  clearTimeout(state.streamRetry);
  state.stream = null;
  state.streamKey = '';
  state.streamReady = false;
  state.streamFailures = 0;
  state.streamRetry = 0;
}

// Opens the stream the page wants (`fresh`: even if one with its channels is open); while a
// refusal's wait runs, the stream opened at its end carries the channels wanted then; while the
// page's channels are coming (`streamComing`), nothing: `marketStream` opens it.
function settle(fresh) {
  if (typeof EventSource === 'undefined' || !state.session || !state.streamReady || state.streamRetry || wanted.coming) return;
  if (!fresh && state.stream && state.streamKey === keyOf(wanted.channels)) return;
  openStream(inboxCursor());
}

/**
 * Opens `/site/v1/stream?channels=alerts,<the page's>`, with `since` the newest inbox entry held
 * (`null`: none is known, and every open fills the inbox from its newest entries instead). The
 * browser reconnects a dropped stream itself, sending `Last-Event-ID` (the last entry's id).
 */
function openStream(since) {
  if (state.stream) state.stream.close();
  const key = keyOf(wanted.channels);
  const es = new EventSource('/site/v1/stream' + q({ channels: key, since: since === null ? undefined : since }));
  state.stream = es;
  state.streamKey = key;
  es.onmessage = (ev) => { if (state.stream === es) onStreamMessage(es, ev.data); };
  es.addEventListener('open', () => {
    if (state.stream !== es) return;
    if (since === null) readNewer(); // no cursor: what came while it was closed is read
    state.streamFailures = 0;
    liveStatus();
  });
  es.addEventListener('error', () => {
    if (state.stream !== es) return;
    liveStatus();
    if (es.readyState === EventSource.CLOSED) reopenLater();
  });
  liveStatus();
}

// One message: an `alerts` entry is read from the inbox (its message carries the webhook's
// body, not the inbox entry) and runs the page's firing listeners; a market channel's goes to
// the page; the server's `close` (the session ended, its key revoked) is a refusal.
function onStreamMessage(es, text) {
  let m = null;
  try { m = JSON.parse(text); } catch (e) { return; }
  if (!m || typeof m !== 'object') return;
  if (m.type === 'close') {
    es.close();
    reopenLater();
    return;
  }
  if (m.channel === 'alerts') {
    readNewer();
    state.firingListeners.forEach((f) => f(m));
  } else if (m.channel && wanted.onMessage) {
    wanted.status.messages += 1;
    wanted.onMessage(m);
  }
}

// Refused (not a dropped connection, which the browser retries itself): check the session,
// then try again without a cursor (it may be what was refused), waiting longer after each
// refusal in a row (3 s doubling to 60 s).
function reopenLater() {
  state.stream = null;
  state.streamKey = '';
  liveStatus();
  const delay = Math.min(REOPEN_MAX_MS, REOPEN_FIRST_MS * Math.pow(2, state.streamFailures));
  state.streamFailures += 1;
  state.streamRetry = setTimeout(async () => {
    const session = state.session;
    if (!session) return;
    try {
      await call('GET', '/site/session');
    } catch (e) {
      if (state.session === session && e.status !== 401) reopenLater();
      return;
    }
    if (state.session !== session) return;
    state.streamRetry = 0;
    if (!state.stream) openStream(null);
  }, delay);
}

/** The notifications page's line saying whether the stream is open. */
export function liveStatus() {
  const el = document.querySelector('[data-live]');
  if (!el) return;
  const open = !!state.stream && state.stream.readyState === EventSource.OPEN;
  say(el, open ? 'Live: new notifications appear here as they arrive.' : 'Reconnecting to live updates…');
}
