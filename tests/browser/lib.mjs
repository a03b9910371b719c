// Helpers of the browser tests of rampart's site (tests/browser/*.mjs): inputs, reporting, HTTP from node, the venue simulator, waiting, and one Chromium run with its console watched.

import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import http from 'node:http';
import { chromium } from 'playwright-core';

// ---- Inputs ----
export function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`environment variable ${name} is required`);
  return v;
}

export const BASE = env('RAMPART_URL').replace(/\/+$/, '');
export const SIM = env('SIM_URL').replace(/\/+$/, '');
export const SYMBOL = (process.env.SYMBOL || 'BTCUSDT').toUpperCase();
export const VENUE = 'binance';
export const WAIT = 30_000; // the longest any single wait may take
export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

// ---- Reporting ----
let stepNo = 0;
/** The number of the step running now. */
export const stepNow = () => stepNo;
export function step(text) {
  stepNo += 1;
  console.log(`step ${stepNo}: ${text}`);
}
export function note(text) {
  console.log(`  ${text}`);
}

// ---- HTTP from node (API keys) ----
export async function api(key, method, pathAndQuery, body) {
  const init = { method, headers: { Authorization: `Bearer ${key}`, Accept: 'application/json' }, signal: AbortSignal.timeout(WAIT) };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(BASE + pathAndQuery, init);
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  return { status: res.status, json, text };
}

export async function apiOk(key, method, pathAndQuery, body) {
  const r = await api(key, method, pathAndQuery, body);
  assert.ok(r.status >= 200 && r.status < 300, `${method} ${pathAndQuery} answered ${r.status}: ${r.text}`);
  return r.json;
}

export async function placeWall(qty) {
  const res = await fetch(`${SIM}/sim/level`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ venue: VENUE, symbol: SYMBOL, side: 'bid', depth: 5, qty }),
    signal: AbortSignal.timeout(WAIT),
  });
  const text = await res.text();
  assert.equal(res.status, 200, `POST ${SIM}/sim/level answered ${res.status}: ${text}`);
  const price = Number(JSON.parse(text).price);
  assert.ok(Number.isFinite(price), `the simulator answered no wall price: ${text}`);
  return price;
}

/** Moves the simulated venue's price with one trade. */
export async function trade(price) {
  const res = await fetch(`${SIM}/sim/trade`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ venue: VENUE, symbol: SYMBOL, price: String(price) }),
    signal: AbortSignal.timeout(WAIT),
  });
  assert.equal(res.status, 200, `POST ${SIM}/sim/trade answered ${res.status}: ${await res.text()}`);
}

// ---- A webhook receiver on loopback: answers 500 to its first delivery, 200 after ----
// (`{ failFirst: false }`: 200 to every one; `delayMs`: each answer that much later).
export function receiver({ failFirst = true, delayMs = 0 } = {}) {
  const got = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      const status = failFirst && got.length === 1 ? 500 : 200;
      setTimeout(() => {
        res.writeHead(status, { 'Content-Length': '0', Connection: 'close' });
        res.end();
      }, delayMs);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, got, port: server.address().port })));
}

/** The Standard Webhooks v1 signatures `secret` makes for a delivery (our own reading of the
 * format, through node's HMAC; tests/tests/signing.rs checks the same against the reference library). */
export function signature(secret, d) {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const signed = `${d.headers['webhook-id']}.${d.headers['webhook-timestamp']}.${d.body}`;
  return 'v1,' + createHmac('sha256', key).update(signed).digest('base64');
}

