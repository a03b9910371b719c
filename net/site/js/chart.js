// The pair page's candle chart (the vendored TradingView Lightweight Charts, loaded on that page only): candles and price lines.

import { fmtPrice, isNum } from './format.js';
import { zoneOffsetMin } from './time.js';

const LEVELS_NEAR = 6; // levels drawn on the chart unless "all lines" is chosen: the nearest
const WALLS_TOP = 4; // walls drawn likewise: the largest in USD

/** `window.rampartChart` with no chart: what the browser test reads on any page. */
export function resetChartHandle() {
  window.rampartChart = { ready: false, priceLines: () => [], lastBarTime: () => null };
}

// The chart library (198 kB) is loaded by the pair page only, once: the other pages never
// need it (measured in perf/site-pages.md). Rationale: it is a classic script that defines the
// global `LightweightCharts`, vendored unchanged, so it is added as a <script> element rather
// than imported as a module.
let chartLib = null;

/** Loads the chart library; resolves false when it cannot be loaded. */
export function loadChartLib() {
  if (window.LightweightCharts) return Promise.resolve(true);
  if (!chartLib) {
    chartLib = new Promise((resolve) => {
      const script = document.createElement('script');
      script.src = '/assets/lightweight-charts.js';
      script.addEventListener('load', () => resolve(true));
      script.addEventListener('error', () => { chartLib = null; resolve(false); });
      document.head.append(script);
    });
  }
  return chartLib;
}

/** The chart's colours and line styles, from the page's CSS variables. */
function chartStyle(LWC) {
  const css = getComputedStyle(document.documentElement);
  const color = (name, fallback) => (css.getPropertyValue(name) || fallback).trim() || fallback;
  return {
    color: color,
    up: color('--up', '#127a3e'),
    down: color('--down', '#c0262d'),
    dashed: LWC.LineStyle ? LWC.LineStyle.Dashed : 2,
    solid: LWC.LineStyle ? LWC.LineStyle.Solid : 0,
    dotted: LWC.LineStyle ? LWC.LineStyle.Dotted : 1,
    accent: color('--accent', '#1f5fbf'),
  };
}

function createChart(LWC, box, style) {
  const color = style.color;
  return LWC.createChart(box, {
    autoSize: true,
    layout: {
      attributionLogo: false, // its logo injects an inline <style>, which the CSP refuses; the footer credits TradingView
      background: { color: color('--panel', '#ffffff') },
      textColor: color('--fg', '#14171c'),
      fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif',
    },
    grid: { vertLines: { color: color('--line', '#d9dde3') }, horzLines: { color: color('--line', '#d9dde3') } },
    timeScale: { timeVisible: true, secondsVisible: false, rightOffset: 6 },
    rightPriceScale: { borderColor: color('--line', '#d9dde3') },
  });
}

/** The chart of a pair: candles and price lines; null when the library is missing. */
export function makeChart(box) {
  const LWC = window.LightweightCharts;
  if (!LWC || typeof LWC.createChart !== 'function') return null;
  const style = chartStyle(LWC);
  const { up, down } = style;
  const chart = createChart(LWC, box, style);
  const series = chart.addSeries(LWC.CandlestickSeries, {
    upColor: up, downColor: down, borderUpColor: up, borderDownColor: down, wickUpColor: up, wickDownColor: down,
    priceLineVisible: false,
  });
  const bars = candleFeed(series);
  const lines = new Map(); // key -> {line: IPriceLine, name}
  return {
    candles: bars.candles,
    lines: (levels, walls, alerts, all, price) => drawLines(series, lines, wantedLines(style, levels, walls, alerts, all, price)),
    setTick: (tick) => setTick(series, tick),
    lastBarTime: bars.lastBarTime,
    priceLines: () => Array.from(lines.values()).map((l) => ({ price: l.line.options().price, title: l.name })),
    remove: () => chart.remove(),
  };
}

