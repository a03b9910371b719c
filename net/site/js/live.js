// Live updates: the session's event stream (the inbox, firings) and a page's market stream, each with its fallback.

import { say } from './dom.js';
import { call, q } from './http.js';
import { addInbox, loadInbox } from './inbox.js';
import { onLeave } from './lifecycle.js';
import { state } from './state.js';

const FIRING_COALESCE_MS = 250; // a burst of firings redraws a page's alert tables once

/**
 * Runs `fn` after each notification of the event stream (an alert fired, a pair was delisted)
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
 * The page's market stream (`GET /site/v1/stream`, server-sent events with the session):
 * `onMessage` gets each message of `channels` while the page stays; `live()` says whether it
 * is open now (the page polls what it would otherwise push while it is not). Closed when the
 * page is left; a dropped stream is reopened by the browser and starts from new snapshots.
 */
export function marketStream(channels, onMessage) {
  const status = { live: () => false, waiting: () => false, close: () => {}, messages: 0 };
  window.rampartStream = status;
  if (typeof EventSource === 'undefined') return status;
  const es = new EventSource('/site/v1/stream' + q({ channels: channels.join(',') }));
  status.live = () => es.readyState === EventSource.OPEN;
  // Open, or (re)connecting: its snapshots will come; closed (refused) is when a page polls.
  status.waiting = () => es.readyState !== EventSource.CLOSED;
  status.close = () => es.close();
  es.onmessage = (ev) => {
    let m = null;
    try { m = JSON.parse(ev.data); } catch (e) { return; }
    if (!m || typeof m !== 'object' || !m.channel) return;
    status.messages += 1;
    onMessage(m);
  };
  onLeave(() => {
    es.close();
    if (window.rampartStream === status) window.rampartStream = null;
  });
  return status;
}

/** Opens the session's event stream (`/site/events`): each `inbox` event joins the inbox and runs the page's firing listeners. */
export function openEvents() {
  closeEvents();
  if (typeof EventSource === 'undefined' || !state.session) return;
  const es = new EventSource('/site/events');
  state.events = es;
  es.addEventListener('inbox', (ev) => {
    let entry = null;
    try { entry = JSON.parse(ev.data); } catch (e) { return; }
    if (!entry || typeof entry !== 'object') return;
    addInbox([entry], true);
    state.firingListeners.forEach((f) => f(entry));
  });
  es.addEventListener('open', () => {
    if (state.eventsOpened) loadInbox(); // fill any gap left while disconnected
    state.eventsOpened = true;
    state.eventsFailures = 0;
    liveStatus();
  });
  es.addEventListener('error', () => {
    liveStatus();
    if (es.readyState !== EventSource.CLOSED || state.events !== es) return;
    reopenLater();
  });
}

// Refused (not a dropped connection, which the browser retries itself): check the session,
// then try again, waiting longer after each refusal (3 s doubling to 60 s).
function reopenLater() {
  state.events = null;
  const delay = Math.min(60000, 3000 * Math.pow(2, state.eventsFailures));
  state.eventsFailures += 1;
  setTimeout(async () => {
    if (!state.session || state.events) return;
    try {
      await call('GET', '/site/session');
      openEvents();
    } catch (e) {
      if (e.status !== 401) setTimeout(() => { if (state.session && !state.events) openEvents(); }, delay);
    }
  }, delay);
}

export function closeEvents() {
  if (state.events) state.events.close();
  state.events = null;
  state.eventsOpened = false;
  state.eventsFailures = 0;
}

/** The notifications page's line saying whether the event stream is open. */
export function liveStatus() {
  const el = document.querySelector('[data-live]');
  if (!el) return;
  const open = state.events && state.events.readyState === EventSource.OPEN;
  say(el, open ? 'Live: new notifications appear here as they arrive.' : 'Reconnecting to live updates…');
}
