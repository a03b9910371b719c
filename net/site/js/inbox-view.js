// The inbox as the notifications page lists it: filtered, bursts of one alert grouped, each entry in one readable line.

import { alertPlace, everyPair } from './alert-rows.js';
import { DERIVATIVE_TYPES, derivCondition, derivTrigger } from './derivatives.js';
import { h } from './dom.js';
import { fmtDuration, fmtPct, fmtPrice, fmtUsd, isNum, labelOf, numberFmt } from './format.js';
import { enc } from './http.js';
import { drawInboxWith, isMuted, muteKey, setMuted } from './inbox.js';
import { state } from './state.js';
import { fmtTime, timeEl, toDate } from './time.js';
import { BOARD_NUMBERS, EVERY_PAIR } from './values.js';

const GROUP_MS = 60000; // entries of one alert less than a minute apart show as one line
const KIND_LABELS = {
  'alert.triggered': 'Alert fired', 'alert.delisted': 'Pair delisted',
  'density.triggered': 'Wall alert', 'market.triggered': 'Market alert', 'alert.expired': 'Alert expired',
  'alert.paused': 'Alert paused',
};

/** The event body of an entry ({} when it has none). */
function eventOf(e) { return e.event && typeof e.event === 'object' ? e.event : {}; }

/** The firings of an `alert.triggered` body: its `triggers` (a `*` alert's, oldest first), else its one `trigger`. */
function triggersOf(ev) {
  if (Array.isArray(ev.triggers) && ev.triggers.length) return ev.triggers.filter((t) => t && typeof t === 'object');
  return ev.trigger && typeof ev.trigger === 'object' ? [ev.trigger] : [];
}

/**
 * Where an entry's event is: {symbols, exchange}: the pairs that fired (a `*` alert's may be
 * many; none for a venue-wide market alert), the first of them the one the entry links to.
 */
function entryPair(e) {
  const ev = eventOf(e);
  const a = ev.alert && typeof ev.alert === 'object' ? ev.alert : {};
  const w = ev.wall && typeof ev.wall === 'object' ? ev.wall : {};
  let symbols = w.symbol ? [w.symbol] : a.symbol ? [a.symbol] : [];
  if (a.symbol === EVERY_PAIR) symbols = firedPairs(triggersOf(ev));
  return { symbols: symbols, exchange: a.exchange || null };
}

// The pairs of a `*` alert's firings, each once, in the order they fired.
function firedPairs(triggers) {
  return Array.from(new Set(triggers.map((t) => t.symbol).filter((x) => typeof x === 'string' && x)));
}

/** Pairs in words: "BTCUSDT", "BTCUSDT and ETHUSDT", "BTCUSDT, ETHUSDT and 3 more". */
function pairNames(symbols) {
  if (symbols.length <= 1) return symbols[0] || '?';
  if (symbols.length === 2) return symbols[0] + ' and ' + symbols[1];
  if (symbols.length === 3) return symbols[0] + ', ' + symbols[1] + ' and ' + symbols[2];
  return symbols[0] + ', ' + symbols[1] + ' and ' + (symbols.length - 2) + ' more';
}

/**
 * The filter an entry falls under (the notifications page's kinds): a firing by its alert's type,
 * 'price' for price and percent alerts; a former density alert's firing (§15: density alerts
 * are wall alerts now) under 'wall'; delistings, expiries and pauses under 'notice'.
 */
function entryFilter(e) {
  if (e.kind === 'alert.delisted' || e.kind === 'alert.expired' || e.kind === 'alert.paused') return 'notice';
  if (e.kind === 'density.triggered') return 'wall';
  if (e.kind !== 'alert.triggered') return e.kind;
  const a = eventOf(e).alert;
  const type = a && typeof a === 'object' ? a.type : '';
  if (DERIVATIVE_TYPES.indexOf(type) >= 0) return 'derivatives';
  return type === 'level' || type === 'wall' ? type : 'price';
}

function entryKindMatches(e, kind) { return !kind || entryFilter(e) === kind; }

/** When an entry was made: its own time, else its event's. */
function entryWhen(e) {
  const ev = eventOf(e);
  return e.createdAt || ev.time || (ev.trigger && ev.trigger.time);
}

function entryTime(e) {
  const ms = toDate(entryWhen(e)).getTime();
  return isNaN(ms) ? 0 : ms;
}

/**
 * The entries the filters let through, newest first, in groups: consecutive entries of one
 * alert less than GROUP_MS apart are one group (a burst of a repeating alert is one line).
 */
