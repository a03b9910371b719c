// The notifications page: the inbox, live through the event stream; filters, groups, mute, and "Show older".

import { errorBox, h, mount, say } from '../dom.js';
import { field } from '../forms.js';
import { call, errText, v1 } from '../http.js';
import { addInbox, INBOX_LIMIT, loadInbox, markSeen } from '../inbox.js';
import { renderInbox } from '../inbox-view.js';
import { current } from '../lifecycle.js';
import { liveStatus } from '../live.js';
import { state } from '../state.js';

// The kinds of the filter (inbox-view's entryFilter): a firing by its alert's type; wall alerts
// include the density alerts made on the site, and the firings of density alerts from before.
const INBOX_KINDS = [
  ['', 'Every kind'], ['price', 'Price and percent alerts'], ['level', 'Level alerts'], ['wall', 'Wall and density alerts'],
  ['derivatives', 'Liquidations, open interest and funding alerts'], ['market.triggered', 'Market alerts'], ['notice', 'Delistings, expiries and pauses'],
];

export function notificationsPage() {
  const gen = state.gen;
  const list = h('ul', { class: 'inbox', testid: 'inbox-list', 'aria-busy': 'true', 'aria-labelledby': 'nt-h' });
  const error = errorBox('inbox-error');
  const live = h('p', { class: 'live', 'data-live': '' });
  const controls = inboxFilters();
  const older = olderButton(error);
  const muted = h('div', { class: 'muted-list', testid: 'muted-list' });
  mount('Notifications', [
    h('h1', { id: 'nt-h', text: 'Notifications' }), live, controls, error,
    h('section', { class: 'panel', 'aria-label': 'Inbox' }, list, h('div', { class: 'actions' }, older), muted),
  ]);
  liveStatus();
  renderInbox();
  markSeen();
  loadInbox().then((r) => {
    if (!current(gen)) return;
    if (r !== true) say(error, 'Could not load the inbox: ' + errText(r));
    renderInbox();
    list.setAttribute('aria-busy', 'false');
    markSeen();
  });
}

// The filters: kind, pair, and whether muted alerts show (kept while the session lasts).
function inboxFilters() {
  const f = state.inboxFilter;
  const kind = field('Kind', 'kind', 'select', { options: INBOX_KINDS, value: f.kind, testid: 'inbox-kind' });
  const pair = field('Pair', 'pair', 'text', { placeholder: 'e.g. BTC', value: f.pair, testid: 'inbox-pair' });
  const showMuted = field('Show muted alerts', 'showMuted', 'checkbox', { checked: f.showMuted });
  showMuted.input.setAttribute('data-testid', 'inbox-show-muted');
  const controls = h('form', { class: 'panel controls', 'aria-label': 'Filter notifications' },
    h('div', { class: 'fields' }, kind.wrap, pair.wrap, showMuted.wrap));
  controls.addEventListener('submit', (ev) => ev.preventDefault());
  controls.addEventListener('input', () => {
    f.kind = kind.input.value;
    f.pair = pair.input.value.trim();
    f.showMuted = showMuted.input.checked;
    renderInbox();
  });
  return controls;
}

// "Show older": the INBOX_LIMIT entries before the oldest held.
function olderButton(error) {
  const older = h('button', { type: 'button', class: 'secondary', testid: 'inbox-older', text: 'Show older' });
  older.addEventListener('click', async () => {
    older.disabled = true;
    say(error, '');
    const ids = Array.from(state.inbox.keys());
    const before = ids.length ? Math.min(...ids) : undefined;
    try {
      const r = await call('GET', v1('inbox', { limit: INBOX_LIMIT, before: before }));
      const got = Array.isArray(r.data) ? r.data : [];
      if (got.length < INBOX_LIMIT) state.inboxOlder = false;
      addInbox(got, false);
      renderInbox();
    } catch (e) {
      say(error, 'Could not load older notifications: ' + errText(e));
    } finally {
      older.disabled = false;
    }
  });
  return older;
}
