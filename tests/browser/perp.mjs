// Browser test of the derivatives flow on the site (decisions.md §17): the pair page's perpetual live from the stream, a pair without one, the board's and the screener's perpetual numbers, the alert form's liquidations, open interest and funding alerts (one pair and a whole venue, a refusal beside its field), and a liquidations alert's firing in words.
//
// Run from the repository root as `node tests/browser/perp.mjs` (after `npm ci` in
// tests/browser). Environment: RAMPART_URL, SIM_URL (the venue simulator the server's live feed
// reads), KEY (a key of an account of its own), SYMBOL (a pair with a perpetual); optional
// CHROMIUM. Prints one line per step; exits 1 on the first failure.

import assert from 'node:assert/strict';
import {
  apiOk, env, loaded, nav, newPage, noPageErrors, note, oneStream, pageTrue, run, setHash, signIn, SIM, step, SYMBOL, tid, until,
  VENUE, visible,
} from './lib.mjs';

const KEY = env('KEY');
const form = tid('alert-form');
const text = async (page, selector) => ((await page.textContent(selector)) || '').trim();
const channelsOf = (symbol, names) => names.map((c) => `${c}:${VENUE}:${symbol}`);

/** One liquidation of `side` worth `usd` on `symbol`'s perpetual at the simulator (§17's control route). */
async function liquidate(symbol, side, usd) {
  const res = await fetch(`${SIM}/sim/liquidation`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ venue: VENUE, symbol, side, usd }),
  });
  assert.equal(res.status, 200, `POST /sim/liquidation answered ${res.status}: ${await res.text()}`);
}

/** Fills the alert form's fields (`name` → value: a select's option or an input's text) and submits it. */
async function submitAlert(page, fields) {
  for (const [name, value] of fields) {
    const select = await page.$(`${form} select[name="${name}"]`);
    if (select) await page.selectOption(`${form} select[name="${name}"]`, value);
    else await page.fill(`${form} input[name="${name}"]`, value);
  }
  await page.click(`${form} button[type="submit"]`);
}

