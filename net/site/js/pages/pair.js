// The pair page: candle chart with levels and walls as price lines, the metrics, the levels and walls as tables, the pair's alerts.

import { alertHeaders, alertPath, alertRow, nextStateChange } from '../alert-rows.js';
import { pairAlertForm } from '../alert-forms.js';
import { loadChartLib, makeChart, resetChartHandle } from '../chart.js';
import { deleteWaits } from '../deletes.js';
import { errorBox, h, mount, say, statusBox } from '../dom.js';
import { field, inWords, options } from '../forms.js';
import { fmtPrice, isNum } from '../format.js';
import { call, enc, errText, v1 } from '../http.js';
import { current, later, onLeave, poll } from '../lifecycle.js';
import { go } from '../nav.js';
import { marketStream, onFiring, streamComing } from '../live.js';
import { drawLevelTable, drawMetrics, drawWallHistory, drawWallTable } from '../pair-tables.js';
import { perpPanel } from '../perp-panel.js';
import { savePrefs } from '../prefs.js';
import { state } from '../state.js';
import { failTable, fillTable, table } from '../tables.js';
import { EVERY_PAIR, INTERVALS, VENUES, venueName } from '../values.js';
import { symbolsOf, venueOptions } from '../venues.js';

const PAIR_REFRESH_MS = 4000;
const CANDLE_LIMIT = 300;
const SYMBOL = /^[A-Za-z0-9._-]{1,40}$/;

/**
 * The page of `symbol` on `exchange`. Its parts share one object `p`: the page's generation,
 * its elements, the chart (once its library has loaded) and what was last read or pushed.
 */
export function pairPage(exchange, symbol) {
  if (!knownPair(exchange, symbol)) return;
  const p = {
    gen: state.gen, exchange: exchange, symbol: symbol,
    chart: null, // made once the chart library has loaded (only this page needs it)
    tickSize: null,
    drawn: { candles: false, levels: false },
    lastLevels: [],
    lastWalls: [],
    lastAlerts: [], // the user's active price alerts on the pair, drawn as dotted lines
    lastPrice: null, // the nearest levels are nearest this
  };
  p.loadAlerts = () => loadPairAlerts(p);
  p.loadWallHistory = () => loadWallHistory(p);
  // The alerts the tables' rows and the chart's lines offer, made through one path; each says
  // what became of them where it was asked (under the pair's alerts, or under the chart).
  p.offerAlert = (body, label) => offerAlert(p, body, label, p.offerStatus, p.alertsError);
  p.chartOffer = (body, label) => offerAlert(p, body, label, p.chartStatus, p.chartError);
  pairView(p);
  watchChart(p);
  // Price, levels and walls come from the stream while it is open (a level broken by a trade
  // leaves the chart at once, walls move with each scan); candles and metrics are polled.
  // The stream is opened once the perpetual's first read says whether the pair has one: with
  // its `perp` and `liquidations` channels then (a pair without one would be refused them), so
  // the page opens one stream, not one and then another.
  const channels = ['price', 'levels', 'walls'].map((c) => c + ':' + exchange + ':' + symbol);
  p.stream = streamComing();
  const open = (has) => {
    if (current(p.gen)) p.stream = marketStream(has ? channels.concat(p.perp.channels()) : channels, (m) => onPairMessage(p, m));
  };
  p.perp.load().then(open, () => open(false));
  loadSymbol(p);
  refreshPair(p, true);
  p.loadAlerts();
  p.loadWallHistory();
  onFiring(p.loadAlerts);
  poll(PAIR_REFRESH_MS, () => refreshPair(p, false));
  poll(WALL_HISTORY_REFRESH_MS, p.loadWallHistory);
}

