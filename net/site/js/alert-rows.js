// Alerts as table rows: price, percent, level and wall alerts (shared with the API; the site's density alerts are wall alerts), market alerts (site only), in words.

import { deleteButton, deleteWaits, pendingRow } from './deletes.js';
import { h, pairLink } from './dom.js';
import { fmtDuration, fmtInt, fmtPrice, fmtUsd, labelOf } from './format.js';
import { enc, v1 } from './http.js';
import { timeEl } from './time.js';
import { BOARD_NUMBERS, EVERY_PAIR, venueName } from './values.js';

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

// An alert's status in words: a market alert whose number sits at its threshold (it fired there)
// waits for the number to go back before it can fire again.
export function statusWords(a) {
  if (a.status === 'active' && a.waiting) return 'waiting to re-arm';
  if (a.status === 'triggered') return 'fired (done)';
  return a.status;
}

// The cells every alert row ends with: repeat, note, status, times fired, last fired, created, action.
function recordCells(a, del) {
  return [
    h('td', { text: a.repeat ? 'yes' : 'no' }),
    h('td', { class: 'wrap', text: a.note || '' }),
    h('td', { 'data-waiting': a.waiting ? 'true' : null, text: statusWords(a) }),
    h('td', { class: 'num', text: fmtInt(a.triggerCount) }),
    h('td', null, a.lastTriggeredAt ? timeEl(a.lastTriggeredAt) : '–'),
    h('td', null, timeEl(a.createdAt)),
    h('td', null, del),
  ];
}

/** The DELETE path of a price, percent, level or wall alert (a density alert made on the site included). */
export function alertPath(a) { return v1('alerts/' + enc(a.id)); }

function alertWhat(a) { return a.type + ' alert #' + a.id + ': ' + alertPlace(a) + ', ' + alertCondition(a); }

/** The row of a price, percent, level or wall alert (or of its waiting delete). */
export function alertRow(a, reload, error) {
  const path = alertPath(a);
  const attrs = { 'data-alert-id': a.id, 'data-type': a.type, 'data-event': a.event || null, 'data-status': a.status };
  if (deleteWaits(path)) return pendingRow(attrs, alertHeaders().length, alertWhat(a), path, reload);
  const del = deleteButton('alert-delete', alertWhat(a), path, reload, error);
  return h('tr', attrs,
    h('td', { text: a.id }),
    h('th', { scope: 'row' }, a.symbol === EVERY_PAIR ? everyPair(a.exchange) : pairLink(a.exchange, a.symbol)),
    h('td', { text: a.exchange }),
    h('td', { text: a.type }),
    h('td', { text: alertCondition(a) }),
    ...recordCells(a, del));
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
