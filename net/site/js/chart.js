// The pair page's candle chart (the vendored TradingView Lightweight Charts, loaded on that page only): candles, price lines, and the markers by which its levels and walls offer their alerts.

import { chartMarks } from './chart-marks.js';
import { fmtPrice, isNum } from './format.js';
import { zoneOffsetMin } from './time.js';

const LEVELS_NEAR = 6; // levels drawn on the chart unless "all lines" is chosen: the nearest
const WALLS_TOP = 4; // walls drawn likewise: the largest in USD

/** `window.rampartChart` with no chart: what the browser test reads on any page. */
export function resetChartHandle() {
  window.rampartChart = { ready: false, priceLines: () => [], lastBarTime: () => null, y: () => null };
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

/**
 * The chart of a pair: candles and price lines; null when the library is missing. Its level
 * lines and walls offer their alerts through markers in `layer` (laid over `box`): `alert(body,
 * label)` makes one.
 */
export function makeChart(box, layer, alert) {
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
  const y = (price) => lineY(chart, series, price);
  const marks = chartMarks(layer, y, alert);
  const scales = watchScales(chart, box, marks);
  return {
    candles: (list, all) => { const ok = bars.candles(list, all); scales.later(); return ok; },
    lines: (levels, walls, alerts, all, price) => {
      const wanted = wantedLines(style, levels, walls, alerts, all, price);
      drawLines(series, lines, wanted);
      marks.draw(wanted.marks);
      scales.later();
      return wanted.counts;
    },
    setTick: (tick) => setTick(series, tick),
    lastBarTime: bars.lastBarTime,
    priceLines: () => Array.from(lines.values()).map((l) => ({ price: l.line.options().price, title: l.name })),
    y: y,
    remove: () => { scales.stop(); marks.remove(); chart.remove(); },
  };
}

/** Where the chart draws `price`, in pixels from its pane's top; null off the pane. */
function lineY(chart, series, price) {
  const y = series.priceToCoordinate(price);
  return y === null || y < 0 || y > chart.paneSize().height ? null : y;
}

/**
 * Keeps the markers on their lines: after a scroll or zoom of either scale, a resize, and
 * (`later()`) new candles or lines, once the chart has drawn them. `stop()` ends it.
 */
function watchScales(chart, box, marks) {
  let frame = 0;
  const later = () => {
    if (frame) return;
    // The chart draws on its next frame; the markers follow on the one after.
    frame = requestAnimationFrame(() => { frame = requestAnimationFrame(() => { frame = 0; marks.place(); }); });
  };
  // Opened once the click's pointer events are over: a popover opened during them is closed
  // again at once as a click outside it.
  const onClick = (param) => { if (param.point) setTimeout(() => marks.at(param.point.y), 0); };
  chart.timeScale().subscribeVisibleLogicalRangeChange(later);
  chart.subscribeClick(onClick);
  const resized = new ResizeObserver(later);
  resized.observe(box);
  box.addEventListener('wheel', later, { passive: true });
  box.addEventListener('pointerup', later);
  return {
    later: later,
    stop: () => {
      resized.disconnect();
      chart.timeScale().unsubscribeVisibleLogicalRangeChange(later);
      chart.unsubscribeClick(onClick);
      if (frame) cancelAnimationFrame(frame);
    },
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
 * USD). {want: key -> line, marks: the level and wall lines for their markers, counts: {levels,
 * of, walls, ofWalls}}.
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
      lineStyle: style.solid, axisLabelVisible: true, mark: { kind: 'level', of: l },
    });
  }
  const usd = (w) => (isNum(w.usd) ? w.usd : 0);
  const shownWalls = walls.filter((w) => w && isNum(w.price)).sort((a, b) => usd(b) - usd(a)).slice(0, all ? Infinity : WALLS_TOP);
  for (const w of shownWalls) {
    const bid = w.side === 'bid';
    want.set('W|' + w.side + '|' + w.price, {
      name: 'wall ' + (bid ? 'bid' : 'ask'),
      price: w.price, color: bid ? style.up : style.down, lineWidth: 2, lineStyle: style.dashed, axisLabelVisible: true,
      mark: { kind: 'wall', of: w },
    });
  }
  const marks = [];
  want.forEach((o, key) => { if (o.mark) marks.push({ key: key, price: o.price, kind: o.mark.kind, of: o.mark.of }); });
  return { want: want, marks: marks, counts: { levels: shownLevels.length, of: levels.length, walls: shownWalls.length, ofWalls: walls.length } };
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
}

/** The price scale's precision from the pair's tick size. */
function setTick(series, tick) {
  if (!isNum(tick) || tick <= 0) return;
  const text = String(tick);
  const m = /e-(\d+)$/.exec(text);
  const decimals = m ? Number(m[1]) : (text.split('.')[1] || '').length;
  series.applyOptions({ priceFormat: { type: 'price', precision: Math.min(decimals, 10), minMove: tick } });
}
