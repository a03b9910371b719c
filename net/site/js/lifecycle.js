// Page lifecycle: the current page's timers and cleanups end when the route changes; late answers of an older page are dropped.

import { state } from './state.js';

/** Ends the current page: its generation is over, its timers stop, its cleanups run. */
export function leavePage() {
  state.gen++;
  state.timers.forEach((t) => clearTimeout(t));
  state.timers.clear();
  state.cleanups.splice(0).forEach((f) => { try { f(); } catch (e) { /* already gone */ } });
}

/** Whether the page of generation `gen` is still the one shown. */
export function current(gen) { return gen === state.gen; }

/** Runs fn every ms milliseconds (after the previous run ended) while the page stays, skipping hidden tabs. */
export function poll(ms, fn) {
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

/** Runs fn once after ms milliseconds, unless the page is left first. */
export function later(ms, fn) {
  const gen = state.gen;
  const t = setTimeout(() => {
    state.timers.delete(t);
    if (current(gen)) fn();
  }, ms);
  state.timers.add(t);
  return t;
}

/** A Map that is empty again on every new page (what a page's rows hold between redraws). */
export function pageMap() {
  const m = new Map();
  let gen = state.gen;
  return () => {
    if (gen !== state.gen) {
      m.clear();
      gen = state.gen;
    }
    return m;
  };
}

/** Runs fn when the page is left. */
export function onLeave(fn) { state.cleanups.push(fn); }
