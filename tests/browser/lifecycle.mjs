// Steps of the site's browser test for an alert's lifecycle (decisions.md §16, issue #49): edit in place, Pause and Resume, Send test, the flood guard's pause in words; run by site.mjs on its signed-in page.

import assert from 'node:assert/strict';
import {
  apiOk, decimals, gone, loaded, nav, note, pageTrue, receiver, step, SYMBOL, tid, trade, until, VENUE, visible,
} from './lib.mjs';

const FLOOD_ROUNDS_MAX = 20; // crossings tried before the flood guard (more than 15 in 3 minutes) must have paused the alert

const row = (id) => `${tid('alerts-table')} tr[data-alert-id="${id}"]`;
const alertOf = async (key, id) => (await apiOk(key, 'GET', '/v1/alerts?status=all')).data.find((x) => x.id === id);

/** The steps, on `page` (signed in as the account of `key`), with alert `editId` of that account (one that does not fire). */
export async function alertLifecycle(page, key, editId) {
  await editInPlace(page, key, editId);
  await pauseAndResume(page, key, editId);
  await sendTest(page, key);
  await floodGuard(page, key);
}

async function editInPlace(page, key, id) {
  step('edit in place (decisions.md §16): Edit turns the row into a form; a refusal shows beside its field in the form\'s words with what was typed (the quiet time, the message\'s placeholder); Save sends a PATCH of the changed fields only and the row is drawn from the answer; Escape closes the form, the focus back on Edit');
  await nav(page, 'alerts');
  await visible(page, loaded('alerts-table'), 'the alerts table did not load');
  const form = `${row(id)} ${tid('alert-edit')}`;
  await page.click(`${row(id)} ${tid('alert-edit-open')}`);
  await visible(page, form, 'Edit did not turn the row into a form');
  assert.equal(await page.evaluate(() => document.activeElement?.name), 'note', 'the form did not take the focus');
  const patches = [];
  const seen = (req) => { if (req.method() === 'PATCH') patches.push(JSON.parse(req.postData() || '{}')); };
  page.on('request', seen);
  await page.fill(`${form} input[name="note"]`, 'edited in place');
  await page.fill(`${form} input[name="cooldown_s"]`, '86401');
  await page.click(`${form} ${tid('alert-edit-save')}`);
  const beside = `${form} .field:has(input[name="cooldown_s"]) ${tid('alert-edit-error')}`;
  await pageTrue(page, (s) => (document.querySelector(s)?.textContent || '').trim() !== '', beside, 'the refusal is not beside the quiet time');
  const refusal = (await page.textContent(beside)).trim();
  assert.ok(refusal.startsWith('Quiet time after a firing (s)') && refusal.includes('"86401"') && !refusal.includes('cooldown_s'), `the refusal says: ${refusal}`);
  assert.equal(await page.getAttribute(`${form} input[name="cooldown_s"]`, 'aria-invalid'), 'true');
  note(`refusal: "${refusal}"`);
  await page.fill(`${form} input[name="cooldown_s"]`, '600');
  await page.fill(`${form} textarea[name="message"]`, '{{prize}} on {{symbol}}');
  await page.click(`${form} ${tid('alert-edit-save')}`);
  const byMessage = `${form} .field:has(textarea[name="message"]) ${tid('alert-edit-error')}`;
  await pageTrue(page, (s) => (document.querySelector(s)?.textContent || '').includes('prize'), byMessage, 'the template\'s refusal is not beside the message');
  const placeholder = (await page.textContent(byMessage)).trim();
  assert.ok(placeholder.startsWith('Message: unknown placeholder \'{{prize}}\''), `the refusal says: ${placeholder}`);
  note(`refusal: "${placeholder}"`);
  await page.fill(`${form} textarea[name="message"]`, '');
  await page.click(`${form} ${tid('alert-edit-save')}`);
  await gone(page, form, 'the form stayed after Save');
  page.off('request', seen);
  const sent = [{ note: 'edited in place', cooldown_s: 86401 }, { note: 'edited in place', cooldown_s: 600, message: '{{prize}} on {{symbol}}' }, { note: 'edited in place', cooldown_s: 600 }];
  assert.deepEqual(patches, sent, 'the PATCH bodies');
  const words = await page.textContent(row(id));
  assert.ok(words.includes('edited in place') && words.includes('quiet for 10 min'), `the row says: ${words}`);
  const a = await alertOf(key, id);
  assert.deepEqual([a.note, a.cooldownS], ['edited in place', 600], JSON.stringify(a));
  await page.click(`${row(id)} ${tid('alert-edit-open')}`);
  await visible(page, form, 'Edit did not open the form again');
  await page.keyboard.press('Escape');
  await gone(page, form, 'Escape did not close the form');
  await pageTrue(page, (s) => document.activeElement === document.querySelector(s), `${row(id)} ${tid('alert-edit-open')}`, 'the focus is not back on Edit');
}

