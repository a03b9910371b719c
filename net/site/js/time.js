// Time: every time on the site (the chart's included) in one stated zone, the browser's own or UTC a click away.

import { h, say } from './dom.js';
import { pad2 } from './format.js';
import { state } from './state.js';

/** The browser's zone, by name. */
const LOCAL_ZONE = (() => {
  try { return Intl.DateTimeFormat().resolvedOptions().timeZone || 'local time'; } catch (e) { return 'local time'; }
})();

// A browser set to UTC has nothing to switch to.
const LOCAL_IS_UTC = /^(Etc\/)?(UTC|GMT|UCT|Universal|Zulu)$/.test(LOCAL_ZONE);

export function toDate(v) { return new Date(typeof v === 'number' ? v : String(v)); }

/** The zone's offset from UTC at `ms`, in minutes (0 in UTC). */
export function zoneOffsetMin(ms) { return state.zone === 'utc' ? 0 : -new Date(ms).getTimezoneOffset(); }

function fmtOffset(min) {
  const a = Math.abs(min);
  return 'UTC' + (min < 0 ? '−' : '+') + pad2(Math.floor(a / 60)) + ':' + pad2(a % 60);
}

/** The zone as the header states it: "Asia/Kolkata (UTC+05:30)" or "UTC". */
function zoneLabel() {
  return state.zone === 'utc' ? 'UTC' : LOCAL_ZONE + ' (' + fmtOffset(zoneOffsetMin(Date.now())) + ')';
}

/** Date and time of a Unix-ms number or an ISO string in the stated zone, "YYYY-MM-DD HH:MM:SS". */
export function fmtTime(v) {
  if (v === null || v === undefined || v === '') return '';
  const d = toDate(v);
  if (isNaN(d.getTime())) return String(v);
  // Shifted by the zone's offset, a date's UTC fields are the zone's wall clock.
  const w = new Date(d.getTime() + zoneOffsetMin(d.getTime()) * 60000);
  return w.getUTCFullYear() + '-' + pad2(w.getUTCMonth() + 1) + '-' + pad2(w.getUTCDate()) + ' ' +
    pad2(w.getUTCHours()) + ':' + pad2(w.getUTCMinutes()) + ':' + pad2(w.getUTCSeconds());
}

/** The time of day of `v` in the stated zone, "HH:MM:SS". */
export function fmtClock(v) { return fmtTime(v).slice(11); }

/** The stated zone's name, as a form asks for a time in it: "UTC" or "Asia/Kolkata". */
export function zoneName() { return state.zone === 'utc' || LOCAL_IS_UTC ? 'UTC' : LOCAL_ZONE; }

/** `v` as a datetime-local control holds it, "YYYY-MM-DDTHH:MM", in the stated zone ('' when none). */
export function toZoneInput(v) {
  const t = fmtTime(v);
  return /^\d{4}-/.test(t) ? t.slice(0, 16).replace(' ', 'T') : '';
}

/** A datetime-local control's "YYYY-MM-DDTHH:MM", read in the stated zone, as ISO 8601 in UTC; null when it is not one. */
export function fromZoneInput(text) {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(text);
  if (!m) return null;
  const [y, mo, d, hh, mi, ss] = m.slice(1).map((x) => Number(x || 0));
  const ms = state.zone === 'utc' ? Date.UTC(y, mo - 1, d, hh, mi, ss) : new Date(y, mo - 1, d, hh, mi, ss).getTime();
  return isNaN(ms) ? null : new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** A <time> of `v` in the stated zone, its UTC instant in `datetime` and the tooltip. */
export function timeEl(v) {
  const d = toDate(v);
  const attrs = isNaN(d.getTime()) ? {} : { datetime: d.toISOString(), title: d.toISOString().replace('.000Z', 'Z') + ' (UTC)' };
  attrs.text = fmtTime(v);
  return h('time', attrs);
}

/** The header's statement of the zone, and its button to switch. */
export function showZone() {
  say(document.getElementById('zone-label'), 'Times: ' + (LOCAL_IS_UTC ? 'UTC' : zoneLabel()));
  const button = document.getElementById('zone');
  button.hidden = LOCAL_IS_UTC;
  say(button, state.zone === 'utc' ? 'Show ' + LOCAL_ZONE : 'Show UTC');
}
