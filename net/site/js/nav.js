// Navigation below every page: the route's parts, going to a route, and the header's marked link; the router registers how a route is drawn.

let draw = () => {};

/** How the current route is drawn (the router's `route`, registered when it loads). */
export function drawWith(fn) {
  draw = fn;
}

function safeDecode(s) {
  try { return decodeURIComponent(s); } catch (e) { return s; }
}

/** The route's parts: `#/pair/okx/BTCUSDT` is ['pair', 'okx', 'BTCUSDT']. */
export function parseRoute() {
  const raw = location.hash.replace(/^#\/?/, '');
  return raw.split('/').filter(Boolean).map(safeDecode);
}

/** Shows `hash`, drawn again when it is already the route. */
export function go(hash) {
  if (location.hash === hash) draw();
  else location.hash = hash;
}

/** Marks the navigation's link of the page shown. */
export function markNav(name) {
  document.querySelectorAll('.nav a[data-route]').forEach((a) => {
    if (a.getAttribute('data-route') === name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  });
}
