// The pair page's perpetual (decisions.md §17): mark price, funding with its interval and next time, open interest and its change, liquidations over the timeframe and the newest ones, live from the stream.

import { completenessWords, fmtRate, sideWords, untilWords } from './derivatives.js';
import { h, say } from './dom.js';
import { fmtCompact, fmtInt, fmtPct, fmtPrice, fmtUsd, isNum, signClass } from './format.js';
import { call, enc, errText, v1 } from './http.js';
import { fillTable, table } from './tables.js';
import { fmtTime, timeEl } from './time.js';
import { venueName } from './values.js';

const LIQ_SHOWN = 20; // the newest liquidations listed (the server holds a pair's newest 128)

// The panel's numbers: [key, label]; a label ending in a space takes the page's timeframe.
const FIELDS = [
  ['mark', 'Mark price'], ['funding', 'Funding'], ['next-funding', 'Next funding'],
  ['oi', 'Open interest'], ['oi-change', 'Open interest change '], ['liq', 'Liquidated '],
];

/**
 * The panel of `symbol`'s perpetual on `exchange`: {el, channels, load, read, has, onMessage, metrics}.
 * `load()` reads it once and answers whether the pair has a perpetual (then its stream channels
 * are worth opening); `read()` polls it while the stream is not live; `onMessage(m)` takes a
 * `perp:` or `liquidations:` message; `metrics(answer, tf)` the page's metrics of its timeframe
 * (open interest change and liquidations over it). `data-perp` says `loading`, `yes`, `none`
 * (the venue lists no perpetual for the pair) or `error`.
 */
export function perpPanel(exchange, symbol) {
  const x = { exchange: exchange, symbol: symbol, perp: null, liqs: [], completeness: null, metrics: null, tf: '', dd: {}, dt: {} };
  x.box = h('section', { class: 'panel perp', testid: 'pair-perp', 'data-perp': 'loading', 'aria-labelledby': 'perp-h', 'aria-busy': 'true' });
  x.title = h('h2', { id: 'perp-h', text: 'Perpetual' });
  x.note = h('p', { class: 'muted', testid: 'perp-note', text: 'Loading…' });
  x.dl = h('dl', { hidden: true }, FIELDS.map(([k, label]) => {
    x.dt[k] = h('dt', { text: label });
    x.dd[k] = h('dd', { testid: 'perp-' + k, text: '–' });
    return h('div', null, x.dt[k], x.dd[k]);
  }));
  x.liqT = table('perp-liquidations', 'The newest liquidations of ' + symbol + ', newest first', ['Time', 'Position', ['Price', 'num'], ['Quantity', 'num'], ['USD', 'num']]);
  x.liqT.wrap.hidden = true;
  x.liqT.scroll.classList.add('tall'); // as the levels: a box of its own that scrolls
  x.liqT.scroll.setAttribute('tabindex', '0');
  x.liqT.scroll.setAttribute('aria-label', 'Liquidations (scrolls)');
  x.liqNote = h('p', { class: 'hint', testid: 'perp-completeness' });
  x.box.append(x.title, x.note, x.dl, x.liqT.wrap, x.liqNote);
  return {
    el: x.box,
    channels: () => ['perp', 'liquidations'].map((c) => c + ':' + exchange + ':' + symbol),
    load: () => read(x).then(() => x.box.getAttribute('data-perp') === 'yes'),
    read: () => read(x),
    has: () => x.box.getAttribute('data-perp') === 'yes',
    onMessage: (m) => onMessage(x, m),
    metrics: (r, tf) => {
      x.metrics = r && r.data ? r.data : null;
      x.tf = tf;
      draw(x);
    },
  };
}

// The pair's perpetual and its liquidations of the last 24 h, read once.
async function read(x) {
  const sym = enc(x.symbol);
  // The liquidations are asked for only once the pair is known to have a perpetual.
  const perp = await settled(call('GET', v1('perp/' + sym, { exchange: x.exchange })));
  const liqs = perp.status === 'fulfilled' ? await settled(call('GET', v1('liquidations/' + sym, { exchange: x.exchange }))) : null;
  if (perp.status !== 'fulfilled') {
    const none = perp.reason && perp.reason.status === 404 && /no perpetual contract/.test(errText(perp.reason));
    x.box.setAttribute('data-perp', none ? 'none' : 'error');
    x.box.setAttribute('aria-busy', 'false');
    x.dl.hidden = true;
    x.liqT.wrap.hidden = true;
  x.liqT.scroll.classList.add('tall'); // as the levels: a box of its own that scrolls
  x.liqT.scroll.setAttribute('tabindex', '0');
  x.liqT.scroll.setAttribute('aria-label', 'Liquidations (scrolls)');
    say(x.note, none ? x.symbol + ' has no perpetual contract on ' + venueName(x.exchange) + '.' : 'Perpetual: ' + errText(perp.reason));
    return;
  }
  x.perp = perp.value.data || null;
  if (liqs.status === 'fulfilled') {
    x.liqs = Array.isArray(liqs.value.data) ? liqs.value.data.slice(0, LIQ_SHOWN) : [];
    x.completeness = liqs.value.completeness || null;
  }
  draw(x);
  drawLiqs(x);
}