// An unknown venue or a text that cannot be a symbol is said so, instead of the page.
function knownPair(exchange, symbol) {
  if (VENUES.indexOf(exchange) < 0 && state.venues.indexOf(exchange) < 0) {
    mount('Pair', [h('h1', { text: 'Unknown venue' }), h('p', { class: 'error', role: 'alert', text: 'No venue named "' + exchange + '".' })]);
    return false;
  }
  if (!SYMBOL.test(symbol)) {
    mount('Pair', [h('h1', { text: 'Unknown pair' }), h('p', { class: 'error', role: 'alert', text: '"' + symbol + '" is not a pair symbol.' })]);
    return false;
  }
  return true;
}

// Builds and shows the page's elements, keeping those drawn later in `p`.
function pairView(p) {
  const symbol = p.symbol;
  p.error = errorBox('pair-error');
  p.price = h('span', { class: 'price' });
  const controls = pairControls(p);
  p.metricsBox = h('section', { class: 'panel metrics', testid: 'pair-metrics', 'aria-labelledby': 'metrics-h', 'aria-busy': 'true' },
    h('h2', { id: 'metrics-h', text: 'Metrics' }), h('p', { class: 'muted', text: 'Loading…' }));
  p.levelsT = table('pair-levels', 'Served levels, nearest first', ['Type', ['Price', 'num'], 'From', ['Strength', 'num'], 'Alert']);
  p.levelsT.scroll.classList.add('tall');
  p.levelsT.scroll.setAttribute('tabindex', '0'); // a scrolling region is reachable by keyboard
  p.levelsT.scroll.setAttribute('aria-label', 'Levels (scrolls)');
  p.wallsT = table('pair-walls', 'Walls of the latest scan', ['Side', ['Price', 'num'], ['Size', 'num'], ['USD', 'num'], ['Distance', 'num'], ['Ratio', 'num'], ['Age', 'num'], 'Alert']);
  p.historyT = table('pair-wall-history', 'Walls of the last 24 h and what became of them, newest first',
    ['Side', ['Price', 'num'], 'First seen', 'Last seen', ['Largest (USD)', 'num'], ['Traded at it (USD)', 'num'], 'Outcome']);
  p.alertsT = table('pair-alerts', 'Your alerts on this pair, and on every ' + venueName(p.exchange) + ' pair', alertHeaders());
  p.alertsError = errorBox('pair-alerts-error');
  p.offerStatus = statusBox('pair-offer-status');
  const alertBox = pairAlertForm(p.exchange, symbol, () => p.loadAlerts());
  p.perp = perpPanel(p.exchange, symbol);
  mount(symbol, [
    h('div', { class: 'pair-head' }, h('h1', { text: symbol + ' · ' + p.exchange }), p.price),
    controls,
    p.error,
    chartPanel(p),
    p.metricsBox,
    p.perp.el,
    h('div', { class: 'two-col' },
      h('section', { class: 'panel', 'aria-labelledby': 'lv-h' }, h('h2', { id: 'lv-h', text: 'Levels' }), p.levelsT.wrap),
      h('section', { class: 'panel', 'aria-labelledby': 'wl-h' }, h('h2', { id: 'wl-h', text: 'Walls' }), p.wallsT.wrap)),
    h('section', { class: 'panel', 'aria-labelledby': 'wh-h' }, h('h2', { id: 'wh-h', text: 'Wall history' }), p.historyT.wrap),
    h('section', { class: 'panel', 'aria-labelledby': 'pa-h' }, h('h2', { id: 'pa-h', text: 'Alerts on ' + symbol }), p.alertsT.wrap, p.alertsError, p.offerStatus, alertBox),
  ]);
}

