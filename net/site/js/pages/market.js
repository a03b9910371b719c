// The market page: the venue's board (decisions.md §9), live from the stream, and the screener of every pair.

import { errorBox, h, mount, say } from '../dom.js';
import { field, options } from '../forms.js';
import { fmtRate } from '../derivatives.js';
import { fmtInt, fmtPct, fmtUsd, isNum, numberFmt } from '../format.js';
import { call, errText, v1 } from '../http.js';
import { current, poll } from '../lifecycle.js';
import { marketStream } from '../live.js';
import { savePrefs } from '../prefs.js';
import { inUniverse, screener, screenRows } from '../screener.js';
import { state } from '../state.js';
import { failTable } from '../tables.js';
import { fmtTime } from '../time.js';
import { CATEGORIES, INTERVALS } from '../values.js';
import { venueOptions } from '../venues.js';

const MARKET_REFRESH_MS = 5000;
const BOARD_FIELDS = [
  ['pairs', 'Pairs'], ['advancing', 'Advancing'], ['declining', 'Declining'], ['unchanged', 'Unchanged'],
  ['up5', 'Up ≥ 5%'], ['down5', 'Down ≤ −5%'], ['walls', 'Walls'], ['atLevel', 'At a level'],
];
// The perpetuals' numbers of the board (decisions.md §17): [key, label, format].
const PERP_FIELDS = [
  ['perps', 'Pairs with a perpetual', fmtInt], ['liqLongUsd', 'Longs liquidated', fmtUsd], ['liqShortUsd', 'Shorts liquidated', fmtUsd],
  ['oiUsd', 'Open interest', fmtUsd], ['oiChange', 'Open interest change', (v) => fmtPct(v, true)],
  ['funding', 'Funding per 8 h (OI-weighted)', fmtRate], ['fundingHigh', 'Funding ≥ 0.05%', fmtInt], ['fundingLow', 'Funding ≤ −0.05%', fmtInt],
];

export function marketPage() {
  const gen = state.gen;
  const m = state.market;
  const error = errorBox('market-error');
  const controls = marketControls(() => { refresh(); }, () => { m.page = 0; drawScreener(); });
  const board = boardPanel(m);
  const screen = screener(m);
  let seq = 0;
  let stream = null;
  let streamed = null;
  let rows = [];
  let fresh = new Set(); // symbols of the universe "new" (from /rankings/new), when it is chosen
  // The board comes from the stream (each build, once a second) while it is open.
  function follow() {
    if (stream && streamed === m.exchange) return;
    if (stream) stream.close();
    streamed = m.exchange;
    const gen2 = state.gen;
    stream = marketStream(['board:' + m.exchange], (msg) => {
      if (!current(gen2) || msg.channel !== 'board:' + m.exchange || !msg.data || !msg.data.intervals) return;
      const numbers = msg.data.intervals[m.interval];
      if (numbers) board.draw({ exchange: m.exchange, interval: m.interval, ts: msg.data.ts, data: numbers }, true);
    });
  }

  async function refresh() {
    follow();
    const mine = Object.assign({}, m);
    const my = ++seq;
    const [market, metrics, young] = await Promise.allSettled(marketRequests(mine, stream && stream.live()));
    if (!current(gen) || my !== seq) return;
    const problems = [];
    if (market.status === 'fulfilled') { if (market.value) board.draw(market.value, false); }
    else {
      problems.push('Board: ' + errText(market.reason));
      board.failed();
    }
    if (young.status === 'fulfilled' && young.value) fresh = new Set((young.value.data || []).map((r) => r.symbol));
    if (metrics.status === 'fulfilled') {
      rows = screenRows(metrics.value);
      drawScreener();
    } else {
      problems.push('Screener: ' + errText(metrics.reason));
      failTable(screen.t, errText(metrics.reason));
    }
    say(error, problems.join(' '));
  }

  function drawScreener() {
    screen.draw(rows.filter((r) => inUniverse(r.symbol, m.category, fresh)), m.exchange);
  }

  mount('Market', [h('h1', { text: 'Market' }), controls, error, board.el, screen.panel]);
  refresh();
  poll(MARKET_REFRESH_MS, refresh);
}

