// Browser test of the site as a trader's tool: one stated time zone (the chart's too), alert tables and the chart's alert lines live without a reload, notifications filtered, grouped, linked and muted, a screener (pages, search, sort, volume in USD), a readable chart, the action column in view at 1280 and 390 px, confirmations and Undo, a market alert that could not fire refused with the number's value, refusals in the form's words.
//
// Run from the repository root as `node tests/browser/trader.mjs` (after `npm ci` in
// tests/browser). Environment: RAMPART_URL, SIM_URL, KEY (a key of an account of its own), SYMBOL;
// optional CHROMIUM. The browser runs in the Asia/Kolkata zone (UTC+05:30 all year: a half-hour
// offset catches arithmetic in whole hours). Prints one line per step; exits 1 on the first failure.

import assert from 'node:assert/strict';
import {
  apiOk, decimals, DESKTOP, env, gone, loaded, nav, newPage, noPageErrors, note, oneStream, pageTrue, PHONE, run, setHash,
  signIn, sleep, step, SYMBOL, tid, trade, until, VENUE, visible, WAIT,
} from './lib.mjs';

const KEY = env('KEY');
const ZONE = 'Asia/Kolkata';
const OFFSET_MS = 330 * 60000;
const UNDO_MS = 6000; // net/site/js/deletes.js UNDO_MS

