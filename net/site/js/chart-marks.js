// The chart's level lines and walls as controls: a focusable, labelled marker at each one's height, and a small menu, opened from the marker or by a click on the line, that offers its alerts (the same offers, through the same path, as the pair page's tables).

import { h, say } from './dom.js';
import { levelName, levelOffers, offerButtons, wallName, wallOffers } from './structure.js';

const MARK_PX = 24; // a marker's width and height: the least target size (WCAG 2.5.8)
const MARK_GAP_PX = 2; // between markers whose lines are too near to stack them
const LINE_HIT_PX = 6; // a click on the chart this near a line's height opens its menu
const EDGE_PX = 8; // the menu keeps this far from the window's edges

const LETTERS = { support: 'S', resistance: 'R', bid: 'W', ask: 'W' };

// A mark's side (support/resistance for a level, bid/ask for a wall), its name (the marker's
// label, which stays while the line does), its name with what changes (a wall's value) and offers.
function markInfo(mark) {
  if (mark.kind === 'level') {
    const name = levelName(mark.of);
    return { side: mark.of.type, name: name, detail: name, offers: levelOffers(mark.of) };
  }
  return { side: mark.of.side, name: wallName(mark.of, false), detail: wallName(mark.of, true), offers: wallOffers(mark.of) };
}

/**
 * The markers over a chart, in `layer` (an element laid over the chart's box). `y(price)` is
 * where the chart draws a price (null off its pane); `alert(body, label)` makes an offered alert.
 * `draw(marks)` takes [{key, price, kind: 'level'|'wall', of: the level or wall}], one per line
 * drawn; `place()` moves them to their lines (after any change of the chart's scales); `at(y)`
 * opens the menu of the line at that height, if one is there.
 */
export function chartMarks(layer, y, alert) {
  const shown = new Map(); // key -> {mark, button, y}
  const menu = markMenu(layer, alert);

  function draw(marks) {
    const keep = new Set(marks.map((m) => m.key));
    shown.forEach((e, key) => {
      if (keep.has(key)) return;
      menu.forget(key);
      e.button.remove();
      shown.delete(key);
    });
    for (const mark of marks) {
      const e = shown.get(mark.key) || newMark(mark.key);
      e.mark = mark;
      const info = markInfo(mark);
      e.button.className = 'chart-mark ' + info.side;
      e.button.setAttribute('data-kind', mark.kind);
      e.button.setAttribute('data-side', info.side);
      e.button.setAttribute('data-price', String(mark.price));
      e.button.setAttribute('aria-label', info.name + ': alerts');
      e.button.title = info.detail;
      say(e.button, LETTERS[info.side] || '?');
    }
    place();
  }

  // A marker, reused while its line stays (a redraw keeps its focus).
  function newMark(key) {
    const button = h('button', { type: 'button', testid: 'chart-mark', 'aria-haspopup': 'dialog', 'aria-expanded': 'false' });
    const e = { mark: null, button: button, y: null };
    button.addEventListener('click', () => menu.open(key, e));
    layer.append(button);
    shown.set(key, e);
    return e;
  }

  // Each marker at its line's height by the chart's left edge; markers of lines nearer than a
  // marker's height stand side by side.
  function place() {
    const rows = [];
    shown.forEach((e) => {
      e.y = y(e.mark.price);
      e.button.hidden = e.y === null;
      if (e.y !== null) rows.push(e);
    });
    rows.sort((a, b) => a.y - b.y);
    let col = 0;
    rows.forEach((e, i) => {
      col = i > 0 && e.y - rows[i - 1].y < MARK_PX ? col + 1 : 0;
      e.button.style.top = Math.round(e.y - MARK_PX / 2) + 'px';
      e.button.style.left = 4 + col * (MARK_PX + MARK_GAP_PX) + 'px';
    });
  }

  function at(py) {
    let best = null;
    shown.forEach((e, key) => {
      if (e.y !== null && Math.abs(e.y - py) <= LINE_HIT_PX && (!best || Math.abs(e.y - py) < Math.abs(best[1].y - py))) best = [key, e];
    });
    if (best) menu.open(best[0], best[1]);
  }

  return { draw: draw, place: place, at: at, remove: () => menu.close() };
}

/** The one menu of a chart's markers: a popover naming the line, with its offers and Cancel. */
function markMenu(layer, alert) {
  const title = h('p', { class: 'menu-title', id: 'chart-menu-title' });
  const actions = h('div', { class: 'actions' });
  const menu = h('div', { class: 'chart-menu', popover: 'auto', role: 'dialog', testid: 'chart-menu', 'aria-labelledby': 'chart-menu-title' },
    title, actions);
  layer.append(menu);
  let current = null; // [key, entry] of the open menu
  const isOpen = () => menu.matches(':popover-open');
  const close = () => { if (isOpen()) menu.hidePopover(); };
  const onScroll = () => close();

  menu.addEventListener('toggle', (ev) => {
    if (ev.newState === 'open') {
      window.addEventListener('scroll', onScroll, { passive: true });
      return;
    }
    window.removeEventListener('scroll', onScroll);
    if (!current) return;
    const button = current[1].button;
    button.setAttribute('aria-expanded', 'false');
    // Opened by a click on the line, nothing had the focus: it goes to the line's marker.
    if (button.isConnected && (document.activeElement === document.body || menu.contains(document.activeElement))) button.focus({ preventScroll: true });
    current = null;
  });

  function open(key, e) {
    const info = markInfo(e.mark);
    if (current && current[1] !== e) current[1].button.setAttribute('aria-expanded', 'false');
    current = [key, e];
    say(title, info.detail);
    const cancel = h('button', { type: 'button', class: 'secondary small', text: 'Cancel' });
    cancel.addEventListener('click', close);
    const made = (body, label) => alert(body, label + ' · ' + info.name);
    actions.replaceChildren(...offerButtons(info.offers, made, close), cancel);
    if (!isOpen()) menu.showPopover();
    e.button.setAttribute('aria-expanded', 'true');
    position(menu, e.button.getBoundingClientRect());
    actions.firstChild.focus({ preventScroll: true });
  }

  return { open: open, close: close, forget: (key) => { if (current && current[0] === key) close(); } };
}

// The menu beside its marker, or under it (over it near the window's foot) where the window is
// too narrow for beside (a phone's); inside the window either way.
function position(menu, at) {
  const m = menu.getBoundingClientRect();
  const beside = at.right + 6 + m.width <= window.innerWidth - EDGE_PX;
  let left = beside ? at.right + 6 : at.left;
  let top = beside ? at.top : at.bottom + 6;
  if (!beside && top + m.height > window.innerHeight - EDGE_PX) top = at.top - 6 - m.height;
  left = Math.max(EDGE_PX, Math.min(left, window.innerWidth - m.width - EDGE_PX));
  top = Math.max(EDGE_PX, Math.min(top, window.innerHeight - m.height - EDGE_PX));
  menu.style.left = Math.round(left) + 'px';
  menu.style.top = Math.round(top) + 'px';
}
