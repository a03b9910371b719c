// The venues and their symbols, read once per session: the venue choices of every form and the pair inputs' suggestions.

import { h } from './dom.js';
import { options } from './forms.js';
import { call, enc, v1 } from './http.js';
import { state } from './state.js';

/** The venues as select options. */
export function venueOptions() { return options(state.venues); }

/** Reads the venues the server serves (the four known ones are kept if it cannot tell). */
export async function loadVenues() {
  try {
    const r = await call('GET', v1('exchanges'));
    const list = (r.data || []).map((x) => x.exchange).filter((x) => typeof x === 'string');
    if (list.length) state.venues = list;
  } catch (e) { /* keep the four known venues */ }
}

/** Symbols of a venue for the pair inputs' suggestions (cached for the session). */
export function symbolsOf(venue) {
  if (!state.symbolLists.has(venue)) {
    const p = call('GET', v1('exchanges/' + enc(venue) + '/symbols'))
      .then((r) => (r.data || []).filter((x) => x.status !== 'delisted').map((x) => x.symbol))
      .catch(() => { state.symbolLists.delete(venue); return []; });
    state.symbolLists.set(venue, p);
  }
  return state.symbolLists.get(venue);
}

/** Fills a <datalist> with the venue's symbols. */
export function suggest(datalist, venue) {
  symbolsOf(venue).then((syms) => {
    datalist.replaceChildren(...syms.map((s) => h('option', { value: s })));
  });
}