/** Waits for the form's "<Type> alert #N created." and answers the alert as GET /v1/alerts lists it. */
async function created(page, typeWords) {
  await pageTrue(page, ([s, e, w]) => new RegExp('^' + w + ' alert #\\d+ created').test((document.querySelector(s)?.textContent || '').trim())
    || (document.querySelector(e)?.textContent || '').trim() !== '', [tid('alert-status'), tid('alert-error'), typeWords], `no "${typeWords} alert #N created"`);
  const err = await text(page, tid('alert-error'));
  assert.equal(err, '', `the alert form refused: ${err}`);
  const id = Number((await text(page, tid('alert-status'))).match(/#(\d+)/)[1]);
  return alertOf(id);
}

/** Waits until the alert form's error line holds `words`; fails with what it holds. */
async function refused(page, words, what) {
  try {
    await pageTrue(page, ([s, w]) => (document.querySelector(s)?.textContent || '').includes(w), [tid('alert-error'), words], '', 10_000);
  } catch (e) {
    throw new Error(`${what} was not refused with "${words}"; the form says "${await text(page, tid('alert-error'))}" and "${await text(page, tid('alert-status'))}"`);
  }
}

async function alertOf(id) {
  const a = (await apiOk(KEY, 'GET', '/v1/alerts?status=all')).data.find((x) => x.id === id);
  assert.ok(a, `GET /v1/alerts does not list alert ${id}`);
  return a;
}

async function pairPage(page, without) {
  step('the pair page shows the perpetual (contract, mark price, funding with its interval and next time, open interest); its stream carries the pair\'s perp and liquidations channels');
  const before = (await page.evaluate(() => window.__eventSources())).length;
  await setHash(page, `#/pair/${VENUE}/${SYMBOL}`);
  await visible(page, `${tid('pair-perp')}[data-perp="yes"]`, 'the pair page shows no perpetual');
  await oneStream(page, channelsOf(SYMBOL, ['price', 'levels', 'walls', 'perp', 'liquidations']), 'the pair page');
  const opened = (await page.evaluate(() => window.__eventSources())).slice(before);
  assert.equal(opened.length, 1, `the pair page opened one stream, not one and then another: ${JSON.stringify(opened)}`);
  const perp = (await apiOk(KEY, 'GET', `/v1/perp/${SYMBOL}?exchange=${VENUE}`)).data;
  assert.ok((await text(page, '#perp-h')).includes(perp.contract), 'the panel does not name the contract');
  const mark = Number((await text(page, tid('perp-mark'))).replace(/,/g, ''));
  assert.ok(Math.abs(mark - perp.markPrice) <= 0.05 * perp.markPrice, `mark price ${mark} against the API's ${perp.markPrice}`);
  const funding = await text(page, tid('perp-funding'));
  assert.match(funding, new RegExp(`^[+-]?\\d+\\.\\d{4}% per ${perp.funding.intervalH} h`), `funding says "${funding}"`);
  const next = await text(page, tid('perp-next-funding'));
  assert.match(next, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d, (in \d|due)/, `next funding says "${next}"`);
  // Binance's open interest is polled (each contract every `binance_oi_poll_s`): it may come later.
  await pageTrue(page, (sel) => /\(\$[\d.]+[KMB]?\)/.test(document.querySelector(sel)?.textContent || ''), tid('perp-oi'), 'open interest has no USD value');
  note(`funding "${funding}", next "${next}", OI "${await text(page, tid('perp-oi'))}"`);

  step('a liquidation injected at the venue appears among the newest without a reload, with the venue\'s completeness in words');
  const since = Date.now() - 1000;
  await liquidate(SYMBOL, 'long', 1234567);
  const ours = (l) => l.side === 'long' && Math.abs(l.usd - 1234567) < 20000 && l.time >= since;
  // The stream carries it within the shard's round; the API's list, from the shard's snapshot, within a second.
  const listed = await until('GET /v1/liquidations does not list it', async () => (await apiOk(KEY, 'GET', `/v1/liquidations/${SYMBOL}?exchange=${VENUE}`)).data.find(ours));
  await visible(page, `${tid('perp-liquidations')} tr[data-side="long"][data-time="${listed.time}"]`, 'the injected $1.23M long liquidation did not appear');
  const shown = await page.getAttribute(`${tid('perp-liquidations')} tr[data-time="${listed.time}"]`, 'data-usd');
  assert.equal(Number(shown), listed.usd, 'the row\'s USD is not the API\'s');
  assert.match(await text(page, tid('perp-completeness')), /at most one liquidation per contract per second/);

  step('a pair without a perpetual says so, and its stream carries no perpetual channel');
  await setHash(page, `#/pair/${VENUE}/${without}`);
  await visible(page, `${tid('pair-perp')}[data-perp="none"]`, `the page of ${without} does not say it has no perpetual`);
  assert.equal(await text(page, tid('perp-note')), `${without} has no perpetual contract on Binance.`);
  await oneStream(page, channelsOf(without, ['price', 'levels', 'walls']), 'a pair without a perpetual');
}

async function marketPage(page, without) {
  step('the market board shows the perpetuals\' numbers; the screener shows funding, open interest, its change and liquidations, and sorts by funding');
  await nav(page, 'market');
  await visible(page, loaded('market-board'), 'the board did not load');
  const board = (await apiOk(KEY, 'GET', `/v1/market?exchange=${VENUE}&interval=1h`)).data;
  await pageTrue(page, (n) => document.querySelector('[data-board="perps"]')?.textContent === String(n), board.perps, `the board's perpetual count is not ${board.perps}`);
  assert.match(await text(page, '[data-board="oiUsd"]'), /^\$[\d.]+[KMB]?$/, 'the board shows no open interest');
  assert.match(await text(page, '[data-board="funding"]'), /^[+-]?\d+\.\d{4}%$/, 'the board shows no funding');
  const rows = `${tid('rankings-table')} tbody tr`;
  await visible(page, `${rows}[data-symbol="${SYMBOL}"]`, `${SYMBOL} is not in the screener`);
  assert.match(await text(page, `${rows}[data-symbol="${SYMBOL}"] td[data-col="funding"]`), /^[+-]?\d+\.\d{4}%$/);
  assert.match(await text(page, `${rows}[data-symbol="${SYMBOL}"] td[data-col="oiUsd"]`), /^\$/);
  assert.equal(await text(page, `${rows}[data-symbol="${without}"] td[data-col="funding"]`), '–', `${without} has a funding rate in the screener`);
  await page.click(`${tid('rankings-table')} button[data-sort="funding"]`);
  await pageTrue(page, () => document.querySelector('[data-testid="rankings-table"] th[aria-sort] button')?.getAttribute('data-sort') === 'funding', null, 'sorting by funding did not take');
  const rates = await page.$$eval(`${rows} td[data-col="funding"]`, (tds) => tds.map((td) => td.textContent).filter((x) => x !== '–').map((x) => Number(x.replace('%', ''))));
  assert.deepEqual(rates, rates.slice().sort((a, b) => b - a), `funding not sorted, largest first: ${rates}`);
}

async function alertForms(page, without) {
  step('the alert form makes a liquidations alert on one pair, an open interest alert on the whole venue and a funding alert, each as typed and listed in words; a wrong-side funding level and a pair without a perpetual are refused beside their fields; a market alert on the board\'s funding');
  await nav(page, 'alerts');
  await visible(page, loaded('alerts-table'), 'the alerts table did not load');
  await submitAlert(page, [['exchange', VENUE], ['type', 'liquidations'], ['scope', 'pair'], ['symbol', SYMBOL], ['event', 'order'], ['direction', 'long'], ['min_usd', '1000000']]);
  const liq = await created(page, 'Liquidations');
  assert.deepEqual([liq.symbol, liq.type, liq.event, liq.direction, liq.minUsd, liq.window], [SYMBOL, 'liquidations', 'order', 'long', 1000000, null]);
  assert.ok((await text(page, `${tid('alerts-table')} tr[data-alert-id="${liq.id}"]`)).includes('one liquidation of longs worth $1M+'), 'the row does not say the condition');

  await page.selectOption(`${form} select[name="event"]`, 'sum');
  const windows = await page.$$eval(`${form} select[name="window"] option`, (os) => os.map((o) => o.value));
  assert.deepEqual(windows, ['1m', '5m', '15m', '1h', '4h', '1d'], 'a liquidations sum offers other windows');

  await submitAlert(page, [['type', 'oi'], ['scope', 'venue'], ['direction', 'up'], ['pct', '10'], ['window', '1h']]);
  const oi = await created(page, 'Open interest');
  assert.deepEqual([oi.symbol, oi.type, oi.direction, oi.pct, oi.window, oi.repeat], ['*', 'oi', 'up', 10, '1h', true]);
  assert.ok((await text(page, `${tid('alerts-table')} tr[data-alert-id="${oi.id}"]`)).includes('every Binance pair'), 'the venue-wide row does not say so');

  const rate8h = (await apiOk(KEY, 'GET', `/v1/perp/${SYMBOL}?exchange=${VENUE}`)).data.funding.rate8h;
  await submitAlert(page, [['type', 'funding'], ['scope', 'pair'], ['symbol', SYMBOL], ['direction', 'above'], ['funding_pct', (rate8h - 0.5).toFixed(4)]]);
  await refused(page, 'Funding rate (% per 8 h) must be above the funding rate now', 'a funding level below the rate now, for "above"');
  assert.equal(await page.getAttribute(`${form} input[name="funding_pct"]`, 'aria-invalid'), 'true', 'the refused field is not marked');
  await page.fill(`${form} input[name="funding_pct"]`, (rate8h + 1).toFixed(4));
  await page.click(`${form} button[type="submit"]`);
  const fund = await created(page, 'Funding');
  assert.deepEqual([fund.symbol, fund.type, fund.direction, fund.fundingPct], [SYMBOL, 'funding', 'above', Number((rate8h + 1).toFixed(4))]);

  await submitAlert(page, [['type', 'oi'], ['scope', 'pair'], ['symbol', without], ['direction', 'any'], ['pct', '5'], ['window', '5m']]);
  await refused(page, `'${without}' has no perpetual contract on binance; oi alerts need one`, `an open interest alert on ${without}`);
  note(`refusal shown: "${await text(page, tid('alert-error'))}"`);

  // A market alert on a perpetuals' number of the board: funding below a negative rate.
  const sf = tid('site-alert-form');
  await page.selectOption(`${sf} select[name="type"]`, 'market');
  await page.selectOption(`${sf} select[name="number"]`, 'funding');
  await page.selectOption(`${sf} select[name="direction"]`, 'below');
  await page.fill(`${sf} input[name="threshold"]`, '-1.5');
  await page.click(`${sf} button[type="submit"]`);
  await pageTrue(page, (s) => /^Market alert #\d+ created/.test((document.querySelector(s)?.textContent || '').trim()), tid('site-alert-status'),
    'no market alert on funding was created');
  const id = Number((await text(page, tid('site-alert-status'))).match(/#(\d+)/)[1]);
  const row = `${tid('site-alerts-table')} tr[data-site-alert-id="${id}"]`;
  await visible(page, row, 'the market alert on funding is not listed');
  assert.ok((await text(page, row)).includes('Funding per 8 h % (1d) below -1.5'), `the row says: ${await text(page, row)}`);
  return liq;
}

async function firing(page, liq) {
  step('the liquidations alert fires on an injected $1.5M long liquidation: the notifications page says it in words, under its own kind');
  await liquidate(SYMBOL, 'long', 1500000);
  await until('the liquidations alert did not fire', async () => (await alertOf(liq.id)).triggerCount >= 1 || null);
  await nav(page, 'notifications');
  await visible(page, loaded('inbox-list'), 'the inbox did not load');
  await page.selectOption(tid('inbox-kind'), 'derivatives');
  const entry = `${tid('inbox-list')} li[data-alert-id="${liq.id}"]`;
  await visible(page, entry, 'the firing is not listed under liquidations, open interest and funding alerts');
  const words = await text(page, entry);
  assert.ok(/\$1\.5M of longs liquidated at \d/.test(words), `the entry says: ${words}`);
  note(`entry: "${words}"`);
}

async function main(browser) {
  const symbols = (await apiOk(KEY, 'GET', `/v1/exchanges/${VENUE}/symbols`)).data;
  const without = (symbols.find((s) => !s.perp) || {}).symbol;
  assert.ok(without, 'every simulated pair has a perpetual: none to show without one');
  assert.ok(symbols.find((s) => s.symbol === SYMBOL && s.perp), `${SYMBOL} has no perpetual`);
  const t = await newPage(browser, 'trader');
  await signIn(t.page, KEY, 'trader');
  await pairPage(t.page, without);
  await marketPage(t.page, without);
  const liq = await alertForms(t.page, without);
  await firing(t.page, liq);
  await t.context.close();
  noPageErrors();
}

await run('derivatives browser test', main);