// The venue (only venues that list the pair can be picked), the timeframe and the chart's lines.
function pairControls(p) {
  const symbol = p.symbol;
  const venue = field('Venue', 'exchange', 'select', { options: venueOptions(), value: p.exchange, testid: 'pair-venue' });
  if (INTERVALS.indexOf(state.pairInterval) < 0) state.pairInterval = '1h';
  const interval = field('Timeframe', 'interval', 'select', { options: options(INTERVALS), value: state.pairInterval, testid: 'pair-interval' });
  venue.input.addEventListener('change', () => go('#/pair/' + enc(venue.input.value) + '/' + enc(symbol)));
  state.venues.forEach((v) => symbolsOf(v).then((list) => {
    const opt = Array.from(venue.input.options).find((o) => o.value === v);
    if (!current(p.gen) || !opt || !list.length || list.indexOf(symbol) >= 0) return;
    opt.disabled = true;
    opt.textContent = v + ' (does not list ' + symbol + ')';
  }));
  const linesF = field('Lines', 'lines', 'select', {
    options: [['near', 'Nearest levels, largest walls'], ['all', 'Every level and wall']], value: state.chartLines, testid: 'chart-lines',
  });
  linesF.input.addEventListener('change', () => {
    state.chartLines = linesF.input.value;
    savePrefs('chartLines', state.chartLines);
    redraw(p);
  });
  interval.input.addEventListener('change', () => {
    state.pairInterval = interval.input.value;
    savePrefs('pairInterval', state.pairInterval);
    p.drawn.candles = false;
    refreshPair(p, true);
  });
  return h('form', { class: 'panel controls', 'aria-label': 'Chart options' },
    h('div', { class: 'fields' }, venue.wrap, interval.wrap, linesF.wrap));
}

// The chart's box, the layer of its markers (beside the box: the box is an image to assistive
// technology, the markers are controls), its legend and what became of an alert it offered.
function chartPanel(p) {
  p.chartBox = h('div', { class: 'chart', testid: 'pair-chart', role: 'img', 'aria-label': 'Candle chart of ' + p.symbol + ' with its levels and walls; the same levels and walls are listed in the tables below.' });
  p.marksLayer = h('div', { class: 'chart-marks', role: 'group', 'aria-label': 'Alerts of the levels and walls drawn' });
  p.chartStatus = statusBox('chart-offer-status');
  p.chartError = errorBox('chart-offer-error');
  p.shownNote = h('span', { testid: 'chart-shown' });
  const legend = h('p', { class: 'legend' },
    h('span', null, h('span', { class: 'swatch support' }), 'support'),
    h('span', null, h('span', { class: 'swatch resistance' }), 'resistance'),
    h('span', null, h('span', { class: 'swatch wall' }), 'wall (dashed)'),
    h('span', null, h('span', { class: 'swatch alert' }), 'your alert (dotted)'), p.shownNote,
    h('span', { text: 'A line’s marker (S, R, W), or a click on the line, offers its alerts.' }));
  return h('section', { class: 'panel', 'aria-label': 'Chart' }, h('div', { class: 'chart-wrap' }, p.chartBox, p.marksLayer), legend, p.chartStatus, p.chartError);
}

// `window.rampartChart` for the browser test, and the chart once its library has loaded.
function watchChart(p) {
  p.handle = {
    ready: false,
    priceLines: () => p.chart ? p.chart.priceLines() : [],
    lastBarTime: () => p.chart ? p.chart.lastBarTime() : null,
    y: (price) => p.chart ? p.chart.y(price) : null,
  };
  window.rampartChart = p.handle;
  onLeave(() => {
    if (p.chart) p.chart.remove();
    if (window.rampartChart === p.handle) resetChartHandle();
  });
  loadChartLib().then((ok) => {
    if (!current(p.gen)) return;
    p.chart = ok ? makeChart(p.chartBox, p.marksLayer, p.chartOffer) : null;
    if (!p.chart) {
      say(p.error, 'The chart library did not load; levels and walls are listed below.');
      return;
    }
    if (p.tickSize !== null) p.chart.setTick(p.tickSize);
    refreshPair(p, true);
  });
}

