// The delivery log of one alert with a webhook (GET /site/v1/alerts/{id}/deliveries), opened from the firing history.

import { errorBox, h, say, statusBox } from './dom.js';
import { call, enc, errText, v1 } from './http.js';
import { current, poll } from './lifecycle.js';
import { failTable, fillTable, table } from './tables.js';
import { fmtTime, timeEl } from './time.js';

/**
 * Every attempt of 7 days, refreshed while the panel is open, and a Redeliver button on each
 * firing whose deliveries have ended: {button(alert), panel}.
 */
export function deliveryLog(gen) {
  const log = {
    gen: gen,
    open: null, // the alert shown
    caption: h('h3', { id: 'dl-h' }),
    t: table('deliveries-table', 'Webhook deliveries, newest first',
      ['Firing', ['Attempt', 'num'], 'At', 'Outcome', ['HTTP', 'num'], ['Latency', 'num'], 'Error', 'Action']),
    error: errorBox('deliveries-error'),
    status: statusBox('deliveries-status'),
  };
  log.panel = h('div', { class: 'deliveries', testid: 'deliveries', hidden: true, 'aria-labelledby': 'dl-h' },
    log.caption, h('p', { class: 'hint', text: 'Kept 7 days, at most 100 rows per alert; a redelivery sends the same body with the same webhook-id.' }),
    log.t.wrap, log.error, log.status);
  poll(3000, () => load(log));
  return { button: (a) => openButton(log, a), panel: log.panel };
}

async function load(log) {
  if (log.open === null) return;
  const id = log.open.id;
  const still = () => current(log.gen) && log.open !== null && log.open.id === id;
  try {
    const r = await call('GET', v1('alerts/' + enc(id) + '/deliveries'));
    if (!still()) return;
    fillTable(log.t, rows(log, id, r.data || []), 'No delivery yet.');
  } catch (e) {
    if (still()) failTable(log.t, errText(e));
  }
}

// One row per attempt; the newest row of each firing whose deliveries have ended can redeliver it
// (a test send's row is no firing: it says so and offers nothing).
function rows(log, id, data) {
  const ended = new Set();
  const pending = new Set(data.filter((d) => d.outcome === 'pending').map((d) => d.triggerTime));
  return data.map((d) => {
    let action = '';
    if (!d.test && !pending.has(d.triggerTime) && !ended.has(d.triggerTime)) {
      ended.add(d.triggerTime);
      action = redeliverButton(log, id, d.triggerTime);
    }
    return h('tr', { 'data-trigger-time': d.triggerTime, 'data-attempt': d.attempt, 'data-outcome': d.outcome, 'data-test': d.test ? 'true' : null },
      h('td', null, d.test ? 'Test send (Send test), ' : null, timeEl(d.triggerTime)),
      h('td', { class: 'num', text: d.attempt }),
      h('td', null, timeEl(d.at)),
      h('td', { class: 'outcome-' + d.outcome, text: d.outcome }),
      h('td', { class: 'num', text: d.status === null ? '–' : d.status }),
      h('td', { class: 'num', text: d.latencyMs === null ? '–' : d.latencyMs + ' ms' }),
      h('td', { class: 'wrap', text: d.error || '' }),
      h('td', null, action));
  });
}

function redeliverButton(log, id, at) {
  const b = h('button', { type: 'button', class: 'secondary', testid: 'redeliver', 'aria-label': 'Redeliver the firing of ' + fmtTime(at), text: 'Redeliver' });
  b.addEventListener('click', async () => {
    b.disabled = true;
    say(log.error, '');
    say(log.status, '');
    try {
      await call('POST', v1('alerts/' + enc(id) + '/deliveries/' + enc(at) + '/redeliver'));
      say(log.status, 'The firing of ' + fmtTime(at) + ' is queued for delivery again.');
      await load(log);
    } catch (e) {
      b.disabled = false;
      say(log.error, 'Could not redeliver: ' + errText(e));
    }
  });
  return b;
}

// The history row's button that shows this alert's deliveries in the panel.
function openButton(log, a) {
  const b = h('button', { type: 'button', class: 'secondary', testid: 'deliveries-open', 'aria-label': 'Deliveries of alert ' + a.id, text: 'Deliveries' });
  b.addEventListener('click', () => {
    log.open = a;
    say(log.error, '');
    say(log.status, '');
    log.caption.textContent = 'Deliveries of alert #' + a.id + ' (' + a.symbol + ' on ' + a.exchange + ')';
    log.t.table.setAttribute('aria-busy', 'true');
    log.t.table.setAttribute('data-alert-id', a.id);
    log.panel.hidden = false;
    load(log);
  });
  return b;
}
