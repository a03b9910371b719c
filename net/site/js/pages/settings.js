// The settings page: the Telegram chat, the API keys, and webhook signing.

import { errorBox, h, mount } from '../dom.js';
import { call, errText } from '../http.js';
import { keyCreateForm, keyRow } from '../keys.js';
import { current } from '../lifecycle.js';
import { signingPanel } from '../signing.js';
import { state } from '../state.js';
import { failTable, fillTable, table } from '../tables.js';
import { telegramForm } from '../telegram.js';

export function settingsPage() {
  const gen = state.gen;
  const keysT = table('keys-table', 'Your API keys; revoking the key of this session signs you out.',
    ['ID', 'Label', 'Plan', 'Created', 'Status', 'Action']);
  const keysError = errorBox('keys-error');
  const newKey = h('div', { class: 'new-key', testid: 'key-new', 'aria-live': 'polite' });

  async function loadKeys() {
    try {
      const r = await call('GET', '/site/keys');
      if (!current(gen)) return;
      fillTable(keysT, (r.data || []).map((k) => keyRow(k, loadKeys, keysError)), 'No key.');
    } catch (e) {
      if (current(gen)) failTable(keysT, errText(e));
    }
  }

  mount('Settings', [
    h('h1', { text: 'Settings' }),
    h('section', { class: 'panel', 'aria-labelledby': 'tg-h' }, h('h2', { id: 'tg-h', text: 'Telegram' }), telegramForm(gen)),
    h('section', { class: 'panel', 'aria-labelledby': 'ky-h' },
      h('h2', { id: 'ky-h', text: 'API keys' }), keysT.wrap, keysError, keyCreateForm(newKey, loadKeys), newKey),
    h('section', { class: 'panel', 'aria-labelledby': 'ws-h' }, h('h2', { id: 'ws-h', text: 'Webhook signing' }), signingPanel(gen)),
  ]);
  loadKeys();
}