/** The series' bars: `candles(bars, all)` sets them all or updates the newest; false when the chart needs a full reload. */
function candleFeed(series) {
  let lastTime = -Infinity;
  function candles(bars, all) {
    const data = [];
    for (const b of bars) {
      if (!b || !isNum(b.openTime)) continue;
      // The library shows its times as UTC: shifted by the zone's offset they read as the
      // stated zone's wall clock, axis and crosshair alike.
      const t = Math.floor((b.openTime + zoneOffsetMin(b.openTime) * 60000) / 1000);
      if (data.length && data[data.length - 1].time >= t) continue;
      data.push({ time: t, open: b.open, high: b.high, low: b.low, close: b.close });
    }
    if (all) {
      series.setData(data);
      lastTime = data.length ? data[data.length - 1].time : -Infinity;
      return true;
    }
    try {
      for (const bar of data) {
        if (bar.time < lastTime) continue;
        series.update(bar);
        lastTime = bar.time;
      }
      return true;
    } catch (e) {
      return false;
    }
  }
  return { candles: candles, lastBarTime: () => (isFinite(lastTime) ? lastTime : null) };
}

/**
 * The lines to draw: the user's active price alerts on the pair, the served levels and walls.
 * Unless `all`, only the LEVELS_NEAR levels nearest `price` and the WALLS_TOP largest walls (in
 * USD). {want: key -> line, counts: {levels, of, walls, ofWalls}}.
 */
function wantedLines(style, levels, walls, alerts, all, price) {
  const want = new Map();
  for (const a of alerts || []) {
    if (!a || !isNum(a.price)) continue;
    want.set('A|' + a.id, {
      name: 'alert #' + a.id + ' ' + (a.direction === 'above' ? '▲' : '▼'),
      price: a.price, color: style.accent, lineWidth: 1, lineStyle: style.dotted, axisLabelVisible: true,
    });
  }
  const near = (l) => (isNum(price) ? Math.abs(l.price - price) : 0);
  const shownLevels = levels.filter((l) => l && isNum(l.price)).sort((a, b) => near(a) - near(b)).slice(0, all ? Infinity : LEVELS_NEAR);
  for (const l of shownLevels) {
    const support = l.type === 'support';
    want.set('L|' + l.type + '|' + l.price, {
      name: (support ? 'S ' : 'R ') + fmtPrice(l.price),
      price: l.price, color: support ? style.up : style.down, lineWidth: Math.min(1 + Math.max(0, (l.strength || 1) - 1), 3),
      lineStyle: style.solid, axisLabelVisible: true,
    });
  }
  const usd = (w) => (isNum(w.usd) ? w.usd : 0);
  const shownWalls = walls.filter((w) => w && isNum(w.price)).sort((a, b) => usd(b) - usd(a)).slice(0, all ? Infinity : WALLS_TOP);
  for (const w of shownWalls) {
    const bid = w.side === 'bid';
    want.set('W|' + w.side + '|' + w.price, {
      name: 'wall ' + (bid ? 'bid' : 'ask'),
      price: w.price, color: bid ? style.up : style.down, lineWidth: 2, lineStyle: style.dashed, axisLabelVisible: true,
    });
  }
  return { want: want, counts: { levels: shownLevels.length, of: levels.length, walls: shownWalls.length, ofWalls: walls.length } };
}

/**
 * Draws the wanted lines: lines no longer wanted go, new ones come. No line has a title in the
 * pane (a title there covers the newest candles): each is told by its colour and style, its
 * price on the scale, and the legend; `priceLines()` names them for the tests.
 */
function drawLines(series, lines, wanted) {
  const want = wanted.want;
  lines.forEach((line, key) => {
    if (!want.has(key)) {
      series.removePriceLine(line.line);
      lines.delete(key);
    }
  });
  want.forEach((o, key) => {
    const opts = { price: o.price, color: o.color, lineWidth: o.lineWidth, lineStyle: o.lineStyle, axisLabelVisible: o.axisLabelVisible, title: '' };
    if (lines.has(key)) lines.get(key).line.applyOptions(opts);
    else lines.set(key, { line: series.createPriceLine(opts), name: o.name });
  });
  return wanted.counts;
}

/** The price scale's precision from the pair's tick size. */
function setTick(series, tick) {
  if (!isNum(tick) || tick <= 0) return;
  const text = String(tick);
  const m = /e-(\d+)$/.exec(text);
  const decimals = m ? Number(m[1]) : (text.split('.')[1] || '').length;
  series.applyOptions({ priceFormat: { type: 'price', precision: Math.min(decimals, 10), minMove: tick } });
}
