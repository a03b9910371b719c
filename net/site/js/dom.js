// DOM building with createElement/textContent only (server data never goes through HTML parsing), and the page's <main>.

/** An element: attrs (`text`, `class`, `testid`, `on<event>` handlers, others as attributes), then children. */
export function h(tag, attrs) {
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

/** Sets an element's text, leaving it alone when unchanged (no needless announcement). */
export function say(el, text) { if (el.textContent !== text) el.textContent = text; }

export function errorBox(testid) { return h('p', { class: 'error', role: 'alert', testid: testid }); }
export function statusBox(testid) { return h('p', { class: 'status', role: 'status', testid: testid }); }

export function pairLink(exchange, symbol) {
  return h('a', { href: '#/pair/' + encodeURIComponent(exchange) + '/' + encodeURIComponent(symbol), text: symbol });
}

/** Shows a page: its title, and its nodes in place of whatever <main> held. */
export function mount(title, nodes) {
  document.title = title + ' · rampart';
  const main = document.getElementById('main');
  main.replaceChildren(...nodes);
}

export function focusHeading() {
  const h1 = document.querySelector('#main h1');
  if (h1) {
    h1.setAttribute('tabindex', '-1');
    h1.focus({ preventScroll: true });
  }
}