// The chart's lines (and the note of how many are drawn) and the tables, from what was last read.
function redraw(p) {
  if (p.chart) {
    const n = p.chart.lines(p.lastLevels, p.lastWalls, p.lastAlerts, state.chartLines === 'all', p.lastPrice);
    const lv = n.levels < n.of ? 'the ' + n.levels + ' nearest of ' + n.of + ' levels' : (n.of ? 'all ' + n.of + ' levels' : 'no level');
    const wl = n.walls < n.ofWalls ? 'the ' + n.walls + ' largest of ' + n.ofWalls + ' walls' : (n.ofWalls ? 'all ' + n.ofWalls + ' walls' : 'no wall');
    say(p.shownNote, 'Drawn: ' + lv + ', ' + wl + '.');
  }
  drawLevelTable(p.levelsT, p.lastLevels, p.drawn.levels, p.offerAlert);
  drawWallTable(p.wallsT, p.lastWalls, p.offerAlert);
  if (p.chart && p.drawn.candles && p.drawn.levels) p.handle.ready = true;
}

const sameWall = (a, b) => a.side === b.side && a.price === b.price;

// One message of the pair's stream: its price, its levels (a snapshot, or one broken) or its walls.
function onPairMessage(p, m) {
  if (!current(p.gen) || !m.data) return;
  const d = m.data;
  if (m.channel.startsWith('perp:') || m.channel.startsWith('liquidations:')) {
    p.perp.onMessage(m);
    return;
  }
  if (m.channel.startsWith('price:')) {
    if (isNum(d.price)) {
      say(p.price, fmtPrice(d.price));
      p.lastPrice = d.price;
    }
    return;
  }
  if (m.type === 'snapshot' && Array.isArray(d.levels)) {
    p.lastLevels = d.levels;
    p.drawn.levels = true;
  } else if (m.type === 'level.broken' && d.level) {
    p.lastLevels = p.lastLevels.filter((l) => l.price !== d.level.price);
  } else if (m.type === 'snapshot' && d.snapshot) {
    p.lastWalls = Array.isArray(d.snapshot.walls) ? d.snapshot.walls : [];
  } else if ((m.type === 'wall.appeared' || m.type === 'wall.changed') && d.wall) {
    p.lastWalls = p.lastWalls.filter((w) => !sameWall(w, d.wall)).concat([d.wall]);
  } else if (m.type === 'wall.gone' && d.wall) {
    p.lastWalls = p.lastWalls.filter((w) => !sameWall(w, d.wall));
  } else return;
  redraw(p);
}

async function loadSymbol(p) {
  try {
    const r = await call('GET', v1('symbols/' + enc(p.symbol), { exchange: p.exchange }));
    if (current(p.gen) && r.data) {
      p.tickSize = r.data.tickSize;
      if (p.chart) p.chart.setTick(p.tickSize);
    }
    if (current(p.gen) && r.data && !p.price.textContent) say(p.price, fmtPrice(r.data.price));
  } catch (e) { /* candles and levels report the problem */ }
}

// The candles (only once the chart can draw them: its library loads first, and asks for them all
// then), the levels and walls unless the stream keeps them, and the metrics of the timeframe.
function pairRequests(p, tf, wantAll, live) {
  const at = { exchange: p.exchange };
  const sym = enc(p.symbol);
  return [
    p.chart ? call('GET', v1('candles/' + sym, { exchange: p.exchange, interval: tf, limit: wantAll ? CANDLE_LIMIT : 3 })) : Promise.resolve(null),
    live ? Promise.resolve(null) : call('GET', v1('levels/' + sym, at)),
    live ? Promise.resolve(null) : call('GET', v1('densities/' + sym, at)),
    call('GET', v1('metrics/' + sym, { exchange: p.exchange, interval: tf })),
  ];
}

