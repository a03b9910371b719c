// The sign-in page: an API key sent once for a session cookie, then back to the page that was asked for.

import { resetChartHandle } from '../chart.js';
import { errorBox, h, mount, say } from '../dom.js';
import { field } from '../forms.js';
import { call, errText } from '../http.js';
import { leavePage } from '../lifecycle.js';
import { go } from '../nav.js';
import { startSession } from '../session.js';
import { state } from '../state.js';

/** Shows the sign-in form (with the message of why, if any), unless it is shown already. */
export function showSignin() {
  if (state.page === 'signin') return;
  leavePage();
  state.page = 'signin';
  resetChartHandle();
  document.getElementById('top').hidden = true;
  const key = field('API key', 'key', 'password', { testid: 'signin-key', autocomplete: 'current-password', required: true });
  const error = errorBox('signin-error');
  error.textContent = state.signinMessage;
  state.signinMessage = '';
  const submit = h('button', { type: 'submit', testid: 'signin-submit', text: 'Sign in' });
  const form = h('form', { class: 'panel', 'aria-labelledby': 'signin-h', novalidate: true },
    key.wrap,
    h('p', { class: 'hint', text: 'Use one of your account\'s API keys (rk_…). The key is sent once; the session lives in a cookie the page cannot read.' }),
    h('div', { class: 'actions' }, submit),
    error);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    signIn(key.input, submit, error);
  });
  mount('Sign in', [h('section', { class: 'signin' }, h('h1', { id: 'signin-h', text: 'Sign in to rampart' }), form)]);
  key.input.focus();
}

async function signIn(input, submit, error) {
  const value = input.value.trim();
  if (!value) {
    say(error, 'Enter an API key.');
    input.focus();
    return;
  }
  submit.disabled = true;
  say(error, '');
  try {
    const r = await call('POST', '/site/signin', { key: value });
    input.value = '';
    startSession(r.data);
    state.page = '';
    const target = state.returnTo && state.returnTo !== '#/signin' ? state.returnTo : '#/market';
    state.returnTo = '';
    go(target);
  } catch (e) {
    submit.disabled = false;
    say(error, errText(e));
    input.focus();
  }
}