async function pauseAndResume(page, key, id) {
  step('Pause and Resume: the row says "Paused", then not; GET /v1/alerts agrees (paused by the user)');
  const state = `${row(id)} ${tid('alert-state')}`;
  await page.click(`${row(id)} ${tid('alert-pause')}`);
  await visible(page, `${row(id)}[data-paused="user"]`, 'the row is not paused');
  assert.equal((await page.textContent(state)).trim(), 'Paused');
  let a = await alertOf(key, id);
  assert.deepEqual([a.paused, a.pausedBy], [true, 'user'], JSON.stringify(a));
  assert.equal((await page.textContent(`${row(id)} ${tid('alert-pause')}`)).trim(), 'Resume');
  await page.click(`${row(id)} ${tid('alert-pause')}`);
  await visible(page, `${row(id)}:not([data-paused])`, 'the row is still paused');
  assert.notEqual((await page.textContent(state)).trim(), 'Paused');
  a = await alertOf(key, id);
  assert.deepEqual([a.paused, a.pausedBy], [false, null], JSON.stringify(a));
}

async function sendTest(page, key) {
  step('Send test: an alert whose webhook is a receiver on loopback says "Delivered: 200 in N ms"; a second press while the first is in flight sends nothing');
  const hook = await receiver({ failFirst: false, delayMs: 300 });
  try {
    const p = (await apiOk(key, 'GET', `/v1/symbols/${SYMBOL}?exchange=${VENUE}`)).data;
    const far = Number((p.price * 4).toFixed(decimals(p.tickSize)));
    const made = (await apiOk(key, 'POST', '/v1/alerts', { symbol: SYMBOL, exchange: VENUE, type: 'price', direction: 'above', price: far,
      webhook_url: `http://127.0.0.1:${hook.port}/test` })).data;
    await nav(page, 'market');
    await nav(page, 'alerts');
    const button = `${row(made.id)} ${tid('alert-test')}`;
    await visible(page, button, `alert ${made.id} offers no Send test`);
    const pressed = await page.$eval(button, (b) => { b.click(); const busy = b.disabled; b.click(); return busy; });
    assert.equal(pressed, true, 'Send test was not disabled while in flight');
    const outcome = `${row(made.id)} ${tid('alert-note')}[data-outcome="delivered"]`;
    await visible(page, outcome, 'no "Delivered" outcome in the row');
    const words = (await page.textContent(outcome)).trim();
    assert.match(words, /^Delivered: 200 in \d+ ms$/);
    assert.equal(await page.isDisabled(button), false, 'Send test stayed disabled');
    assert.equal(hook.got.length, 1, `the receiver got ${hook.got.length} tests`);
    assert.equal(JSON.parse(hook.got[0].body).event, 'alert.test', hook.got[0].body);
    note(`outcome: "${words}"`);
    await apiOk(key, 'DELETE', `/v1/alerts/${made.id}`);
  } finally {
    hook.server.close();
  }
}

async function floodGuard(page, key) {
  step('the flood guard: a repeating alert that fires more than 15 times in 3 minutes is paused; its row and the notifications page say so in words, and a firing\'s message (the alert\'s text) shows in the inbox');
  const p = (await apiOk(key, 'GET', `/v1/symbols/${SYMBOL}?exchange=${VENUE}`)).data;
  const dec = decimals(p.tickSize);
  const level = Number((p.price * 1.01).toFixed(dec));
  const made = (await apiOk(key, 'POST', '/v1/alerts', { symbol: SYMBOL, exchange: VENUE, type: 'price', direction: 'above', price: level, repeat: true, cooldown_s: 0 })).data;
  await apiOk(key, 'PATCH', `/v1/alerts/${made.id}`, { message: '{{symbol}} crossed {{price}}' });
  const started = Date.now();
  let a = made;
  for (let i = 0; i < FLOOD_ROUNDS_MAX && !a.paused; i++) {
    const count = a.triggerCount;
    await trade((level * 0.99).toFixed(dec));
    await trade((level * 1.01).toFixed(dec));
    a = await until(`crossing ${i + 1}: alert ${made.id} neither fired nor paused`, async () => {
      const now = await alertOf(key, made.id);
      return now.triggerCount > count || now.paused ? now : null;
    }, 10_000);
  }
  await trade((level * 0.97).toFixed(dec));
  assert.deepEqual([a.paused, a.pausedBy], [true, 'flood_guard'], JSON.stringify(a));
  note(`paused by the flood guard after ${a.triggerCount} firings in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  await visible(page, `${row(made.id)}[data-paused="flood_guard"]`, 'the row does not show the flood guard\'s pause');
  const words = (await page.textContent(`${row(made.id)} ${tid('alert-state')}`)).trim();
  assert.equal(words, 'Paused by the flood guard: fired more than 15 times in 3 minutes');
  await nav(page, 'notifications');
  const item = `${tid('inbox-list')} li[data-kind="alert.paused"][data-alert-id="${made.id}"]`;
  await visible(page, item, `no alert.paused entry of alert ${made.id}`);
  const line = (await page.textContent(item)).trim();
  assert.match(line, new RegExp(`Alert #${made.id} \\(${SYMBOL} on ${VENUE}\\) paused by the flood guard \\(\\d+ firings in 3 minutes\\); resume it on the alerts page`), line);
  const text = `${tid('inbox-list')} li[data-kind="alert.triggered"][data-alert-id="${made.id}"] ${tid('inbox-text')}`;
  await visible(page, text, 'a firing of an alert with a message does not show its text');
  assert.match((await page.textContent(text)).trim(), new RegExp(`^${SYMBOL} crossed `));
  note(`entry: "${line}"`);
  await apiOk(key, 'DELETE', `/v1/alerts/${made.id}`);
}