/** Reads the page's data again (`full`: every candle) and draws it; problems are said in the page's error line. */
async function refreshPair(p, full) {
  const tf = state.pairInterval;
  const wantAll = full || !p.drawn.candles;
  // Levels and walls come from the stream, also while it connects (polling the walls of a
  // pair without any answers 404 at every round).
  const live = p.stream.waiting();
  const [candles, levels, dens, metrics] = await Promise.allSettled(pairRequests(p, tf, wantAll, live));
  if (!current(p.gen) || tf !== state.pairInterval) return;
  const problems = [];
  takeCandles(p, candles, wantAll, problems);
  takeWalls(p, dens, problems);
  if (levels.status === 'fulfilled' && levels.value !== null) {
    p.lastLevels = Array.isArray(levels.value.data) ? levels.value.data : [];
    p.drawn.levels = true;
  } else if (levels.status !== 'fulfilled') problems.push('Levels: ' + errText(levels.reason));
  redraw(p);
  if (metrics.status === 'fulfilled') {
    drawMetrics(p.metricsBox, metrics.value, tf);
    p.perp.metrics(metrics.value, tf);
  } else problems.push('Metrics: ' + errText(metrics.reason));
  if (!live && !full && p.perp.has()) p.perp.read(); // the stream keeps the perpetual while it is open
  say(p.error, problems.join(' '));
}

function takeCandles(p, candles, wantAll, problems) {
  if (candles.status === 'fulfilled' && candles.value === null) return; // no chart yet
  if (candles.status !== 'fulfilled') {
    problems.push('Candles: ' + errText(candles.reason));
    return;
  }
  const bars = Array.isArray(candles.value.data) ? candles.value.data : [];
  p.drawn.candles = p.chart ? p.chart.candles(bars, wantAll) : false;
  const last = bars[bars.length - 1];
  if (last && isNum(last.close)) {
    say(p.price, fmtPrice(last.close));
    p.lastPrice = last.close;
  }
}

function takeWalls(p, dens, problems) {
  if (dens.status === 'fulfilled' && dens.value === null) return; // the stream keeps the walls
  if (dens.status === 'fulfilled') {
    const d = dens.value.data || {};
    p.lastWalls = Array.isArray(d.walls) ? d.walls : [];
  } else if (dens.reason && dens.reason.status === 404) {
    p.lastWalls = []; // no wall at this moment (or an unknown pair, which the levels call reports)
  } else problems.push('Walls: ' + errText(dens.reason));
}

// Makes an alert a level or wall offered (a table's row or the chart's line), on this pair;
// says what became of it in `status` or `error`.
async function offerAlert(p, body, label, status, error) {
  try {
    const r = await call('POST', v1('alerts'), { symbol: p.symbol, exchange: p.exchange, ...body });
    say(error, '');
    say(status, label + ': alert #' + (r.data && r.data.id) + ' created.');
    p.loadAlerts();
  } catch (e) {
    say(status, '');
    say(error, label + ': ' + inWords(errText(e))); // the API's field names in the site's words
  }
}

// The wall history is read when the page opens and then every half minute: it changes at wall
// scans, and each read counts against the site's budget.
const WALL_HISTORY_REFRESH_MS = 30_000;

async function loadWallHistory(p) {
  try {
    const r = await call('GET', v1('walls/' + enc(p.symbol) + '/history', { exchange: p.exchange, limit: 50 }));
    if (!current(p.gen)) return;
    drawWallHistory(p.historyT, Array.isArray(r.data) ? r.data : []);
  } catch (e) {
    if (current(p.gen)) failTable(p.historyT, errText(e));
  }
}

async function loadPairAlerts(p) {
  try {
    const r = await call('GET', v1('alerts', { status: 'all' }));
    if (!current(p.gen)) return;
    const mine = (r.data || []).filter((a) => a.exchange === p.exchange && (a.symbol === p.symbol || a.symbol === EVERY_PAIR));
    fillTable(p.alertsT, mine.map((a) => alertRow(a, p.loadAlerts, p.alertsError)), 'No alert on this pair yet.');
    clearTimeout(p.wake); // read again when an alert stops cooling down (its row's words change)
    const ms = nextStateChange(mine);
    if (ms) p.wake = later(ms + 250, p.loadAlerts);
    p.lastAlerts = mine.filter((a) => a.type === 'price' && a.status === 'active' && !deleteWaits(alertPath(a)));
    redraw(p);
  } catch (e) {
    if (current(p.gen)) failTable(p.alertsT, errText(e));
  }
}
