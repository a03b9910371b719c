// Browser test of rampart's site (net/site) against a running server and venue simulator: sign-in, CSRF, alerts, live notifications, one event stream per page, the chart's levels and the alerts its lines offer, alerts on a whole venue, webhook signing and the delivery log, an alert's lifecycle (edit in place, pause, a test delivery, the flood guard; lifecycle.mjs), isolation of accounts.
//
// Run from the repository root as `node tests/browser/site.mjs` (after `npm ci` in tests/browser).
// Environment: RAMPART_URL, SIM_URL, KEY_A, KEY_B, SYMBOL, WALL_QTY; optional SHOTS (a directory
// for screenshots) and CHROMIUM (the browser binary, /usr/bin/chromium by default).
// Prints one line per step; exits 1 on the first failure.

import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import {
  apiOk, BASE, close, decimals, DESKTOP, env, gone, loaded, nav, newPage, noPageErrors, note, oneStream, pageTrue, PHONE,
  placeWall as placeWallOf, receiver, rowIds, run, setHash, signature, signedIn, signIn, SIM, sleep, step, SYMBOL, tid, trade,
  unseen, until, VENUE, visible, WAIT,
} from './lib.mjs';
import { alertLifecycle } from './lifecycle.mjs';

const KEY_A = env('KEY_A');
const KEY_B = env('KEY_B');
const WALL_QTY = env('WALL_QTY');
const SHOTS = process.env.SHOTS || '';
const placeWall = () => placeWallOf(WALL_QTY);

