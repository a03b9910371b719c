// HTTP: every call sends the session cookie, a state change the CSRF token; an error carries the server's message.

import { state } from './state.js';

/** A refused or failed call: the HTTP status (0 when the server was not reached) and the server's words. */
export class HttpError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

/** A number written into a JSON body exactly as the user typed it (the server keeps values as sent). */
export class Raw {
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

/** The JSON answer of `method path` (`{}` when empty); a non-2xx answer throws an HttpError. */
export async function call(method, path, body, keepalive) {
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
  if (!res.ok) throw refusal(res, json, path);
  return json || {};
}

let sessionLost = () => {};

/** What a 401 on a signed-in page does (the session's `sessionEnded`, registered when it loads). */
export function whenSessionLost(fn) {
  sessionLost = fn;
}

// The error of a non-2xx answer; a 401 on a signed-in page ends the session in the UI.
function refusal(res, json, path) {
  const message = json && typeof json.error === 'string' && json.error
    ? json.error : 'HTTP ' + res.status + (res.statusText ? ' ' + res.statusText : '');
  if (res.status === 401 && state.session && path.indexOf('/site/signin') !== 0) {
    setTimeout(() => sessionLost('Your session has ended (' + message + '). Sign in again.'), 0);
  }
  return new HttpError(res.status, message);
}

export function errText(e) { return e && e.message ? e.message : String(e); }

/** A query string of the params that have a value ('' when none has). */
export function q(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') u.set(k, v);
  const s = u.toString();
  return s ? '?' + s : '';
}

/** The path of an API route through the site (`/site/v1/...`, with the session). */
export function v1(path, params) { return '/site/v1/' + path + q(params || {}); }
export function enc(s) { return encodeURIComponent(s); }
