// The market page's screener: every pair of the venue with its numbers, searched, sorted by any column, in pages.

import { h, pairLink, say } from './dom.js';
import { fmtRate } from './derivatives.js';
import { fmtInt, fmtPct, fmtPrice, fmtUsd, isNum, labelOf, numberFmt, signClass } from './format.js';
import { savePrefs } from './prefs.js';
import { fillTable, table } from './tables.js';
import { CATEGORIES } from './values.js';

// The screener's columns: [key, heading, format, css class]. Values are per pair, from one board.
const SCREEN_COLUMNS = [
  ['price', 'Price', fmtPrice],
  ['change', 'Change %', (v) => fmtPct(v, true), 'signed'],
  ['volatility', 'Volatility %', (v) => fmtPct(v)],
  ['volumeUsd', 'Volume (USD)', fmtUsd],
  ['trades', 'Trades', fmtInt],
  ['spread', 'Spread (bp)', (v) => (isNum(v) ? numberFmt.format(v) : '–')],
  ['depthUsd', 'Depth ±1% (USD)', fmtUsd],
  ['wallsUsd', 'Walls (USD)', fmtUsd],
  ['level', 'Nearest level %', (v) => fmtPct(v)],
  ['funding', 'Funding 8h %', fmtRate, 'signed'],
  ['oiUsd', 'Open interest (USD)', fmtUsd],
  ['oiChange', 'OI change %', (v) => fmtPct(v, true), 'signed'],
  ['liqUsd', 'Liquidated (USD)', fmtUsd],
];
const SCREEN_PAGE = 50;

/** One row per pair of `GET /site/v1/metrics?usd=true`: the numbers the screener shows. */
export function screenRows(r) {
  return (r.data || []).map((e) => {
    const d = e.data || {};
    const q = isNum(e.quoteUsd) ? e.quoteUsd : null;
    const lv = d.levels ? [d.levels.support, d.levels.resistance].filter(isNum).map(Math.abs) : [];
    return {
      symbol: e.symbol,
      price: e.price,
      change: d.change,
      volatility: d.volatility,
      volumeUsd: isNum(d.volume) && q !== null ? d.volume * q : null,
      trades: d.trades,
      spread: d.spread,
      depthUsd: d.depth && isNum(d.depth.bidUsd) && isNum(d.depth.askUsd) ? d.depth.bidUsd + d.depth.askUsd : null,
      wallsUsd: d.walls && isNum(d.walls.usd) ? d.walls.usd : null,
      level: lv.length ? Math.min(...lv) : null,
      // The pair's perpetual (decisions.md §17): absent without one, or before it is known.
      funding: d.funding && isNum(d.funding.rate8h) ? d.funding.rate8h : null,
      oiUsd: d.oi && isNum(d.oi.usd) ? d.oi.usd : null,
      oiChange: isNum(d.oiChange) ? d.oiChange : null,
      liqUsd: d.liquidations && isNum(d.liquidations.longUsd) && isNum(d.liquidations.shortUsd) ? d.liquidations.longUsd + d.liquidations.shortUsd : null,
    };
  });
}

/** Whether a pair is in the chosen universe (`fresh`: the symbols of the universe "new"). */
export function inUniverse(symbol, category, fresh) {
  switch (category) {
    case 'usdt': return symbol.endsWith('USDT');
    case 'usdc': return symbol.endsWith('USDC');
    case 'btc': return symbol.endsWith('BTC');
    case 'new': return fresh.has(symbol);
    default: return true;
  }
}

