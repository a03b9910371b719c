// The create forms of alerts: price, percent, level, wall, liquidations, open interest and funding (POST /site/v1/alerts), the site's density alert (a wall alert on "appeared", every plan) and market alerts (POST /site/site-alerts), and the pair page's price alert.

import { LIQ_WINDOWS, OI_WINDOWS } from './derivatives.js';
import { errorBox, h, say, statusBox } from './dom.js';
import { field, numberInput, options, submitting } from './forms.js';
import { call, v1 } from './http.js';
import { BOARD_NUMBERS, EVERY_PAIR, INTERVALS, VENUE_WIDE_TYPES } from './values.js';
import { suggest, venueOptions } from './venues.js';

const TYPE_NAMES = { price: 'Price', pct: 'Percent', level: 'Level', wall: 'Wall', liquidations: 'Liquidations', oi: 'Open interest', funding: 'Funding' };

/** The types of the create form: [value, words]; the last three need the pair's perpetual (decisions.md §17). */
const TYPES = [
  ['price', 'Price crosses a level'], ['pct', 'Percent move'], ['level', 'A support or resistance is approached, touched or broken'],
  ['wall', 'A wall appears, is pulled or is filled'], ['liquidations', 'Liquidations (perpetual): one large, or a sum over a window'],
  ['oi', 'Open interest moves (perpetual)'], ['funding', 'Funding crosses a rate (perpetual)'],
];

/** The fields a level or wall alert adds (decisions.md §15). */
function structureFields() {
  return {
    event: field('Event', 'event', 'select', { options: [] }),
    within: field('Within %', 'within_pct', 'text', { inputmode: 'decimal', placeholder: '0.5', hint: 'How near the level the price must come (0.05 to 10).' }),
    minStrength: field('Minimum strength', 'min_strength', 'text', { inputmode: 'numeric', placeholder: '1' }),
    minUsd: field('Minimum wall value (USD)', 'min_usd', 'text', { inputmode: 'decimal', placeholder: 'e.g. 2000000' }),
    maxDist: field('Maximum distance from price (%)', 'max_dist_pct', 'text', { inputmode: 'decimal', placeholder: '5' }),
    minAge: field('Minimum age (s)', 'min_age_s', 'text', { inputmode: 'numeric', placeholder: '0' }),
    fundingPct: field('Funding rate (% per 8 h)', 'funding_pct', 'text', { inputmode: 'decimal', placeholder: 'e.g. 0.05', hint: 'From −50 to 50; the venue’s rate for the contract’s interval, scaled to 8 hours.' }),
  };
}

/** Create form of price, percent, level and wall alerts (POST /site/v1/alerts, the API's body without webhook_url). */
export function alertForm(created) {
  const listId = 'symbols-alert-form';
  const venue = field('Venue', 'exchange', 'select', { options: venueOptions(), value: 'binance' });
  const scope = field('Watch', 'scope', 'select', { options: [['pair', 'One pair'], ['venue', 'Whole venue (every pair)']] });
  const symbol = field('Pair', 'symbol', 'text', { placeholder: 'BTCUSDT', list: listId, required: true });
  const type = field('Type', 'type', 'select', { options: TYPES });
  const direction = field('Direction', 'direction', 'select', { options: [] });
  const price = field('Price', 'price', 'text', { inputmode: 'decimal', placeholder: 'e.g. 65000' });
  const pct = field('Move %', 'pct', 'text', { inputmode: 'decimal', placeholder: '0.1 to 500' });
  const windowF = field('Window', 'window', 'select', { options: options(INTERVALS), value: '1h', hint: 'Measured from the open of the current candle.' });
  const repeat = field('Repeat (fire again after re-arming)', 'repeat', 'checkbox');
  const cooldown = field('Quiet time after a firing (s)', 'cooldown_s', 'text', {
    inputmode: 'numeric', placeholder: '0', hint: 'Per pair, at most 86400; a whole venue’s is 900 unless given.',
  });
  const note = field('Note', 'note', 'text', { maxlength: 500 });
  const s = structureFields();
  const f = { venue: venue, scope: scope, symbol: symbol, type: type, direction: direction, price: price, pct: pct, windowF: windowF, repeat: repeat, cooldown: cooldown, note: note, s: s };
  const datalist = h('datalist', { id: listId });
  const error = errorBox('alert-error');
  const status = statusBox('alert-status');
  const submit = h('button', { type: 'submit', text: 'Create alert' });
  const sync = () => syncAlertType(f);
  // A whole venue's alert usually keeps watching: choosing it ticks Repeat (it can be unticked:
  // then the alert ends with its first delivery).
  scope.input.addEventListener('change', () => { if (wholeVenue(f)) repeat.input.checked = true; });
  [type, scope, repeat, s.event].forEach((x) => x.input.addEventListener('change', sync));
  venue.input.addEventListener('change', () => suggest(datalist, venue.input.value));
  sync();
  suggest(datalist, venue.input.value);

  const form = h('form', { testid: 'alert-form', 'aria-labelledby': 'af-h', novalidate: true },
    h('h3', { id: 'af-h', text: 'New alert' }),
    h('div', { class: 'fields' }, venue.wrap, type.wrap, scope.wrap, symbol.wrap, s.event.wrap, direction.wrap, price.wrap, pct.wrap, windowF.wrap,
      s.within.wrap, s.minStrength.wrap, s.minUsd.wrap, s.maxDist.wrap, s.minAge.wrap, s.fundingPct.wrap, note.wrap, repeat.wrap, cooldown.wrap),
    datalist, h('div', { class: 'actions' }, submit), error, status);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const kind = type.input.value;
    const body = alertBody(f);
    await submitting(submit, error, status, async () => {
      const r = await call('POST', v1('alerts'), body);
      say(status, TYPE_NAMES[kind] + ' alert #' + (r.data && r.data.id) + ' created.');
      [price, pct, note, cooldown, s.within, s.minStrength, s.minUsd, s.maxDist, s.minAge, s.fundingPct].forEach((x) => { x.input.value = ''; });
      created();
    });
  });
  return form;
}

