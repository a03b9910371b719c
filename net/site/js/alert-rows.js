// Alerts as table rows: price, percent, level and wall alerts (shared with the API; the site's density alerts are wall alerts), market alerts (site only), their conditions and states in words.

import { alertActions } from './alert-actions.js';
import { editorOf } from './alert-edit.js';
import { derivCondition } from './derivatives.js';
import { deleteButton, deleteWaits, pendingRow } from './deletes.js';
import { h, pairLink } from './dom.js';
import { fmtDuration, fmtInt, fmtPrice, fmtUsd, labelOf } from './format.js';
import { enc, v1 } from './http.js';
import { fmtClock, fmtTime, timeEl, toDate } from './time.js';
import { BOARD_NUMBERS, EVERY_PAIR, FLOOD_FIRINGS_MAX, FLOOD_WINDOW_S, venueName } from './values.js';

/** The columns of a table of price, percent, level and wall alerts. */
export function alertHeaders() {
  return ['ID', 'Pair', 'Venue', 'Type', 'Condition', 'Repeat', 'Note', 'Status', ['Fired', 'num'], 'Last fired', 'Created', 'Action'];
}

/** The columns of a table of market alerts (the site's own; GET /site/site-alerts lists no other kind). */
export const SITE_ALERT_HEADERS = ['ID', 'Venue', 'Condition', 'Repeat', 'Note', 'Status', ['Fired', 'num'], 'Last fired', 'Created', 'Action'];

/** Where an alert watches, in words: "BTCUSDT on binance", or "every Binance pair" for a `*` alert. */
export function alertPlace(a) {
  return a.symbol === EVERY_PAIR ? everyPair(a.exchange) : (a.symbol || '?') + ' on ' + (a.exchange || '?');
}

/** The pairs of a venue a `*` alert watches: "every Binance pair". */
export function everyPair(exchange) { return 'every ' + venueName(exchange) + ' pair'; }

/** A price, percent, level or wall alert's condition in words, with its quiet time (per pair). */
export function alertCondition(a) {
  const quiet = a.cooldownS > 0 ? '; then quiet for ' + fmtDuration(a.cooldownS) + (a.symbol === EVERY_PAIR ? ' per pair' : '') : '';
  return alertWhen(a) + quiet;
}

function alertWhen(a) {
  const deriv = derivCondition(a);
  if (deriv) return deriv;
  if (a.type === 'pct') return a.direction + ' ' + a.pct + '% within the ' + a.window + ' candle';
  if (a.type === 'level') {
    const side = { above: 'a resistance', below: 'a support', any: 'a level' }[a.direction] || 'a level';
    const band = a.event === 'approach' ? ' within ' + a.withinPct + '%' : '';
    const strength = a.minStrength > 1 ? ', strength ' + a.minStrength + '+' : '';
    const tfs = Array.isArray(a.timeframes) && a.timeframes.length < 9 ? ' (' + a.timeframes.join(', ') + ')' : '';
    return a.event + ' of ' + side + band + strength + tfs;
  }
  if (a.type === 'wall') {
    const side = { bid: 'a bid wall', ask: 'an ask wall', any: 'a wall' }[a.direction] || 'a wall';
    const usd = a.minUsd > 0 ? ' of ' + fmtUsd(a.minUsd) + '+' : '';
    const age = a.minAgeS > 0 ? ', ' + a.minAgeS + ' s old' : '';
    return side + usd + ' within ' + a.maxDistPct + '% ' + a.event + age;
  }
  return a.direction + ' ' + fmtPrice(a.price);
}

/** Why the flood guard paused an alert, in words (decisions.md §16). */
export const FLOOD_WORDS = 'Paused by the flood guard: fired more than ' + FLOOD_FIRINGS_MAX + ' times in ' + FLOOD_WINDOW_S / 60 + ' minutes';

/**
 * When a one-pair alert's quiet time after its last firing ends, in ms, if that is after `now`
 * (a `*` alert's quiet time runs per pair: none is the alert's); else 0.
 */
export function coolingUntil(a, now) {
  if (a.status !== 'active' || a.paused || !(a.cooldownS > 0) || !a.lastTriggeredAt || a.symbol === EVERY_PAIR) return 0;
  const end = toDate(a.lastTriggeredAt).getTime() + a.cooldownS * 1000;
  return end > now ? end : 0;
}

/** Milliseconds until the first of `alerts` stops cooling down (its row's words change then), or 0. */
export function nextStateChange(alerts) {
  const now = Date.now();
  const ends = alerts.map((a) => coolingUntil(a, now)).filter((t) => t > 0);
  return ends.length ? Math.min(...ends) - now : 0;
}

