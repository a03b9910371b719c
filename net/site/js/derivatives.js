// The derivatives flow of decisions.md §17 in words: funding rates, how complete a venue's liquidations are, and the conditions and firings of liquidations, oi and funding alerts.

import { fmtCompact, fmtPct, fmtPrice, fmtUsd, isNum } from './format.js';
import { venueName } from './values.js';

/** The alert types of §17: they need the pair's perpetual, and may watch a whole venue. */
export const DERIVATIVE_TYPES = ['liquidations', 'oi', 'funding'];

/** Windows of a liquidations `sum` alert and of an `oi` alert (§17), shorter first. */
export const LIQ_WINDOWS = ['1m', '5m', '15m', '1h', '4h', '1d'];
export const OI_WINDOWS = ['5m', '15m', '1h', '4h', '1d'];

/** A funding rate in percent as the venues write it, 4 decimals and signed: "+0.0100%". */
export function fmtRate(v) {
  return isNum(v) ? (v > 0 ? '+' : '') + v.toFixed(4) + '%' : '–';
}

/** The side of a liquidated position in words (§17: `long` is a forced sell of a long). */
export function sideWords(side) {
  return { long: 'longs', short: 'shorts', any: 'longs or shorts' }[side] || 'positions';
}

/** What a venue's public feed shows of its liquidations (`completeness`), in words. */
export function completenessWords(c, exchange) {
  const v = venueName(exchange);
  switch (c) {
    case 'largest_per_second': return v + ' sends at most one liquidation per contract per second, the largest: this is not every liquidation.';
    case 'all': return v + ' sends every liquidation.';
    case 'partial': return v + ' sends part of its liquidations ("not the total").';
    case 'none': return v + ' publishes no liquidations.';
    default: return '';
  }
}

/** A liquidations, oi or funding alert's condition in words; null for another type. */
export function derivCondition(a) {
  if (a.type === 'liquidations') {
    return a.event === 'sum'
      ? fmtUsd(a.minUsd) + '+ of ' + sideWords(a.direction) + ' liquidated within ' + a.window
      : 'one liquidation of ' + sideWords(a.direction) + ' worth ' + fmtUsd(a.minUsd) + '+';
  }
  if (a.type === 'oi') {
    const dir = { up: 'up', down: 'down', any: 'up or down' }[a.direction] || a.direction;
    return 'open interest ' + dir + ' ' + a.pct + '% within ' + a.window + (a.minUsd > 0 ? ', at least ' + fmtUsd(a.minUsd) + ' open' : '');
  }
  if (a.type === 'funding') return 'funding ' + a.direction + ' ' + fmtRate(a.fundingPct) + ' per 8 h';
  return null;
}

/** What one trigger of a liquidations, oi or funding firing saw, in words; null without any. */
export function derivTrigger(t) {
  if (t.liquidation && typeof t.liquidation === 'object') {
    const l = t.liquidation;
    const more = isNum(l.count) && l.count > 1 ? ' (the largest of ' + l.count + ')' : '';
    return fmtUsd(l.usd) + ' of ' + sideWords(l.side) + ' liquidated at ' + fmtPrice(l.price) + more;
  }
  if (t.liquidations && typeof t.liquidations === 'object') {
    const s = t.liquidations;
    return fmtUsd(s.sumUsd) + ' of ' + sideWords(s.side) + ' liquidated in ' + s.window + ' (' + s.count + ' orders)';
  }
  if (t.oi && typeof t.oi === 'object') {
    return 'open interest ' + fmtPct(t.oi.changePct, true) + ' in ' + t.oi.window + ', now ' + fmtCompact(t.oi.base) + ' (' + fmtUsd(t.oi.usd) + ')';
  }
  if (t.funding && typeof t.funding === 'object') return 'funding ' + fmtRate(t.funding.rate8h) + ' per 8 h';
  return null;
}

/** Time left until `ms` in words: "in 2 h 13 min", "in 45 s", "due". */
export function untilWords(ms, now) {
  const s = Math.round((ms - now) / 1000);
  if (!(s > 0)) return 'due';
  if (s < 60) return 'in ' + s + ' s';
  const m = Math.floor(s / 60);
  return m < 60 ? 'in ' + m + ' min' : 'in ' + Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
}