// The board (unless the stream is live), the screener's metrics, and the universe "new" when chosen.
function marketRequests(mine, live) {
  return [
    live ? Promise.resolve(null) : call('GET', v1('market', { exchange: mine.exchange, interval: mine.interval })),
    call('GET', v1('metrics', { exchange: mine.exchange, interval: mine.interval, usd: 'true' })),
    mine.category === 'new' ? call('GET', v1('rankings/new', { exchange: mine.exchange, metric: 'volume', limit: 100 })) : Promise.resolve(null),
  ];
}

/** The board's panel: {el, draw(answer, live), failed()}. */
function boardPanel(m) {
  const board = h('section', { class: 'panel board', testid: 'market-board', 'aria-labelledby': 'board-h', 'aria-busy': 'true' });
  const boardTitle = h('h2', { id: 'board-h', text: 'Market board' });
  const values = {};
  const dl = h('dl', null, BOARD_FIELDS.map(([k, label]) => {
    values[k] = h('dd', { 'data-board': k, text: '–' });
    return h('div', null, h('dt', { text: label }), values[k]);
  }));
  const meter = h('meter', { min: '0', max: '100', low: '40', high: '60', optimum: '100', value: '50', 'aria-labelledby': 'sentiment-label' });
  values.sentiment = h('dd', { 'data-board': 'sentiment', text: '–' });
  dl.append(h('div', { class: 'sentiment' },
    h('dt', { id: 'sentiment-label', text: 'Sentiment index (volume-weighted share of advancing pairs, 0–100)' }),
    values.sentiment, meter));
  const perpDl = h('dl', { class: 'perps', 'aria-label': 'Perpetuals' }, PERP_FIELDS.map(([k, label]) => {
    values[k] = h('dd', { 'data-board': k, text: '–' });
    return h('div', null, h('dt', { text: label }), values[k]);
  }));
  const updated = h('p', { class: 'updated' });
  board.append(boardTitle, dl, h('h3', { text: 'Perpetuals' }), perpDl, updated);

  function draw(r, live) {
    const d = r.data || {};
    BOARD_FIELDS.forEach(([k]) => say(values[k], fmtInt(d[k])));
    PERP_FIELDS.forEach(([k, , fmt]) => say(values[k], fmt(d[k])));
    say(values.sentiment, isNum(d.sentiment) ? numberFmt.format(d.sentiment) : '–');
    if (isNum(d.sentiment)) meter.value = d.sentiment;
    say(boardTitle, 'Market board · ' + (r.exchange || m.exchange) + ' · ' + (r.interval || m.interval));
    const how = live ? 'live.' : 'refreshes every ' + MARKET_REFRESH_MS / 1000 + ' s.';
    say(updated, 'Updated ' + fmtTime(isNum(r.ts) ? r.ts : Date.now()) + '; ' + how);
    board.setAttribute('aria-busy', 'false');
  }
  return { el: board, draw: draw, failed: () => board.setAttribute('aria-busy', 'false') };
}

/** The venue, universe, interval and search of the board and the screener (kept per browser). */
function marketControls(changed, searched) {
  const m = state.market;
  const venue = field('Venue', 'exchange', 'select', { options: venueOptions(), value: m.exchange, testid: 'market-venue' });
  const cat = field('Universe', 'category', 'select', { options: CATEGORIES, value: m.category, testid: 'market-category' });
  const interval = field('Interval', 'interval', 'select', { options: options(INTERVALS), value: m.interval, testid: 'market-interval' });
  const search = field('Search pairs', 'search', 'search', { value: m.search || '', placeholder: 'e.g. SOL', testid: 'screener-search' });
  const read = () => {
    m.exchange = venue.input.value;
    m.category = cat.input.value;
    m.interval = interval.input.value;
  };
  read(); // a stored choice no longer offered falls back to the first option
  const form = h('form', { class: 'panel controls', 'aria-label': 'Board and screener options' },
    h('div', { class: 'fields' }, venue.wrap, cat.wrap, interval.wrap, search.wrap),
    h('p', { class: 'hint', text: 'The interval sets the window of change, volatility, volume, trades, open interest change and liquidations; spread, depth, walls, levels, funding and open interest are as of now. Click a column to sort by it.' }));
  form.addEventListener('submit', (ev) => ev.preventDefault());
  search.input.addEventListener('input', () => {
    m.search = search.input.value;
    searched();
  });
  form.addEventListener('change', (ev) => {
    if (ev.target === search.input) return;
    read();
    m.page = 0;
    savePrefs('market', m);
    changed();
  });
  return form;
}