/**
 * An alert's state in words: a market alert whose number sits at its threshold (it fired there)
 * waits for the number to go back before it can fire again; an alert of the API may be paused
 * (by the user, or by the flood guard), cooling down after a firing, or ended after its most
 * firings (a repeating one: one that does not repeat has `maxFires` 1 and has simply fired); an
 * active one says when it ends, if it does.
 */
export function statusWords(a) {
  if (a.status === 'active' && a.waiting) return 'waiting to re-arm';
  if (a.status === 'triggered') return a.repeat && a.maxFires ? 'Ended after ' + fmtInt(a.triggerCount) + ' firing' + (a.triggerCount === 1 ? '' : 's') : 'fired (done)';
  if (a.paused) return a.pausedBy === 'flood_guard' ? FLOOD_WORDS : 'Paused';
  const until = coolingUntil(a, Date.now());
  const ends = a.expiresAt ? '; ends ' + fmtTime(a.expiresAt) : '';
  return (until ? 'Cooling down until ' + fmtClock(until) : a.status) + ends;
}

// The cells every alert row ends with: repeat, note, status, times fired (of its most), last
// fired, created, and the action cell's content.
function recordCells(a, action) {
  return [
    h('td', { text: a.repeat ? 'yes' : 'no' }),
    h('td', { class: 'wrap', text: a.note || '' }),
    h('td', { class: a.paused || a.expiresAt ? 'wrap' : null, 'data-waiting': a.waiting ? 'true' : null, testid: 'alert-state', text: statusWords(a) }),
    h('td', { class: 'num', text: fmtInt(a.triggerCount) + (a.repeat && a.maxFires ? ' of ' + fmtInt(a.maxFires) : '') }),
    h('td', null, a.lastTriggeredAt ? timeEl(a.lastTriggeredAt) : '–'),
    h('td', null, timeEl(a.createdAt)),
    h('td', null, action),
  ];
}

/** The DELETE path of a price, percent, level or wall alert (a density alert made on the site included). */
export function alertPath(a) { return v1('alerts/' + enc(a.id)); }

function alertWhat(a) { return a.type + ' alert #' + a.id + ': ' + alertPlace(a) + ', ' + alertCondition(a); }

/**
 * The row of a price, percent, level or wall alert: its edit form while that is open, or the
 * row of its waiting delete; its actions are Edit, Pause or Resume, Send test and Delete.
 */
export function alertRow(a, reload, error) {
  const path = alertPath(a);
  const attrs = {
    'data-alert-id': a.id, 'data-type': a.type, 'data-event': a.event || null, 'data-status': a.status,
    'data-paused': a.paused ? a.pausedBy || 'user' : null,
  };
  if (deleteWaits(path)) return pendingRow(attrs, alertHeaders().length, alertWhat(a), path, reload);
  const editing = editorOf(a.id);
  if (editing) return editing;
  const del = deleteButton('alert-delete', alertWhat(a), path, reload, error);
  const ctx = { cols: alertHeaders().length, draw: (x) => alertRow(x, reload, error), reload: reload };
  return h('tr', attrs,
    h('td', { text: a.id }),
    h('th', { scope: 'row' }, a.symbol === EVERY_PAIR ? everyPair(a.exchange) : pairLink(a.exchange, a.symbol)),
    h('td', { text: a.exchange }),
    h('td', { text: a.type }),
    h('td', { text: alertCondition(a) }),
    ...recordCells(a, alertActions(a, ctx, del)));
}

/** A market alert's condition in words, with its quiet time. */
export function siteCondition(a) {
  const when = labelOf(BOARD_NUMBERS, a.number) + ' (' + a.interval + ') ' + a.direction + ' ' + a.threshold;
  return when + (a.repeat && a.cooldownS > 0 ? '; then quiet for ' + fmtDuration(a.cooldownS) : '');
}

/** The row of a market alert (or of its waiting delete: DELETE /site/site-alerts/{id}). */
export function siteAlertRow(a, reload, error) {
  const path = '/site/site-alerts/' + enc(a.id);
  const what = 'market alert #' + a.id + ': ' + a.exchange + ', ' + siteCondition(a);
  const attrs = { 'data-site-alert-id': a.id, 'data-type': a.type, 'data-status': a.status };
  if (deleteWaits(path)) return pendingRow(attrs, SITE_ALERT_HEADERS.length, what, path, reload);
  const del = deleteButton('site-alert-delete', what, path, reload, error);
  return h('tr', attrs,
    h('td', { text: a.id }),
    h('td', { text: a.exchange }),
    h('td', { class: 'wrap', text: siteCondition(a) }),
    ...recordCells(a, del));
}
