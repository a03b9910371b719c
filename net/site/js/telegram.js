// The settings page's Telegram form: the chat that receives every firing, read from and saved to /site/channels.

import { errorBox, h, say, statusBox } from './dom.js';
import { field, submitting } from './forms.js';
import { call, errText } from './http.js';
import { current } from './lifecycle.js';

/** The Telegram chat id form of the page of generation `gen`. */
export function telegramForm(gen) {
  const chat = field('Telegram chat id', 'telegramChatId', 'text', {
    testid: 'telegram-chat-id', placeholder: 'e.g. 123456789 or @channel', hint: 'Leave empty and save to stop Telegram messages.',
  });
  const error = errorBox('telegram-error');
  const status = statusBox('telegram-status');
  const submit = h('button', { type: 'submit', text: 'Save' });
  const hint = h('p', { class: 'hint', testid: 'telegram-hint', text: 'The chat that receives every alert firing and delisting notice through the service\'s bot.' });
  const form = h('form', { testid: 'telegram-form', 'aria-label': 'Telegram channel', novalidate: true },
    hint,
    h('div', { class: 'fields wide' }, chat.wrap), h('div', { class: 'actions' }, submit), error, status);
  chat.input.disabled = true;
  call('GET', '/site/channels').then((r) => {
    if (!current(gen)) return;
    chat.input.value = r.data && r.data.telegramChatId ? String(r.data.telegramChatId) : '';
    chat.input.disabled = false;
    if (!(r.data && r.data.telegramEnabled)) say(hint, 'This server has no Telegram bot configured: a chat id is kept, and firings reach Notifications only until the operator sets one up.');
  }, (e) => {
    if (!current(gen)) return;
    chat.input.disabled = false;
    say(error, errText(e));
  });
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const v = chat.input.value.trim();
    await submitting(submit, error, status, async () => {
      const r = await call('PUT', '/site/channels', { telegramChatId: v ? v : null });
      const saved = r.data ? r.data.telegramChatId : null;
      chat.input.value = saved ? String(saved) : '';
      const where = r.data && r.data.telegramEnabled ? ' Firings are sent there from now on.' : ' This server has no Telegram bot configured: firings reach Notifications only.';
      say(status, saved ? 'Saved chat ' + saved + '.' + where : 'Telegram chat removed.');
    });
  });
  return form;
}
