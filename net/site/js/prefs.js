// Preferences kept in this browser (localStorage, under "rampart.<name>"), read with a fallback.

/** The stored value of `name`, or `fallback` (an object fallback fills the stored object's gaps). */
export function loadPrefs(name, fallback) {
  try {
    const v = JSON.parse(localStorage.getItem('rampart.' + name) || 'null');
    if (v === null) return fallback;
    return typeof fallback === 'object' ? Object.assign({}, fallback, v) : v;
  } catch (e) {
    return fallback;
  }
}

/** Keeps `value` as `name` (nothing in a private window that refuses it). */
export function savePrefs(name, value) {
  try { localStorage.setItem('rampart.' + name, JSON.stringify(value)); } catch (e) { /* private mode */ }
}