function inboxGroups() {
  const f = state.inboxFilter;
  const needle = f.pair.toUpperCase();
  const shown = Array.from(state.inbox.values()).sort((a, b) => b.id - a.id).filter((e) => {
    if (!f.showMuted && isMuted(e)) return false;
    if (!entryKindMatches(e, f.kind)) return false;
    return !needle || entryPair(e).symbols.some((x) => x.toUpperCase().includes(needle));
  });
  const groups = [];
  for (const e of shown) {
    const g = groups[groups.length - 1];
    const t = entryTime(e);
    if (g && muteKey(e) && muteKey(g[0]) === muteKey(e) && e.kind === g[0].kind && entryTime(g[g.length - 1]) - t < GROUP_MS) g.push(e);
    else groups.push([e]);
  }
  return groups;
}

/** Draws the notifications page's list and its muted alerts (nothing when another page is shown). */
export function renderInbox() {
  const list = document.querySelector('[data-testid="inbox-list"]');
  if (!list) return;
  const older = document.querySelector('[data-testid="inbox-older"]');
  if (older) older.hidden = !state.inboxOlder;
  renderMuted();
  const groups = inboxGroups();
  if (!groups.length) {
    const any = state.inbox.size > 0;
    list.replaceChildren(h('li', { class: 'empty', text: any ? 'No notification matches the filters.' : 'No notification yet. Alert firings appear here as they happen.' }));
    return;
  }
  list.replaceChildren(...groups.map(inboxItem));
}

function renderMuted() {
  const box = document.querySelector('[data-testid="muted-list"]');
  if (!box) return;
  if (!state.muted.size) {
    box.replaceChildren();
    return;
  }
  box.replaceChildren(h('h2', { text: 'Muted alerts' }), h('p', { class: 'hint', text: 'Their firings are kept and still go to webhooks and Telegram; this browser hides them here and leaves them out of the unread count.' }),
    h('ul', null, Array.from(state.muted).sort().map((k) => {
      const [kind, id] = k.split(':');
      const name = (kind === 'api' ? 'alert' : kind + ' alert') + ' #' + id;
      const un = h('button', { type: 'button', class: 'secondary', testid: 'unmute', 'data-mute': k, text: 'Unmute' });
      un.addEventListener('click', () => setMuted(k, false));
      return h('li', null, name + ' ', un);
    })));
}

// An entry's tools: a link to its pair, and Mute (or Unmute) for its alert.
function entryTools(e) {
  const p = entryPair(e);
  const symbol = p.symbols[0];
  const key = muteKey(e);
  const tools = h('span', { class: 'tools' });
  if (symbol && p.exchange) tools.append(h('a', { href: '#/pair/' + enc(p.exchange) + '/' + enc(symbol), testid: 'inbox-pair-link', text: 'Open ' + symbol }));
  if (key) {
    const on = state.muted.has(key);
    const b = h('button', { type: 'button', class: 'link', testid: on ? 'unmute' : 'mute', 'data-mute': key, text: on ? 'Unmute' : 'Mute this alert' });
    b.addEventListener('click', () => setMuted(key, !on));
    tools.append(' ', b);
  }
  return tools;
}

function inboxItem(group) {
  const e = group[0];
  const when = entryWhen(e);
  const tools = entryTools(e);
  const more = group.length > 1 ? h('span', { class: 'group', testid: 'inbox-group', text: ' ×' + group.length + ' (since ' + fmtTime(entryTime(group[group.length - 1])).slice(11) + ')' }) : null;
  return h('li', {
    'data-kind': e.kind, 'data-alert-id': e.alertId === null || e.alertId === undefined ? null : e.alertId,
    'data-entry-id': e.id, 'data-group-size': group.length, class: group.some((x) => x._fresh) ? 'fresh' : null,
  }, when ? [timeEl(when), ' '] : null, h('span', { class: 'kind', text: KIND_LABELS[e.kind] || e.kind }), ' ',
  describe(e.kind, eventOf(e), e.alertId), more, ' ', tools, messageOf(e));
}

// The text of a firing whose alert has a message (decisions.md §16), as the alert's owner wrote it.
function messageOf(e) {
  const text = e.kind === 'alert.triggered' ? eventOf(e).text : null;
  return typeof text === 'string' && text ? h('span', { class: 'entry-text', testid: 'inbox-text', text: text }) : null;
}

