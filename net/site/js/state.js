// The site's shared state: the session, the current page, the inbox and the choices kept per browser.

import { loadPrefs } from './prefs.js';
import { VENUES } from './values.js';

/** The state the modules share: one object, so a module reads what another set without a getter. */
export const state = {
  session: null, // {accountId, plan, csrf}
  venues: VENUES.slice(),
  gen: 0, // bumped at every page change: async work of an older page checks it and stops
  timers: new Set(),
  cleanups: [],
  page: '',
  stream: null, // the page's one EventSource (/site/v1/stream: alerts and the page's market channels)
  streamKey: '', // its channels
  streamReady: false, // the session's first read of the inbox has ended: a stream may open
  streamFailures: 0, // refusals in a row, for the back-off of reconnecting
  streamRetry: 0, // the timer of the reopening after a refusal, while it waits

  inbox: new Map(), // entry id -> entry
  inboxRead: false, // the newest entries were read this session (the stream resumes after them)
  lastSeen: 0,
  returnTo: '',
  signinMessage: '',
  market: loadPrefs('market', { exchange: 'binance', category: 'all', interval: '1d', sort: 'volumeUsd', dir: 'desc', search: '', page: 0 }),
  pairInterval: loadPrefs('pairInterval', '1h'),
  chartLines: loadPrefs('chartLines', 'near') === 'all' ? 'all' : 'near', // the pair chart's lines: nearest or every one
  symbolLists: new Map(), // venue -> Promise of symbols
  zone: loadPrefs('zone', 'local') === 'utc' ? 'utc' : 'local', // every time shown: the browser's zone or UTC
  firingListeners: new Set(), // the page's reactions to a firing (cleared when it is left)
  muted: new Set(), // "api:12", "market:4" (and "density:3" of former density alerts): alerts whose entries are hidden
  inboxFilter: { kind: '', pair: '', showMuted: false },
  inboxOlder: true, // older entries may exist beyond those held
};