const DIRECTIONS = {
  price: [['above', 'above'], ['below', 'below']],
  pct: [['up', 'up'], ['down', 'down'], ['any', 'either way']],
  level: [['any', 'support or resistance'], ['above', 'resistance (above the price)'], ['below', 'support (below the price)']],
  wall: [['any', 'bid or ask'], ['bid', 'bid (buy wall)'], ['ask', 'ask (sell wall)']],
  liquidations: [['any', 'longs or shorts'], ['long', 'longs (forced sells)'], ['short', 'shorts (forced buys)']],
  oi: [['up', 'up'], ['down', 'down'], ['any', 'either way']],
  funding: [['above', 'rises to'], ['below', 'falls to']],
};
const EVENTS = {
  level: [['approach', 'approached'], ['touch', 'touched'], ['break', 'broken']],
  wall: [['appeared', 'appears'], ['pulled', 'is pulled'], ['filled', 'is filled']],
  liquidations: [['order', 'one liquidation worth at least'], ['sum', 'liquidations over a window summing to at least']],
};
// What the form's shared fields are called, and what its window offers, for each type.
const MIN_USD_LABELS = { wall: 'Minimum wall value (USD)', liquidations: 'Minimum liquidation value (USD)', oi: 'Least open interest (USD)' };
const WINDOWS = { pct: INTERVALS, liquidations: LIQ_WINDOWS, oi: OI_WINDOWS };
const WINDOW_HINTS = { pct: 'Measured from the open of the current candle.', liquidations: 'A rolling window, in 60 slots.', oi: 'A rolling window, in 60 slots; the change is in the contract’s base units.' };

// Replaces a select's options, keeping its value when the new ones have it.
function choices(select, list) {
  const keep = select.value;
  select.replaceChildren(...list.map(([v, t]) => h('option', { value: v, text: t })));
  if (list.some((d) => d[0] === keep)) select.value = keep;
}

// Whether the form watches every pair of its venue: a choice of the types that may.
function wholeVenue(f) {
  return VENUE_WIDE_TYPES.indexOf(f.type.input.value) >= 0 && f.scope.input.value === 'venue';
}

// The fields of the chosen type: a price; a move and its window; a level's event and filters; a
// wall's event and filters; the directions of each. A whole venue's alert has no pair and a
// quiet time per pair (900 s unless given).
function syncAlertType(f) {
  const kind = f.type.input.value;
  const venue = wholeVenue(f);
  f.scope.wrap.hidden = VENUE_WIDE_TYPES.indexOf(kind) < 0;
  f.symbol.wrap.hidden = venue;
  f.cooldown.wrap.hidden = !venue && !f.repeat.input.checked;
  f.cooldown.input.placeholder = venue ? '900' : '0';
  choices(f.direction.input, DIRECTIONS[kind]);
  if (EVENTS[kind]) choices(f.s.event.input, EVENTS[kind]);
  f.s.event.wrap.hidden = !EVENTS[kind];
  f.price.wrap.hidden = kind !== 'price';
  f.pct.wrap.hidden = kind !== 'pct' && kind !== 'oi';
  f.windowF.wrap.hidden = !usesWindow(f);
  f.s.within.wrap.hidden = kind !== 'level' || f.s.event.input.value !== 'approach';
  f.s.minStrength.wrap.hidden = kind !== 'level';
  [f.s.maxDist, f.s.minAge].forEach((x) => { x.wrap.hidden = kind !== 'wall'; });
  f.s.minUsd.wrap.hidden = !MIN_USD_LABELS[kind];
  f.s.fundingPct.wrap.hidden = kind !== 'funding';
  relabel(f.s.minUsd, MIN_USD_LABELS[kind]);
  relabel(f.pct, kind === 'oi' ? 'Change %' : 'Move %');
  if (WINDOWS[kind]) {
    choices(f.windowF.input, WINDOWS[kind].map((w) => [w, w]));
    f.windowF.wrap.querySelector('.hint').textContent = WINDOW_HINTS[kind];
  }
}