const settled = (promise) => promise.then((value) => ({ status: 'fulfilled', value: value }), (reason) => ({ status: 'rejected', reason: reason }));

// A message of the pair's `perp` or `liquidations` channel.
function onMessage(x, m) {
  const d = m.data;
  if (!d) return;
  if (m.channel.startsWith('perp:')) {
    x.perp = d;
    draw(x);
  } else if (m.type === 'snapshot' && Array.isArray(d.liquidations)) {
    x.liqs = d.liquidations.slice(0, LIQ_SHOWN);
    x.completeness = d.completeness || x.completeness;
    drawLiqs(x);
  } else if (m.type === 'liquidation' && d.liquidation) {
    x.liqs = [d.liquidation].concat(x.liqs).slice(0, LIQ_SHOWN);
    drawLiqs(x);
  }
}

const stale = (o) => (o && o.stale ? ' (stale: no update for a minute)' : '');

// The perpetual's numbers, from its last read or message and the page's metrics.
function draw(x) {
  const p = x.perp;
  if (!p) return;
  x.box.setAttribute('data-perp', 'yes');
  x.box.setAttribute('aria-busy', 'false');
  x.dl.hidden = false;
  say(x.title, 'Perpetual · ' + p.contract + (p.multiplier > 1 ? ' (' + p.multiplier + ' ' + baseOf(x.symbol) + ' a contract)' : ''));
  say(x.note, 'The USDT-margined perpetual of ' + x.symbol + ' on ' + venueName(x.exchange) + ', in units of the spot pair.');
  const f = p.funding;
  say(x.dd.mark, fmtPrice(p.markPrice));
  say(x.dd.funding, f ? fmtRate(f.rate) + ' per ' + f.intervalH + ' h' + (f.intervalH !== 8 ? ' (' + fmtRate(f.rate8h) + ' per 8 h)' : '') + stale(f) : 'not known yet');
  x.dd.funding.className = f ? signClass(f.rate) : '';
  say(x.dd['next-funding'], f && isNum(f.nextTime) ? fmtTime(f.nextTime) + ', ' + untilWords(f.nextTime, Date.now()) : '–');
  const oi = p.oi;
  say(x.dd.oi, oi ? fmtCompact(oi.base) + ' ' + baseOf(x.symbol) + (isNum(oi.usd) ? ' (' + fmtUsd(oi.usd) + ')' : '') + stale(oi) : 'not known yet');
  drawWindow(x);
}

// Open interest change and liquidations over the page's timeframe (the pair's metrics).
function drawWindow(x) {
  const m = x.metrics || {};
  say(x.dt['oi-change'], 'Open interest change (' + x.tf + ')');
  say(x.dt.liq, 'Liquidated (' + x.tf + ')');
  say(x.dd['oi-change'], isNum(m.oiChange) ? fmtPct(m.oiChange, true) : 'not known yet');
  x.dd['oi-change'].className = signClass(m.oiChange);
  const l = m.liquidations;
  const none = x.completeness === 'none';
  say(x.dd.liq, none ? 'none published' : l ? 'longs ' + fmtUsd(l.longUsd) + ' (' + fmtInt(l.longCount) + '), shorts ' + fmtUsd(l.shortUsd) + ' (' + fmtInt(l.shortCount) + ')'
    : 'not known yet (the window is not watched in full)');
}

function drawLiqs(x) {
  const none = x.completeness === 'none';
  x.liqT.wrap.hidden = !x.perp;
  say(x.liqNote, completenessWords(x.completeness, x.exchange));
  const rows = x.liqs.map((l) => h('tr', { 'data-time': l.time, 'data-side': l.side, 'data-usd': l.usd },
    h('td', null, timeEl(l.time)),
    h('td', { class: l.side === 'long' ? 'down' : 'up', text: sideWords(l.side).replace(/s$/, '') }),
    h('td', { class: 'num', text: fmtPrice(l.price) }),
    h('td', { class: 'num', text: fmtPrice(l.qty) }),
    h('td', { class: 'num', text: fmtUsd(l.usd) })));
  fillTable(x.liqT, rows, none ? venueName(x.exchange) + ' publishes no liquidations.' : 'No liquidation in the last 24 h.');
  drawWindow(x);
}

// The base asset of a USDT pair (§17: perpetuals are mapped onto the venue's XUSDT pair).
function baseOf(symbol) { return symbol.endsWith('USDT') ? symbol.slice(0, -4) : ''; }