/** "YYYY-MM-DD HH:MM:SS" of `ms` read as UTC: the wall clock of a zone when shifted by its offset. */
function wallClock(ms) {
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getUTCFullYear()}-${p(d.getUTCMonth() + 1)}-${p(d.getUTCDate())} ${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())}`;
}

const alertRow = (table, id) => `${tid(table)} tr[data-alert-id="${id}"]`;
const lines = (page) => page.evaluate(() => window.rampartChart.priceLines());

/** The chart's newest bar against the newest candle of the API: the chart's time (which it shows as UTC) minus the candle's open. */
async function chartShift(page) {
  return until('the chart shows no bar of the newest candle', async () => {
    const shown = await page.evaluate(() => window.rampartChart.lastBarTime());
    const bars = (await apiOk(KEY, 'GET', `/v1/candles/${SYMBOL}?exchange=${VENUE}&interval=1h&limit=1`)).data;
    if (shown === null || !bars.length) return null;
    return { shift: shown * 1000 - bars[bars.length - 1].openTime };
  });
}

/** Waits until `selector` (a button) is on screen in the viewport and is what a click at its centre hits. */
async function inView(page, selector, width, what) {
  await page.locator(selector).first().scrollIntoViewIfNeeded();
  const box = await page.locator(selector).first().boundingBox();
  assert.ok(box, `${what}: not rendered`);
  assert.ok(box.x >= 0 && box.x + box.width <= width, `${what}: at x ${box.x}..${box.x + box.width}, the viewport is ${width} px wide`);
  const hit = await page.evaluate(([x, y, sel]) => {
    const el = document.elementFromPoint(x, y);
    return !!el && !!el.closest(sel);
  }, [box.x + box.width / 2, box.y + box.height / 2, selector]);
  assert.ok(hit, `${what}: something covers it`);
}

async function main(browser) {
  const sym = (await apiOk(KEY, 'GET', `/v1/symbols/${SYMBOL}?exchange=${VENUE}`)).data;
  const dec = decimals(sym.tickSize);
  const above = (f) => Number((sym.price * f).toFixed(dec));
  const first = (await apiOk(KEY, 'POST', '/v1/alerts', { symbol: SYMBOL, exchange: VENUE, type: 'price', direction: 'above', price: above(1.02) })).data;
  const t = await newPage(browser, 'trader', DESKTOP, ZONE);
  await signIn(t.page, KEY, 'trader');

  step(`one stated time zone: the header names ${ZONE} (UTC+05:30), the tables and the chart use it, and "Show UTC" switches both`);
  {
    // Chromium's ICU names the zone by its older alias.
    assert.match((await t.page.textContent(tid('zone-label'))).trim(), /^Times: Asia\/(Kolkata|Calcutta) \(UTC\+05:30\)$/);
    const created = Date.parse(first.createdAt);
    const cell = `${alertRow('alerts-table', first.id)} time[datetime="${new Date(created).toISOString()}"]`;
    await nav(t.page, 'alerts');
    await visible(t.page, cell, 'the alert has no Created time');
    assert.equal((await t.page.textContent(cell)).trim(), wallClock(created + OFFSET_MS), 'the Created time is not in the stated zone');
    await setHash(t.page, `#/pair/${VENUE}/${SYMBOL}`);
    await pageTrue(t.page, () => window.rampartChart && window.rampartChart.ready === true, null, 'the chart never became ready');
    assert.deepEqual(await chartShift(t.page), { shift: OFFSET_MS }, 'the chart is not in the stated zone');
    await t.page.click(tid('zone-toggle'));
    await pageTrue(t.page, () => document.querySelector('[data-testid="zone-label"]').textContent === 'Times: UTC', null, '"Show UTC" did not switch');
    await pageTrue(t.page, () => window.rampartChart && window.rampartChart.ready === true, null, 'the chart was not drawn again');
    assert.deepEqual(await chartShift(t.page), { shift: 0 }, 'the chart is not in UTC after "Show UTC"');
    await nav(t.page, 'alerts');
    await visible(t.page, cell, 'the alert has no Created time');
    assert.equal((await t.page.textContent(cell)).trim(), wallClock(created), 'the Created time is not in UTC after "Show UTC"');
    await t.page.click(tid('zone-toggle'));
    await pageTrue(t.page, () => document.querySelector('[data-testid="zone-label"]').textContent.includes('(UTC+05:30)'), null, 'the zone did not switch back');
  }

  step('live: a firing changes the pair page\'s alert table and removes the alert\'s chart line, and changes the Alerts page\'s row, with no reload (one EventSource on each page)');
  {
    const polled = [];
    const count = (req) => {
      if (/\/site\/v1\/(levels|densities)\//.test(req.url())) polled.push(req.url());
    };
    t.page.on('request', count);
    await setHash(t.page, `#/pair/${VENUE}/${SYMBOL}`);
    await pageTrue(t.page, () => window.rampartChart && window.rampartChart.ready === true, null, 'the chart never became ready');
    // The pair has a perpetual on the simulator: its page follows the perpetual's channels too (decisions.md §17).
    await oneStream(t.page, ['price', 'levels', 'walls', 'perp', 'liquidations'].map((c) => `${c}:${VENUE}:${SYMBOL}`), 'the pair page');
    await until(`no chart line for alert #${first.id}`, async () => (await lines(t.page)).some((l) => l.title.startsWith(`alert #${first.id} `)));
    await visible(t.page, `${alertRow('pair-alerts', first.id)}[data-status="active"]`, 'the pair page does not list the alert as active');
    await t.page.evaluate(() => { window.__marker = 35; });
    await trade(above(1.03));
    await visible(t.page, `${alertRow('pair-alerts', first.id)}[data-status="triggered"]`, 'the pair page\'s alert table did not follow the firing');
    await until('the fired alert\'s chart line stayed', async () => !(await lines(t.page)).some((l) => l.title.startsWith(`alert #${first.id} `)));
    t.page.off('request', count);
    assert.deepEqual(polled, [], 'the pair page asked for levels or walls the stream sends (a pair without walls answers 404)');

    const second = (await apiOk(KEY, 'POST', '/v1/alerts', { symbol: SYMBOL, exchange: VENUE, type: 'price', direction: 'above', price: above(1.05) })).data;
    await nav(t.page, 'alerts');
    const row = alertRow('alerts-table', second.id);
    await visible(t.page, `${row}[data-status="active"]`, 'the new alert is not listed as active');
    await oneStream(t.page, [], 'the alerts page');
    await trade(above(1.06));
    await visible(t.page, `${row}[data-status="triggered"]`, 'the Alerts page did not follow the firing');
    const cells = await t.page.$$eval(`${row} td`, (tds) => tds.map((td) => td.textContent.trim()));
    assert.ok(cells.includes('fired (done)'), `the row does not say it fired: ${cells}`);
    assert.equal(await t.page.evaluate(() => window.__marker), 35, 'the page was reloaded');
    note(`row after the firing: ${cells.join(' | ')}`);
  }

  step('notifications: a burst of one repeating alert is one line; filter by kind and pair; a link to the pair; mute and unmute');
  {
    const rep = (await apiOk(KEY, 'POST', '/v1/alerts', { symbol: SYMBOL, exchange: VENUE, type: 'price', direction: 'above', price: above(1.08), repeat: true })).data;
    await nav(t.page, 'notifications');
    await visible(t.page, loaded('inbox-list'), 'the inbox did not load');
    for (const f of [1.09, 1.07, 1.09]) {
      await trade(above(f));
      await sleep(700);
    }
    const burst = `${tid('inbox-list')} li[data-alert-id="${rep.id}"]`;
    await visible(t.page, `${burst}[data-group-size="2"]`, 'two firings of one alert within a minute are not one line');
    assert.equal((await t.page.$$(burst)).length, 1, 'the burst shows as more than one line');
    note(`burst: "${(await t.page.textContent(burst)).trim()}"`);
    const entry = `${tid('inbox-list')} li[data-alert-id="${first.id}"]`;
    assert.equal(await t.page.getAttribute(`${entry} ${tid('inbox-pair-link')}`, 'href'), `#/pair/${VENUE}/${SYMBOL}`);
    await t.page.selectOption(tid('inbox-kind'), 'market.triggered');
    await gone(t.page, entry, 'the kind filter kept a price alert\'s entry');
    await t.page.selectOption(tid('inbox-kind'), 'price');
    await visible(t.page, entry, 'the kind filter hid a price alert\'s entry');
    await t.page.fill(tid('inbox-pair'), 'NOSUCHPAIR');
    await gone(t.page, entry, 'the pair filter kept another pair\'s entry');
    await t.page.fill(tid('inbox-pair'), SYMBOL.slice(0, 3).toLowerCase());
    await visible(t.page, entry, 'the pair filter hid the pair\'s entry');
    await t.page.click(`${burst} ${tid('mute')}`);
    await gone(t.page, burst, 'a muted alert\'s entries still show');
    await visible(t.page, `${tid('muted-list')} ${tid('unmute')}[data-mute="api:${rep.id}"]`, 'the muted alert is not listed');
    await t.page.check(tid('inbox-show-muted'));
    await visible(t.page, burst, '"Show muted alerts" does not show it');
    await t.page.uncheck(tid('inbox-show-muted'));
    await t.page.click(`${tid('muted-list')} ${tid('unmute')}[data-mute="api:${rep.id}"]`);
    await visible(t.page, burst, 'Unmute did not bring the entries back');
    await t.page.click(tid('inbox-older'));
    await until('"Show older" did not end at the oldest entry', async () => t.page.isHidden(tid('inbox-older')));
    await apiOk(KEY, 'DELETE', `/v1/alerts/${rep.id}`);
  }

  step('screener: every pair in pages of 50, search, sort by any column, volume in US dollars (the quote\'s USD price)');
  {
    await nav(t.page, 'market');
    const rows = `${tid('rankings-table')} tbody tr[data-symbol]`;
    await visible(t.page, rows, 'the screener stayed empty');
    const total = (await apiOk(KEY, 'GET', `/v1/metrics?exchange=${VENUE}`)).data.length;
    assert.ok(total > 50, `the server lists ${total} pairs: paging needs more than 50`);
    await until('the screener does not count every pair', async () => (await t.page.textContent(tid('screener-count'))) === `Pairs 1–50 of ${total}`);
    assert.equal((await t.page.$$(rows)).length, 50);
    await t.page.click(tid('screener-next'));
    await until('Next did not show the rest', async () => (await t.page.textContent(tid('screener-count'))) === `Pairs 51–${total} of ${total}`);
    assert.equal((await t.page.$$(rows)).length, total - 50);
    assert.equal(await t.page.isDisabled(tid('screener-next')), true, 'Next is enabled on the last page');
    await t.page.click(tid('screener-prev'));
    await t.page.click(`${tid('rankings-table')} button[data-sort="change"]`);
    await pageTrue(t.page, () => document.querySelector('[data-testid="rankings-table"] th[aria-sort] button')?.getAttribute('data-sort') === 'change', null, 'sorting by Change % did not take');
    const changes = await t.page.$$eval(`${rows} td[data-col="change"]`, (tds) => tds.map((td) => td.textContent.replace('%', '').replace('+', '').replace(/,/g, '')).filter((x) => x !== '–').map(Number));
    assert.ok(changes.length > 1 && changes.every((c, i) => i === 0 || changes[i - 1] >= c), `Change % is not largest first: ${changes}`);
    await t.page.fill(tid('screener-search'), SYMBOL.slice(0, 3).toLowerCase());
    await until('the search did not narrow the table', async () => {
      const syms = await t.page.$$eval(rows, (rs) => rs.map((r) => r.getAttribute('data-symbol')));
      return syms.length > 0 && syms.length < 50 && syms.every((x) => x.includes(SYMBOL.slice(0, 3)));
    });
    // Volume (USD) of a pair is its quote volume times its quote's USD price, as the page's own
    // read of /site/v1/metrics?usd=true gave them (a fresh API read would see a newer board).
    await until('Volume (USD) is not the quote volume in dollars', async () => {
      const read = await t.page.waitForResponse((r) => r.url().includes('/site/v1/metrics?') && r.url().includes('usd=true'), { timeout: 10_000 });
      const entry = (await read.json()).data.find((e) => e.symbol === SYMBOL);
      const want = await t.page.evaluate((x) => '$' + new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 2 }).format(x), entry.data.volume * entry.quoteUsd);
      await sleep(500); // drawn; the next read is 5 s away
      const shown = await t.page.textContent(`${rows}[data-symbol="${SYMBOL}"] td[data-col="volumeUsd"]`);
      return shown === want ? true : (note(`shown ${shown}, read ${want}`), false);
    });
    await t.page.fill(tid('screener-search'), '');
  }

  step('the chart draws the nearest levels and the largest walls, every one on request, and no title over the candles');
  {
    await setHash(t.page, `#/pair/${VENUE}/${SYMBOL}`);
    await pageTrue(t.page, () => window.rampartChart && window.rampartChart.ready === true, null, 'the chart never became ready');
    // The served levels as the page's table lists them (the stream's): polling the API here would
    // spend the key's 120 requests a minute.
    const served = async () => (await t.page.$$(`${tid('pair-levels')} tbody tr:not(:has(td.empty))`)).length;
    const levelLines = async () => (await lines(t.page)).filter((l) => /^[SR] /.test(l.title)).length;
    await until('the chart does not draw the 6 nearest levels', async () => (await levelLines()) === Math.min(6, await served()));
    note(await t.page.textContent(tid('chart-shown')));
    await t.page.selectOption(tid('chart-lines'), 'all');
    await until('"Every level and wall" did not draw every level', async () => (await levelLines()) === (await served()));
    await t.page.selectOption(tid('chart-lines'), 'near');
  }

  const keep = (await apiOk(KEY, 'POST', '/v1/alerts', { symbol: SYMBOL, exchange: VENUE, type: 'price', direction: 'above', price: above(3) })).data;
  step('layouts: at 1280 and 390 px an alert row\'s Delete and a key\'s Revoke are on screen, and the key table\'s warning is not cut');
  for (const viewport of [DESKTOP, PHONE]) {
    const p = await newPage(browser, `trader-${viewport.width}`, viewport, ZONE);
    await signIn(p.page, KEY, 'trader');
    await nav(p.page, 'alerts');
    await visible(p.page, alertRow('alerts-table', keep.id), 'the alert is not listed');
    await inView(p.page, `${alertRow('alerts-table', keep.id)} ${tid('alert-delete')}`, viewport.width, `Delete at ${viewport.width} px`);
    await nav(p.page, 'settings');
    await visible(p.page, loaded('keys-table'), 'the keys did not load');
    await inView(p.page, `${tid('keys-table')} ${tid('key-revoke')}`, viewport.width, `Revoke at ${viewport.width} px`);
    const caption = await p.page.locator('.caption', { hasText: 'revoking' }).boundingBox();
    assert.ok(caption && caption.x >= 0 && caption.x + caption.width <= viewport.width, `the key table's warning is cut at ${viewport.width} px`);
    await p.context.close();
  }

  step('Delete asks first, naming the alert; Cancel keeps it; Undo takes a confirmed delete back; without Undo it goes');
  {
    await nav(t.page, 'alerts');
    const row = alertRow('alerts-table', keep.id);
    await t.page.click(`${row} ${tid('alert-delete')}`);
    await visible(t.page, tid('confirm'), 'Delete asked for no confirmation');
    const text = await t.page.textContent(tid('confirm-text'));
    assert.ok(text.includes(`#${keep.id}`) && text.includes(SYMBOL), `the confirmation does not name the alert: ${text}`);
    await t.page.click(tid('confirm-no'));
    await gone(t.page, tid('confirm'), 'the confirmation stayed after Cancel');
    await sleep(500);
    assert.equal(await t.page.$(`${row}[data-pending-delete]`), null, 'Cancel deleted');
    await t.page.click(`${row} ${tid('alert-delete')}`);
    await t.page.click(tid('confirm-yes'));
    await visible(t.page, `${row}[data-pending-delete] ${tid('undo-delete')}`, 'a confirmed delete offers no Undo');
    await t.page.click(`${row} ${tid('undo-delete')}`);
    await visible(t.page, `${row} ${tid('alert-delete')}`, 'Undo did not bring the row back');
    await sleep(UNDO_MS + 1000);
    const still = (await apiOk(KEY, 'GET', '/v1/alerts?status=all')).data;
    assert.ok(still.some((a) => a.id === keep.id), 'the alert was deleted after Undo');
    await t.page.click(`${row} ${tid('alert-delete')}`);
    await t.page.click(tid('confirm-yes'));
    const asked = Date.now();
    await gone(t.page, row, 'the confirmed delete did not happen', UNDO_MS + WAIT);
    const all = (await apiOk(KEY, 'GET', '/v1/alerts?status=all')).data;
    assert.ok(!all.some((a) => a.id === keep.id), 'GET /v1/alerts still lists the deleted alert');
    note(`deleted ${((Date.now() - asked) / 1000).toFixed(1)} s after the confirmation`);
  }

  step('Revoke asks first naming the key; the session\'s own key needs its id typed');
  {
    await nav(t.page, 'settings');
    await visible(t.page, loaded('keys-table'), 'the keys did not load');
    const before = await t.page.$$eval(`${tid('keys-table')} tr[data-key-id]`, (rs) => rs.map((r) => r.getAttribute('data-key-id')));
    await t.page.fill('input[name="label"]', 'bot');
    await t.page.click(tid('key-create'));
    const made = await until('the new key is not listed', async () => {
      const now = await t.page.$$eval(`${tid('keys-table')} tr[data-key-id]`, (rs) => rs.map((r) => r.getAttribute('data-key-id')));
      return now.find((id) => !before.includes(id));
    });
    await t.page.click(`${tid('keys-table')} tr[data-key-id="${made}"] ${tid('key-revoke')}`);
    const text = await t.page.textContent(tid('confirm-text'));
    assert.ok(text.includes(`key #${made} (bot)`), `the confirmation does not name the key: ${text}`);
    assert.equal(await t.page.$(tid('confirm-typed')), null, 'another key asks for typing');
    assert.ok((await t.page.textContent(tid('key-new'))).includes('(bot)'), 'the new key\'s notice drops its label');
    await t.page.click(tid('confirm-yes'));
    await until('the key is not shown revoked', async () => (await t.page.textContent(`${tid('keys-table')} tr[data-key-id="${made}"]`)).includes('revoked'));

    const own = `${tid('keys-table')} tr[data-current="true"]`;
    const ownId = await t.page.getAttribute(own, 'data-key-id');
    await t.page.click(`${own} ${tid('key-revoke')}`);
    await visible(t.page, tid('confirm-typed'), 'the session\'s own key asks for no typing');
    assert.ok((await t.page.textContent(tid('confirm-text'))).includes('signs you out'), 'the confirmation does not say it signs out');
    assert.equal(await t.page.isDisabled(tid('confirm-yes')), true, 'Revoke is enabled before the id is typed');
    await t.page.fill(tid('confirm-typed'), ownId + '0');
    assert.equal(await t.page.isDisabled(tid('confirm-yes')), true, 'Revoke is enabled by a wrong id');
    await t.page.fill(tid('confirm-typed'), ownId);
    assert.equal(await t.page.isDisabled(tid('confirm-yes')), false, 'Revoke stays disabled with the id typed');
    await t.page.click(tid('confirm-no'));
    await gone(t.page, tid('confirm'), 'the confirmation stayed after Cancel');
    assert.equal((await apiOk(KEY, 'GET', '/v1/alerts')).data !== undefined, true, 'the session\'s key no longer works');
  }

  step('a market alert that could not fire (at the number\'s value now) is refused, naming the value; refusals use the form\'s words; a repeating density alert takes a quiet time, is listed as a wall alert, and its Delete goes to DELETE /site/v1/alerts/{id}');
  {
    await nav(t.page, 'alerts');
    const form = tid('site-alert-form');
    // Threshold 0, above: a count is always at or above it, so the alert could never fire. (The
    // value now as the threshold raced the moving board: it could drop below before the submit.)
    await t.page.selectOption(`${form} select[name="type"]`, 'market');
    await t.page.selectOption(`${form} select[name="number"]`, 'up5');
    await t.page.selectOption(`${form} select[name="interval"]`, '1d');
    await t.page.selectOption(`${form} select[name="direction"]`, 'above');
    await t.page.fill(`${form} input[name="threshold"]`, '0');
    await t.page.click(`${form} button[type="submit"]`);
    await pageTrue(t.page, (s) => (document.querySelector(s)?.textContent || '').includes('now'), tid('site-alert-error'), 'no refusal shown');
    const refusal = (await t.page.textContent(tid('site-alert-error'))).trim();
    assert.match(refusal, /^The count of pairs up 5 % or more on binance \(1d\) is \d+ now, already at or above 0: .* Choose a threshold above \d+\.$/);
    note(`refusal: "${refusal}"`);
    await t.page.selectOption(`${form} select[name="type"]`, 'density');
    await t.page.fill(`${form} input[name="min_usd"]`, '');
    await t.page.click(`${form} button[type="submit"]`);
    await pageTrue(t.page, (s) => {
      const text = document.querySelector(s)?.textContent || '';
      return text !== '' && !text.includes('now'); // a submission clears the old refusal first
    }, tid('site-alert-error'), 'the refusal did not change');
    const words = (await t.page.textContent(tid('site-alert-error'))).trim();
    assert.equal(words, 'Missing: Minimum wall value (USD)', `the refusal does not use the form's label: ${words}`);
    // It stands beside its field, which is marked invalid and has the focus.
    await visible(t.page, `${form} .field:has(input[name="min_usd"]) ${tid('site-alert-error')}`, 'the refusal is not beside its field');
    assert.equal(await t.page.getAttribute(`${form} input[name="min_usd"]`, 'aria-invalid'), 'true');
    assert.equal(await t.page.evaluate(() => document.activeElement?.name), 'min_usd', 'the refused field has not the focus');
    note(`refusal: "${words}"`);
    // A refused value is repeated with the field's label: what was typed, in the form's words.
    await t.page.fill(`${form} input[name="min_usd"]`, '-5');
    await t.page.click(`${form} button[type="submit"]`);
    await pageTrue(t.page, (s) => (document.querySelector(s)?.textContent || '').includes('-5'), tid('site-alert-error'), 'the refusal does not say what was typed');
    const typed = (await t.page.textContent(tid('site-alert-error'))).trim();
    assert.ok(typed.startsWith('Minimum wall value (USD) must be') && !typed.includes('min_usd'), `the refusal says: ${typed}`);
    note(`refusal: "${typed}"`);
    // A repeating density alert with a quiet time after each firing: the account's wall alert on
    // "appeared" (decisions.md §15), in the alerts table, not among the market alerts.
    await t.page.fill(`${form} input[name="min_usd"]`, '1000000000000');
    await t.page.check(`${form} input[name="repeat"]`);
    await t.page.fill(`${form} input[name="cooldown_s"]`, '900');
    await t.page.click(`${form} button[type="submit"]`);
    await pageTrue(t.page, (s) => /^Wall alert #\d+ created/.test((document.querySelector(s)?.textContent || '').trim()), tid('site-alert-status'), 'the density form did not say the alert was made');
    const id = Number((await t.page.textContent(tid('site-alert-status'))).trim().match(/^Wall alert #(\d+)/)[1]);
    const made = (await apiOk(KEY, 'GET', '/v1/alerts')).data.find((a) => a.id === id);
    assert.ok(made, `GET /v1/alerts does not list the density alert #${id}`);
    assert.deepEqual([made.type, made.event, made.symbol, made.minUsd, made.repeat, made.cooldownS, made.webhookUrl],
      ['wall', 'appeared', '*', 1e12, true, 900, null], JSON.stringify(made));
    const row = `${alertRow('alerts-table', made.id)}[data-type="wall"]`;
    await visible(t.page, row, 'the repeating density alert is not in the alerts table');
    const condition = await t.page.textContent(row);
    assert.ok(condition.includes('every Binance pair') && condition.includes('then quiet for 15 min per pair'), `the row says: ${condition}`);
    assert.equal(await t.page.$(`${tid('site-alerts-table')} tr[data-site-alert-id="${made.id}"]`), null, 'the density alert is listed with the market alerts');
    const deletes = [];
    const seen = (req) => {
      if (req.method() === 'DELETE') deletes.push(new URL(req.url()).pathname);
    };
    t.page.on('request', seen);
    await t.page.click(`${row} ${tid('alert-delete')}`);
    await t.page.click(tid('confirm-yes'));
    await gone(t.page, row, 'the density alert\'s confirmed delete did not happen', UNDO_MS + WAIT);
    t.page.off('request', seen);
    assert.deepEqual(deletes, [`/site/v1/alerts/${made.id}`], `the deletes sent: ${deletes}`);
    assert.ok(!(await apiOk(KEY, 'GET', '/v1/alerts?status=all')).data.some((a) => a.id === made.id), 'GET /v1/alerts still lists the deleted density alert');
  }
  await t.context.close();
  noPageErrors();
}

await run('trader browser test', main);