/** One readable line for an inbox entry's event body (the webhook body, or a market alert's firing). */
function describe(kind, ev, alertId) {
  const a = ev.alert && typeof ev.alert === 'object' ? ev.alert : {};
  const id = a.id !== undefined ? a.id : alertId;
  if (kind === 'alert.triggered') return describeFiring(a, ev, id);
  if (kind === 'alert.delisted') {
    return alertPlace(a) + ' was delisted; alert #' + id + ' was removed.';
  }
  if (kind === 'alert.expired') {
    return alertPlace(a) + ' · alert #' + id + ' reached its expiry and was removed.';
  }
  if (kind === 'alert.paused') return pausedWords(a, ev, id);
  if (kind === 'density.triggered') {
    // A density alert's firing from before density alerts became wall alerts (§15), kept in the
    // inbox: its alert had an id of its own, no longer listed.
    const w = ev.wall && typeof ev.wall === 'object' ? ev.wall : {};
    return (w.symbol || a.symbol || '?') + ' on ' + (a.exchange || '?') + ' · density alert #' + id + ' ' +
      wallWords({ side: w.side, price: w.price, usd: w.usd, dist: w.dist, age: w.ageS }, 'appeared') + (a.note ? ' · ' + a.note : '');
  }
  if (kind === 'market.triggered') {
    return (a.exchange || '?') + ' · ' + labelOf(BOARD_NUMBERS, a.number) + ' (' + a.interval + ') ' + a.direction + ' ' +
      a.threshold + ' · now ' + (isNum(ev.value) ? numberFmt.format(ev.value) : '?') + ' · market alert #' + id + (a.note ? ' · ' + a.note : '');
  }
  return 'alert #' + id;
}

/**
 * A paused alert in words: "Alert #12 (BTCUSDT on binance) paused by the flood guard (16 firings
 * in 3 minutes); resume it on the alerts page", the page linked.
 */
function pausedWords(a, ev, id) {
  const why = ev.reason === 'flood_guard'
    ? ' paused by the flood guard (' + (isNum(ev.firings) ? ev.firings + ' firings' : 'too many firings') + (isNum(ev.windowS) ? ' in ' + spanWords(ev.windowS) : '') + ')'
    : ' paused' + (ev.reason ? ' (' + ev.reason + ')' : '');
  return ['Alert #' + id + ' (' + alertPlace(a) + ')' + why + '; resume it on ', h('a', { href: '#/alerts', testid: 'inbox-alerts-link', text: 'the alerts page' }), '.'];
}

/** A span of seconds in words: "3 minutes", "90 seconds". */
function spanWords(s) {
  if (s % 60 !== 0) return s + ' seconds';
  return s / 60 + (s === 60 ? ' minute' : ' minutes');
}

/**
 * A price, percent, level or wall alert's firing in words. A `*` alert's body names the pairs
 * that fired; what each one's price, level or wall was is told when only one did.
 */
function describeFiring(a, ev, id) {
  const fired = triggersOf(ev);
  const every = a.symbol === EVERY_PAIR;
  const t = fired.length === 1 ? fired[0] : {};
  const deriv = derivCondition(a);
  const cond = deriv ? derivTrigger(t) || deriv
    : a.type === 'pct' ? a.direction + ' ' + a.pct + '% (' + a.window + ')'
    : a.type === 'level' ? a.event + (t.level ? ' of the ' + t.level.type + ' at ' + fmtPrice(t.level.price) + ' (' + t.level.timeframe + ')' : '')
    : a.type === 'wall' ? (t.wall ? wallWords(t.wall, a.event) : 'wall ' + a.event)
    : a.direction + ' ' + fmtPrice(a.price);
  const where = every ? pairNames(firedPairs(fired)) + ' on ' + (a.exchange || '?') : alertPlace(a);
  return where + ' · ' + a.type + ' alert #' + id + (every ? ' on ' + everyPair(a.exchange) + ':' : '') + ' ' + cond +
    (isNum(t.price) ? ' · price ' + fmtPrice(t.price) : '') + (isNum(t.move) ? ' · moved ' + fmtPct(t.move, true) : '') + (a.note ? ' · ' + a.note : '');
}

/**
 * A wall's firing in words: "bid wall of $2.1M at 61250 appeared, 0.4% below the price, standing
 * 30 s"; a pulled or filled one says how long it stood ("… pulled after 5 min").
 */
function wallWords(w, event) {
  const usd = isNum(w.usd) ? ' of ' + fmtUsd(w.usd) : '';
  const what = (w.side || '?') + ' wall' + usd + ' at ' + fmtPrice(w.price) + ' ' + event;
  if (event !== 'appeared') return what + (isNum(w.lifetimeS) && w.lifetimeS > 0 ? ' after ' + fmtDuration(w.lifetimeS) : '');
  const dist = isNum(w.dist) ? ', ' + fmtPct(Math.abs(w.dist)) + (w.dist < 0 ? ' below' : ' above') + ' the price' : '';
  return what + dist + (isNum(w.age) && w.age > 0 ? ', standing ' + fmtDuration(w.age) : '');
}

drawInboxWith(renderInbox);
