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

/** The table's rows, or one line of `emptyText` when there are none; loaded. */
export function fillTable(t, rows, emptyText) {
  if (rows.length) t.tbody.replaceChildren(...rows);
  else t.tbody.replaceChildren(h('tr', null, h('td', { colspan: t.cols, class: 'empty', text: emptyText })));
  t.table.setAttribute('aria-busy', 'false');
}

/** The table as one line of error; loaded. */
export function failTable(t, message) {
  t.tbody.replaceChildren(h('tr', null, h('td', { colspan: t.cols, class: 'error', text: message })));
  t.table.setAttribute('aria-busy', 'false');
}
