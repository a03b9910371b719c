// Weighs the site's pages: for each page, loaded cold (a fresh browser context: no cache) and signed in, the bytes transferred (and, as the same-run baseline, the bytes without compression) and the times to first contentful paint and to the page's data drawn; the median of RUNS loads, at 1280 px.
//
// Run by tests/tests/site_browser.rs when RAMPART_WEIGH=<file> is set (how perf/site-pages.md is
// made). Environment: RAMPART_URL, SIM_URL, KEY, SYMBOL, WEIGH_OUT (a Markdown file to write).

import { writeFileSync } from 'node:fs';
import { DESKTOP, env, loaded, newPage, note, pageTrue, run, signIn, step, SYMBOL, tid, VENUE, visible } from './lib.mjs';

const KEY = env('KEY');
const OUT = env('WEIGH_OUT');
const RUNS = 5;

const PAGES = [
  ['sign-in', '#/signin', (p) => visible(p, tid('signin-key'), 'the sign-in form did not show')],
  ['market', '#/market', (p) => visible(p, `${loaded('rankings-table')} tbody tr[data-symbol]`, 'the screener did not load')],
  ['pair', `#/pair/${VENUE}/${SYMBOL}`, (p) => pageTrue(p, () => window.rampartChart && window.rampartChart.ready === true, null, 'the chart never became ready')],
  ['alerts', '#/alerts', (p) => visible(p, loaded('site-alerts-table'), 'the alerts did not load')],
  ['notifications', '#/notifications', (p) => visible(p, loaded('inbox-list'), 'the inbox did not load')],
  ['settings', '#/settings', (p) => visible(p, loaded('keys-table'), 'the keys did not load')],
];

const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** One cold load of `hash`: {bytes, requests, fcp, ready} (ms from the navigation's start). */
async function loadOnce(browser, cookies, hash, ready, identity) {
  const p = await newPage(browser, 'weigh', DESKTOP);
  if (cookies) await p.context.addCookies(cookies);
  // The same-run baseline: the files as they are, not compressed.
  if (identity) await p.context.setExtraHTTPHeaders({ 'Accept-Encoding': 'identity' });
  await p.page.goto('/' + hash, { waitUntil: 'domcontentloaded' });
  await ready(p.page);
  const readyAt = await p.page.evaluate(() => performance.now());
  await p.page.waitForTimeout(200);
  const m = await p.page.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    const res = performance.getEntriesByType('resource');
    const fcp = performance.getEntriesByType('paint').find((e) => e.name === 'first-contentful-paint');
    return {
      bytes: (nav ? nav.transferSize : 0) + res.reduce((n, r) => n + r.transferSize, 0),
      requests: 1 + res.length,
      fcp: fcp ? fcp.startTime : null,
    };
  });
  await p.context.close();
  return { bytes: m.bytes, requests: m.requests, fcp: m.fcp, ready: readyAt };
}

async function main(browser) {
  step(`each page ${RUNS} times, cold, at ${DESKTOP.width} px`);
  const s = await newPage(browser, 'session', DESKTOP);
  await signIn(s.page, KEY, 'weigh');
  const cookies = await s.context.cookies();
  const rows = [];
  for (const [name, hash, ready] of PAGES) {
    const runs = [];
    const plain = [];
    for (let i = 0; i < RUNS; i++) {
      runs.push(await loadOnce(browser, name === 'sign-in' ? null : cookies, hash, ready, false));
      plain.push(await loadOnce(browser, name === 'sign-in' ? null : cookies, hash, ready, true));
    }
    const row = {
      name,
      kib: median(runs.map((r) => r.bytes)) / 1024,
      plainKib: median(plain.map((r) => r.bytes)) / 1024,
      requests: median(runs.map((r) => r.requests)),
      fcp: median(runs.map((r) => r.fcp ?? NaN)),
      ready: median(runs.map((r) => r.ready)),
    };
    note(`${name}: ${row.kib.toFixed(1)} KiB (${row.plainKib.toFixed(1)} not compressed) in ${row.requests} requests, first paint ${row.fcp.toFixed(0)} ms, data drawn ${row.ready.toFixed(0)} ms`);
    rows.push(row);
  }
  await s.context.close();
  const table = ['| Page | Transferred (KiB) | Not compressed (KiB) | Ratio | Requests | First contentful paint (ms) | Data drawn (ms) |', '|---|---|---|---|---|---|---|']
    .concat(rows.map((r) => `| ${r.name} | ${r.kib.toFixed(1)} | ${r.plainKib.toFixed(1)} | ${(r.kib / r.plainKib).toFixed(2)} | ${r.requests} | ${r.fcp.toFixed(0)} | ${r.ready.toFixed(0)} |`));
  writeFileSync(OUT, table.join('\n') + '\n');
}

await run('site weight', main);
