// A pair's structure, its levels and walls, as the pair page offers it: each in words, the alerts each offers (decisions.md §15), and the buttons that make them, for the tables and the chart alike.

import { h } from './dom.js';
import { fmtPrice, fmtUsd, isNum } from './format.js';

/** The alerts a level offers: the pair's levels of its side, timeframe and at least its
 * strength, approached or broken. [[label, body], ...], bodies without symbol and exchange. */
export function levelOffers(l) {
  const base = { type: 'level', direction: l.type === 'support' ? 'below' : 'above', timeframes: [l.timeframe], min_strength: l.strength };
  return [['Alert on approach', { ...base, event: 'approach' }], ['Alert on break', { ...base, event: 'break' }]];
}

/** The alerts a wall offers: walls of its side worth at least half of it, pulled or filled. */
export function wallOffers(w) {
  const base = { type: 'wall', direction: w.side, max_dist_pct: Math.min(50, Math.ceil(Math.abs(w.dist || 0)) + 1) };
  if (isNum(w.usd)) base.min_usd = Math.floor(w.usd / 2);
  return [['Alert if pulled', { ...base, event: 'pulled' }], ['Alert if filled', { ...base, event: 'filled' }]];
}

/**
 * The buttons of `offers`: each makes its alert with `alert(body, label)`, the one path of every
 * offered alert (the page adds the pair). `after` runs once a button has been pressed.
 */
export function offerButtons(offers, alert, after) {
  return offers.map(([label, body]) => {
    const b = h('button', { type: 'button', class: 'small', text: label });
    b.addEventListener('click', () => {
      if (after) after();
      alert(body, label);
    });
    return b;
  });
}

// What made a level, in a trader's words (the API's timeframe tags of docs/api.md's rule 3).
const EXTREMES = { dmax: "yesterday's high", dmin: "yesterday's low", wmax: "last week's high", wmin: "last week's low" };

/** What made a level: "1h swing high", "yesterday's low". */
export function levelSource(l) {
  return EXTREMES[l.timeframe] || l.timeframe + ' swing ' + (l.side === 'high' ? 'high' : 'low');
}

/** A level in words: "Support at 64000 (1h swing low, strength 2)". */
export function levelName(l) {
  return (l.type === 'support' ? 'Support' : 'Resistance') + ' at ' + fmtPrice(l.price) +
    ' (' + levelSource(l) + (l.strength > 1 ? ', strength ' + l.strength : '') + ')';
}

/** A wall in words: "Bid wall at 63000", with `usd` "Bid wall at 63000 ($2.1M)". */
export function wallName(w, usd) {
  return (w.side === 'bid' ? 'Bid' : 'Ask') + ' wall at ' + fmtPrice(w.price) + (usd && isNum(w.usd) ? ' (' + fmtUsd(w.usd) + ')' : '');
}