// Whether the chosen type takes a window: a percent move, open interest, a liquidations sum.
function usesWindow(f) {
  const kind = f.type.input.value;
  return kind === 'pct' || kind === 'oi' || (kind === 'liquidations' && f.s.event.input.value === 'sum');
}

function relabel(x, text) {
  const label = x.wrap.querySelector('label');
  if (label && text && label.textContent !== text) label.textContent = text;
}

function alertBody(f) {
  const kind = f.type.input.value;
  const level = kind === 'level';
  const wall = kind === 'wall';
  const event = EVENTS[kind] ? f.s.event.input.value : undefined;
  const venue = wholeVenue(f);
  return {
    symbol: venue ? EVERY_PAIR : f.symbol.input.value.trim(),
    exchange: f.venue.input.value,
    type: kind,
    direction: f.direction.input.value,
    price: kind === 'price' ? numberInput(f.price.input) : undefined,
    pct: kind === 'pct' || kind === 'oi' ? numberInput(f.pct.input) : undefined,
    window: usesWindow(f) ? f.windowF.input.value : undefined,
    event: event,
    within_pct: level && event === 'approach' ? numberInput(f.s.within.input) : undefined,
    min_strength: level ? numberInput(f.s.minStrength.input) : undefined,
    min_usd: MIN_USD_LABELS[kind] ? numberInput(f.s.minUsd.input) : undefined,
    funding_pct: kind === 'funding' ? numberInput(f.s.fundingPct.input) : undefined,
    max_dist_pct: wall ? numberInput(f.s.maxDist.input) : undefined,
    min_age_s: wall ? numberInput(f.s.minAge.input) : undefined,
    repeat: f.repeat.input.checked ? true : undefined,
    cooldown_s: f.cooldown.wrap.hidden ? undefined : numberInput(f.cooldown.input),
    note: f.note.input.value ? f.note.input.value : undefined,
  };
}

/** The fields of the density (wall appears) and market alert form, in the order it shows them. */
function siteAlertFields(listId) {
  return {
    type: field('Kind', 'type', 'select', { options: [['density', 'A wall appears'], ['market', 'A board number crosses a threshold']] }),
    venue: field('Venue', 'exchange', 'select', { options: venueOptions(), value: 'binance' }),
    symbol: field('Pair', 'symbol', 'text', { placeholder: 'empty: every pair', list: listId }),
    side: field('Side', 'side', 'select', { options: [['any', 'bid or ask'], ['bid', 'bid (buy wall)'], ['ask', 'ask (sell wall)']] }),
    minUsd: field('Minimum wall value (USD)', 'min_usd', 'text', { inputmode: 'decimal', placeholder: 'e.g. 250000' }),
    maxDist: field('Maximum distance from price (%)', 'max_dist_pct', 'text', { inputmode: 'decimal', placeholder: '5' }),
    minAge: field('Minimum age (s)', 'min_age_s', 'text', { inputmode: 'numeric', placeholder: '0' }),
    number: field('Board number', 'number', 'select', { options: BOARD_NUMBERS }),
    interval: field('Interval', 'interval', 'select', { options: options(INTERVALS), value: '1d' }),
    direction: field('Direction', 'direction', 'select', { options: [['above', 'above'], ['below', 'below']] }),
    threshold: field('Threshold', 'threshold', 'text', { inputmode: 'decimal', placeholder: 'e.g. 60', hint: '0–100 for sentiment; US dollars for liquidations and open interest; percent for its change (−100 up) and funding (−50 to 50); a count for the others. It fires when the number reaches the threshold from the other side.' }),
    repeat: field('Repeat', 'repeat', 'checkbox'),
    cooldown: field('Quiet time after a firing (s)', 'cooldown_s', 'text', {
      inputmode: 'numeric', placeholder: '0', hint: 'A repeating alert stays silent this long after each firing (at most 86400).',
    }),
    note: field('Note', 'note', 'text', { maxlength: 500 }),
  };
}

