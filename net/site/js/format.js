// Numbers and words as the site shows them: prices, counts, US dollars, percents, durations.

export const numberFmt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 2 });
const compactFmt = new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 2 });
export const intFmt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

export function isNum(v) { return typeof v === 'number' && isFinite(v); }

export function pad2(n) { return String(n).padStart(2, '0'); }

export function fmtPrice(v) { return isNum(v) ? String(v) : '–'; }
export function fmtInt(v) { return isNum(v) ? intFmt.format(v) : '–'; }
export function fmtCompact(v) { return isNum(v) ? compactFmt.format(v) : '–'; }
export function fmtUsd(v) { return isNum(v) ? '$' + compactFmt.format(v) : '–'; }
export function fmtPct(v, signed) {
  if (!isNum(v)) return '–';
  const s = numberFmt.format(v) + '%';
  return signed && v > 0 ? '+' + s : s;
}

/** A duration in seconds in its largest whole unit: "2 h", "5 min", "90 s". */
export function fmtDuration(s) {
  if (s % 3600 === 0) return s / 3600 + ' h';
  if (s % 60 === 0) return s / 60 + ' min';
  return s + ' s';
}

/** The CSS class of a signed number: "up", "down" or none. */
export function signClass(v) { return isNum(v) ? (v > 0 ? 'up' : v < 0 ? 'down' : '') : ''; }

/** The words of `value` in a list of [value, words] pairs (the value itself when absent). */
export function labelOf(pairs, value) {
  const hit = pairs.find((p) => p[0] === value);
  return hit ? hit[1] : String(value);
}

export function capital(t) { return t.charAt(0).toUpperCase() + t.slice(1); }
