// The create forms of alerts: price and percent (POST /site/v1/alerts), wall and market (POST /site/site-alerts), and the pair page's price alert.

import { errorBox, h, say, statusBox } from './dom.js';
import { field, numberInput, options, submitting } from './forms.js';
import { call, v1 } from './http.js';
import { BOARD_NUMBERS, INTERVALS } from './values.js';
import { suggest, venueOptions } from './venues.js';

/** Create form of price and percent alerts (POST /site/v1/alerts, the API's body without webhook_url). */
export function alertForm(created) {
  const listId = 'symbols-alert-form';
  const venue = field('Venue', 'exchange', 'select', { options: venueOptions(), value: 'binance' });
  const symbol = field('Pair', 'symbol', 'text', { placeholder: 'BTCUSDT', list: listId, required: true });
  const type = field('Type', 'type', 'select', { options: [['price', 'Price crosses a level'], ['pct', 'Percent move']] });
  const direction = field('Direction', 'direction', 'select', { options: [] });
  const price = field('Price', 'price', 'text', { inputmode: 'decimal', placeholder: 'e.g. 65000' });
  const pct = field('Move %', 'pct', 'text', { inputmode: 'decimal', placeholder: '0.1 to 500' });
  const windowF = field('Window', 'window', 'select', { options: options(INTERVALS), value: '1h', hint: 'Measured from the open of the current candle.' });
  const repeat = field('Repeat (fire again after re-arming)', 'repeat', 'checkbox');
  const note = field('Note', 'note', 'text', { maxlength: 500 });
  const f = { venue: venue, symbol: symbol, type: type, direction: direction, price: price, pct: pct, windowF: windowF, repeat: repeat, note: note };
  const datalist = h('datalist', { id: listId });
  const error = errorBox('alert-error');
  const status = statusBox('alert-status');
  const submit = h('button', { type: 'submit', text: 'Create alert' });
  const sync = () => syncAlertType(f);
  type.input.addEventListener('change', sync);
  venue.input.addEventListener('change', () => suggest(datalist, venue.input.value));
  sync();
  suggest(datalist, venue.input.value);

  const form = h('form', { testid: 'alert-form', 'aria-labelledby': 'af-h', novalidate: true },
    h('h3', { id: 'af-h', text: 'New price or percent alert' }),
    h('div', { class: 'fields' }, venue.wrap, symbol.wrap, type.wrap, direction.wrap, price.wrap, pct.wrap, windowF.wrap, note.wrap, repeat.wrap),
    datalist, h('div', { class: 'actions' }, submit), error, status);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const isPct = type.input.value === 'pct';
    const body = alertBody(f, isPct);
    await submitting(submit, error, status, async () => {
      const r = await call('POST', v1('alerts'), body);
      say(status, (isPct ? 'Percent' : 'Price') + ' alert #' + (r.data && r.data.id) + ' created.');
      price.input.value = '';
      pct.input.value = '';
      note.input.value = '';
      created();
    });
  });
  return form;
}

// The fields of the chosen type: a price, or a move and its window; the directions of each.
function syncAlertType(f) {
  const isPct = f.type.input.value === 'pct';
  const keep = f.direction.input.value;
  const dirs = isPct ? [['up', 'up'], ['down', 'down'], ['any', 'either way']] : [['above', 'above'], ['below', 'below']];
  f.direction.input.replaceChildren(...dirs.map(([v, t]) => h('option', { value: v, text: t })));
  if (dirs.some((d) => d[0] === keep)) f.direction.input.value = keep;
  f.price.wrap.hidden = isPct;
  f.pct.wrap.hidden = !isPct;
  f.windowF.wrap.hidden = !isPct;
}

function alertBody(f, isPct) {
  return {
    symbol: f.symbol.input.value.trim(),
    exchange: f.venue.input.value,
    type: f.type.input.value,
    direction: f.direction.input.value,
    price: isPct ? undefined : numberInput(f.price.input),
    pct: isPct ? numberInput(f.pct.input) : undefined,
    window: isPct ? f.windowF.input.value : undefined,
    repeat: f.repeat.input.checked ? true : undefined,
    note: f.note.input.value ? f.note.input.value : undefined,
  };
}

/** The fields of the wall and market alert form, in the order it shows them. */
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
    threshold: field('Threshold', 'threshold', 'text', { inputmode: 'decimal', placeholder: 'e.g. 60', hint: '0–100 for sentiment; a count for the others. It fires when the number reaches the threshold from the other side.' }),
    repeat: field('Repeat', 'repeat', 'checkbox'),
    cooldown: field('Quiet time after a firing (s)', 'cooldown_s', 'text', {
      inputmode: 'numeric', placeholder: '0', hint: 'A repeating alert stays silent this long after each firing (at most 86400).',
    }),
    note: field('Note', 'note', 'text', { maxlength: 500 }),
  };
}

/** Create form of density and market alerts (POST /site/site-alerts, fields of decisions.md §10). */
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
    densityOnly.forEach((x) => { x.wrap.hidden = !density; });
    marketOnly.forEach((x) => { x.wrap.hidden = density; });
    f.cooldown.wrap.hidden = !f.repeat.input.checked;
  }
  f.type.input.addEventListener('change', syncType);
  f.repeat.input.addEventListener('change', syncType);
  f.venue.input.addEventListener('change', () => suggest(datalist, f.venue.input.value));
  syncType();
  suggest(datalist, f.venue.input.value);

  const form = h('form', { testid: 'site-alert-form', 'aria-labelledby': 'sf-h', novalidate: true },
    h('h3', { id: 'sf-h', text: 'New wall or market alert' }),
    h('div', { class: 'fields' }, f.type.wrap, f.venue.wrap, densityOnly.map((x) => x.wrap), marketOnly.map((x) => x.wrap), f.note.wrap, f.repeat.wrap, f.cooldown.wrap),
    datalist, h('div', { class: 'actions' }, submit), error, status);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const density = f.type.input.value === 'density';
    const body = siteAlertBody(f, density);
    await submitting(submit, error, status, async () => {
      const r = await call('POST', '/site/site-alerts', body);
      say(status, (density ? 'Wall' : 'Market') + ' alert #' + (r.data && r.data.id) + ' created.');
      f.note.input.value = '';
      created();
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
  body.repeat = f.repeat.input.checked;
  body.cooldown_s = f.repeat.input.checked ? numberInput(f.cooldown.input) : undefined;
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