/** The screener table: search, a sort on any column (click its heading), pages of SCREEN_PAGE: {panel, t, draw(rows, exchange)}. */
export function screener(m) {
  const headers = ['#', 'Pair'].concat(SCREEN_COLUMNS.map(([, label]) => [label, 'num']));
  const s = { m: m, t: table('rankings-table', 'Every pair of the venue', headers), last: { rows: [], exchange: m.exchange } };
  s.ths = Array.from(s.t.table.querySelectorAll('thead th'));
  const again = () => draw(s, s.last.rows, s.last.exchange);
  sortButtons(s, again);
  s.count = h('span', { class: 'hint', testid: 'screener-count', 'aria-live': 'polite' });
  s.prev = h('button', { type: 'button', class: 'secondary', testid: 'screener-prev', text: 'Previous' });
  s.next = h('button', { type: 'button', class: 'secondary', testid: 'screener-next', text: 'Next' });
  s.prev.addEventListener('click', () => { m.page = Math.max(0, m.page - 1); again(); });
  s.next.addEventListener('click', () => { m.page += 1; again(); });
  const panel = h('section', { class: 'panel', 'aria-labelledby': 'rank-h' },
    h('h2', { id: 'rank-h', text: 'Screener' }), s.t.wrap, h('div', { class: 'actions' }, s.prev, s.next, s.count));
  return { panel: panel, t: s.t, draw: (rows, exchange) => draw(s, rows, exchange) };
}

// Each numeric heading becomes a button: a click sorts by its column, again the other way.
function sortButtons(s, again) {
  const m = s.m;
  SCREEN_COLUMNS.forEach(([key, label], i) => {
    const th = s.ths[i + 2];
    const b = h('button', { type: 'button', class: 'sort', 'data-sort': key, text: label });
    b.addEventListener('click', () => {
      if (m.sort === key) m.dir = m.dir === 'asc' ? 'desc' : 'asc';
      else { m.sort = key; m.dir = 'desc'; }
      m.page = 0;
      savePrefs('market', m);
      again();
    });
    th.replaceChildren(b);
  });
}

// The rows the search lets through, sorted by the column `col`.
function sortedRows(rows, needle, col, sign) {
  return rows.filter((r) => !needle || r.symbol.includes(needle)).sort((a, b) => {
    const x = a[col[0]];
    const y = b[col[0]];
    if (!isNum(x) || !isNum(y)) return isNum(x) ? -1 : isNum(y) ? 1 : a.symbol.localeCompare(b.symbol);
    return (x - y) * sign || a.symbol.localeCompare(b.symbol);
  });
}

function draw(s, rows, exchange) {
  const m = s.m;
  s.last = { rows: rows, exchange: exchange };
  const needle = (m.search || '').trim().toUpperCase();
  const col = SCREEN_COLUMNS.find((c) => c[0] === m.sort) || SCREEN_COLUMNS[3];
  const shown = sortedRows(rows, needle, col, m.dir === 'asc' ? 1 : -1);
  const pages = Math.max(1, Math.ceil(shown.length / SCREEN_PAGE));
  m.page = Math.min(m.page || 0, pages - 1);
  const from = m.page * SCREEN_PAGE;
  const page = shown.slice(from, from + SCREEN_PAGE);
  s.ths.forEach((th, i) => {
    const key = i >= 2 ? SCREEN_COLUMNS[i - 2][0] : null;
    if (key === col[0]) th.setAttribute('aria-sort', m.dir === 'asc' ? 'ascending' : 'descending');
    else th.removeAttribute('aria-sort');
  });
  s.t.setCaption(labelOf(CATEGORIES, m.category) + ' on ' + exchange + ', sorted by ' + col[1] + (m.dir === 'asc' ? ', smallest first' : ', largest first') +
    '; change, volatility, volume, trades, open interest change and liquidations over ' + m.interval +
    ', the rest as of now. Volume is the quote volume in US dollars; funding, open interest and liquidations are the pair\'s perpetual\'s.');
  fillTable(s.t, page.map((r, i) => h('tr', { 'data-symbol': r.symbol },
    h('td', { text: from + i + 1 }),
    h('th', { scope: 'row' }, pairLink(exchange, r.symbol)),
    SCREEN_COLUMNS.map(([key, , fmt, cls]) => h('td', { class: 'num ' + (cls === 'signed' ? signClass(r[key]) : ''), 'data-col': key, text: fmt(r[key]) })))),
  needle ? 'No pair matches "' + needle + '".' : 'No pair has metrics yet.');
  say(s.count, shown.length ? 'Pairs ' + (from + 1) + '–' + (from + page.length) + ' of ' + shown.length : '');
  s.prev.disabled = m.page === 0;
  s.next.disabled = m.page >= pages - 1;
}
