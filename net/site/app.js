/* rampart site: the single-page app (hash routes, no framework) over the server's /site/ JSON routes and event stream. */
(function () {
  'use strict';

  // ---- Constants: the value sets of docs/openapi.json and decisions.md §9, §10 ----
  const VENUES = ['binance', 'bybit', 'okx', 'bitget'];
  const INTERVALS = ['5m', '15m', '1h', '4h', '1d', '1w'];
  const CATEGORIES = [
    ['all', 'All pairs'], ['usdt', 'USDT-quoted'], ['usdc', 'USDC-quoted'],
    ['btc', 'BTC-quoted'], ['new', 'New (under 30 days)'],
  ];
  const BOARD_NUMBERS = [
    ['sentiment', 'Sentiment'], ['advancing', 'Advancing'], ['declining', 'Declining'],
    ['up5', 'Up 5% or more'], ['down5', 'Down 5% or more'], ['walls', 'Walls'], ['atLevel', 'At a level'],
  ];
  const BOARD_FIELDS = [
    ['pairs', 'Pairs'], ['advancing', 'Advancing'], ['declining', 'Declining'], ['unchanged', 'Unchanged'],
    ['up5', 'Up ≥ 5%'], ['down5', 'Down ≤ −5%'], ['walls', 'Walls'], ['atLevel', 'At a level'],
  ];
  const KIND_LABELS = {
    'alert.triggered': 'Alert fired', 'alert.delisted': 'Pair delisted',
    'density.triggered': 'Wall alert', 'market.triggered': 'Market alert', 'alert.expired': 'Alert expired',
  };
  const MARKET_REFRESH_MS = 5000;
  const PAIR_REFRESH_MS = 4000;
  const CANDLE_LIMIT = 300;
  const LEVELS_NEAR = 6; // levels drawn on the chart unless "all lines" is chosen: the nearest
  const WALLS_TOP = 4; // walls drawn likewise: the largest in USD
  const INBOX_LIMIT = 100; // entries per read of the inbox ("Show older" reads the next 100)
  const INBOX_KEEP = 5000; // entries held in the page; past it the oldest are forgotten
  const GROUP_MS = 60000; // entries of one alert less than a minute apart show as one line
  const INBOX_KINDS = [
    ['', 'Every kind'], ['alert.triggered', 'Price and percent alerts'], ['density.triggered', 'Wall alerts'],
    ['market.triggered', 'Market alerts'], ['notice', 'Delistings and expiries'],
  ];
  const FIRING_COALESCE_MS = 250; // a burst of firings redraws a page's alert tables once
  const UNDO_MS = 6000; // a confirmed alert delete waits this long for Undo
  const SITE_ALERTS_REFRESH_MS = 10000; // "waiting to re-arm" follows the board without a firing
  const DECIMAL = /^(0|[1-9]\d*)(\.\d+)?$/;
  const SYMBOL = /^[A-Za-z0-9._-]{1,40}$/;

  // ---- State ----
  const state = {
    session: null, // {accountId, plan, csrf}
    venues: VENUES.slice(),
    gen: 0, // bumped at every page change: async work of an older page checks it and stops
    timers: new Set(),
    cleanups: [],
    page: '',
    events: null,
    eventsOpened: false,
    eventsFailures: 0, // refusals in a row, for the back-off of reconnecting

    inbox: new Map(), // entry id -> entry
    lastSeen: 0,
    returnTo: '',
    signinMessage: '',
    market: loadPrefs('market', { exchange: 'binance', category: 'all', interval: '1d', sort: 'volumeUsd', dir: 'desc', search: '', page: 0 }),
    pairInterval: loadPrefs('pairInterval', '1h'),
    chartLines: loadPrefs('chartLines', 'near') === 'all' ? 'all' : 'near', // the pair chart's lines: nearest or every one
    symbolLists: new Map(), // venue -> Promise of symbols
    zone: loadPrefs('zone', 'local') === 'utc' ? 'utc' : 'local', // every time shown: the browser's zone or UTC
    firingListeners: new Set(), // the page's reactions to a firing (cleared when it is left)
    muted: new Set(), // "api:12", "density:3", "market:4": alerts whose entries are hidden
    inboxFilter: { kind: '', pair: '', showMuted: false },
    inboxOlder: true, // older entries may exist beyond those held
  };

  // ---- Small utilities ----
  function loadPrefs(name, fallback) {
    try {
      const v = JSON.parse(localStorage.getItem('rampart.' + name) || 'null');
      if (v === null) return fallback;
      return typeof fallback === 'object' ? Object.assign({}, fallback, v) : v;
    } catch (e) {
      return fallback;
    }
  }

  function savePrefs(name, value) {
    try { localStorage.setItem('rampart.' + name, JSON.stringify(value)); } catch (e) { /* private mode */ }
  }

  function isNum(v) { return typeof v === 'number' && isFinite(v); }

  function safeDecode(s) {
    try { return decodeURIComponent(s); } catch (e) { return s; }
  }

  function pad2(n) { return String(n).padStart(2, '0'); }

  // ---- Time: every time on the site (the chart's included) in one stated zone: the browser's
  // own, named in the header, or UTC a click away (kept per browser) ----
  const LOCAL_ZONE = (() => {
    try { return Intl.DateTimeFormat().resolvedOptions().timeZone || 'local time'; } catch (e) { return 'local time'; }
  })();

  function toDate(v) { return new Date(typeof v === 'number' ? v : String(v)); }

  /** The zone's offset from UTC at `ms`, in minutes (0 in UTC). */
  function zoneOffsetMin(ms) { return state.zone === 'utc' ? 0 : -new Date(ms).getTimezoneOffset(); }

  function fmtOffset(min) {
    const a = Math.abs(min);
    return 'UTC' + (min < 0 ? '−' : '+') + pad2(Math.floor(a / 60)) + ':' + pad2(a % 60);
  }

  /** The zone as the header states it: "Asia/Kolkata (UTC+05:30)" or "UTC". */
  function zoneLabel() {
    return state.zone === 'utc' ? 'UTC' : LOCAL_ZONE + ' (' + fmtOffset(zoneOffsetMin(Date.now())) + ')';
  }

  /** Date and time of a Unix-ms number or an ISO string in the stated zone, "YYYY-MM-DD HH:MM:SS". */
  function fmtTime(v) {
    if (v === null || v === undefined || v === '') return '';
    const d = toDate(v);
    if (isNaN(d.getTime())) return String(v);
    // Shifted by the zone's offset, a date's UTC fields are the zone's wall clock.
    const w = new Date(d.getTime() + zoneOffsetMin(d.getTime()) * 60000);
    return w.getUTCFullYear() + '-' + pad2(w.getUTCMonth() + 1) + '-' + pad2(w.getUTCDate()) + ' ' +
      pad2(w.getUTCHours()) + ':' + pad2(w.getUTCMinutes()) + ':' + pad2(w.getUTCSeconds());
  }

  function timeEl(v) {
    const d = toDate(v);
    const attrs = isNaN(d.getTime()) ? {} : { datetime: d.toISOString(), title: d.toISOString().replace('.000Z', 'Z') + ' (UTC)' };
    attrs.text = fmtTime(v);
    return h('time', attrs);
  }

  // A browser set to UTC has nothing to switch to.
  const LOCAL_IS_UTC = /^(Etc\/)?(UTC|GMT|UCT|Universal|Zulu)$/.test(LOCAL_ZONE);

  function showZone() {
    say(document.getElementById('zone-label'), 'Times: ' + (LOCAL_IS_UTC ? 'UTC' : zoneLabel()));
    const button = document.getElementById('zone');
    button.hidden = LOCAL_IS_UTC;
    say(button, state.zone === 'utc' ? 'Show ' + LOCAL_ZONE : 'Show UTC');
  }

  function toggleZone() {
    state.zone = state.zone === 'utc' ? 'local' : 'utc';
    savePrefs('zone', state.zone);
    showZone();
    if (state.session) {
      state.page = '';
      route(); // every time on the page, and the chart's axis, drawn again in the new zone
    }
  }

  const numberFmt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 2 });
  const compactFmt = new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 2 });
  const intFmt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

  function fmtPrice(v) { return isNum(v) ? String(v) : '–'; }
  function fmtInt(v) { return isNum(v) ? intFmt.format(v) : '–'; }
  function fmtCompact(v) { return isNum(v) ? compactFmt.format(v) : '–'; }
  function fmtUsd(v) { return isNum(v) ? '$' + compactFmt.format(v) : '–'; }
  function fmtPct(v, signed) {
    if (!isNum(v)) return '–';
    const s = numberFmt.format(v) + '%';
    return signed && v > 0 ? '+' + s : s;
  }

  function signClass(v) { return isNum(v) ? (v > 0 ? 'up' : v < 0 ? 'down' : '') : ''; }

  function labelOf(pairs, value) {
    const hit = pairs.find((p) => p[0] === value);
    return hit ? hit[1] : String(value);
  }

  // ---- DOM building (createElement/textContent only: server data never goes through innerHTML) ----
  function h(tag, attrs) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'text') el.textContent = String(v);
      else if (k === 'class') el.className = v;
      else if (k === 'testid') el.setAttribute('data-testid', v);
      else if (k.slice(0, 2) === 'on' && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    for (let i = 2; i < arguments.length; i++) append(el, arguments[i]);
    return el;
  }

  function append(el, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) child.forEach((c) => append(el, c));
    else el.append(child instanceof Node ? child : String(child));
  }

  let fieldSeq = 0;

  /** A labelled control: {wrap, input}. kind is 'select' (with options [[value, text]]), or an input type. */
  function field(label, name, kind, opts) {
    const o = opts || {};
    const id = 'f' + (++fieldSeq) + '-' + name;
    let input;
    if (kind === 'select') {
      input = h('select', { id: id, name: name, testid: o.testid });
      for (const [value, text] of o.options) input.append(h('option', { value: value, text: text }));
      if (o.value !== undefined) input.value = o.value;
    } else {
      input = h('input', {
        id: id, name: name, type: kind, testid: o.testid, placeholder: o.placeholder,
        inputmode: o.inputmode, autocomplete: o.autocomplete || 'off', list: o.list,
        required: o.required, maxlength: o.maxlength, spellcheck: kind === 'text' ? 'false' : null,
      });
      if (o.value !== undefined) input.value = o.value;
    }
    if (kind === 'checkbox') {
      input.checked = !!o.checked;
      return { input: input, wrap: h('div', { class: 'check' }, input, h('label', { for: id, text: label })) };
    }
    const wrap = h('div', { class: 'field' }, h('label', { for: id, text: label }), input);
    if (o.hint) {
      const hintId = id + '-hint';
      wrap.append(h('span', { class: 'hint', id: hintId, text: o.hint }));
      input.setAttribute('aria-describedby', hintId);
    }
    return { input: input, wrap: wrap };
  }

  function options(values) { return values.map((v) => [v, v]); }
  function venueOptions() { return options(state.venues); }

  /**
   * A table inside a horizontally scrolling box, its caption shown above the box (so a wide
   * table never cuts it): {wrap, scroll, table, tbody, cols, setCaption}. A table whose last
   * column is "Action" keeps that column pinned to the box's right edge, so the row's buttons
   * stay in view however far the other columns reach.
   */
  function table(testid, caption, headers) {
    const thead = h('thead', null, h('tr', null, headers.map((hd) => {
      const [text, cls] = Array.isArray(hd) ? hd : [hd, null];
      return h('th', { scope: 'col', class: cls, text: text });
    })));
    const tbody = h('tbody');
    const pinned = headers[headers.length - 1] === 'Action';
    const captionEl = h('caption', { class: 'sr-only', text: caption });
    const shown = h('p', { class: 'caption', 'aria-hidden': 'true', text: caption });
    const tbl = h('table', { testid: testid, 'aria-busy': 'true', class: pinned ? 'pin-last' : null }, captionEl, thead, tbody);
    const scroll = h('div', { class: 'table-wrap' }, tbl);
    const setCaption = (text) => { say(captionEl, text); say(shown, text); };
    return { wrap: h('div', { class: 'table-box' }, shown, scroll), scroll: scroll, table: tbl, tbody: tbody, cols: headers.length, setCaption: setCaption };
  }

  function fillTable(t, rows, emptyText) {
    if (rows.length) t.tbody.replaceChildren(...rows);
    else t.tbody.replaceChildren(h('tr', null, h('td', { colspan: t.cols, class: 'empty', text: emptyText })));
    t.table.setAttribute('aria-busy', 'false');
  }

  function failTable(t, message) {
    t.tbody.replaceChildren(h('tr', null, h('td', { colspan: t.cols, class: 'error', text: message })));
    t.table.setAttribute('aria-busy', 'false');
  }

  function errorBox(testid) { return h('p', { class: 'error', role: 'alert', testid: testid }); }
  function statusBox(testid) { return h('p', { class: 'status', role: 'status', testid: testid }); }
  function say(el, text) { if (el.textContent !== text) el.textContent = text; }

  function pairLink(exchange, symbol) {
    return h('a', { href: '#/pair/' + encodeURIComponent(exchange) + '/' + encodeURIComponent(symbol), text: symbol });
  }

  // ---- HTTP: every call sends the session cookie, state changes the CSRF token; errors carry the server's message ----
  class HttpError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  /** A number written into a JSON body exactly as the user typed it (the server keeps values as sent). */
  class Raw {
    constructor(text) { this.text = text; }
  }

  function toJson(obj) {
    const parts = [];
    for (const [k, v] of Object.entries(obj)) {
      if (v === undefined) continue;
      parts.push(JSON.stringify(k) + ':' + (v instanceof Raw ? v.text : JSON.stringify(v)));
    }
    return '{' + parts.join(',') + '}';
  }

  /** A form's number: undefined when empty, exact text when a plain decimal, else the text (the server names the problem). */
  function numberInput(input) {
    const t = input.value.trim();
    if (t === '') return undefined;
    return DECIMAL.test(t) ? new Raw(t) : t;
  }

  async function call(method, path, body, keepalive) {
    const init = { method: method, credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' } };
    if (keepalive) init.keepalive = true; // outlives the page (a waiting delete sent as the tab closes)
    if (method !== 'GET') {
      init.headers['Content-Type'] = 'application/json';
      if (state.session) init.headers['X-CSRF-Token'] = state.session.csrf;
      if (body !== undefined) init.body = typeof body === 'string' ? body : toJson(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new HttpError(0, 'The server could not be reached (' + (e && e.message ? e.message : 'network error') + ').');
    }
    let text = '';
    try { text = await res.text(); } catch (e) { text = ''; }
    let json = null;
    if (text) {
      try { json = JSON.parse(text); } catch (e) { json = null; }
    }
    if (!res.ok) {
      const message = json && typeof json.error === 'string' && json.error
        ? json.error : 'HTTP ' + res.status + (res.statusText ? ' ' + res.statusText : '');
      if (res.status === 401 && state.session && path.indexOf('/site/signin') !== 0) {
        setTimeout(() => sessionEnded('Your session has ended (' + message + '). Sign in again.'), 0);
      }
      throw new HttpError(res.status, message);
    }
    return json || {};
  }

  function errText(e) { return e && e.message ? e.message : String(e); }

  // The API's field names in a refusal, in the words of the site's forms.
  const FIELD_WORDS = [
    ['min_usd', 'minimum wall value (USD)'], ['max_dist_pct', 'maximum distance from price (%)'],
    ['min_age_s', 'minimum age (s)'], ['cooldown_s', 'quiet time after a firing'], ['webhook_url', 'webhook URL'],
    ['telegramChatId', 'Telegram chat id'],
  ];

  /** A refusal as the server worded it, with its field names replaced by the form's labels. */
  function humanize(message) {
    let m = message;
    for (const [name, words] of FIELD_WORDS) m = m.split("'" + name + "'").join(words).split(name).join(words);
    return m.replace(/^missing field /, 'Missing: ');
  }

  // One form submission: the button busy meanwhile, old messages cleared, a refusal shown as
  // the server worded it (field names in the form's words).
  async function submitting(submit, error, status, work) {
    submit.disabled = true;
    say(error, '');
    if (status) say(status, '');
    try {
      await work();
    } catch (e) {
      say(error, humanize(errText(e)));
    } finally {
      submit.disabled = false;
    }
  }

  function q(params) {
    const u = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') u.set(k, v);
    const s = u.toString();
    return s ? '?' + s : '';
  }

  function v1(path, params) { return '/site/v1/' + path + q(params || {}); }
  function enc(s) { return encodeURIComponent(s); }

  // ---- Page lifecycle: timers and cleanups of the current page end when the route changes ----
  function leavePage() {
    state.gen++;
    state.timers.forEach((t) => clearTimeout(t));
    state.timers.clear();
    state.cleanups.splice(0).forEach((f) => { try { f(); } catch (e) { /* already gone */ } });
  }

  function current(gen) { return gen === state.gen; }

  /** Runs fn every ms milliseconds (after the previous run ended) while the page stays, skipping hidden tabs. */
  function poll(ms, fn) {
    const gen = state.gen;
    const schedule = () => {
      const t = setTimeout(async () => {
        state.timers.delete(t);
        if (!current(gen)) return;
        if (!document.hidden) {
          try { await fn(); } catch (e) { /* fn shows its own errors */ }
        }
        if (current(gen)) schedule();
      }, ms);
      state.timers.add(t);
    };
    schedule();
  }

  function onLeave(fn) { state.cleanups.push(fn); }

  /**
   * Runs `fn` after each notification of the event stream (an alert fired, a pair was delisted)
   * while the page stays: tables of alerts redraw their statuses and counts without a reload.
   * Bursts are coalesced: at most one run per FIRING_COALESCE_MS.
   */
  function onFiring(fn) {
    let timer = 0;
    const listener = () => {
      if (timer) return;
      timer = setTimeout(() => { timer = 0; fn(); }, FIRING_COALESCE_MS);
    };
    state.firingListeners.add(listener);
    onLeave(() => {
      clearTimeout(timer);
      state.firingListeners.delete(listener);
    });
  }

  /**
   * The page's market stream (`GET /site/v1/stream`, server-sent events with the session):
   * `onMessage` gets each message of `channels` while the page stays; `live()` says whether it
   * is open now (the page polls what it would otherwise push while it is not). Closed when the
   * page is left; a dropped stream is reopened by the browser and starts from new snapshots.
   */
  function marketStream(channels, onMessage) {
    const status = { live: () => false, waiting: () => false, close: () => {}, messages: 0 };
    window.rampartStream = status;
    if (typeof EventSource === 'undefined') return status;
    const es = new EventSource('/site/v1/stream' + q({ channels: channels.join(',') }));
    status.live = () => es.readyState === EventSource.OPEN;
    // Open, or (re)connecting: its snapshots will come; closed (refused) is when a page polls.
    status.waiting = () => es.readyState !== EventSource.CLOSED;
    status.close = () => es.close();
    es.onmessage = (ev) => {
      let m = null;
      try { m = JSON.parse(ev.data); } catch (e) { return; }
      if (!m || typeof m !== 'object' || !m.channel) return;
      status.messages += 1;
      onMessage(m);
    };
    onLeave(() => {
      es.close();
      if (window.rampartStream === status) window.rampartStream = null;
    });
    return status;
  }

  function mount(title, nodes) {
    document.title = title + ' · rampart';
    const main = document.getElementById('main');
    main.replaceChildren(...nodes);
  }

  function focusHeading() {
    const h1 = document.querySelector('#main h1');
    if (h1) {
      h1.setAttribute('tabindex', '-1');
      h1.focus({ preventScroll: true });
    }
  }

  // ---- Routing ----
  function parseRoute() {
    const raw = location.hash.replace(/^#\/?/, '');
    return raw.split('/').filter(Boolean).map(safeDecode);
  }

  function go(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
  }

  function route() {
    const parts = parseRoute();
    if (!state.session) {
      if (parts[0] !== 'signin' && location.hash) state.returnTo = location.hash;
      showSignin();
      return;
    }
    const [name, a, b] = parts;
    let page = null;
    if (name === 'market' || !name) page = () => marketPage();
    else if (name === 'pair' && a && b) page = () => pairPage(a.toLowerCase(), b.toUpperCase());
    else if (name === 'alerts') page = () => alertsPage();
    else if (name === 'notifications') page = () => notificationsPage();
    else if (name === 'settings') page = () => settingsPage();
    if (!page) {
      location.replace('#/market');
      return;
    }
    leavePage();
    state.page = name || 'market';
    markNav(state.page);
    page();
    focusHeading();
  }

  function markNav(name) {
    document.querySelectorAll('.nav a[data-route]').forEach((a) => {
      if (a.getAttribute('data-route') === name) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    });
  }

  // ---- Session: sign-in, sign-out, the header ----
  async function boot() {
    document.getElementById('signout').addEventListener('click', signOut);
    document.getElementById('zone').addEventListener('click', toggleZone);
    showZone();
    document.getElementById('skip-link').addEventListener('click', (ev) => {
      ev.preventDefault();
      document.getElementById('main').focus();
    });
    window.addEventListener('hashchange', route);
    resetChartHandle();
    try {
      const r = await call('GET', '/site/session');
      startSession(r.data);
    } catch (e) {
      if (e.status !== 401) state.signinMessage = 'Could not check the session: ' + errText(e);
    }
    route();
  }

  function startSession(data) {
    if (!data || typeof data.csrf !== 'string') throw new HttpError(0, 'The server answered without a session.');
    state.session = { accountId: data.accountId, plan: data.plan, csrf: data.csrf };
    state.inbox.clear();
    state.lastSeen = Number(loadPrefs('seen.' + data.accountId, 0)) || 0;
    state.muted = mutedSet();
    state.inboxOlder = true;
    document.getElementById('top').hidden = false;
    say(document.getElementById('who'), 'Account ' + data.accountId + ' · ' + data.plan + ' plan');
    updateBadge();
    loadVenues();
    loadInbox();
    openEvents();
  }

  function endSessionState() {
    state.session = null;
    closeEvents();
    leavePage();
    state.inbox.clear();
    state.symbolLists.clear();
    document.getElementById('top').hidden = true;
    markNav('');
  }

  /** The session is gone (expired, key revoked, signed out elsewhere): back to the sign-in form. */
  function sessionEnded(message) {
    if (!state.session) return;
    const parts = parseRoute();
    if (parts[0] && parts[0] !== 'signin') state.returnTo = location.hash;
    endSessionState();
    state.signinMessage = message || '';
    state.page = '';
    if (location.hash !== '#/signin') location.hash = '#/signin';
    else showSignin();
  }

  async function signOut() {
    const btn = document.getElementById('signout');
    btn.disabled = true;
    await flushDeletes(false); // sent with this session's token, before it ends
    try {
      await call('POST', '/site/signout');
    } catch (e) {
      if (e.status !== 401) {
        btn.disabled = false;
        window.alert('Sign-out failed: ' + errText(e));
        return;
      }
    }
    btn.disabled = false;
    state.returnTo = '';
    endSessionState();
    state.page = '';
    state.signinMessage = '';
    if (location.hash !== '#/signin') location.hash = '#/signin';
    else showSignin();
  }

  function showSignin() {
    if (state.page === 'signin') return;
    leavePage();
    state.page = 'signin';
    resetChartHandle();
    document.getElementById('top').hidden = true;
    const key = field('API key', 'key', 'password', { testid: 'signin-key', autocomplete: 'current-password', required: true });
    const error = errorBox('signin-error');
    error.textContent = state.signinMessage;
    state.signinMessage = '';
    const submit = h('button', { type: 'submit', testid: 'signin-submit', text: 'Sign in' });
    const form = h('form', { class: 'panel', 'aria-labelledby': 'signin-h', novalidate: true },
      key.wrap,
      h('p', { class: 'hint', text: 'Use one of your account\'s API keys (rk_…). The key is sent once; the session lives in a cookie the page cannot read.' }),
      h('div', { class: 'actions' }, submit),
      error);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const value = key.input.value.trim();
      if (!value) {
        say(error, 'Enter an API key.');
        key.input.focus();
        return;
      }
      submit.disabled = true;
      say(error, '');
      try {
        const r = await call('POST', '/site/signin', { key: value });
        key.input.value = '';
        startSession(r.data);
        state.page = '';
        const target = state.returnTo && state.returnTo !== '#/signin' ? state.returnTo : '#/market';
        state.returnTo = '';
        go(target);
      } catch (e) {
        submit.disabled = false;
        say(error, errText(e));
        key.input.focus();
      }
    });
    mount('Sign in', [h('section', { class: 'signin' }, h('h1', { id: 'signin-h', text: 'Sign in to rampart' }), form)]);
    key.input.focus();
  }

  async function loadVenues() {
    try {
      const r = await call('GET', v1('exchanges'));
      const list = (r.data || []).map((x) => x.exchange).filter((x) => typeof x === 'string');
      if (list.length) state.venues = list;
    } catch (e) { /* keep the four known venues */ }
  }

  /** Symbols of a venue for the pair inputs' suggestions (cached for the session). */
  function symbolsOf(venue) {
    if (!state.symbolLists.has(venue)) {
      const p = call('GET', v1('exchanges/' + enc(venue) + '/symbols'))
        .then((r) => (r.data || []).filter((x) => x.status !== 'delisted').map((x) => x.symbol))
        .catch(() => { state.symbolLists.delete(venue); return []; });
      state.symbolLists.set(venue, p);
    }
    return state.symbolLists.get(venue);
  }

  function suggest(datalist, venue) {
    symbolsOf(venue).then((syms) => {
      datalist.replaceChildren(...syms.map((s) => h('option', { value: s })));
    });
  }

  // ---- Live inbox: event stream, unread badge ----
  function openEvents() {
    closeEvents();
    if (typeof EventSource === 'undefined' || !state.session) return;
    const es = new EventSource('/site/events');
    state.events = es;
    es.addEventListener('inbox', (ev) => {
      let entry = null;
      try { entry = JSON.parse(ev.data); } catch (e) { return; }
      if (!entry || typeof entry !== 'object') return;
      addInbox([entry], true);
      state.firingListeners.forEach((f) => f(entry));
    });
    es.addEventListener('open', () => {
      if (state.eventsOpened) loadInbox(); // fill any gap left while disconnected
      state.eventsOpened = true;
      state.eventsFailures = 0;
      liveStatus();
    });
    es.addEventListener('error', () => {
      liveStatus();
      if (es.readyState !== EventSource.CLOSED || state.events !== es) return;
      // Refused (not a dropped connection, which the browser retries itself): check the
      // session, then try again, waiting longer after each refusal (3 s doubling to 60 s).
      state.events = null;
      const delay = Math.min(60000, 3000 * Math.pow(2, state.eventsFailures));
      state.eventsFailures += 1;
      setTimeout(async () => {
        if (!state.session || state.events) return;
        try {
          await call('GET', '/site/session');
          openEvents();
        } catch (e) {
          if (e.status !== 401) setTimeout(() => { if (state.session && !state.events) openEvents(); }, delay);
        }
      }, delay);
    });
  }

  function closeEvents() {
    if (state.events) state.events.close();
    state.events = null;
    state.eventsOpened = false;
    state.eventsFailures = 0;
  }

  function liveStatus() {
    const el = document.querySelector('[data-live]');
    if (!el) return;
    const open = state.events && state.events.readyState === EventSource.OPEN;
    say(el, open ? 'Live: new notifications appear here as they arrive.' : 'Reconnecting to live updates…');
  }

  async function loadInbox() {
    try {
      const r = await call('GET', v1('inbox', { limit: INBOX_LIMIT }));
      addInbox(Array.isArray(r.data) ? r.data : [], false);
      return true;
    } catch (e) {
      return e;
    }
  }

  function addInbox(entries, live) {
    let added = false;
    for (const e of entries) {
      if (!e || !isNum(e.id) || state.inbox.has(e.id)) continue;
      state.inbox.set(e.id, e);
      if (live) e._fresh = true;
      added = true;
    }
    if (!added) return;
    if (state.inbox.size > INBOX_KEEP) {
      const ids = Array.from(state.inbox.keys()).sort((a, b) => a - b);
      ids.slice(0, ids.length - INBOX_KEEP).forEach((id) => state.inbox.delete(id));
    }
    if (state.page === 'notifications') {
      renderInbox();
      markSeen();
    }
    updateBadge();
  }

  function unreadCount() {
    let n = 0;
    state.inbox.forEach((e, id) => { if (id > state.lastSeen && !isMuted(e)) n++; });
    return n;
  }

  // ---- Muting: an alert's entries hidden from Notifications and the unread count, in this
  // browser (kept in localStorage per account; the alert still fires, and its entries are kept) ----
  function muteKey(e) { return e.alertId === null || e.alertId === undefined ? '' : (e.kind.startsWith('alert.') ? 'api' : e.kind.split('.')[0]) + ':' + e.alertId; }
  function mutedSet() { return new Set(state.session ? loadPrefs('muted.' + state.session.accountId, []) : []); }
  function isMuted(e) { const k = muteKey(e); return !!k && state.muted.has(k); }
  function setMuted(key, on) {
    if (on) state.muted.add(key); else state.muted.delete(key);
    if (state.session) savePrefs('muted.' + state.session.accountId, Array.from(state.muted));
    updateBadge();
    renderInbox();
  }

  function markSeen() {
    let max = state.lastSeen;
    state.inbox.forEach((e, id) => { if (id > max) max = id; });
    if (max !== state.lastSeen && state.session) {
      state.lastSeen = max;
      savePrefs('seen.' + state.session.accountId, max);
    }
    updateBadge();
  }

  function updateBadge() {
    const n = state.session ? unreadCount() : 0;
    const badge = document.getElementById('unread-count');
    const link = document.getElementById('nav-notifications');
    badge.textContent = String(n);
    badge.hidden = n === 0;
    if (n) link.setAttribute('aria-label', 'Notifications, ' + n + ' unread');
    else link.removeAttribute('aria-label');
  }

  // ---- Market page: the board (§9) and the screener ----
  function marketPage() {
    const gen = state.gen;
    const m = state.market;
    const error = errorBox('market-error');
    const controls = marketControls(() => { refresh(); }, () => { m.page = 0; drawScreener(); });
    const board = h('section', { class: 'panel board', testid: 'market-board', 'aria-labelledby': 'board-h', 'aria-busy': 'true' });
    const boardTitle = h('h2', { id: 'board-h', text: 'Market board' });
    const values = {};
    const dl = h('dl', null, BOARD_FIELDS.map(([k, label]) => {
      values[k] = h('dd', { 'data-board': k, text: '–' });
      return h('div', null, h('dt', { text: label }), values[k]);
    }));
    const meter = h('meter', { min: '0', max: '100', low: '40', high: '60', optimum: '100', value: '50', 'aria-labelledby': 'sentiment-label' });
    values.sentiment = h('dd', { 'data-board': 'sentiment', text: '–' });
    dl.append(h('div', { class: 'sentiment' },
      h('dt', { id: 'sentiment-label', text: 'Sentiment index (volume-weighted share of advancing pairs, 0–100)' }),
      values.sentiment, meter));
    const updated = h('p', { class: 'updated' });
    board.append(boardTitle, dl, updated);

    const screen = screener(m);
    let seq = 0;
    let stream = null;
    let streamed = null;
    let rows = [];
    let fresh = new Set(); // symbols of the universe "new" (from /rankings/new), when it is chosen
    // The board comes from the stream (each build, once a second) while it is open.
    function follow() {
      if (stream && streamed === m.exchange) return;
      if (stream) stream.close();
      streamed = m.exchange;
      const gen2 = state.gen;
      stream = marketStream(['board:' + m.exchange], (msg) => {
        if (!current(gen2) || msg.channel !== 'board:' + m.exchange || !msg.data || !msg.data.intervals) return;
        const numbers = msg.data.intervals[m.interval];
        if (numbers) drawBoard({ exchange: m.exchange, interval: m.interval, ts: msg.data.ts, data: numbers }, true);
      });
    }

    async function refresh() {
      follow();
      const mine = Object.assign({}, m);
      const my = ++seq;
      const live = stream && stream.live();
      const [market, metrics, young] = await Promise.allSettled([
        live ? Promise.resolve(null) : call('GET', v1('market', { exchange: mine.exchange, interval: mine.interval })),
        call('GET', v1('metrics', { exchange: mine.exchange, interval: mine.interval, usd: 'true' })),
        mine.category === 'new' ? call('GET', v1('rankings/new', { exchange: mine.exchange, metric: 'volume', limit: 100 })) : Promise.resolve(null),
      ]);
      if (!current(gen) || my !== seq) return;
      const problems = [];
      if (market.status === 'fulfilled') { if (market.value) drawBoard(market.value, false); }
      else {
        problems.push('Board: ' + errText(market.reason));
        board.setAttribute('aria-busy', 'false');
      }
      if (young.status === 'fulfilled' && young.value) fresh = new Set((young.value.data || []).map((r) => r.symbol));
      if (metrics.status === 'fulfilled') {
        rows = screenRows(metrics.value);
        drawScreener();
      } else {
        problems.push('Screener: ' + errText(metrics.reason));
        failTable(screen.t, errText(metrics.reason));
      }
      say(error, problems.join(' '));
    }

    function drawScreener() {
      screen.draw(rows.filter((r) => inUniverse(r.symbol, m.category, fresh)), m.exchange);
    }

    function drawBoard(r, live) {
      const d = r.data || {};
      BOARD_FIELDS.forEach(([k]) => say(values[k], fmtInt(d[k])));
      say(values.sentiment, isNum(d.sentiment) ? numberFmt.format(d.sentiment) : '–');
      if (isNum(d.sentiment)) meter.value = d.sentiment;
      say(boardTitle, 'Market board · ' + (r.exchange || m.exchange) + ' · ' + (r.interval || m.interval));
      const how = live ? 'live.' : 'refreshes every ' + MARKET_REFRESH_MS / 1000 + ' s.';
      say(updated, 'Updated ' + fmtTime(isNum(r.ts) ? r.ts : Date.now()) + '; ' + how);
      board.setAttribute('aria-busy', 'false');
    }

    mount('Market', [h('h1', { text: 'Market' }), controls, error, board, screen.panel]);
    refresh();
    poll(MARKET_REFRESH_MS, refresh);
  }

  // The screener's columns: [key, heading, format, css class]. Values are per pair, from one board.
  const SCREEN_COLUMNS = [
    ['price', 'Price', fmtPrice],
    ['change', 'Change %', (v) => fmtPct(v, true), 'signed'],
    ['volatility', 'Volatility %', (v) => fmtPct(v)],
    ['volumeUsd', 'Volume (USD)', fmtUsd],
    ['trades', 'Trades', fmtInt],
    ['spread', 'Spread (bp)', (v) => (isNum(v) ? numberFmt.format(v) : '–')],
    ['depthUsd', 'Depth ±1% (USD)', fmtUsd],
    ['wallsUsd', 'Walls (USD)', fmtUsd],
    ['level', 'Nearest level %', (v) => fmtPct(v)],
  ];
  const SCREEN_PAGE = 50;

  /** One row per pair of `GET /site/v1/metrics?usd=true`: the numbers the screener shows. */
  function screenRows(r) {
    return (r.data || []).map((e) => {
      const d = e.data || {};
      const q = isNum(e.quoteUsd) ? e.quoteUsd : null;
      const lv = d.levels ? [d.levels.support, d.levels.resistance].filter(isNum).map(Math.abs) : [];
      return {
        symbol: e.symbol,
        price: e.price,
        change: d.change,
        volatility: d.volatility,
        volumeUsd: isNum(d.volume) && q !== null ? d.volume * q : null,
        trades: d.trades,
        spread: d.spread,
        depthUsd: d.depth && isNum(d.depth.bidUsd) && isNum(d.depth.askUsd) ? d.depth.bidUsd + d.depth.askUsd : null,
        wallsUsd: d.walls && isNum(d.walls.usd) ? d.walls.usd : null,
        level: lv.length ? Math.min(...lv) : null,
      };
    });
  }

  function inUniverse(symbol, category, fresh) {
    switch (category) {
      case 'usdt': return symbol.endsWith('USDT');
      case 'usdc': return symbol.endsWith('USDC');
      case 'btc': return symbol.endsWith('BTC');
      case 'new': return fresh.has(symbol);
      default: return true;
    }
  }

  /** The screener table: search, a sort on any column (click its heading), pages of SCREEN_PAGE. */
  function screener(m) {
    const headers = ['#', 'Pair'].concat(SCREEN_COLUMNS.map(([, label]) => [label, 'num']));
    const t = table('rankings-table', 'Every pair of the venue', headers);
    const ths = Array.from(t.table.querySelectorAll('thead th'));
    SCREEN_COLUMNS.forEach(([key, label], i) => {
      const th = ths[i + 2];
      const b = h('button', { type: 'button', class: 'sort', 'data-sort': key, text: label });
      b.addEventListener('click', () => {
        if (m.sort === key) m.dir = m.dir === 'asc' ? 'desc' : 'asc';
        else { m.sort = key; m.dir = 'desc'; }
        m.page = 0;
        savePrefs('market', m);
        again();
      });
      th.replaceChildren(b);
    });
    const count = h('span', { class: 'hint', testid: 'screener-count', 'aria-live': 'polite' });
    const prev = h('button', { type: 'button', class: 'secondary', testid: 'screener-prev', text: 'Previous' });
    const next = h('button', { type: 'button', class: 'secondary', testid: 'screener-next', text: 'Next' });
    prev.addEventListener('click', () => { m.page = Math.max(0, m.page - 1); again(); });
    next.addEventListener('click', () => { m.page += 1; again(); });
    const panel = h('section', { class: 'panel', 'aria-labelledby': 'rank-h' },
      h('h2', { id: 'rank-h', text: 'Screener' }), t.wrap, h('div', { class: 'actions' }, prev, next, count));
    let last = { rows: [], exchange: m.exchange };
    const again = () => draw(last.rows, last.exchange);

    function draw(rows, exchange) {
      last = { rows: rows, exchange: exchange };
      const needle = (m.search || '').trim().toUpperCase();
      const col = SCREEN_COLUMNS.find((c) => c[0] === m.sort) || SCREEN_COLUMNS[3];
      const sign = m.dir === 'asc' ? 1 : -1;
      const shown = rows.filter((r) => !needle || r.symbol.includes(needle)).sort((a, b) => {
        const x = a[col[0]];
        const y = b[col[0]];
        if (!isNum(x) || !isNum(y)) return isNum(x) ? -1 : isNum(y) ? 1 : a.symbol.localeCompare(b.symbol);
        return (x - y) * sign || a.symbol.localeCompare(b.symbol);
      });
      const pages = Math.max(1, Math.ceil(shown.length / SCREEN_PAGE));
      m.page = Math.min(m.page || 0, pages - 1);
      const from = m.page * SCREEN_PAGE;
      const page = shown.slice(from, from + SCREEN_PAGE);
      ths.forEach((th, i) => {
        const key = i >= 2 ? SCREEN_COLUMNS[i - 2][0] : null;
        if (key === col[0]) th.setAttribute('aria-sort', m.dir === 'asc' ? 'ascending' : 'descending');
        else th.removeAttribute('aria-sort');
      });
      t.setCaption(labelOf(CATEGORIES, m.category) + ' on ' + exchange + ', sorted by ' + col[1] + (m.dir === 'asc' ? ', smallest first' : ', largest first') +
        '; change, volatility, volume and trades over ' + m.interval + ', the rest as of now. Volume is the quote volume in US dollars.');
      fillTable(t, page.map((r, i) => h('tr', { 'data-symbol': r.symbol },
        h('td', { text: from + i + 1 }),
        h('th', { scope: 'row' }, pairLink(exchange, r.symbol)),
        SCREEN_COLUMNS.map(([key, , fmt, cls]) => h('td', { class: 'num ' + (cls === 'signed' ? signClass(r[key]) : ''), 'data-col': key, text: fmt(r[key]) })))),
      needle ? 'No pair matches "' + needle + '".' : 'No pair has metrics yet.');
      say(count, shown.length ? 'Pairs ' + (from + 1) + '–' + (from + page.length) + ' of ' + shown.length : '');
      prev.disabled = m.page === 0;
      next.disabled = m.page >= pages - 1;
    }
    return { panel: panel, t: t, draw: draw };
  }

  function marketControls(changed, searched) {
    const m = state.market;
    const venue = field('Venue', 'exchange', 'select', { options: venueOptions(), value: m.exchange, testid: 'market-venue' });
    const cat = field('Universe', 'category', 'select', { options: CATEGORIES, value: m.category, testid: 'market-category' });
    const interval = field('Interval', 'interval', 'select', { options: options(INTERVALS), value: m.interval, testid: 'market-interval' });
    const search = field('Search pairs', 'search', 'search', { value: m.search || '', placeholder: 'e.g. SOL', testid: 'screener-search' });
    const read = () => {
      m.exchange = venue.input.value;
      m.category = cat.input.value;
      m.interval = interval.input.value;
    };
    read(); // a stored choice no longer offered falls back to the first option
    const form = h('form', { class: 'panel controls', 'aria-label': 'Board and screener options' },
      h('div', { class: 'fields' }, venue.wrap, cat.wrap, interval.wrap, search.wrap),
      h('p', { class: 'hint', text: 'The interval sets the window of change, volatility, volume and trades; spread, depth, walls and levels are as of now. Click a column to sort by it.' }));
    form.addEventListener('submit', (ev) => ev.preventDefault());
    search.input.addEventListener('input', () => {
      m.search = search.input.value;
      searched();
    });
    form.addEventListener('change', (ev) => {
      if (ev.target === search.input) return;
      read();
      m.page = 0;
      savePrefs('market', m);
      changed();
    });
    return form;
  }

  // ---- Pair page: candle chart with levels and walls as price lines, metrics, alerts ----
  function resetChartHandle() {
    window.rampartChart = { ready: false, priceLines: () => [], lastBarTime: () => null };
  }

  function pairPage(exchange, symbol) {
    const gen = state.gen;
    if (VENUES.indexOf(exchange) < 0 && state.venues.indexOf(exchange) < 0) {
      mount('Pair', [h('h1', { text: 'Unknown venue' }), h('p', { class: 'error', role: 'alert', text: 'No venue named "' + exchange + '".' })]);
      return;
    }
    if (!SYMBOL.test(symbol)) {
      mount('Pair', [h('h1', { text: 'Unknown pair' }), h('p', { class: 'error', role: 'alert', text: '"' + symbol + '" is not a pair symbol.' })]);
      return;
    }
    const error = errorBox('pair-error');
    const price = h('span', { class: 'price' });
    const venue = field('Venue', 'exchange', 'select', { options: venueOptions(), value: exchange, testid: 'pair-venue' });
    if (INTERVALS.indexOf(state.pairInterval) < 0) state.pairInterval = '1h';
    const interval = field('Timeframe', 'interval', 'select', { options: options(INTERVALS), value: state.pairInterval, testid: 'pair-interval' });
    venue.input.addEventListener('change', () => go('#/pair/' + enc(venue.input.value) + '/' + enc(symbol)));
    // Only venues that list the pair can be picked.
    state.venues.forEach((v) => symbolsOf(v).then((list) => {
      const opt = Array.from(venue.input.options).find((o) => o.value === v);
      if (!current(gen) || !opt || !list.length || list.indexOf(symbol) >= 0) return;
      opt.disabled = true;
      opt.textContent = v + ' (does not list ' + symbol + ')';
    }));
    const chartBox = h('div', { class: 'chart', testid: 'pair-chart', role: 'img', 'aria-label': 'Candle chart of ' + symbol + ' with its levels and walls; the same levels and walls are listed in the tables below.' });
    const shownNote = h('span', { testid: 'chart-shown' });
    const legend = h('p', { class: 'legend' },
      h('span', null, h('span', { class: 'swatch support' }), 'support'),
      h('span', null, h('span', { class: 'swatch resistance' }), 'resistance'),
      h('span', null, h('span', { class: 'swatch wall' }), 'wall (dashed)'),
      h('span', null, h('span', { class: 'swatch alert' }), 'your alert (dotted)'), shownNote);
    const linesF = field('Lines', 'lines', 'select', {
      options: [['near', 'Nearest levels, largest walls'], ['all', 'Every level and wall']], value: state.chartLines, testid: 'chart-lines',
    });
    linesF.input.addEventListener('change', () => {
      state.chartLines = linesF.input.value;
      savePrefs('chartLines', state.chartLines);
      redraw();
    });
    const metricsBox = h('section', { class: 'panel metrics', testid: 'pair-metrics', 'aria-labelledby': 'metrics-h', 'aria-busy': 'true' },
      h('h2', { id: 'metrics-h', text: 'Metrics' }), h('p', { class: 'muted', text: 'Loading…' }));
    const levelsT = table('pair-levels', 'Served levels, nearest first', ['Type', ['Price', 'num'], 'From', ['Strength', 'num']]);
    levelsT.scroll.classList.add('tall');
    levelsT.scroll.setAttribute('tabindex', '0'); // a scrolling region is reachable by keyboard
    levelsT.scroll.setAttribute('aria-label', 'Levels (scrolls)');
    const wallsT = table('pair-walls', 'Walls of the latest scan', ['Side', ['Price', 'num'], ['Size', 'num'], ['USD', 'num'], ['Distance', 'num'], ['Ratio', 'num'], ['Age', 'num']]);
    const alertsT = table('pair-alerts', 'Your price and percent alerts on this pair', alertHeaders());
    const alertsError = errorBox('pair-alerts-error');
    const alertBox = pairAlertForm(exchange, symbol, () => loadAlerts());

    mount(symbol, [
      h('div', { class: 'pair-head' }, h('h1', { text: symbol + ' · ' + exchange }), price),
      h('form', { class: 'panel controls', 'aria-label': 'Chart options' },
        h('div', { class: 'fields' }, venue.wrap, interval.wrap, linesF.wrap)),
      error,
      h('section', { class: 'panel', 'aria-label': 'Chart' }, chartBox, legend),
      metricsBox,
      h('div', { class: 'two-col' },
        h('section', { class: 'panel', 'aria-labelledby': 'lv-h' }, h('h2', { id: 'lv-h', text: 'Levels' }), levelsT.wrap),
        h('section', { class: 'panel', 'aria-labelledby': 'wl-h' }, h('h2', { id: 'wl-h', text: 'Walls' }), wallsT.wrap)),
      h('section', { class: 'panel', 'aria-labelledby': 'pa-h' }, h('h2', { id: 'pa-h', text: 'Alerts on ' + symbol }), alertsT.wrap, alertsError, alertBox),
    ]);

    let chart = null; // made once the chart library has loaded (only this page needs it)
    let tickSize = null;
    const handle = {
      ready: false,
      priceLines: () => chart ? chart.priceLines() : [],
      lastBarTime: () => chart ? chart.lastBarTime() : null,
    };
    window.rampartChart = handle;
    onLeave(() => {
      if (chart) chart.remove();
      if (window.rampartChart === handle) resetChartHandle();
    });
    loadChartLib().then((ok) => {
      if (!current(gen)) return;
      chart = ok ? makeChart(chartBox, exchange, symbol) : null;
      if (!chart) {
        say(error, 'The chart library did not load; levels and walls are listed below.');
        return;
      }
      if (tickSize !== null) chart.setTick(tickSize);
      refresh(true);
    });

    let drawn = { candles: false, levels: false };
    let lastLevels = [];
    let lastWalls = [];
    let lastAlerts = []; // the user's active price alerts on the pair, drawn as dotted lines
    let lastPrice = null; // the nearest levels are nearest this

    function redraw() {
      if (chart) {
        const n = chart.lines(lastLevels, lastWalls, lastAlerts, state.chartLines === 'all', lastPrice);
        const lv = n.levels < n.of ? 'the ' + n.levels + ' nearest of ' + n.of + ' levels' : (n.of ? 'all ' + n.of + ' levels' : 'no level');
        const wl = n.walls < n.ofWalls ? 'the ' + n.walls + ' largest of ' + n.ofWalls + ' walls' : (n.ofWalls ? 'all ' + n.ofWalls + ' walls' : 'no wall');
        say(shownNote, 'Drawn: ' + lv + ', ' + wl + '.');
      }
      drawLevelTable(levelsT, lastLevels, drawn.levels);
      drawWallTable(wallsT, lastWalls);
      if (chart && drawn.candles && drawn.levels) handle.ready = true;
    }

    // Price, levels and walls come from the stream while it is open (a level broken by a trade
    // leaves the chart at once, walls move with each scan); candles and metrics are polled.
    const sameWall = (a, b) => a.side === b.side && a.price === b.price;
    const stream = marketStream(['price', 'levels', 'walls'].map((c) => c + ':' + exchange + ':' + symbol), (m) => {
      if (!current(gen) || !m.data) return;
      const d = m.data;
      if (m.channel.startsWith('price:')) {
        if (isNum(d.price)) {
          say(price, fmtPrice(d.price));
          lastPrice = d.price;
        }
        return;
      }
      if (m.type === 'snapshot' && Array.isArray(d.levels)) {
        lastLevels = d.levels;
        drawn.levels = true;
      } else if (m.type === 'level.broken' && d.level) {
        lastLevels = lastLevels.filter((l) => l.price !== d.level.price);
      } else if (m.type === 'snapshot' && d.snapshot) {
        lastWalls = Array.isArray(d.snapshot.walls) ? d.snapshot.walls : [];
      } else if ((m.type === 'wall.appeared' || m.type === 'wall.changed') && d.wall) {
        lastWalls = lastWalls.filter((w) => !sameWall(w, d.wall)).concat([d.wall]);
      } else if (m.type === 'wall.gone' && d.wall) {
        lastWalls = lastWalls.filter((w) => !sameWall(w, d.wall));
      } else return;
      redraw();
    });

    interval.input.addEventListener('change', () => {
      state.pairInterval = interval.input.value;
      savePrefs('pairInterval', state.pairInterval);
      drawn.candles = false;
      refresh(true);
    });

    async function loadSymbol() {
      try {
        const r = await call('GET', v1('symbols/' + enc(symbol), { exchange: exchange }));
        if (current(gen) && r.data) {
          tickSize = r.data.tickSize;
          if (chart) chart.setTick(tickSize);
        }
        if (current(gen) && r.data && !price.textContent) say(price, fmtPrice(r.data.price));
      } catch (e) { /* candles and levels report the problem */ }
    }

    async function refresh(full) {
      const tf = state.pairInterval;
      const wantAll = full || !drawn.candles;
      // Levels and walls come from the stream, also while it connects (polling the walls of a
      // pair without any answers 404 at every round).
      const live = stream.waiting();
      const [candles, levels, dens, metrics] = await Promise.allSettled([
        // Candles only once the chart can draw them (its library loads first; it asks for them all then).
        chart ? call('GET', v1('candles/' + enc(symbol), { exchange: exchange, interval: tf, limit: wantAll ? CANDLE_LIMIT : 3 })) : Promise.resolve(null),
        live ? Promise.resolve(null) : call('GET', v1('levels/' + enc(symbol), { exchange: exchange })),
        live ? Promise.resolve(null) : call('GET', v1('densities/' + enc(symbol), { exchange: exchange })),
        call('GET', v1('metrics/' + enc(symbol), { exchange: exchange, interval: tf })),
      ]);
      if (!current(gen) || tf !== state.pairInterval) return;
      const problems = [];
      if (candles.status === 'fulfilled' && candles.value === null) {
        // no chart yet
      } else if (candles.status === 'fulfilled') {
        const bars = Array.isArray(candles.value.data) ? candles.value.data : [];
        drawn.candles = chart ? chart.candles(bars, wantAll) : false;
        const last = bars[bars.length - 1];
        if (last && isNum(last.close)) {
          say(price, fmtPrice(last.close));
          lastPrice = last.close;
        }
      } else problems.push('Candles: ' + errText(candles.reason));
      if (dens.status === 'fulfilled' && dens.value === null) {
        // the stream keeps the walls
      } else if (dens.status === 'fulfilled') {
        const d = dens.value.data || {};
        lastWalls = Array.isArray(d.walls) ? d.walls : [];
      } else if (dens.reason && dens.reason.status === 404) {
        lastWalls = []; // no wall at this moment (or an unknown pair, which the levels call reports)
      } else problems.push('Walls: ' + errText(dens.reason));
      if (levels.status === 'fulfilled' && levels.value !== null) {
        lastLevels = Array.isArray(levels.value.data) ? levels.value.data : [];
        drawn.levels = true;
      } else if (levels.status !== 'fulfilled') problems.push('Levels: ' + errText(levels.reason));
      redraw();
      if (metrics.status === 'fulfilled') drawMetrics(metricsBox, metrics.value, tf);
      else problems.push('Metrics: ' + errText(metrics.reason));
      say(error, problems.join(' '));
    }

    async function loadAlerts() {
      try {
        const r = await call('GET', v1('alerts', { status: 'all' }));
        if (!current(gen)) return;
        const mine = (r.data || []).filter((a) => a.symbol === symbol && a.exchange === exchange);
        fillTable(alertsT, mine.map((a) => alertRow(a, loadAlerts, alertsError)), 'No alert on this pair yet.');
        lastAlerts = mine.filter((a) => a.type === 'price' && a.status === 'active' && !pendingDeletes.has(alertPath(a)));
        redraw();
      } catch (e) {
        if (current(gen)) failTable(alertsT, errText(e));
      }
    }

    loadSymbol();
    refresh(true);
    loadAlerts();
    onFiring(loadAlerts);
    poll(PAIR_REFRESH_MS, () => refresh(false));
  }

  // The chart library (198 kB) is loaded by the pair page only, once: the other pages never
  // need it (measured in perf/site-pages.md). Resolves false when it cannot be loaded.
  let chartLib = null;
  function loadChartLib() {
    if (window.LightweightCharts) return Promise.resolve(true);
    if (!chartLib) {
      chartLib = new Promise((resolve) => {
        const script = document.createElement('script');
        script.src = '/assets/lightweight-charts.js';
        script.addEventListener('load', () => resolve(true));
        script.addEventListener('error', () => { chartLib = null; resolve(false); });
        document.head.append(script);
      });
    }
    return chartLib;
  }

  /** The chart of a pair: candles and price lines; null when the library is missing. */
  function makeChart(box, exchange, symbol) {
    const LWC = window.LightweightCharts;
    if (!LWC || typeof LWC.createChart !== 'function') return null;
    const css = getComputedStyle(document.documentElement);
    const color = (name, fallback) => (css.getPropertyValue(name) || fallback).trim() || fallback;
    const up = color('--up', '#127a3e');
    const down = color('--down', '#c0262d');
    const chart = LWC.createChart(box, {
      autoSize: true,
      layout: {
        attributionLogo: false, // its logo injects an inline <style>, which the CSP refuses; the footer credits TradingView
        background: { color: color('--panel', '#ffffff') },
        textColor: color('--fg', '#14171c'),
        fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif',
      },
      grid: { vertLines: { color: color('--line', '#d9dde3') }, horzLines: { color: color('--line', '#d9dde3') } },
      timeScale: { timeVisible: true, secondsVisible: false, rightOffset: 6 },
      rightPriceScale: { borderColor: color('--line', '#d9dde3') },
    });
    const series = chart.addSeries(LWC.CandlestickSeries, {
      upColor: up, downColor: down, borderUpColor: up, borderDownColor: down, wickUpColor: up, wickDownColor: down,
      priceLineVisible: false,
    });
    const dashed = LWC.LineStyle ? LWC.LineStyle.Dashed : 2;
    const solid = LWC.LineStyle ? LWC.LineStyle.Solid : 0;
    const dotted = LWC.LineStyle ? LWC.LineStyle.Dotted : 1;
    const accent = color('--accent', '#1f5fbf');
    const lines = new Map(); // key -> {line: IPriceLine, name}
    let lastTime = -Infinity;

    /** Full data (all) or the newest bars as updates; false when the chart needs a full reload. */
    function candles(bars, all) {
      const data = [];
      for (const b of bars) {
        if (!b || !isNum(b.openTime)) continue;
        // The library shows its times as UTC: shifted by the zone's offset they read as the
        // stated zone's wall clock, axis and crosshair alike.
        const t = Math.floor((b.openTime + zoneOffsetMin(b.openTime) * 60000) / 1000);
        if (data.length && data[data.length - 1].time >= t) continue;
        data.push({ time: t, open: b.open, high: b.high, low: b.low, close: b.close });
      }
      if (all) {
        series.setData(data);
        lastTime = data.length ? data[data.length - 1].time : -Infinity;
        return true;
      }
      try {
        for (const bar of data) {
          if (bar.time < lastTime) continue;
          series.update(bar);
          lastTime = bar.time;
        }
        return true;
      } catch (e) {
        return false;
      }
    }

    /**
     * Draws the served levels and walls, and the user's active price alerts on the pair: lines
     * no longer wanted go, new ones come. Unless `all`, only the LEVELS_NEAR levels nearest
     * `price` and the WALLS_TOP largest walls (in USD) are drawn. No line has a title in the
     * pane (a title there covers the newest candles): each is told by its colour and style, its
     * price on the scale, and the legend; `priceLines()` names them for the tests.
     */
    function drawLines(levels, walls, alerts, all, price) {
      const want = new Map();
      for (const a of alerts || []) {
        if (!a || !isNum(a.price)) continue;
        want.set('A|' + a.id, {
          name: 'alert #' + a.id + ' ' + (a.direction === 'above' ? '▲' : '▼'),
          price: a.price, color: accent, lineWidth: 1, lineStyle: dotted, axisLabelVisible: true,
        });
      }
      const near = (l) => (isNum(price) ? Math.abs(l.price - price) : 0);
      const shownLevels = levels.filter((l) => l && isNum(l.price)).sort((a, b) => near(a) - near(b)).slice(0, all ? Infinity : LEVELS_NEAR);
      for (const l of shownLevels) {
        const support = l.type === 'support';
        want.set('L|' + l.type + '|' + l.price, {
          name: (support ? 'S ' : 'R ') + fmtPrice(l.price),
          price: l.price, color: support ? up : down, lineWidth: Math.min(1 + Math.max(0, (l.strength || 1) - 1), 3),
          lineStyle: solid, axisLabelVisible: true,
        });
      }
      const usd = (w) => (isNum(w.usd) ? w.usd : 0);
      const shownWalls = walls.filter((w) => w && isNum(w.price)).sort((a, b) => usd(b) - usd(a)).slice(0, all ? Infinity : WALLS_TOP);
      for (const w of shownWalls) {
        const bid = w.side === 'bid';
        want.set('W|' + w.side + '|' + w.price, {
          name: 'wall ' + (bid ? 'bid' : 'ask'),
          price: w.price, color: bid ? up : down, lineWidth: 2, lineStyle: dashed, axisLabelVisible: true,
        });
      }
      lines.forEach((line, key) => {
        if (!want.has(key)) {
          series.removePriceLine(line.line);
          lines.delete(key);
        }
      });
      want.forEach((o, key) => {
        const opts = { price: o.price, color: o.color, lineWidth: o.lineWidth, lineStyle: o.lineStyle, axisLabelVisible: o.axisLabelVisible, title: '' };
        if (lines.has(key)) lines.get(key).line.applyOptions(opts);
        else lines.set(key, { line: series.createPriceLine(opts), name: o.name });
      });
      return { levels: shownLevels.length, of: levels.length, walls: shownWalls.length, ofWalls: walls.length };
    }

    function setTick(tick) {
      if (!isNum(tick) || tick <= 0) return;
      const text = String(tick);
      const m = /e-(\d+)$/.exec(text);
      const decimals = m ? Number(m[1]) : (text.split('.')[1] || '').length;
      series.applyOptions({ priceFormat: { type: 'price', precision: Math.min(decimals, 10), minMove: tick } });
    }

    return {
      candles: candles,
      lines: drawLines,
      setTick: setTick,
      lastBarTime: () => (isFinite(lastTime) ? lastTime : null),
      priceLines: () => Array.from(lines.values()).map((l) => ({ price: l.line.options().price, title: l.name })),
      remove: () => chart.remove(),
    };
  }

  function drawLevelTable(t, levels, loaded) {
    if (!loaded) return;
    fillTable(t, levels.map((l) => h('tr', null,
      h('td', { class: l.type === 'support' ? 'up' : 'down', text: l.type === 'support' ? 'Support' : 'Resistance' }),
      h('td', { class: 'num', text: fmtPrice(l.price) }),
      h('td', { text: levelSource(l) }),
      h('td', { class: 'num', text: l.strength }))), 'No level yet.');
  }

  // What made a level, in a trader's words (the API's timeframe tags of docs/api.md's rule 3).
  const EXTREMES = { dmax: "yesterday's high", dmin: "yesterday's low", wmax: "last week's high", wmin: "last week's low" };
  function levelSource(l) {
    return EXTREMES[l.timeframe] || l.timeframe + ' swing ' + (l.side === 'high' ? 'high' : 'low');
  }

  function drawWallTable(t, walls) {
    fillTable(t, walls.map((w) => h('tr', null,
      h('td', { class: w.side === 'bid' ? 'up' : 'down', text: w.side === 'bid' ? 'Bid' : 'Ask' }),
      h('td', { class: 'num', text: fmtPrice(w.price) }),
      h('td', { class: 'num', text: fmtCompact(w.qty) }),
      h('td', { class: 'num', text: fmtUsd(w.usd) }),
      h('td', { class: 'num', text: fmtPct(w.dist, true) }),
      h('td', { class: 'num', text: isNum(w.ratio) ? numberFmt.format(w.ratio) + '×' : '–' }),
      h('td', { class: 'num', text: isNum(w.age) ? intFmt.format(w.age) + ' s' : '–' }))), 'No wall at the moment.');
  }

  function drawMetrics(box, r, tf) {
    const d = r.data || {};
    const items = [];
    const add = (label, value, cls) => items.push(h('div', null, h('dt', { text: label }), h('dd', { class: cls, text: value })));
    if ('change' in d) add('Change (' + tf + ')', fmtPct(d.change, true), signClass(d.change));
    if ('volatility' in d) add('Volatility (' + tf + ')', fmtPct(d.volatility));
    if ('volume' in d) add('Quote volume (' + tf + ')', fmtCompact(d.volume));
    if ('trades' in d) add('Trades (' + tf + ')', fmtInt(d.trades));
    if ('spread' in d) add('Spread', isNum(d.spread) ? numberFmt.format(d.spread) + ' bp' : '–');
    if (d.depth) {
      add('Bids within 1%', fmtUsd(d.depth.bidUsd));
      add('Asks within 1%', fmtUsd(d.depth.askUsd));
      add('Book imbalance', isNum(d.depth.imbalance) ? numberFmt.format(d.depth.imbalance) : '–', signClass(d.depth.imbalance));
    }
    if (d.walls) add('Walls', fmtInt(d.walls.count) + (isNum(d.walls.usd) ? ' · ' + fmtUsd(d.walls.usd) : ''));
    if (d.levels) {
      add('Nearest support', d.levels.support === null ? 'none' : fmtPct(d.levels.support, true));
      add('Nearest resistance', d.levels.resistance === null ? 'none' : fmtPct(d.levels.resistance, true));
    }
    const body = items.length ? h('dl', null, items) : h('p', { class: 'muted', text: 'No metric has data yet (a young listing, or an empty book).' });
    const when = h('p', { class: 'updated', text: 'Computed ' + fmtTime(isNum(r.computedAt) && r.computedAt > 0 ? r.computedAt : r.ts) });
    box.replaceChildren(box.firstChild, body, when);
    box.setAttribute('aria-busy', 'false');
  }

  function pairAlertForm(exchange, symbol, created) {
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

  // ---- Alerts page: price/pct alerts (shared with the API), density and market alerts (site only), history ----
  function alertHeaders() {
    return ['ID', 'Pair', 'Venue', 'Type', 'Condition', 'Repeat', 'Note', 'Status', ['Fired', 'num'], 'Last fired', 'Created', 'Action'];
  }

  function alertCondition(a) {
    if (a.type === 'pct') return a.direction + ' ' + a.pct + '% within the ' + a.window + ' candle';
    return a.direction + ' ' + fmtPrice(a.price);
  }

  // ---- Destructive actions: a confirmation naming what goes; alert deletes can be undone ----

  /**
   * A modal confirmation: {title, text, yes (the button's words), typed (optional: a text the
   * user must type first, for what cannot be taken back)}. Resolves true when confirmed;
   * Cancel, Escape or leaving the page resolve false.
   */
  function confirmDialog(o) {
    return new Promise((resolve) => {
      const yes = h('button', { type: 'button', class: 'danger', testid: 'confirm-yes', text: o.yes });
      const no = h('button', { type: 'button', class: 'secondary', testid: 'confirm-no', text: 'Cancel' });
      let typed = null;
      if (o.typed) {
        typed = field('Type ' + o.typed + ' to confirm', 'confirm', 'text', { testid: 'confirm-typed' });
        yes.disabled = true;
        typed.input.addEventListener('input', () => { yes.disabled = typed.input.value.trim() !== o.typed; });
      }
      const dlg = h('dialog', { class: 'confirm', testid: 'confirm', 'aria-labelledby': 'confirm-h', 'aria-describedby': 'confirm-p' },
        h('h2', { id: 'confirm-h', text: o.title }), h('p', { id: 'confirm-p', testid: 'confirm-text', text: o.text }),
        typed ? typed.wrap : null, h('div', { class: 'actions' }, no, yes));
      let answer = false;
      yes.addEventListener('click', () => { answer = true; dlg.close(); });
      no.addEventListener('click', () => dlg.close());
      dlg.addEventListener('close', () => { dlg.remove(); resolve(answer); });
      onLeave(() => { if (dlg.open) dlg.close(); });
      document.body.append(dlg);
      dlg.showModal();
      (typed ? typed.input : no).focus();
    });
  }

  // A confirmed delete waits UNDO_MS before it is sent, so Undo honestly takes it back: the alert
  // stays, and can still fire, until then. Its row says so meanwhile. The wait goes on on any page
  // of the site; closing the tab or signing out sends every waiting delete at once.
  const pendingDeletes = new Map(); // DELETE path -> {run, timer, until}

  function scheduleDelete(path, what, reload, error) {
    const p = { timer: 0, until: Date.now() + UNDO_MS, run: null };
    p.run = async (keepalive) => {
      clearTimeout(p.timer);
      if (pendingDeletes.get(path) !== p) return;
      pendingDeletes.delete(path);
      try {
        await call('DELETE', path, undefined, keepalive);
      } catch (e) {
        if (e.status !== 404) say(error, 'Could not delete ' + what + ': ' + errText(e));
      }
      reload();
    };
    p.timer = setTimeout(() => p.run(false), UNDO_MS);
    pendingDeletes.set(path, p);
    reload();
  }

  function undoDelete(path, reload) {
    const p = pendingDeletes.get(path);
    if (p) clearTimeout(p.timer);
    pendingDeletes.delete(path);
    reload();
  }

  function flushDeletes(keepalive) { return Promise.all(Array.from(pendingDeletes.values()).map((p) => p.run(keepalive))); }
  window.addEventListener('pagehide', () => { flushDeletes(true); });

  // A delete button for one alert row: asks first, naming the alert; then the delete waits for Undo.
  function deleteButton(testid, what, path, reload, error) {
    const del = h('button', { type: 'button', class: 'danger', testid: testid, 'aria-label': 'Delete ' + what, text: 'Delete' });
    del.addEventListener('click', async () => {
      say(error, '');
      const ok = await confirmDialog({
        title: 'Delete ' + what.split(':')[0] + '?', text: 'Delete ' + what + '? You can undo it for ' + UNDO_MS / 1000 + ' s.', yes: 'Delete',
      });
      if (ok) scheduleDelete(path, what, reload, error);
    });
    return del;
  }

  // The row of an alert whose delete waits: what goes, when, and Undo.
  function pendingRow(attrs, cols, what, path, reload) {
    const p = pendingDeletes.get(path);
    const secs = Math.max(1, Math.ceil((p.until - Date.now()) / 1000));
    const undo = h('button', { type: 'button', class: 'secondary', testid: 'undo-delete', text: 'Undo' });
    undo.addEventListener('click', () => undoDelete(path, reload));
    return h('tr', Object.assign({ 'data-pending-delete': 'true', class: 'pending' }, attrs),
      h('td', { colspan: cols, class: 'wrap' }, h('span', { text: capital(what) + ' is deleted in ' + secs + ' s (it can still fire until then). ' }), undo));
  }

  function capital(t) { return t.charAt(0).toUpperCase() + t.slice(1); }

  // An alert's status in words: a market alert whose number sits at its threshold (it fired there)
  // waits for the number to go back before it can fire again.
  function statusWords(a) {
    if (a.status === 'active' && a.waiting) return 'waiting to re-arm';
    if (a.status === 'triggered') return 'fired (done)';
    return a.status;
  }

  /** The kind of a site alert as the site names it. */
  function siteKind(a) { return a.type === 'density' ? 'wall' : a.type; }

  // The cells every alert row ends with: repeat, note, status, times fired, last fired, created, action.
  function recordCells(a, del) {
    return [
      h('td', { text: a.repeat ? 'yes' : 'no' }),
      h('td', { class: 'wrap', text: a.note || '' }),
      h('td', { 'data-waiting': a.waiting ? 'true' : null, text: statusWords(a) }),
      h('td', { class: 'num', text: fmtInt(a.triggerCount) }),
      h('td', null, a.lastTriggeredAt ? timeEl(a.lastTriggeredAt) : '–'),
      h('td', null, timeEl(a.createdAt)),
      h('td', null, del),
    ];
  }

  function alertPath(a) { return v1('alerts/' + enc(a.id)); }

  function alertWhat(a) { return a.type + ' alert #' + a.id + ': ' + a.symbol + ' on ' + a.exchange + ', ' + alertCondition(a); }

  function alertRow(a, reload, error) {
    const path = alertPath(a);
    const attrs = { 'data-alert-id': a.id, 'data-status': a.status };
    if (pendingDeletes.has(path)) return pendingRow(attrs, alertHeaders().length, alertWhat(a), path, reload);
    const del = deleteButton('alert-delete', alertWhat(a), path, reload, error);
    return h('tr', attrs,
      h('td', { text: a.id }),
      h('th', { scope: 'row' }, pairLink(a.exchange, a.symbol)),
      h('td', { text: a.exchange }),
      h('td', { text: a.type }),
      h('td', { text: alertCondition(a) }),
      ...recordCells(a, del));
  }

  function siteCondition(a) {
    return siteWhen(a) + (a.repeat && a.cooldownS > 0 ? '; then quiet for ' + fmtDuration(a.cooldownS) : '');
  }

  function fmtDuration(s) {
    if (s % 3600 === 0) return s / 3600 + ' h';
    if (s % 60 === 0) return s / 60 + ' min';
    return s + ' s';
  }

  function siteWhen(a) {
    if (a.type === 'density') {
      const sides = a.side === 'any' ? 'bid or ask' : a.side;
      return (a.symbol || 'any pair') + ': ' + sides + ' wall of ' + fmtUsd(a.minUsd) + ' or more within ' +
        a.maxDistPct + '% of the price' + (a.minAgeS ? ', standing ' + a.minAgeS + ' s' : '');
    }
    if (a.type === 'market') {
      return labelOf(BOARD_NUMBERS, a.number) + ' (' + a.interval + ') ' + a.direction + ' ' + a.threshold;
    }
    return a.type;
  }

  function siteAlertRow(a, reload, error) {
    const path = '/site/site-alerts/' + enc(a.id);
    const what = siteKind(a) + ' alert #' + a.id + ': ' + a.exchange + ', ' + siteCondition(a);
    const attrs = { 'data-site-alert-id': a.id, 'data-type': a.type, 'data-status': a.status };
    if (pendingDeletes.has(path)) return pendingRow(attrs, SITE_ALERT_HEADERS.length, what, path, reload);
    const del = deleteButton('site-alert-delete', what, path, reload, error);
    return h('tr', attrs,
      h('td', { text: a.id }),
      h('td', { text: siteKind(a) }),
      h('td', { text: a.exchange }),
      h('td', { class: 'wrap', text: siteCondition(a) }),
      ...recordCells(a, del));
  }

  const SITE_ALERT_HEADERS = ['ID', 'Kind', 'Venue', 'Condition', 'Repeat', 'Note', 'Status', ['Fired', 'num'], 'Last fired', 'Created', 'Action'];

  function alertsPage() {
    const gen = state.gen;
    const alertsT = table('alerts-table', 'Price and percent alerts (also listed by GET /v1/alerts)', alertHeaders());
    const siteT = table('site-alerts-table', 'Wall and market alerts (site only)', SITE_ALERT_HEADERS);
    const historyT = table('alerts-history', 'Alerts that have fired, most recent first',
      ['Last fired', 'Alert', 'What', 'Status', ['Times', 'num'], 'Webhook']);
    const log = deliveryLog(gen);
    const apiError = errorBox('alerts-list-error');
    const siteError = errorBox('site-alerts-list-error');
    let api = null;
    let site = null;

    async function loadApi() {
      try {
        const r = await call('GET', v1('alerts', { status: 'all' }));
        if (!current(gen)) return;
        api = r.data || [];
        fillTable(alertsT, api.map((a) => alertRow(a, loadApi, apiError)), 'No price or percent alert yet.');
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
        fillTable(siteT, site.map((a) => siteAlertRow(a, loadSite, siteError)), 'No wall or market alert yet.');
      } catch (e) {
        if (current(gen)) failTable(siteT, errText(e));
      }
      drawHistory();
    }

    function drawHistory() {
      if (!current(gen) || api === null || site === null) return;
      const fired = [];
      api.forEach((a) => { if (a.triggerCount > 0) fired.push({ a: a, what: a.symbol + ' on ' + a.exchange + ': ' + alertCondition(a), label: a.type + ' alert #' + a.id, hook: !!a.webhookUrl, attr: 'data-alert-id' }); });
      site.forEach((a) => { if (a.triggerCount > 0) fired.push({ a: a, what: a.exchange + ' · ' + siteCondition(a), label: siteKind(a) + ' alert #' + a.id, hook: false, attr: 'data-site-alert-id' }); });
      fired.sort((x, y) => String(y.a.lastTriggeredAt || '').localeCompare(String(x.a.lastTriggeredAt || '')));
      fillTable(historyT, fired.map((f) => h('tr', { [f.attr]: f.a.id },
        h('td', null, f.a.lastTriggeredAt ? timeEl(f.a.lastTriggeredAt) : '–'),
        h('th', { scope: 'row', text: f.label }),
        h('td', { class: 'wrap', text: f.what }),
        h('td', { text: statusWords(f.a) }),
        h('td', { class: 'num', text: fmtInt(f.a.triggerCount) }),
        h('td', null, f.hook ? log.button(f.a) : 'none'))), 'No alert has fired yet. Every firing is also in Notifications.');
    }

    mount('Alerts', [
      h('h1', { text: 'Alerts' }),
      h('section', { class: 'panel', 'aria-labelledby': 'pa-h' },
        h('h2', { id: 'pa-h', text: 'Price and percent alerts' }), alertsT.wrap, apiError, alertForm(loadApi)),
      h('section', { class: 'panel', 'aria-labelledby': 'sa-h' },
        h('h2', { id: 'sa-h', text: 'Wall and market alerts' }), siteT.wrap, siteError, siteAlertForm(loadSite)),
      h('section', { class: 'panel', 'aria-labelledby': 'hi-h' },
        h('h2', { id: 'hi-h', text: 'Firing history' }), historyT.wrap, log.panel),
    ]);
    loadApi();
    loadSite();
    onFiring(() => { loadApi(); loadSite(); });
    poll(SITE_ALERTS_REFRESH_MS, loadSite);
  }

  // The delivery log of one alert with a webhook (GET /site/v1/alerts/{id}/deliveries), opened
  // from the firing history: every attempt of 7 days, refreshed while the panel is open, and a
  // Redeliver button on each firing whose deliveries have ended. {button(alert), panel}.
  function deliveryLog(gen) {
    const caption = h('h3', { id: 'dl-h' });
    const t = table('deliveries-table', 'Webhook deliveries, newest first',
      ['Firing', ['Attempt', 'num'], 'At', 'Outcome', ['HTTP', 'num'], ['Latency', 'num'], 'Error', 'Action']);
    const error = errorBox('deliveries-error');
    const status = statusBox('deliveries-status');
    const panel = h('div', { class: 'deliveries', testid: 'deliveries', hidden: true, 'aria-labelledby': 'dl-h' },
      caption, h('p', { class: 'hint', text: 'Kept 7 days, at most 100 rows per alert; a redelivery sends the same body with the same webhook-id.' }),
      t.wrap, error, status);
    let open = null;

    async function load() {
      if (open === null) return;
      const id = open.id;
      try {
        const r = await call('GET', v1('alerts/' + enc(id) + '/deliveries'));
        if (!current(gen) || open === null || open.id !== id) return;
        fillTable(t, rows(id, r.data || []), 'No delivery yet.');
      } catch (e) {
        if (current(gen) && open !== null && open.id === id) failTable(t, errText(e));
      }
    }

    function rows(id, data) {
      const ended = new Set();
      const pending = new Set(data.filter((d) => d.outcome === 'pending').map((d) => d.triggerTime));
      return data.map((d) => {
        let action = '';
        if (!pending.has(d.triggerTime) && !ended.has(d.triggerTime)) {
          ended.add(d.triggerTime);
          action = redeliverButton(id, d.triggerTime);
        }
        return h('tr', { 'data-trigger-time': d.triggerTime, 'data-attempt': d.attempt, 'data-outcome': d.outcome },
          h('td', null, timeEl(d.triggerTime)),
          h('td', { class: 'num', text: d.attempt }),
          h('td', null, timeEl(d.at)),
          h('td', { class: 'outcome-' + d.outcome, text: d.outcome }),
          h('td', { class: 'num', text: d.status === null ? '–' : d.status }),
          h('td', { class: 'num', text: d.latencyMs === null ? '–' : d.latencyMs + ' ms' }),
          h('td', { class: 'wrap', text: d.error || '' }),
          h('td', null, action));
      });
    }

    function redeliverButton(id, at) {
      const b = h('button', { type: 'button', class: 'secondary', testid: 'redeliver', 'aria-label': 'Redeliver the firing of ' + fmtTime(at), text: 'Redeliver' });
      b.addEventListener('click', async () => {
        b.disabled = true;
        say(error, '');
        say(status, '');
        try {
          await call('POST', v1('alerts/' + enc(id) + '/deliveries/' + enc(at) + '/redeliver'));
          say(status, 'The firing of ' + fmtTime(at) + ' is queued for delivery again.');
          await load();
        } catch (e) {
          b.disabled = false;
          say(error, 'Could not redeliver: ' + errText(e));
        }
      });
      return b;
    }

    function button(a) {
      const b = h('button', { type: 'button', class: 'secondary', testid: 'deliveries-open', 'aria-label': 'Deliveries of alert ' + a.id, text: 'Deliveries' });
      b.addEventListener('click', () => {
        open = a;
        say(error, '');
        say(status, '');
        caption.textContent = 'Deliveries of alert #' + a.id + ' (' + a.symbol + ' on ' + a.exchange + ')';
        t.table.setAttribute('aria-busy', 'true');
        t.table.setAttribute('data-alert-id', a.id);
        panel.hidden = false;
        load();
      });
      return b;
    }

    poll(3000, load);
    return { button: button, panel: panel };
  }

  /** Create form of price and percent alerts (POST /site/v1/alerts, the API's body without webhook_url). */
  function alertForm(created) {
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
    const datalist = h('datalist', { id: listId });
    const error = errorBox('alert-error');
    const status = statusBox('alert-status');
    const submit = h('button', { type: 'submit', text: 'Create alert' });

    function syncType() {
      const isPct = type.input.value === 'pct';
      const keep = direction.input.value;
      const dirs = isPct ? [['up', 'up'], ['down', 'down'], ['any', 'either way']] : [['above', 'above'], ['below', 'below']];
      direction.input.replaceChildren(...dirs.map(([v, t]) => h('option', { value: v, text: t })));
      if (dirs.some((d) => d[0] === keep)) direction.input.value = keep;
      price.wrap.hidden = isPct;
      pct.wrap.hidden = !isPct;
      windowF.wrap.hidden = !isPct;
    }
    type.input.addEventListener('change', syncType);
    venue.input.addEventListener('change', () => suggest(datalist, venue.input.value));
    syncType();
    suggest(datalist, venue.input.value);

    const form = h('form', { testid: 'alert-form', 'aria-labelledby': 'af-h', novalidate: true },
      h('h3', { id: 'af-h', text: 'New price or percent alert' }),
      h('div', { class: 'fields' }, venue.wrap, symbol.wrap, type.wrap, direction.wrap, price.wrap, pct.wrap, windowF.wrap, note.wrap, repeat.wrap),
      datalist, h('div', { class: 'actions' }, submit), error, status);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const isPct = type.input.value === 'pct';
      const body = {
        symbol: symbol.input.value.trim(),
        exchange: venue.input.value,
        type: type.input.value,
        direction: direction.input.value,
        price: isPct ? undefined : numberInput(price.input),
        pct: isPct ? numberInput(pct.input) : undefined,
        window: isPct ? windowF.input.value : undefined,
        repeat: repeat.input.checked ? true : undefined,
        note: note.input.value ? note.input.value : undefined,
      };
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

  /** Create form of density and market alerts (POST /site/site-alerts, fields of decisions.md §10). */
  function siteAlertForm(created) {
    const listId = 'symbols-site-alert-form';
    const type = field('Kind', 'type', 'select', { options: [['density', 'A wall appears'], ['market', 'A board number crosses a threshold']] });
    const venue = field('Venue', 'exchange', 'select', { options: venueOptions(), value: 'binance' });
    const symbol = field('Pair', 'symbol', 'text', { placeholder: 'empty: every pair', list: listId });
    const side = field('Side', 'side', 'select', { options: [['any', 'bid or ask'], ['bid', 'bid (buy wall)'], ['ask', 'ask (sell wall)']] });
    const minUsd = field('Minimum wall value (USD)', 'min_usd', 'text', { inputmode: 'decimal', placeholder: 'e.g. 250000' });
    const maxDist = field('Maximum distance from price (%)', 'max_dist_pct', 'text', { inputmode: 'decimal', placeholder: '5' });
    const minAge = field('Minimum age (s)', 'min_age_s', 'text', { inputmode: 'numeric', placeholder: '0' });
    const number = field('Board number', 'number', 'select', { options: BOARD_NUMBERS });
    const interval = field('Interval', 'interval', 'select', { options: options(INTERVALS), value: '1d' });
    const direction = field('Direction', 'direction', 'select', { options: [['above', 'above'], ['below', 'below']] });
    const threshold = field('Threshold', 'threshold', 'text', { inputmode: 'decimal', placeholder: 'e.g. 60', hint: '0–100 for sentiment; a count for the others. It fires when the number reaches the threshold from the other side.' });
    const repeat = field('Repeat', 'repeat', 'checkbox');
    const cooldown = field('Quiet time after a firing (s)', 'cooldown_s', 'text', {
      inputmode: 'numeric', placeholder: '0', hint: 'A repeating alert stays silent this long after each firing (at most 86400).',
    });
    const note = field('Note', 'note', 'text', { maxlength: 500 });
    const datalist = h('datalist', { id: listId });
    const error = errorBox('site-alert-error');
    const status = statusBox('site-alert-status');
    const submit = h('button', { type: 'submit', text: 'Create alert' });
    const densityOnly = [symbol, side, minUsd, maxDist, minAge];
    const marketOnly = [number, interval, direction, threshold];

    function syncType() {
      const density = type.input.value === 'density';
      densityOnly.forEach((f) => { f.wrap.hidden = !density; });
      marketOnly.forEach((f) => { f.wrap.hidden = density; });
      cooldown.wrap.hidden = !repeat.input.checked;
    }
    type.input.addEventListener('change', syncType);
    repeat.input.addEventListener('change', syncType);
    venue.input.addEventListener('change', () => suggest(datalist, venue.input.value));
    syncType();
    suggest(datalist, venue.input.value);

    const form = h('form', { testid: 'site-alert-form', 'aria-labelledby': 'sf-h', novalidate: true },
      h('h3', { id: 'sf-h', text: 'New wall or market alert' }),
      h('div', { class: 'fields' }, type.wrap, venue.wrap, densityOnly.map((f) => f.wrap), marketOnly.map((f) => f.wrap), note.wrap, repeat.wrap, cooldown.wrap),
      datalist, h('div', { class: 'actions' }, submit), error, status);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const density = type.input.value === 'density';
      const body = { type: type.input.value, exchange: venue.input.value };
      if (density) {
        const s = symbol.input.value.trim();
        body.symbol = s ? s : undefined;
        body.side = side.input.value;
        body.min_usd = numberInput(minUsd.input);
        body.max_dist_pct = numberInput(maxDist.input);
        body.min_age_s = numberInput(minAge.input);
      } else {
        body.number = number.input.value;
        body.interval = interval.input.value;
        body.direction = direction.input.value;
        body.threshold = numberInput(threshold.input);
      }
      body.repeat = repeat.input.checked;
      body.cooldown_s = repeat.input.checked ? numberInput(cooldown.input) : undefined;
      body.note = note.input.value ? note.input.value : undefined;
      await submitting(submit, error, status, async () => {
        const r = await call('POST', '/site/site-alerts', body);
        say(status, (density ? 'Wall' : 'Market') + ' alert #' + (r.data && r.data.id) + ' created.');
        note.input.value = '';
        created();
      });
    });
    return form;
  }

  // ---- Notifications page: the inbox, live through the event stream; filters, groups, mute, paging ----
  function notificationsPage() {
    const gen = state.gen;
    const f = state.inboxFilter;
    const list = h('ul', { class: 'inbox', testid: 'inbox-list', 'aria-busy': 'true', 'aria-labelledby': 'nt-h' });
    const error = errorBox('inbox-error');
    const live = h('p', { class: 'live', 'data-live': '' });
    const kind = field('Kind', 'kind', 'select', { options: INBOX_KINDS, value: f.kind, testid: 'inbox-kind' });
    const pair = field('Pair', 'pair', 'text', { placeholder: 'e.g. BTC', value: f.pair, testid: 'inbox-pair' });
    const showMuted = field('Show muted alerts', 'showMuted', 'checkbox', { checked: f.showMuted });
    showMuted.input.setAttribute('data-testid', 'inbox-show-muted');
    const controls = h('form', { class: 'panel controls', 'aria-label': 'Filter notifications' },
      h('div', { class: 'fields' }, kind.wrap, pair.wrap, showMuted.wrap));
    controls.addEventListener('submit', (ev) => ev.preventDefault());
    controls.addEventListener('input', () => {
      f.kind = kind.input.value;
      f.pair = pair.input.value.trim();
      f.showMuted = showMuted.input.checked;
      renderInbox();
    });
    const older = h('button', { type: 'button', class: 'secondary', testid: 'inbox-older', text: 'Show older' });
    older.addEventListener('click', async () => {
      older.disabled = true;
      say(error, '');
      const ids = Array.from(state.inbox.keys());
      const before = ids.length ? Math.min(...ids) : undefined;
      try {
        const r = await call('GET', v1('inbox', { limit: INBOX_LIMIT, before: before }));
        const got = Array.isArray(r.data) ? r.data : [];
        if (got.length < INBOX_LIMIT) state.inboxOlder = false;
        addInbox(got, false);
        renderInbox();
      } catch (e) {
        say(error, 'Could not load older notifications: ' + errText(e));
      } finally {
        older.disabled = false;
      }
    });
    const muted = h('div', { class: 'muted-list', testid: 'muted-list' });
    mount('Notifications', [
      h('h1', { id: 'nt-h', text: 'Notifications' }), live, controls, error,
      h('section', { class: 'panel', 'aria-label': 'Inbox' }, list, h('div', { class: 'actions' }, older), muted),
    ]);
    liveStatus();
    renderInbox();
    markSeen();
    loadInbox().then((r) => {
      if (!current(gen)) return;
      if (r !== true) say(error, 'Could not load the inbox: ' + errText(r));
      renderInbox();
      list.setAttribute('aria-busy', 'false');
      markSeen();
    });
  }

  /** Where an entry's event is: {symbol, exchange} (symbol null for a venue-wide market alert). */
  function entryPair(e) {
    const ev = e.event && typeof e.event === 'object' ? e.event : {};
    const a = ev.alert && typeof ev.alert === 'object' ? ev.alert : {};
    const w = ev.wall && typeof ev.wall === 'object' ? ev.wall : {};
    return { symbol: w.symbol || a.symbol || null, exchange: a.exchange || null };
  }

  function entryKindMatches(e, kind) {
    if (!kind) return true;
    if (kind === 'notice') return e.kind === 'alert.delisted' || e.kind === 'alert.expired';
    return e.kind === kind;
  }

  /** The entries the filters let through, newest first, in groups: consecutive entries of one
   * alert less than GROUP_MS apart are one group (a burst of a repeating alert is one line). */
  function inboxGroups() {
    const f = state.inboxFilter;
    const needle = f.pair.toUpperCase();
    const shown = Array.from(state.inbox.values()).sort((a, b) => b.id - a.id).filter((e) => {
      if (!f.showMuted && isMuted(e)) return false;
      if (!entryKindMatches(e, f.kind)) return false;
      const p = entryPair(e);
      return !needle || (p.symbol || '').toUpperCase().includes(needle);
    });
    const groups = [];
    for (const e of shown) {
      const g = groups[groups.length - 1];
      const t = entryTime(e);
      if (g && muteKey(e) && muteKey(g[0]) === muteKey(e) && e.kind === g[0].kind && entryTime(g[g.length - 1]) - t < GROUP_MS) g.push(e);
      else groups.push([e]);
    }
    return groups;
  }

  function entryTime(e) {
    const ev = e.event && typeof e.event === 'object' ? e.event : {};
    const v = e.createdAt || ev.time || (ev.trigger && ev.trigger.time);
    const ms = toDate(v).getTime();
    return isNaN(ms) ? 0 : ms;
  }

  function renderInbox() {
    const list = document.querySelector('[data-testid="inbox-list"]');
    if (!list) return;
    const older = document.querySelector('[data-testid="inbox-older"]');
    if (older) older.hidden = !state.inboxOlder;
    renderMuted();
    const groups = inboxGroups();
    if (!groups.length) {
      const any = state.inbox.size > 0;
      list.replaceChildren(h('li', { class: 'empty', text: any ? 'No notification matches the filters.' : 'No notification yet. Alert firings appear here as they happen.' }));
      return;
    }
    list.replaceChildren(...groups.map(inboxItem));
  }

  function renderMuted() {
    const box = document.querySelector('[data-testid="muted-list"]');
    if (!box) return;
    if (!state.muted.size) {
      box.replaceChildren();
      return;
    }
    box.replaceChildren(h('h2', { text: 'Muted alerts' }), h('p', { class: 'hint', text: 'Their firings are kept and still go to webhooks and Telegram; this browser hides them here and leaves them out of the unread count.' }),
      h('ul', null, Array.from(state.muted).sort().map((k) => {
        const [kind, id] = k.split(':');
        const name = (kind === 'api' ? 'price or percent' : kind === 'density' ? 'wall' : kind) + ' alert #' + id;
        const un = h('button', { type: 'button', class: 'secondary', testid: 'unmute', 'data-mute': k, text: 'Unmute' });
        un.addEventListener('click', () => setMuted(k, false));
        return h('li', null, name + ' ', un);
      })));
  }

  function inboxItem(group) {
    const e = group[0];
    const ev = e.event && typeof e.event === 'object' ? e.event : {};
    const when = e.createdAt || ev.time || (ev.trigger && ev.trigger.time);
    const p = entryPair(e);
    const key = muteKey(e);
    const tools = h('span', { class: 'tools' });
    if (p.symbol && p.exchange) tools.append(h('a', { href: '#/pair/' + enc(p.exchange) + '/' + enc(p.symbol), testid: 'inbox-pair-link', text: 'Open ' + p.symbol }));
    if (key) {
      const on = state.muted.has(key);
      const b = h('button', { type: 'button', class: 'link', testid: on ? 'unmute' : 'mute', 'data-mute': key, text: on ? 'Unmute' : 'Mute this alert' });
      b.addEventListener('click', () => setMuted(key, !on));
      tools.append(' ', b);
    }
    const more = group.length > 1 ? h('span', { class: 'group', testid: 'inbox-group', text: ' ×' + group.length + ' (since ' + fmtTime(entryTime(group[group.length - 1])).slice(11) + ')' }) : null;
    return h('li', {
      'data-kind': e.kind, 'data-alert-id': e.alertId === null || e.alertId === undefined ? null : e.alertId,
      'data-entry-id': e.id, 'data-group-size': group.length, class: group.some((x) => x._fresh) ? 'fresh' : null,
    }, when ? [timeEl(when), ' '] : null, h('span', { class: 'kind', text: KIND_LABELS[e.kind] || e.kind }), ' ',
    describe(e.kind, ev, e.alertId), more, ' ', tools);
  }

  /** One readable line for an inbox entry's event body (the webhook body, or the site alert's firing). */
  function describe(kind, ev, alertId) {
    const a = ev.alert && typeof ev.alert === 'object' ? ev.alert : {};
    const pair = (x) => (x.symbol || '?') + ' on ' + (x.exchange || a.exchange || '?');
    const id = a.id !== undefined ? a.id : alertId;
    if (kind === 'alert.triggered') {
      const t = ev.trigger || {};
      const cond = a.type === 'pct' ? a.direction + ' ' + a.pct + '% (' + a.window + ')' : a.direction + ' ' + fmtPrice(a.price);
      return pair(a) + ' · ' + a.type + ' alert #' + id + ' ' + cond + ' · price ' + fmtPrice(t.price) +
        (isNum(t.move) ? ' · moved ' + fmtPct(t.move, true) : '') + (a.note ? ' · ' + a.note : '');
    }
    if (kind === 'alert.delisted') {
      return pair(a) + ' was delisted; alert #' + id + ' was removed.';
    }
    if (kind === 'alert.expired') {
      return pair(a) + ' · alert #' + id + ' reached its expiry and was removed.';
    }
    if (kind === 'density.triggered') {
      const w = ev.wall || {};
      return (w.symbol || a.symbol || '?') + ' on ' + (a.exchange || '?') + ' · ' + (w.side || '?') + ' wall at ' + fmtPrice(w.price) +
        ' · ' + fmtUsd(w.usd) + ' · ' + fmtPct(w.dist, true) + ' from the price' +
        (isNum(w.ageS) ? ' · standing ' + w.ageS + ' s' : '') + ' · wall alert #' + id + (a.note ? ' · ' + a.note : '');
    }
    if (kind === 'market.triggered') {
      return (a.exchange || '?') + ' · ' + labelOf(BOARD_NUMBERS, a.number) + ' (' + a.interval + ') ' + a.direction + ' ' +
        a.threshold + ' · now ' + (isNum(ev.value) ? numberFmt.format(ev.value) : '?') + ' · market alert #' + id + (a.note ? ' · ' + a.note : '');
    }
    return 'alert #' + id;
  }

  // ---- Settings page: Telegram chat id, API keys ----
  function settingsPage() {
    const gen = state.gen;
    const keysT = table('keys-table', 'Your API keys; revoking the key of this session signs you out.',
      ['ID', 'Label', 'Plan', 'Created', 'Status', 'Action']);
    const keysError = errorBox('keys-error');
    const newKey = h('div', { class: 'new-key', testid: 'key-new', 'aria-live': 'polite' });

    async function loadKeys() {
      try {
        const r = await call('GET', '/site/keys');
        if (!current(gen)) return;
        fillTable(keysT, (r.data || []).map((k) => keyRow(k, loadKeys, keysError)), 'No key.');
      } catch (e) {
        if (current(gen)) failTable(keysT, errText(e));
      }
    }

    mount('Settings', [
      h('h1', { text: 'Settings' }),
      h('section', { class: 'panel', 'aria-labelledby': 'tg-h' }, h('h2', { id: 'tg-h', text: 'Telegram' }), telegramForm(gen)),
      h('section', { class: 'panel', 'aria-labelledby': 'ky-h' },
        h('h2', { id: 'ky-h', text: 'API keys' }), keysT.wrap, keysError, keyCreateForm(newKey, loadKeys), newKey),
      h('section', { class: 'panel', 'aria-labelledby': 'ws-h' }, h('h2', { id: 'ws-h', text: 'Webhook signing' }), signingPanel(gen)),
    ]);
    loadKeys();
  }

  // The account's webhook signing secret (GET/POST/DELETE /site/v1/webhook-secret): its state,
  // create, rotate and end, the last two after a confirmation; a new secret is shown once.
  function signingPanel(gen) {
    const state_ = h('p', { testid: 'signing-state', 'aria-live': 'polite' });
    const error = errorBox('signing-error');
    const out = h('div', { class: 'new-key', testid: 'signing-new', 'aria-live': 'polite' });
    const make = h('button', { type: 'button', testid: 'signing-rotate' });
    const end = h('button', { type: 'button', class: 'danger', testid: 'signing-end', text: 'End signing', hidden: true });
    const confirmText = h('span', { class: 'hint' });
    const yes = h('button', { type: 'button', class: 'danger', testid: 'signing-confirm' });
    const no = h('button', { type: 'button', class: 'secondary', text: 'Cancel' });
    const confirmRow = h('div', { class: 'actions', hidden: true, role: 'group', 'aria-label': 'Confirm' }, confirmText, yes, no);
    const wrap = h('div', { testid: 'signing', 'aria-busy': 'true' },
      h('p', { class: 'hint', text: 'With a secret, every webhook carries webhook-id, webhook-timestamp and webhook-signature (Standard Webhooks v1), which any Standard Webhooks library verifies. Without one, deliveries are unsigned.' }),
      state_, h('div', { class: 'actions' }, make, end), confirmRow, error, out);
    let signing = false;
    let pending = null;

    function show(d) {
      signing = !!d.signing;
      let text = 'Webhooks are not signed.';
      if (signing) {
        text = 'Webhooks are signed with a secret made ' + fmtTime(d.createdAt) + '.';
        if (d.previousUntil) text += ' The secret it replaced also signs until ' + fmtTime(d.previousUntil) + '.';
      }
      say(state_, text);
      state_.setAttribute('data-signing', signing ? 'true' : 'false');
      make.textContent = signing ? 'Rotate secret' : 'Create secret';
      end.hidden = !signing;
      wrap.setAttribute('aria-busy', 'false');
    }

    async function load() {
      try {
        const r = await call('GET', v1('webhook-secret'));
        if (current(gen)) show(r.data || {});
      } catch (e) {
        if (current(gen)) say(error, errText(e));
      }
    }

    function ask(what, text, label) {
      pending = what;
      say(confirmText, text);
      yes.textContent = label;
      confirmRow.hidden = false;
    }

    async function run(what) {
      confirmRow.hidden = true;
      pending = null;
      [make, end, yes].forEach((b) => { b.disabled = true; });
      say(error, '');
      out.replaceChildren();
      try {
        if (what === 'end') {
          await call('DELETE', v1('webhook-secret'));
        } else {
          const r = await call('POST', v1('webhook-secret'));
          showSecret(out, (r.data && r.data.secret) || '');
        }
        await load();
      } catch (e) {
        say(error, errText(e));
      } finally {
        [make, end, yes].forEach((b) => { b.disabled = false; });
      }
    }

    make.addEventListener('click', () => {
      if (!signing) run('rotate');
      else ask('rotate', 'A new secret signs from now on; the current one also signs for 24 hours, time for your receivers to move.', 'Rotate now');
    });
    end.addEventListener('click', () => ask('end', 'Both secrets are forgotten at once and webhooks go out unsigned.', 'End signing now'));
    yes.addEventListener('click', () => { if (pending) run(pending); });
    no.addEventListener('click', () => { confirmRow.hidden = true; pending = null; });
    load();
    return wrap;
  }

  function showSecret(out, secret) {
    showOnce(out, 'New signing secret:', secret, 'signing-secret', 'Copy it now into your receivers: it is not shown again.');
  }

  function telegramForm(gen) {
    const chat = field('Telegram chat id', 'telegramChatId', 'text', {
      testid: 'telegram-chat-id', placeholder: 'e.g. 123456789 or @channel', hint: 'Leave empty and save to stop Telegram messages.',
    });
    const error = errorBox('telegram-error');
    const status = statusBox('telegram-status');
    const submit = h('button', { type: 'submit', text: 'Save' });
    const hint = h('p', { class: 'hint', testid: 'telegram-hint', text: 'The chat that receives every alert firing and delisting notice through the service\'s bot.' });
    let enabled = false;
    const form = h('form', { testid: 'telegram-form', 'aria-label': 'Telegram channel', novalidate: true },
      hint,
      h('div', { class: 'fields wide' }, chat.wrap), h('div', { class: 'actions' }, submit), error, status);
    chat.input.disabled = true;
    call('GET', '/site/channels').then((r) => {
      if (!current(gen)) return;
      chat.input.value = r.data && r.data.telegramChatId ? String(r.data.telegramChatId) : '';
      chat.input.disabled = false;
      enabled = !!(r.data && r.data.telegramEnabled);
      if (!enabled) say(hint, 'This server has no Telegram bot configured: a chat id is kept, and firings reach Notifications only until the operator sets one up.');
    }, (e) => {
      if (!current(gen)) return;
      chat.input.disabled = false;
      say(error, errText(e));
    });
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const v = chat.input.value.trim();
      await submitting(submit, error, status, async () => {
        const r = await call('PUT', '/site/channels', { telegramChatId: v ? v : null });
        const saved = r.data ? r.data.telegramChatId : null;
        chat.input.value = saved ? String(saved) : '';
        enabled = !!(r.data && r.data.telegramEnabled);
        const where = enabled ? ' Firings are sent there from now on.' : ' This server has no Telegram bot configured: firings reach Notifications only.';
        say(status, saved ? 'Saved chat ' + saved + '.' + where : 'Telegram chat removed.');
      });
    });
    return form;
  }

  function keyRow(k, reload, error) {
    const cells = [
      h('td', { text: k.id }),
      h('td', { class: 'wrap', text: k.label || '' }),
      h('td', { text: k.plan }),
      h('td', null, timeEl(k.createdAt)),
      h('td', null, k.revokedAt ? ['revoked ', timeEl(k.revokedAt)] : (k.current ? 'active (this session)' : 'active')),
    ];
    let action = '';
    if (!k.revokedAt) {
      action = h('button', { type: 'button', class: 'danger', testid: 'key-revoke', 'aria-label': 'Revoke key ' + k.id, text: 'Revoke' });
      action.addEventListener('click', async () => {
        say(error, '');
        const name = 'key #' + k.id + (k.label ? ' (' + k.label + ')' : '');
        const ok = await confirmDialog(k.current ? {
          title: 'Revoke the key of this session?',
          text: 'Revoking ' + name + ' signs you out of this site at once, and every program using it is refused from its next request. It cannot be undone.',
          yes: 'Revoke and sign out', typed: String(k.id),
        } : {
          title: 'Revoke ' + name + '?',
          text: 'Every program using ' + name + ' is refused from its next request. It cannot be undone.',
          yes: 'Revoke',
        });
        if (!ok) return;
        action.disabled = true;
        try {
          await call('DELETE', '/site/keys/' + enc(k.id));
          if (k.current) sessionEnded('The key of this session was revoked; sign in with another key.');
          else reload();
        } catch (e) {
          action.disabled = false;
          if (e.status !== 401) say(error, errText(e));
        }
      });
    }
    cells.push(h('td', null, action));
    return h('tr', { 'data-key-id': k.id, 'data-current': k.current ? 'true' : null }, cells);
  }

  function keyCreateForm(out, created) {
    const label = field('Label (optional)', 'label', 'text', { maxlength: 100, placeholder: 'e.g. trading bot' });
    const error = errorBox('key-create-error');
    const submit = h('button', { type: 'submit', testid: 'key-create', text: 'Create key' });
    const form = h('form', { 'aria-label': 'New API key', novalidate: true },
      h('h3', { text: 'New key' }), h('div', { class: 'fields wide' }, label.wrap), h('div', { class: 'actions' }, submit), error);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      out.replaceChildren();
      await submitting(submit, error, null, async () => {
        const v = label.input.value.trim();
        const r = await call('POST', '/site/keys', v ? { label: v } : {});
        label.input.value = '';
        showNewKey(out, r.data || {});
        created();
      });
    });
    return form;
  }

  function showNewKey(out, k) {
    showOnce(out, 'New key #' + k.id + (k.label ? ' (' + k.label + ')' : '') + ', plan ' + k.plan + ':', k.key || '',
      'key-new-value', 'Copy it now: it is not shown again (the server keeps only its hash).');
  }

  // A credential shown once (a new key, a signing secret), with a Copy button.
  function showOnce(out, heading, value, testid, hint) {
    const code = h('code', { testid: testid, text: value });
    const copy = h('button', { type: 'button', class: 'secondary', text: 'Copy' });
    const copied = h('span', { class: 'hint', role: 'status' });
    copy.addEventListener('click', async () => {
      try {
        await navigator.clipboard.writeText(value);
        say(copied, 'Copied.');
      } catch (e) {
        say(copied, 'Select it and copy it by hand.');
      }
    });
    out.replaceChildren(h('p', null, h('strong', { text: heading })), code, h('p', { class: 'hint', text: hint }),
      h('div', { class: 'actions' }, copy, copied));
  }

  // ---- Start ----
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', boot);
  else boot();
})();