// ---- The scenario ----
async function main(browser) {
  const A = {};

  step('sign in as A through the form: CSP header, HttpOnly SameSite=Strict cookie without the key');
  const a = await newPage(browser, 'A');
  {
    const first = await a.page.goto('/', { waitUntil: 'domcontentloaded', timeout: WAIT });
    const csp = first.headers()['content-security-policy'] || '';
    assert.ok(csp.includes("script-src 'self'"), `the page's Content-Security-Policy lacks script-src 'self': "${csp}"`);
    await visible(a.page, tid('signin-key'), 'the sign-in form did not show');
    const label = await a.page.$eval(tid('signin-key'), (el) => (el.labels && el.labels[0] ? el.labels[0].textContent : ''));
    assert.match(label, /API key/, 'the key input has no "API key" label');
    assert.equal(await a.page.getAttribute(tid('signin-key'), 'type'), 'password');
    // A wrong key shows the server's message.
    await a.page.fill(tid('signin-key'), 'rk_' + '0'.repeat(32));
    await a.page.click(tid('signin-submit'));
    await pageTrue(a.page, (s) => (document.querySelector(s)?.textContent || '').trim().length > 0, tid('signin-error'),
      'a wrong key showed no error');
    note(`wrong key: "${(await a.page.textContent(tid('signin-error'))).trim()}"`);
    await a.page.fill(tid('signin-key'), KEY_A);
    await a.page.click(tid('signin-submit'));
    await signedIn(a.page, 'A');
    const cookie = (await a.context.cookies(BASE)).find((c) => c.name === 'rampart_session');
    assert.ok(cookie, 'no rampart_session cookie after signing in');
    assert.equal(cookie.httpOnly, true, 'the session cookie is not HttpOnly');
    assert.equal(cookie.sameSite, 'Strict', 'the session cookie is not SameSite=Strict');
    assert.ok(!cookie.value.includes(KEY_A) && !cookie.value.includes(KEY_A.replace(/^rk_/, '')), 'the cookie carries the key');
    assert.equal(await a.page.evaluate(() => document.cookie.includes('rampart_session')), false, 'the page can read the session cookie');
    await visible(a.page, `${tid('rankings-table')} tbody tr[data-symbol]`, 'the rankings table stayed empty');
  }

  step('CSRF: a state change without the token is 403 and creates nothing');
  {
    const before = (await apiOk(KEY_A, 'GET', '/v1/alerts?status=all')).data.length;
    const sym = await apiOk(KEY_A, 'GET', `/v1/symbols/${SYMBOL}?exchange=${VENUE}`);
    A.price = sym.data.price;
    A.decimals = decimals(sym.data.tickSize);
    const body = JSON.stringify({ symbol: SYMBOL, exchange: VENUE, type: 'price', direction: 'above', price: Number((A.price * 2).toFixed(A.decimals)) });
    const statuses = await a.page.evaluate(async (b) => {
      const bare = await fetch('/site/v1/alerts', { method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json' }, body: b });
      const wrong = await fetch('/site/v1/alerts', { method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': '00' }, body: b });
      return [bare.status, wrong.status];
    }, body);
    assert.deepEqual(statuses, [403, 403], `POST without / with a wrong CSRF token answered ${statuses}`);
    const after = (await apiOk(KEY_A, 'GET', '/v1/alerts?status=all')).data.length;
    assert.equal(after, before, 'an alert was created without the CSRF token');
  }

  step('price alerts: one made on the site is listed by GET /v1/alerts; one made through the API shows on the site');
  {
    await nav(a.page, 'alerts');
    await visible(a.page, loaded('alerts-table'), 'the alerts table did not load');
    const form = tid('alert-form');
    const up = (A.price * 1.5).toFixed(A.decimals);
    await a.page.selectOption(`${form} select[name="exchange"]`, VENUE);
    await a.page.fill(`${form} input[name="symbol"]`, SYMBOL);
    await a.page.selectOption(`${form} select[name="type"]`, 'price');
    await a.page.selectOption(`${form} select[name="direction"]`, 'above');
    await a.page.fill(`${form} input[name="price"]`, up);
    await a.page.click(`${form} button[type="submit"]`);
    const made = await until('the alert made on the site is not listed by GET /v1/alerts', async () => {
      const r = await apiOk(KEY_A, 'GET', '/v1/alerts');
      return r.data.find((x) => x.symbol === SYMBOL && x.exchange === VENUE && x.direction === 'above' && close(x.price, Number(up)));
    });
    assert.equal(made.webhookUrl, null, 'an alert made on the site has a webhook URL');
    A.siteAlertId = made.id;
    const err = (await a.page.textContent(tid('alert-error'))).trim();
    assert.equal(err, '', `the alert form shows an error: ${err}`);
    await visible(a.page, `${tid('alerts-table')} tr[data-alert-id="${made.id}"]`, `alert ${made.id} is not in the table`);
    note(`site alert ${made.id} above ${up}`);

    const down = (A.price * 0.5).toFixed(A.decimals);
    const viaApi = await apiOk(KEY_A, 'POST', '/v1/alerts', { symbol: SYMBOL, exchange: VENUE, type: 'price', direction: 'below', price: Number(down) });
    A.apiAlertId = viaApi.data.id;
    await nav(a.page, 'market');
    await nav(a.page, 'alerts');
    await visible(a.page, `${tid('alerts-table')} tr[data-alert-id="${A.apiAlertId}"]`, `the API's alert ${A.apiAlertId} is not in the site's table`);
    note(`API alert ${A.apiAlertId} below ${down}`);

    // A refusal shows the server's own message.
    await a.page.fill(`${form} input[name="symbol"]`, SYMBOL);
    await a.page.selectOption(`${form} select[name="direction"]`, 'above');
    await a.page.fill(`${form} input[name="price"]`, down);
    await a.page.click(`${form} button[type="submit"]`);
    await pageTrue(a.page, (s) => (document.querySelector(s)?.textContent || '').trim().length > 0, tid('alert-error'),
      'an alert on the wrong side of the price showed no error');
    assert.equal(await a.page.getAttribute(tid('alert-error'), 'role'), 'alert');
    note(`refusal shown: "${(await a.page.textContent(tid('alert-error'))).trim()}"`);
  }

  step('level and wall alerts (decisions.md §15) made with the same form are listed by GET /v1/alerts and described in the table');
  {
    const form = tid('alert-form');
    const mine = async (what, pick) => until(`the ${what} alert made on the site is not listed by GET /v1/alerts`, async () => {
      const r = await apiOk(KEY_A, 'GET', '/v1/alerts');
      return r.data.find(pick);
    });
    await a.page.selectOption(`${form} select[name="exchange"]`, VENUE);
    await a.page.fill(`${form} input[name="symbol"]`, SYMBOL);
    await a.page.selectOption(`${form} select[name="type"]`, 'level');
    await a.page.selectOption(`${form} select[name="event"]`, 'approach');
    await a.page.selectOption(`${form} select[name="direction"]`, 'above');
    await a.page.fill(`${form} input[name="within_pct"]`, '0.75');
    await a.page.fill(`${form} input[name="min_strength"]`, '2');
    await a.page.click(`${form} button[type="submit"]`);
    const level = await mine('level', (x) => x.type === 'level' && x.symbol === SYMBOL && x.event === 'approach');
    assert.deepEqual([level.direction, level.withinPct, level.minStrength, level.timeframes.length], ['above', 0.75, 2, 9]);
    const row = `${tid('alerts-table')} tr[data-alert-id="${level.id}"]`;
    await visible(a.page, row, `the level alert ${level.id} is not in the table`);
    const words = (await a.page.textContent(row)).trim();
    assert.ok(words.includes('approach of a resistance within 0.75%'), `the level alert's row says: ${words}`);

    await a.page.selectOption(`${form} select[name="type"]`, 'wall');
    await a.page.selectOption(`${form} select[name="event"]`, 'pulled');
    await a.page.selectOption(`${form} select[name="direction"]`, 'bid');
    await a.page.fill(`${form} input[name="min_usd"]`, '2000000');
    await a.page.click(`${form} button[type="submit"]`);
    const wall = await mine('wall', (x) => x.type === 'wall' && x.symbol === SYMBOL && x.event === 'pulled');
    assert.deepEqual([wall.direction, wall.minUsd, wall.maxDistPct, wall.minAgeS], ['bid', 2000000, 5, 0]);
    await visible(a.page, `${tid('alerts-table')} tr[data-alert-id="${wall.id}"]`, `the wall alert ${wall.id} is not in the table`);
    for (const id of [level.id, wall.id]) await apiOk(KEY_A, 'DELETE', `/v1/alerts/${id}`);
    note(`level alert ${level.id} and wall alert ${wall.id} made on the site, then deleted`);
  }

  // The wall the density step places is worth WALL_QTY at about the price: alerts that ask for
  // half of that are met by it alone.
  A.wallMinUsd = Math.min(1e12, Math.max(1, Math.floor(Number(WALL_QTY) * A.price * 0.5)));

  step('whole venue (decisions.md §15): the form offers it for percent, level and wall alerts, not price; a wall alert made so is on symbol "*" of the venue, repeats with a 900 s quiet time per pair, and its row says "every Binance pair"');
  {
    const form = tid('alert-form');
    const scope = `${form} select[name="scope"]`;
    await a.page.selectOption(`${form} select[name="type"]`, 'price');
    await unseen(a.page, scope, 'a price alert offers the whole venue');
    await a.page.selectOption(`${form} select[name="exchange"]`, VENUE);
    await a.page.selectOption(`${form} select[name="type"]`, 'wall');
    await a.page.selectOption(scope, 'venue');
    await unseen(a.page, `${form} input[name="symbol"]`, 'the pair is still asked for a whole venue');
    await a.page.selectOption(`${form} select[name="event"]`, 'appeared');
    await a.page.selectOption(`${form} select[name="direction"]`, 'any');
    await a.page.fill(`${form} input[name="min_usd"]`, String(A.wallMinUsd));
    await a.page.click(`${form} button[type="submit"]`);
    const every = await until('the whole-venue alert made on the site is not listed by GET /v1/alerts', async () => {
      const r = await apiOk(KEY_A, 'GET', '/v1/alerts');
      return r.data.find((x) => x.type === 'wall' && x.symbol === '*' && x.event === 'appeared');
    });
    assert.deepEqual([every.exchange, every.repeat, every.cooldownS, every.minUsd], [VENUE, true, 900, A.wallMinUsd], JSON.stringify(every));
    const row = `${tid('alerts-table')} tr[data-alert-id="${every.id}"]`;
    await visible(a.page, row, `the whole-venue alert ${every.id} is not in the table`);
    const words = (await a.page.textContent(row)).trim();
    assert.ok(words.includes('every Binance pair') && words.includes('quiet for 15 min per pair'), `the whole-venue alert's row says: ${words}`);
    await a.page.selectOption(scope, 'pair');
    A.everyId = every.id;
    note(`wall alert ${every.id} on every ${VENUE} pair: "${words}"`);
  }

  step('density alert made with the density/market form (POST /site/site-alerts) is a wall alert on "appeared" (decisions.md §15): listed by GET /v1/alerts without a webhook, in the account\'s alerts table in words, not among the market alerts; it fires live into Notifications when a wall is placed (no reload), through the page\'s one EventSource (alerts)');
  {
    await visible(a.page, loaded('site-alerts-table'), 'the market alerts table did not load');
    const minUsd = A.wallMinUsd;
    const form = tid('site-alert-form');
    await a.page.selectOption(`${form} select[name="type"]`, 'density');
    await a.page.selectOption(`${form} select[name="exchange"]`, VENUE);
    await a.page.fill(`${form} input[name="symbol"]`, SYMBOL);
    await a.page.selectOption(`${form} select[name="side"]`, 'any');
    await a.page.fill(`${form} input[name="min_usd"]`, String(minUsd));
    await a.page.click(`${form} button[type="submit"]`);
    await pageTrue(a.page, (s) => /^Wall alert #\d+ created/.test((document.querySelector(s)?.textContent || '').trim()), tid('site-alert-status'),
      'the density form did not say the alert was made');
    const err = (await a.page.textContent(tid('site-alert-error'))).trim();
    assert.equal(err, '', `the density form shows an error: ${err}`);
    const id = Number((await a.page.textContent(tid('site-alert-status'))).trim().match(/^Wall alert #(\d+)/)[1]);
    const made = (await apiOk(KEY_A, 'GET', '/v1/alerts')).data.find((x) => x.id === id);
    assert.ok(made, `GET /v1/alerts does not list the density alert #${id}`);
    assert.deepEqual([made.type, made.exchange, made.symbol, made.event, made.direction, made.minUsd, made.maxDistPct, made.minAgeS, made.webhookUrl, made.status],
      ['wall', VENUE, SYMBOL, 'appeared', 'any', minUsd, 5, 0, null, 'active'], JSON.stringify(made));
    A.densityId = made.id;
    const row = `${tid('alerts-table')} tr[data-alert-id="${made.id}"][data-type="wall"][data-event="appeared"]`;
    await visible(a.page, row, `the density alert ${made.id} is not in the account's alerts table`);
    const words = (await a.page.textContent(row)).trim();
    assert.ok(words.includes(`a wall of $`) && words.includes('within 5% appeared'), `the density alert's row says: ${words}`);
    const market = await a.page.evaluate(async () => (await (await fetch('/site/site-alerts', { credentials: 'same-origin' })).json()).data);
    assert.deepEqual(market.filter((x) => x.type !== 'market'), [], 'GET /site/site-alerts lists alerts other than market alerts');
    assert.deepEqual(await rowIds(a.page, 'site-alerts-table', 'data-site-alert-id'), [], 'the market alerts table lists the density alert');
    note(`density alert ${A.densityId} (wall, appeared), min_usd ${minUsd}: "${words}"`);

    await nav(a.page, 'notifications');
    await visible(a.page, loaded('inbox-list'), 'the inbox did not load');
    const { since } = await oneStream(a.page, [], 'the notifications page');
    const newest = (await apiOk(KEY_A, 'GET', '/v1/inbox?limit=1')).data.map((e) => e.id)[0] || 0;
    assert.ok(since <= newest, `the stream's since ${since} is beyond the newest inbox entry ${newest}`);
    note(`one EventSource: alerts, since ${since}`);
    await a.page.evaluate(() => {
      window.__marker = 1;
    });
    A.wallPrice = await placeWall();
    note(`wall placed at ${A.wallPrice}`);
    const item = `${tid('inbox-list')} li[data-kind="alert.triggered"][data-alert-id="${A.densityId}"]`;
    await visible(a.page, item, `no alert.triggered entry for the density alert ${A.densityId} arrived live`);
    assert.equal(await a.page.evaluate(() => window.__marker), 1, 'the page was reloaded');
    const text = (await a.page.textContent(item)).trim();
    assert.ok(text.includes(SYMBOL), `the entry does not name the pair: ${text}`);
    // "bid wall of $2.1M at 61250 appeared": the wall placed, in words.
    const fired = text.match(/bid wall of \$[\d.]+[KMBT]? at ([\d.]+) appeared/);
    assert.ok(fired && close(Number(fired[1]), A.wallPrice), `the entry does not describe the wall placed at ${A.wallPrice}: ${text}`);
    const body = (await apiOk(KEY_A, 'GET', '/v1/inbox?limit=100')).data.find((e) => e.alertId === A.densityId && e.kind === 'alert.triggered');
    assert.ok(body, `GET /v1/inbox has no alert.triggered entry of the density alert ${A.densityId}`);
    const w = body.event.trigger.wall;
    assert.deepEqual([body.event.alert.type, body.event.alert.event, body.event.trigger.symbol, w.side, w.reason], ['wall', 'appeared', SYMBOL, 'bid', null], JSON.stringify(body.event));
    assert.ok(close(w.price, A.wallPrice) && w.usd >= minUsd, `the firing's wall: ${JSON.stringify(w)}`);
    note(`entry: "${text}"`);
    // The whole-venue wall alert fired on the same wall: its entry names the pair that fired.
    const every = `${tid('inbox-list')} li[data-kind="alert.triggered"][data-alert-id="${A.everyId}"]`;
    await visible(a.page, every, `no entry of the whole-venue alert ${A.everyId} arrived live`);
    const everyText = await a.page.textContent(every);
    assert.ok(everyText.includes(SYMBOL) && everyText.includes('every Binance pair'), `the whole-venue entry says: ${everyText}`);
    note(`entry: "${everyText.trim()}"`);
    // The kind filter puts it with the wall alerts, not with the price and percent alerts.
    await a.page.selectOption(tid('inbox-kind'), 'price');
    await gone(a.page, item, 'the price and percent filter kept the density alert\'s entry');
    await a.page.selectOption(tid('inbox-kind'), 'wall');
    await visible(a.page, item, 'the wall filter hid the density alert\'s entry');
    await a.page.selectOption(tid('inbox-kind'), '');
    await apiOk(KEY_A, 'DELETE', `/v1/alerts/${A.everyId}`);
    A.entryId = Number(await a.page.getAttribute(item, 'data-entry-id'));
    await oneStream(a.page, [], 'the notifications page after the firing');
  }

  step(`pair page: one EventSource (alerts and the pair's channels, resuming after the entry seen); every served level of ${SYMBOL} is a price line of the chart, and so is the new wall`);
  {
    await setHash(a.page, `#/pair/${VENUE}/${SYMBOL}`);
    await visible(a.page, tid('pair-chart'), 'the pair page did not show its chart');
    await visible(a.page, tid('pair-metrics'), 'the pair page did not show its metrics');
    await pageTrue(a.page, () => window.rampartChart && window.rampartChart.ready === true, null, 'the chart never became ready');
    // The pair has a perpetual on the simulator: its page follows the perpetual's channels too (decisions.md §17).
    const pairChannels = ['price', 'levels', 'walls', 'perp', 'liquidations'].map((c) => `${c}:${VENUE}:${SYMBOL}`);
    const { since } = await oneStream(a.page, pairChannels, 'the pair page');
    assert.ok(since >= A.entryId, `the pair page's stream resumes at ${since}, before the entry ${A.entryId} the last page held`);
    note(`one EventSource: alerts and ${pairChannels.join(', ')}, since ${since}`);
    await a.page.selectOption(tid('chart-lines'), 'all'); // by default only the nearest levels are drawn
    let report = '';
    await until('the chart does not hold every served level', async () => {
      const served = (await apiOk(KEY_A, 'GET', `/v1/levels/${SYMBOL}?exchange=${VENUE}`)).data;
      const lines = await a.page.evaluate(() => window.rampartChart.priceLines());
      const missing = served.filter((l) => !lines.some((p) => close(p.price, l.price)));
      report = `served ${served.length}, lines ${lines.length}, missing ${JSON.stringify(missing.map((l) => l.price))}`;
      if (!served.length) throw new Error('no level is served, so nothing can be checked');
      if (missing.length) throw new Error(report);
      return true;
    });
    note(report);
    await until(`no "wall bid" line at ${A.wallPrice}`, async () => {
      const lines = await a.page.evaluate(() => window.rampartChart.priceLines());
      return lines.some((p) => p.title === 'wall bid' && close(p.price, A.wallPrice));
    });
    const venue = await a.page.$eval(tid('pair-venue'), (el) => el.value);
    assert.equal(venue, VENUE);
    const tfs = await a.page.$$eval(`${tid('pair-interval')} option`, (os) => os.map((o) => o.value));
    assert.deepEqual(tfs, ['5m', '15m', '1h', '4h', '1d', '1w']);
  }

  step('pair page is live: a wall the simulator removes leaves the chart and one it places appears, with no levels or walls request and no reload');
  {
    await pageTrue(a.page, () => window.rampartStream && window.rampartStream.live(), null, 'the pair page opened no stream');
    const asked = [];
    const count = (req) => {
      const u = req.url();
      if (u.includes('/site/v1/levels') || u.includes('/site/v1/densities')) asked.push(u);
    };
    a.page.on('request', count);
    await a.page.evaluate(() => {
      window.__marker = 2;
    });
    const removed = await fetch(`${SIM}/sim/level`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ venue: VENUE, symbol: SYMBOL, side: 'bid', price: String(A.wallPrice), qty: '0' }),
      signal: AbortSignal.timeout(WAIT),
    });
    assert.equal(removed.status, 200, `removing the wall answered ${removed.status}: ${await removed.text()}`);
    await until(`the removed wall at ${A.wallPrice} is still a chart line`, async () => {
      const lines = await a.page.evaluate(() => window.rampartChart.priceLines());
      return !lines.some((p) => p.title === 'wall bid' && close(p.price, A.wallPrice));
    });
    A.pulledPrice = A.wallPrice;
    A.wallPrice = await placeWall();
    await until(`the new wall at ${A.wallPrice} did not become a chart line`, async () => {
      const lines = await a.page.evaluate(() => window.rampartChart.priceLines());
      return lines.some((p) => p.title === 'wall bid' && close(p.price, A.wallPrice));
    });
    a.page.off('request', count);
    assert.deepEqual(asked, [], 'the pair page polled what the stream pushes');
    assert.equal(await a.page.evaluate(() => window.__marker), 2, 'the page was reloaded');
    note(`stream messages on the pair page: ${await a.page.evaluate(() => window.rampartStream.messages)}`);
  }

  step('pair page: the wall history (GET /site/v1/walls/{symbol}/history) shows the removed wall as pulled, the new one as standing');
  {
    await nav(a.page, 'market');
    await setHash(a.page, `#/pair/${VENUE}/${SYMBOL}`);
    const rows = `${tid('pair-wall-history')} tbody tr`;
    await until(`the wall history shows no pulled wall at ${A.pulledPrice}`, async () => {
      const got = await a.page.$$eval(rows, (trs) => trs.map((tr) => [tr.dataset.outcome, tr.children[1]?.textContent || '']));
      return got.some(([o, p]) => o === 'pulled' && close(Number(p.replace(/[^0-9.]/g, '')), A.pulledPrice));
    });
    note('wall history on the pair page: the removed wall pulled');

    // A level row offers its alerts: "Alert on break" makes a level alert of its side, timeframe
    // and strength; a wall row offers "Alert if pulled".
    const levelRow = `${tid('pair-levels')} tbody tr`;
    await visible(a.page, `${levelRow} button`, 'no level row offers an alert');
    const [kind, timeframe] = await a.page.$eval(levelRow, (tr) => [tr.children[0].textContent, tr.children[2].textContent]);
    await a.page.click(`${levelRow} >> text=Alert on break`);
    const offered = await until('the level row\'s alert is not listed by GET /v1/alerts', async () => {
      const r = await apiOk(KEY_A, 'GET', '/v1/alerts');
      return r.data.find((x) => x.type === 'level' && x.event === 'break' && x.symbol === SYMBOL);
    });
    assert.equal(offered.direction, kind === 'Support' ? 'below' : 'above', `a ${kind} (${timeframe}) offered ${JSON.stringify(offered)}`);
    assert.equal(offered.timeframes.length, 1, JSON.stringify(offered));
    const wallRow = `${tid('pair-walls')} tbody tr`;
    await visible(a.page, `${wallRow} button`, 'no wall row offers an alert');
    await a.page.click(`${wallRow} >> text=Alert if pulled`);
    const wallOffered = await until('the wall row\'s alert is not listed by GET /v1/alerts', async () => {
      const r = await apiOk(KEY_A, 'GET', '/v1/alerts');
      return r.data.find((x) => x.type === 'wall' && x.event === 'pulled' && x.symbol === SYMBOL);
    });
    for (const id of [offered.id, wallOffered.id]) await apiOk(KEY_A, 'DELETE', `/v1/alerts/${id}`);
    note(`offered from the pair's tables: level alert ${offered.id}, wall alert ${wallOffered.id}`);
  }

  step('pair page: the chart\'s level line, clicked, and a wall\'s marker, by keyboard, offer the same alerts; GET /v1/alerts lists what they made');
  {
    const mark = (kind) => `${tid('chart-mark')}[data-kind="${kind}"]:not([hidden])`;
    const menu = tid('chart-menu');
    await visible(a.page, mark('level'), 'no level line of the chart has a marker');
    await a.page.$eval(tid('pair-chart'), (el) => el.scrollIntoView({ block: 'center' }));
    // The marker stands at its line's height; a click on the line, away from the marker, opens
    // the line's menu. The line clicked is a level's with no other line within the click's reach
    // (the chart's LINE_HIT_PX, 6 px, and a pixel of rounding): where a wall's line is drawn
    // within a pixel of a level's (the simulator's walls sit near its levels), a click there
    // opens whichever is nearer to the pixel, as it should, and names no line in particular.
    const at = await until('no level\'s marker is at its line, clear of the other lines', async () => {
      const marks = await a.page.$$eval(`${tid('chart-mark')}:not([hidden])`, (bs) => {
        const c = document.querySelector('[data-testid="pair-chart"]').getBoundingClientRect();
        return bs.map((b) => {
          const r = b.getBoundingClientRect();
          return { kind: b.dataset.kind, price: Number(b.dataset.price), side: b.dataset.side, name: b.title, mid: r.top + r.height / 2 - c.top, x: c.left + c.width / 2, top: c.top };
        });
      });
      const ys = await a.page.evaluate((ps) => ps.map((p) => window.rampartChart.y(p)), marks.map((m) => m.price));
      const placed = marks.map((m, i) => ({ ...m, y: ys[i] }));
      const clear = (m) => placed.every((o) => o === m || o.y === null || Math.abs(o.y - m.y) > 8);
      return placed.find((m) => m.kind === 'level' && m.y !== null && Math.abs(m.y - m.mid) <= 2 && clear(m)) ?? null;
    });
    await a.page.mouse.click(at.x, at.top + at.y);
    await visible(a.page, `${menu}:popover-open`, 'a click on a level line opened no menu');
    assert.equal((await a.page.textContent(`${menu} .menu-title`)).trim(), at.name);
    await a.page.click(`${menu} >> text=Alert on approach`);
    const level = await until('the chart\'s level alert is not listed by GET /v1/alerts', async () => {
      const r = await apiOk(KEY_A, 'GET', '/v1/alerts');
      return r.data.find((x) => x.type === 'level' && x.event === 'approach' && x.symbol === SYMBOL);
    });
    assert.equal(level.direction, at.side === 'support' ? 'below' : 'above', `${at.name} offered ${JSON.stringify(level)}`);
    await unseen(a.page, `${menu}:popover-open`, 'the menu stayed open after its alert was made');
    await pageTrue(a.page, (s) => /alert #\d+ created/.test(document.querySelector(s)?.textContent || ''), tid('chart-offer-status'),
      'the chart did not say its alert was made');

    await visible(a.page, mark('wall'), 'no wall of the chart has a marker');
    const wallSide = await a.page.getAttribute(mark('wall'), 'data-side');
    await a.page.focus(mark('wall'));
    await a.page.keyboard.press('Enter');
    await visible(a.page, `${menu}:popover-open`, 'Enter on a wall\'s marker opened no menu');
    assert.equal(await a.page.evaluate(() => document.activeElement.textContent), 'Alert if pulled', 'the menu did not take the focus');
    await a.page.keyboard.press('Tab');
    await a.page.keyboard.press('Enter');
    const wall = await until('the chart\'s wall alert is not listed by GET /v1/alerts', async () => {
      const r = await apiOk(KEY_A, 'GET', '/v1/alerts');
      return r.data.find((x) => x.type === 'wall' && x.event === 'filled' && x.symbol === SYMBOL);
    });
    assert.equal(wall.direction, wallSide, JSON.stringify(wall));
    await pageTrue(a.page, () => document.activeElement?.dataset.testid === 'chart-mark', null, 'the focus did not go back to the marker');
    for (const id of [level.id, wall.id]) await apiOk(KEY_A, 'DELETE', `/v1/alerts/${id}`);
    note(`offered from the chart: level alert ${level.id} (${at.name}), wall alert ${wall.id} (${wallSide})`);
  }

  step('market page is live: one EventSource (alerts and the board); the board is rebuilt on the page every second with no /site/v1/market request');
  {
    await nav(a.page, 'market');
    await visible(a.page, loaded('market-board'), 'the board did not load');
    const updated = `${tid('market-board')} .updated`;
    await until('the board does not say it is live', async () => (await a.page.textContent(updated)).includes('live.'));
    await oneStream(a.page, [`board:${VENUE}`], 'the market page');
    const asked = [];
    const count = (req) => {
      if (req.url().includes('/site/v1/market')) asked.push(req.url());
    };
    a.page.on('request', count);
    const first = await a.page.textContent(updated);
    await until('the board was not rebuilt on the page', async () => (await a.page.textContent(updated)) !== first);
    await new Promise((r) => setTimeout(r, 6000)); // longer than the page's 5 s poll
    a.page.off('request', count);
    assert.deepEqual(asked, [], 'the market page polled the board the stream pushes');
  }

  step('delete the site-made price alert with its row button (confirmed; gone once its time for Undo is over); GET /v1/alerts no longer lists it');
  {
    await nav(a.page, 'alerts');
    const row = `${tid('alerts-table')} tr[data-alert-id="${A.siteAlertId}"]`;
    await visible(a.page, row, `alert ${A.siteAlertId} is not in the table`);
    await a.page.click(`${row} ${tid('alert-delete')}`);
    await visible(a.page, tid('confirm-yes'), 'Delete asked for no confirmation');
    await a.page.click(tid('confirm-yes'));
    await gone(a.page, row, `alert ${A.siteAlertId}'s row stayed after deleting (and its time for Undo)`);
    const all = (await apiOk(KEY_A, 'GET', '/v1/alerts?status=all')).data;
    assert.ok(!all.some((x) => x.id === A.siteAlertId), `GET /v1/alerts still lists the deleted alert ${A.siteAlertId}`);
    assert.ok(all.some((x) => x.id === A.apiAlertId), 'the other alert went too');
  }

  step('Settings: webhook signing is off, "Create secret" shows a whsec_ secret once and GET /v1/webhook-secret agrees');
  {
    await nav(a.page, 'settings');
    await visible(a.page, `${tid('signing')}[aria-busy="false"]`, 'the signing panel did not load');
    assert.equal(await a.page.getAttribute(tid('signing-state'), 'data-signing'), 'false');
    assert.equal((await a.page.textContent(tid('signing-rotate'))).trim(), 'Create secret');
    await a.page.click(tid('signing-rotate'));
    await visible(a.page, tid('signing-secret'), 'no secret was shown');
    A.secret = (await a.page.textContent(tid('signing-secret'))).trim();
    assert.match(A.secret, /^whsec_[A-Za-z0-9+/]{43}=$/, `the shown secret: ${A.secret}`);
    await visible(a.page, `${tid('signing-state')}[data-signing="true"]`, 'the state did not turn to signing');
    const state = (await apiOk(KEY_A, 'GET', '/v1/webhook-secret')).data;
    assert.equal(state.signing, true);
    assert.equal(state.previousUntil, null);
    note(`state: "${(await a.page.textContent(tid('signing-state'))).trim()}"`);
  }

  step('Alerts: the firing history opens the delivery log of an alert whose receiver failed once then answered');
  {
    A.hook = await receiver();
    const p = (await apiOk(KEY_A, 'GET', `/v1/symbols/${SYMBOL}?exchange=${VENUE}`)).data.price;
    const level = Number((p * 1.02).toFixed(A.decimals));
    const made = await apiOk(KEY_A, 'POST', '/v1/alerts', { symbol: SYMBOL, exchange: VENUE, type: 'price', direction: 'above', price: level,
      webhook_url: `http://127.0.0.1:${A.hook.port}/hook` });
    A.hookAlertId = made.data.id;
    await trade((p * 1.03).toFixed(A.decimals));
    // The §6 schedule retries 10 s after the first failure.
    await until('the receiver did not get the failed delivery and its retry', async () => A.hook.got.length >= 2, WAIT + 15_000);
    const [first, second] = A.hook.got;
    assert.equal(first.body, second.body, 'the retry carries another body');
    for (const d of [first, second]) {
      assert.equal(d.headers['webhook-id'], `${A.hookAlertId}:${JSON.parse(d.body).trigger.time}`);
      assert.equal(d.headers['webhook-signature'], signature(A.secret, d), 'the signature is not the secret\'s');
    }
    await nav(a.page, 'alerts');
    const open = `${tid('alerts-history')} tr[data-alert-id="${A.hookAlertId}"] ${tid('deliveries-open')}`;
    await visible(a.page, open, `alert ${A.hookAlertId} has no Deliveries button in the firing history`);
    await a.page.click(open);
    const rows = `${tid('deliveries-table')}[data-alert-id="${A.hookAlertId}"] tbody tr[data-outcome]`;
    const seen = await until('the log does not show the failed attempt and the delivered retry', async () => {
      const r = await a.page.$$eval(rows, (trs) => trs.map((t) => [t.getAttribute('data-attempt'), t.getAttribute('data-outcome'), t.cells[4].textContent]));
      return r.length === 2 && r[0][1] === 'delivered' ? r : null;
    });
    assert.deepEqual(seen, [['2', 'delivered', '200'], ['1', 'failed', '500']]);
    note(`log rows: ${JSON.stringify(seen)}`);
  }

  step('Settings: rotating (after a confirmation) shows a new secret and the old one\'s 24 h');
  {
    await nav(a.page, 'settings');
    await visible(a.page, `${tid('signing-state')}[data-signing="true"]`, 'the signing panel did not load');
    await a.page.click(tid('signing-rotate'));
    await visible(a.page, tid('signing-confirm'), 'rotating asked no confirmation');
    await a.page.click(tid('signing-confirm'));
    await pageTrue(a.page, ([s, old]) => {
      const el = document.querySelector(s);
      return el && el.textContent.trim().startsWith('whsec_') && el.textContent.trim() !== old;
    }, [tid('signing-secret'), A.secret], 'no new secret was shown after rotating');
    A.oldSecret = A.secret;
    A.secret = (await a.page.textContent(tid('signing-secret'))).trim();
    await pageTrue(a.page, (s) => /also signs until/.test(document.querySelector(s)?.textContent || ''), tid('signing-state'),
      'the state does not say until when the previous secret signs');
    const state = (await apiOk(KEY_A, 'GET', '/v1/webhook-secret')).data;
    const left = Date.parse(state.previousUntil) - Date.now();
    assert.ok(left > 23.9 * 3600e3 && left <= 24 * 3600e3, `previousUntil ${state.previousUntil} is not 24 h ahead`);
  }

  step('Alerts: Redeliver sends the same body again, signed by the new secret and the old one');
  {
    await nav(a.page, 'alerts');
    const open = `${tid('alerts-history')} tr[data-alert-id="${A.hookAlertId}"] ${tid('deliveries-open')}`;
    await visible(a.page, open, 'no Deliveries button');
    await a.page.click(open);
    const button = `${tid('deliveries-table')}[data-alert-id="${A.hookAlertId}"] ${tid('redeliver')}`;
    await visible(a.page, button, 'no Redeliver button on the ended firing');
    await a.page.click(button);
    await visible(a.page, tid('deliveries-status'), 'no word that the firing was queued');
    await until('the receiver did not get the redelivery', async () => A.hook.got.length >= 3);
    const [first, , again] = A.hook.got;
    assert.equal(again.body, first.body, 'the redelivery carries another body');
    assert.equal(again.headers['webhook-id'], first.headers['webhook-id'], 'the redelivery carries another webhook-id');
    assert.equal(again.headers['webhook-signature'], `${signature(A.secret, again)} ${signature(A.oldSecret, again)}`);
    const rows = `${tid('deliveries-table')}[data-alert-id="${A.hookAlertId}"] tbody tr[data-outcome]`;
    await until('the log does not show the redelivery', async () => {
      const r = await a.page.$$eval(rows, (trs) => trs.map((t) => t.getAttribute('data-outcome')));
      return r.length === 3 && r[0] === 'delivered';
    });
    const err = (await a.page.textContent(tid('deliveries-error'))).trim();
    assert.equal(err, '', `the log shows an error: ${err}`);
  }

  step('Settings: "End signing" (after a confirmation) turns signing off, and the API agrees');
  {
    await nav(a.page, 'settings');
    await visible(a.page, `${tid('signing-state')}[data-signing="true"]`, 'the signing panel did not load');
    await a.page.click(tid('signing-end'));
    await visible(a.page, tid('signing-confirm'), 'ending asked no confirmation');
    await a.page.click(tid('signing-confirm'));
    await visible(a.page, `${tid('signing-state')}[data-signing="false"]`, 'the state did not turn to unsigned');
    assert.equal((await apiOk(KEY_A, 'GET', '/v1/webhook-secret')).data.signing, false);
    A.hook.server.close();
  }

  // Edit in place, Pause and Resume, Send test, the flood guard (decisions.md §16).
  const lifecycleFrom = Date.now();
  await alertLifecycle(a.page, KEY_A, A.apiAlertId);
  note(`the lifecycle steps took ${((Date.now() - lifecycleFrom) / 1000).toFixed(1)} s`);

  step('sign out: the session is over, the page\'s EventSource is closed and the sign-in form shows');
  {
    await a.page.click(tid('signout'));
    await visible(a.page, tid('signin-key'), 'the sign-in form did not show after signing out');
    const status = await a.page.evaluate(async () => (await fetch('/site/session', { credentials: 'same-origin' })).status);
    assert.equal(status, 401, `/site/session answered ${status} after signing out`);
    const open = await a.page.evaluate(() => window.__eventSources().filter((e) => e.open).map((e) => e.url));
    assert.deepEqual(open, [], 'an EventSource is still open after signing out');
    await a.context.close();
  }

  step("sign in as B: none of A's alerts (its density alert included) or notifications, and A's alerts cannot be deleted");
  {
    const b = await newPage(browser, 'B');
    await signIn(b.page, KEY_B, 'B');
    await nav(b.page, 'alerts');
    await visible(b.page, loaded('alerts-table'), "B's alerts table did not load");
    await visible(b.page, loaded('site-alerts-table'), "B's market alerts table did not load");
    const apiRows = await rowIds(b.page, 'alerts-table', 'data-alert-id');
    assert.ok(!apiRows.includes(A.apiAlertId), `B's alerts page shows A's alert ${A.apiAlertId}`);
    assert.ok(!apiRows.includes(A.densityId), `B's alerts page shows A's density alert ${A.densityId}`);

    const aInbox = new Set((await apiOk(KEY_A, 'GET', '/v1/inbox?limit=1000')).data.map((e) => e.id));
    await nav(b.page, 'notifications');
    await visible(b.page, loaded('inbox-list'), "B's inbox did not load");
    const bEntries = await b.page.$$eval(`${tid('inbox-list')} li[data-entry-id]`, (ls) => ls.map((l) => Number(l.getAttribute('data-entry-id'))));
    const leaked = bEntries.filter((id) => aInbox.has(id));
    assert.deepEqual(leaked, [], "B's notifications show A's entries");

    const probe = await b.page.evaluate(async (id) => {
      const list = await (await fetch('/site/v1/alerts?status=all', { credentials: 'same-origin' })).json();
      const s = await (await fetch('/site/session', { credentials: 'same-origin' })).json();
      const del = await fetch(`/site/v1/alerts/${id}`, { method: 'DELETE', credentials: 'same-origin', headers: { 'X-CSRF-Token': s.data.csrf } });
      return { ids: (list.data || []).map((x) => x.id), del: del.status };
    }, A.densityId);
    assert.ok(!probe.ids.includes(A.apiAlertId) && !probe.ids.includes(A.densityId), `GET /site/v1/alerts as B lists A's alerts: ${probe.ids}`);
    assert.equal(probe.del, 404, `DELETE of A's density alert as B answered ${probe.del}`);
    assert.ok((await apiOk(KEY_A, 'GET', '/v1/alerts?status=all')).data.some((x) => x.id === A.densityId), "B's DELETE removed A's density alert");
    await b.context.close();
  }

  if (SHOTS) {
    step(`screenshots into ${SHOTS}`);
    mkdirSync(SHOTS, { recursive: true });
    for (const [size, viewport] of [['desktop', DESKTOP], ['phone', PHONE]]) {
      const s = await newPage(browser, `shots-${size}`, viewport);
      await s.page.goto('/', { waitUntil: 'domcontentloaded' });
      await visible(s.page, tid('signin-key'), 'the sign-in form did not show');
      await s.page.screenshot({ path: path.join(SHOTS, `signin-${size}.png`), fullPage: true });
      await s.page.fill(tid('signin-key'), KEY_A);
      await s.page.click(tid('signin-submit'));
      await signedIn(s.page, 'A');
      const pages = [
        ['market', '#/market', async () => {
          await visible(s.page, loaded('market-board'), 'the board did not load');
          await visible(s.page, loaded('rankings-table'), 'the rankings did not load');
        }],
        ['pair', `#/pair/${VENUE}/${SYMBOL}`, async () => {
          await pageTrue(s.page, () => window.rampartChart && window.rampartChart.ready === true, null, 'the chart never became ready');
          await visible(s.page, loaded('pair-metrics'), 'the metrics did not load');
        }],
        ['alerts', '#/alerts', async () => {
          await visible(s.page, loaded('alerts-table'), 'the alerts did not load');
          await visible(s.page, loaded('site-alerts-table'), 'the site alerts did not load');
          await visible(s.page, tid('deliveries-open'), 'the firing history has no delivery log');
          await s.page.click(tid('deliveries-open'));
          await visible(s.page, loaded('deliveries-table'), 'the delivery log did not load');
        }],
        ['notifications', '#/notifications', () => visible(s.page, loaded('inbox-list'), 'the inbox did not load')],
        ['settings', '#/settings', async () => {
          await visible(s.page, loaded('keys-table'), 'the keys did not load');
          await visible(s.page, loaded('signing'), 'the signing panel did not load');
        }],
      ];
      for (const [name, hash, ready] of pages) {
        await setHash(s.page, hash);
        await ready();
        await sleep(300); // let the chart paint
        await s.page.screenshot({ path: path.join(SHOTS, `${name}-${size}.png`), fullPage: true });
      }
      await s.context.close();
    }
  }

  noPageErrors();
}

await run('site browser test', main);