/**
 * Create form of density and market alerts (POST /site/site-alerts, fields of decisions.md §10).
 * A density alert is made as the account's wall alert on "appeared" (§15: listed with the
 * account's alerts, on every plan, within the density-alert cap); a market alert stays the
 * site's own. `created(kind)` is told which ('density' or 'market') so its table is read again.
 */
export function siteAlertForm(created) {
  const listId = 'symbols-site-alert-form';
  const f = siteAlertFields(listId);
  const datalist = h('datalist', { id: listId });
  const error = errorBox('site-alert-error');
  const status = statusBox('site-alert-status');
  const submit = h('button', { type: 'submit', text: 'Create alert' });
  const densityOnly = [f.symbol, f.side, f.minUsd, f.maxDist, f.minAge];
  const marketOnly = [f.number, f.interval, f.direction, f.threshold];

  function syncType() {
    const density = f.type.input.value === 'density';
    // No pair: every pair of the venue, an alert that repeats (decisions.md §15).
    const wide = density && !f.symbol.input.value.trim();
    if (wide !== f.repeat.input.disabled) {
      f.repeat.input.checked = wide;
      f.repeat.input.disabled = wide;
    }
    densityOnly.forEach((x) => { x.wrap.hidden = !density; });
    marketOnly.forEach((x) => { x.wrap.hidden = density; });
    f.cooldown.wrap.hidden = !f.repeat.input.checked;
  }
  f.type.input.addEventListener('change', syncType);
  f.repeat.input.addEventListener('change', syncType);
  f.symbol.input.addEventListener('input', syncType);
  f.venue.input.addEventListener('change', () => suggest(datalist, f.venue.input.value));
  syncType();
  suggest(datalist, f.venue.input.value);

  const form = h('form', { testid: 'site-alert-form', 'aria-labelledby': 'sf-h', novalidate: true },
    h('h3', { id: 'sf-h', text: 'New density or market alert' }),
    h('div', { class: 'fields' }, f.type.wrap, f.venue.wrap, densityOnly.map((x) => x.wrap), marketOnly.map((x) => x.wrap), f.note.wrap, f.repeat.wrap, f.cooldown.wrap),
    datalist, h('div', { class: 'actions' }, submit), error, status);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const density = f.type.input.value === 'density';
    const body = siteAlertBody(f, density);
    await submitting(submit, error, status, async () => {
      const r = await call('POST', '/site/site-alerts', body);
      const id = r.data && r.data.id;
      say(status, density ? 'Wall alert #' + id + ' created (listed with the price, percent, level and wall alerts).' : 'Market alert #' + id + ' created.');
      f.note.input.value = '';
      created(density ? 'density' : 'market');
    });
  });
  return form;
}

function siteAlertBody(f, density) {
  const body = { type: f.type.input.value, exchange: f.venue.input.value };
  if (density) {
    const s = f.symbol.input.value.trim();
    body.symbol = s ? s : undefined;
    body.side = f.side.input.value;
    body.min_usd = numberInput(f.minUsd.input);
    body.max_dist_pct = numberInput(f.maxDist.input);
    body.min_age_s = numberInput(f.minAge.input);
  } else {
    body.number = f.number.input.value;
    body.interval = f.interval.input.value;
    body.direction = f.direction.input.value;
    body.threshold = numberInput(f.threshold.input);
  }
  // A density alert on every pair of the venue repeats (decisions.md §15: repeat false is refused).
  body.repeat = (density && !body.symbol) || f.repeat.input.checked;
  body.cooldown_s = body.repeat ? numberInput(f.cooldown.input) : undefined;
  body.note = f.note.input.value ? f.note.input.value : undefined;
  return body;
}

/** The pair page's form of a price alert on its pair. */
export function pairAlertForm(exchange, symbol, created) {
  const dir = field('Direction', 'direction', 'select', { options: [['above', 'Price rises to'], ['below', 'Price falls to']] });
  const priceIn = field('Price', 'price', 'text', { inputmode: 'decimal', placeholder: 'e.g. 65000' });
  const error = errorBox('pair-alert-error');
  const status = statusBox('pair-alert-status');
  const submit = h('button', { type: 'submit', text: 'Add price alert' });
  const form = h('form', { testid: 'pair-alert-form', 'aria-label': 'New price alert on ' + symbol, novalidate: true },
    h('h3', { text: 'New price alert' }),
    h('div', { class: 'fields' }, dir.wrap, priceIn.wrap),
    h('div', { class: 'actions' }, submit), error, status);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    await submitting(submit, error, status, async () => {
      const r = await call('POST', v1('alerts'), {
        symbol: symbol, exchange: exchange, type: 'price', direction: dir.input.value, price: numberInput(priceIn.input),
      });
      say(status, 'Price alert #' + (r.data && r.data.id) + ' created.');
      priceIn.input.value = '';
      created();
    });
  });
  return form;
}
