// Tables: a caption above a horizontally scrolling box, rows filled or an empty or error line, aria-busy until loaded.

import { h, say } from './dom.js';

/**
 * A table inside a horizontally scrolling box, its caption shown above the box (so a wide
 * table never cuts it): {wrap, scroll, table, tbody, cols, setCaption}. A table whose last
 * column is "Action" keeps that column pinned to the box's right edge, so the row's buttons
 * stay in view however far the other columns reach. A header is its text or [text, class].
 */
export function table(testid, caption, headers) {
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

/**
 * The table's rows, or one line of `emptyText` when there are none; loaded. A row already in the
 * table (an alert being edited) stays where it is, never taken out and put back, so what is
 * typed in it and its focus survive a redraw; the focus on a control of a row drawn anew goes
 * to the same control of the row that replaces it (a live table redraws at every firing).
 */
export function fillTable(t, rows, emptyText) {
  const list = rows.length ? rows : [h('tr', null, h('td', { colspan: t.cols, class: 'empty', text: emptyText }))];
  const focus = focusedControl(t.tbody);
  const keep = new Set(list);
  Array.from(t.tbody.children).forEach((row) => { if (!keep.has(row)) row.remove(); });
  list.forEach((row, i) => {
    const at = t.tbody.children[i];
    if (at !== row) t.tbody.insertBefore(row, at || null);
  });
  if (focus && !t.tbody.contains(document.activeElement)) refocus(t.tbody, focus);
  t.table.setAttribute('aria-busy', 'false');
}

// The focused control of a row, by what finds it again in the row drawn in its place: the row's
// `data-*-id` attributes and the control's test id; null when the focus is elsewhere.
function focusedControl(tbody) {
  const el = document.activeElement;
  const row = el && tbody.contains(el) ? el.closest('tr') : null;
  const testid = el && el.getAttribute('data-testid');
  if (!row || !testid) return null;
  const ids = Array.from(row.attributes).filter((a) => /^data-[a-z-]*id$/.test(a.name));
  return ids.map((a) => '[' + a.name + '="' + CSS.escape(a.value) + '"]').join('') + ' [data-testid="' + CSS.escape(testid) + '"]';
}

function refocus(tbody, selector) {
  const el = selector.charAt(0) === '[' ? tbody.querySelector('tr' + selector) : null;
  if (el) el.focus({ preventScroll: true });
}

/** The table as one line of error; loaded. */
export function failTable(t, message) {
  t.tbody.replaceChildren(h('tr', null, h('td', { colspan: t.cols, class: 'error', text: message })));
  t.table.setAttribute('aria-busy', 'false');
}
