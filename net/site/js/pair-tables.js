// The pair page's tables and metrics: its levels and walls (the same the chart draws) and the numbers of its interval.

import { h } from './dom.js';
import { fmtCompact, fmtInt, fmtPct, fmtPrice, fmtUsd, intFmt, isNum, numberFmt, signClass } from './format.js';
import { levelOffers, levelSource, offerButtons, wallOffers } from './structure.js';
import { fillTable } from './tables.js';
import { fmtTime } from './time.js';

// A row's buttons that offer its alerts; `alert(body, label)` makes one.
function offerCell(offers, alert) {
  if (!alert) return h('td');
  return h('td', { class: 'offers' }, offerButtons(offers, alert));
}

/** The levels' table, once the levels have been read; `alert` makes an offered alert. */
export function drawLevelTable(t, levels, loaded, alert) {
  if (!loaded) return;
  fillTable(t, levels.map((l) => h('tr', null,
    h('td', { class: l.type === 'support' ? 'up' : 'down', text: l.type === 'support' ? 'Support' : 'Resistance' }),
    h('td', { class: 'num', text: fmtPrice(l.price) }),
    h('td', { text: levelSource(l) }),
    h('td', { class: 'num', text: l.strength }),
    offerCell(levelOffers(l), alert))), 'No level yet.');
}

export function drawWallTable(t, walls, alert) {
  fillTable(t, walls.map((w) => h('tr', null,
    h('td', { class: w.side === 'bid' ? 'up' : 'down', text: w.side === 'bid' ? 'Bid' : 'Ask' }),
    h('td', { class: 'num', text: fmtPrice(w.price) }),
    h('td', { class: 'num', text: fmtCompact(w.qty) }),
    h('td', { class: 'num', text: fmtUsd(w.usd) }),
    h('td', { class: 'num', text: fmtPct(w.dist, true) }),
    h('td', { class: 'num', text: isNum(w.ratio) ? numberFmt.format(w.ratio) + '×' : '–' }),
    h('td', { class: 'num', text: isNum(w.age) ? intFmt.format(w.age) + ' s' : '–' }),
    offerCell(wallOffers(w), alert))), 'No wall at the moment.');
}

const OUTCOMES = { open: 'standing', filled: 'filled', pulled: 'pulled' };

/** The pair's wall history (`GET /site/v1/walls/{symbol}/history`), newest first. */
export function drawWallHistory(t, walls) {
  fillTable(t, walls.map((w) => h('tr', { 'data-outcome': w.outcome },
    h('td', { class: w.side === 'bid' ? 'up' : 'down', text: w.side === 'bid' ? 'Bid' : 'Ask' }),
    h('td', { class: 'num', text: fmtPrice(w.price) }),
    h('td', { text: fmtTime(w.firstSeen) }),
    h('td', { text: fmtTime(w.lastSeen) }),
    h('td', { class: 'num', text: fmtUsd(w.maxUsd) }),
    h('td', { class: 'num', text: fmtUsd(w.executedUsd) }),
    h('td', { text: OUTCOMES[w.outcome] || w.outcome }))), 'No wall in the last 24 h.');
}

/** The metrics of `GET /site/v1/metrics/{symbol}` over the interval `tf`, under the box's heading. */
export function drawMetrics(box, r, tf) {
  const d = r.data || {};
  const items = [];
  const add = (label, value, cls) => items.push(h('div', null, h('dt', { text: label }), h('dd', { class: cls, text: value })));
  if ('change' in d) add('Change (' + tf + ')', fmtPct(d.change, true), signClass(d.change));
  if ('volatility' in d) add('Volatility (' + tf + ')', fmtPct(d.volatility));
  if ('volume' in d) add('Quote volume (' + tf + ')', fmtCompact(d.volume));
  if ('trades' in d) add('Trades (' + tf + ')', fmtInt(d.trades));
  if ('spread' in d) add('Spread', isNum(d.spread) ? numberFmt.format(d.spread) + ' bp' : '–');
  if (d.depth) {
    add('Bids within 1%', fmtUsd(d.depth.bidUsd));
    add('Asks within 1%', fmtUsd(d.depth.askUsd));
    add('Book imbalance', isNum(d.depth.imbalance) ? numberFmt.format(d.depth.imbalance) : '–', signClass(d.depth.imbalance));
  }
  if (d.walls) add('Walls', fmtInt(d.walls.count) + (isNum(d.walls.usd) ? ' · ' + fmtUsd(d.walls.usd) : ''));
  if (d.levels) {
    add('Nearest support', d.levels.support === null ? 'none' : fmtPct(d.levels.support, true));
    add('Nearest resistance', d.levels.resistance === null ? 'none' : fmtPct(d.levels.resistance, true));
  }
  const body = items.length ? h('dl', null, items) : h('p', { class: 'muted', text: 'No metric has data yet (a young listing, or an empty book).' });
  const when = h('p', { class: 'updated', text: 'Computed ' + fmtTime(isNum(r.computedAt) && r.computedAt > 0 ? r.computedAt : r.ts) });
  box.replaceChildren(box.firstChild, body, when);
  box.setAttribute('aria-busy', 'false');
}
