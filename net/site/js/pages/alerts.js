// The alerts page: price, percent, level and wall alerts (shared with the API, for one pair or a whole venue; the site's density alerts among them), market alerts (site only), their forms and the firing history.

import { alertForm, siteAlertForm } from '../alert-forms.js';
import { alertCondition, alertHeaders, alertPlace, alertRow, nextStateChange, SITE_ALERT_HEADERS, siteAlertRow, siteCondition, statusWords } from '../alert-rows.js';
import { deliveryLog } from '../deliveries.js';
import { errorBox, h, mount } from '../dom.js';
import { fmtInt } from '../format.js';
import { call, errText, v1 } from '../http.js';
import { current, later, poll } from '../lifecycle.js';
import { onFiring } from '../live.js';
import { state } from '../state.js';
import { failTable, fillTable, table } from '../tables.js';
import { timeEl } from '../time.js';

const SITE_ALERTS_REFRESH_MS = 10000; // "waiting to re-arm" follows the board without a firing

export function alertsPage() {
  const gen = state.gen;
  const alertsT = table('alerts-table', 'Price, percent, level, wall, liquidations, open interest and funding alerts, of one pair or a whole venue, density alerts included (also listed by GET /v1/alerts)', alertHeaders());
  const siteT = table('site-alerts-table', 'Market alerts (site only)', SITE_ALERT_HEADERS);
  const historyT = table('alerts-history', 'Alerts that have fired, most recent first',
    ['Last fired', 'Alert', 'What', 'Status', ['Times', 'num'], 'Webhook']);
  const log = deliveryLog(gen);
  const apiError = errorBox('alerts-list-error');
  const siteError = errorBox('site-alerts-list-error');
  let api = null;
  let site = null;
  let wake = 0; // the redraw when an alert stops cooling down

  function drawApi() {
    fillTable(alertsT, api.map((a) => alertRow(a, loadApi, apiError)), 'No price, percent, level or wall alert yet.');
    clearTimeout(wake);
    const ms = nextStateChange(api);
    if (ms) wake = later(ms + 250, drawApi);
  }

  async function loadApi() {
    try {
      const r = await call('GET', v1('alerts', { status: 'all' }));
      if (!current(gen)) return;
      api = r.data || [];
      drawApi();
    } catch (e) {
      if (current(gen)) failTable(alertsT, errText(e));
    }
    drawHistory();
  }

  async function loadSite() {
    try {
      const r = await call('GET', '/site/site-alerts');
      if (!current(gen)) return;
      site = r.data || [];
      fillTable(siteT, site.map((a) => siteAlertRow(a, loadSite, siteError)), 'No market alert yet.');
    } catch (e) {
      if (current(gen)) failTable(siteT, errText(e));
    }
    drawHistory();
  }

  function drawHistory() {
    if (!current(gen) || api === null || site === null) return;
    fillTable(historyT, firedAlerts(api, site).map((f) => historyRow(f, log)), 'No alert has fired yet. Every firing is also in Notifications.');
  }

  mount('Alerts', [
    h('h1', { text: 'Alerts' }),
    h('section', { class: 'panel', 'aria-labelledby': 'pa-h' },
      h('h2', { id: 'pa-h', text: 'Price, percent, level, wall, liquidations, open interest and funding alerts' }), alertsT.wrap, apiError, alertForm(loadApi)),
    h('section', { class: 'panel', 'aria-labelledby': 'sa-h' },
      h('h2', { id: 'sa-h', text: 'Density and market alerts' }),
      h('p', { class: 'hint', text: 'A density alert (a wall appears) is a wall alert on "appeared", on every plan: once made it is listed with the alerts above.' }),
      siteT.wrap, siteError, siteAlertForm((kind) => (kind === 'density' ? loadApi() : loadSite()))),
    h('section', { class: 'panel', 'aria-labelledby': 'hi-h' },
      h('h2', { id: 'hi-h', text: 'Firing history' }), historyT.wrap, log.panel),
  ]);
  loadApi();
  loadSite();
  onFiring(() => { loadApi(); loadSite(); });
  poll(SITE_ALERTS_REFRESH_MS, loadSite);
}

// Every alert that has fired, the account's and the market alerts, the most recently fired first.
function firedAlerts(api, site) {
  const fired = [];
  api.forEach((a) => { if (a.triggerCount > 0) fired.push({ a: a, what: alertPlace(a) + ': ' + alertCondition(a), label: a.type + ' alert #' + a.id, hook: !!a.webhookUrl, attr: 'data-alert-id' }); });
  site.forEach((a) => { if (a.triggerCount > 0) fired.push({ a: a, what: a.exchange + ' · ' + siteCondition(a), label: 'market alert #' + a.id, hook: false, attr: 'data-site-alert-id' }); });
  fired.sort((x, y) => String(y.a.lastTriggeredAt || '').localeCompare(String(x.a.lastTriggeredAt || '')));
  return fired;
}

function historyRow(f, log) {
  return h('tr', { [f.attr]: f.a.id },
    h('td', null, f.a.lastTriggeredAt ? timeEl(f.a.lastTriggeredAt) : '–'),
    h('th', { scope: 'row', text: f.label }),
    h('td', { class: 'wrap', text: f.what }),
    h('td', { text: statusWords(f.a) }),
    h('td', { class: 'num', text: fmtInt(f.a.triggerCount) }),
    h('td', null, f.hook ? log.button(f.a) : 'none'));
}