// ---- Waiting ----
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls fn (async, returns a truthy value when done) for at most ms; fails with message. */
export async function until(message, fn, ms = WAIT) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${ms / 1000} s: ${message}${last ? ` (last error: ${last.message})` : ''}`);
    }
    await sleep(250);
  }
}

export async function visible(page, selector, message, ms = WAIT) {
  try {
    return await page.waitForSelector(selector, { state: 'visible', timeout: ms });
  } catch (e) {
    throw new Error(`timed out after ${ms / 1000} s: ${message} (${selector})`);
  }
}

export async function gone(page, selector, message, ms = WAIT, state = 'detached') {
  try {
    await page.waitForSelector(selector, { state, timeout: ms });
  } catch (e) {
    throw new Error(`timed out after ${ms / 1000} s: ${message} (${selector})`);
  }
}

/** Waits until `selector` is out of sight: hidden, or not in the page at all. */
export const unseen = (page, selector, message, ms = WAIT) => gone(page, selector, message, ms, 'hidden');

export async function pageTrue(page, fn, arg, message, ms = WAIT) {
  try {
    await page.waitForFunction(fn, arg, { timeout: ms, polling: 200 });
  } catch (e) {
    throw new Error(`timed out after ${ms / 1000} s: ${message}`);
  }
}

export const tid = (id) => `[data-testid="${id}"]`;

/** Waits for the market page after submitting the sign-in form; a refusal fails with the page's message. */
export async function signedIn(page, who) {
  try {
    await page.waitForFunction(() => {
      const err = document.querySelector('[data-testid="signin-error"]');
      return document.querySelector('[data-testid="market-board"]') || (err && err.textContent.trim() !== '' && !document.querySelector('[data-testid="signin-submit"]:disabled'));
    }, null, { timeout: WAIT, polling: 200 });
  } catch (e) {
    throw new Error(`timed out after ${WAIT / 1000} s: the market page did not show after signing in as ${who}`);
  }
  const refused = await page.$(tid('market-board')) ? '' : await page.textContent(tid('signin-error'));
  if (refused) throw new Error(`signing in as ${who} was refused: ${refused.trim()}`);
}
export const loaded = (id) => `${tid(id)}[aria-busy="false"]`;

/**
 * Waits until the page holds exactly one EventSource not closed, on `/site/v1/stream` with the
 * channels `alerts` and then `channels`, and a `since`; answers its `since`. Every EventSource
 * the page ever made is on `/site/v1/stream` (none on `/site/events`).
 */
export async function oneStream(page, channels, what) {
  const want = ['alerts'].concat(channels).join(',');
  let seen = '';
  try {
    return await until(`${what}: the page does not hold exactly one open EventSource with channels ${want}`, async () => {
      const all = await page.evaluate(() => window.__eventSources());
      const open = all.filter((e) => e.open).map((e) => new URL(e.url));
      seen = JSON.stringify(all);
      const other = all.find((e) => new URL(e.url).pathname !== '/site/v1/stream');
      if (other) throw new Error(`an EventSource on ${other.url}`);
      if (open.length !== 1 || open[0].searchParams.get('channels') !== want) return null;
      const since = open[0].searchParams.get('since');
      return since !== null && /^[0-9]+$/.test(since) ? { since: Number(since) } : null;
    });
  } catch (e) {
    throw new Error(`${e.message}; its EventSources: ${seen}`);
  }
}

// ---- Browser: console errors, page errors and CSP violations are recorded for every page ----
export const consoleErrors = [];
export const pageErrors = [];
export const cspViolations = [];

export function watch(page, who) {
  page.on('console', (m) => {
    if (m.type() !== 'error' && m.type() !== 'warning') return;
    const text = m.text();
    if (/Content[- ]Security[- ]Policy|CSP violation/i.test(text)) cspViolations.push(`${who}: ${text}`);
    else if (m.type() === 'error') consoleErrors.push(`${who}: ${text}${m.location().url ? ` (${m.location().url})` : ''}`);
  });
  page.on('pageerror', (e) => pageErrors.push(`${who}: ${e && e.stack ? e.stack : e}`));
}

export async function newPage(browser, who, viewport = DESKTOP, timezoneId = undefined) {
  const context = await browser.newContext({ viewport, baseURL: BASE, timezoneId });
  // The document reports each violation itself too, whatever the console says.
  await context.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) => {
      console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || '(inline)'} at ${e.sourceFile}:${e.lineNumber}`);
    });
  });
  // Every EventSource the page makes is counted, so a test can see how many are open.
  await context.addInitScript(() => {
    const Native = window.EventSource;
    if (!Native) return;
    const made = [];
    window.EventSource = class extends Native {
      constructor(url, init) {
        super(url, init);
        made.push(this);
      }
    };
    window.__eventSources = () => made.map((es) => ({ url: es.url, open: es.readyState !== Native.CLOSED }));
  });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT);
  watch(page, who);
  return { context, page };
}

export async function signIn(page, key, who) {
  const response = await page.goto('/', { waitUntil: 'domcontentloaded', timeout: WAIT });
  await visible(page, tid('signin-key'), 'the sign-in form did not show');
  await page.fill(tid('signin-key'), key);
  await page.click(tid('signin-submit'));
  await signedIn(page, who);
  return response;
}

/** Follows a header link (no reload), as a user would. */
export async function nav(page, name) {
  await page.click(tid(`nav-${name}`));
  await pageTrue(page, (n) => location.hash === `#/${n}`, name, `the ${name} link did not open its page`);
}

export async function setHash(page, hash) {
  await page.evaluate((h) => {
    location.hash = h;
  }, hash);
}

export async function rowIds(page, tableId, attr) {
  return page.$$eval(`${tid(tableId)} tbody tr[${attr}]`, (rows, a) => rows.map((r) => Number(r.getAttribute(a))), attr);
}

export function decimals(tick) {
  const s = String(tick);
  const m = /e-(\d+)$/.exec(s);
  return Math.min(m ? Number(m[1]) : (s.split('.')[1] || '').length, 8);
}

export const close = (a, b) => Math.abs(a - b) <= 1e-9 * Math.max(Math.abs(a), Math.abs(b), 1e-300);

// ---- Run ----
/** Runs `main(browser)` in headless Chromium; prints the failing step and the page errors, and
 * exits 1 on a failure, 0 when every step passed. */
export async function run(name, main) {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    timeout: WAIT,
  });
  let failed = false;
  try {
    await main(browser);
    console.log(`${name}: all steps passed`);
  } catch (e) {
    failed = true;
    console.error(`FAILED at step ${stepNo}: ${e && e.stack ? e.stack : e}`);
    if (cspViolations.length) console.error(`CSP violations:\n  ${cspViolations.join('\n  ')}`);
    if (pageErrors.length) console.error(`uncaught script errors:\n  ${pageErrors.join('\n  ')}`);
  } finally {
    await browser.close().catch(() => {});
  }
  process.exit(failed ? 1 : 0);
}

/** The last step of every script: no CSP violation and no uncaught script error on any page. */
export function noPageErrors() {
  step('no Content-Security-Policy violation and no uncaught script error on any page');
  if (consoleErrors.length) note(`console errors (not failures): ${consoleErrors.length}\n    ${consoleErrors.slice(0, 20).join('\n    ')}`);
  assert.deepEqual(cspViolations, [], 'Content-Security-Policy violations happened');
  assert.deepEqual(pageErrors, [], 'uncaught script errors happened');
}
