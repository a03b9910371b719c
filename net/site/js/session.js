// The session in the page: started by signing in (or found at start), ended by signing out or by the server.

import { say } from './dom.js';
import { flushDeletes } from './deletes.js';
import { errText, HttpError, call, whenSessionLost } from './http.js';
import { loadInbox, mutedSet, updateBadge } from './inbox.js';
import { leavePage } from './lifecycle.js';
import { closeStream, startStream } from './live.js';
import { go, markNav, parseRoute } from './nav.js';
import { loadPrefs } from './prefs.js';
import { state } from './state.js';
import { loadVenues } from './venues.js';

/** Starts the session the server answered (`/site/signin` or `/site/session`): the header, the venues, the inbox and the page's stream (after the inbox's first read). */
export function startSession(data) {
  if (!data || typeof data.csrf !== 'string') throw new HttpError(0, 'The server answered without a session.');
  state.session = { accountId: data.accountId, plan: data.plan, csrf: data.csrf };
  state.inbox.clear();
  state.inboxRead = false;
  state.lastSeen = Number(loadPrefs('seen.' + data.accountId, 0)) || 0;
  state.muted = mutedSet();
  state.inboxOlder = true;
  document.getElementById('top').hidden = false;
  say(document.getElementById('who'), 'Account ' + data.accountId + ' · ' + data.plan + ' plan');
  updateBadge();
  loadVenues();
  startStream(loadInbox());
}

function endSessionState() {
  state.session = null;
  closeStream();
  leavePage();
  state.inbox.clear();
  state.symbolLists.clear();
  document.getElementById('top').hidden = true;
  markNav('');
}

/** The session is gone (expired, key revoked, signed out elsewhere): back to the sign-in form. */
export function sessionEnded(message) {
  if (!state.session) return;
  const parts = parseRoute();
  if (parts[0] && parts[0] !== 'signin') state.returnTo = location.hash;
  endSessionState();
  state.signinMessage = message || '';
  state.page = '';
  go('#/signin'); // drawn again when it is the route already: the sign-in form
}

/** The header's Sign out: waiting deletes are sent first, with this session's token. */
export async function signOut() {
  const btn = document.getElementById('signout');
  btn.disabled = true;
  await flushDeletes(false); // sent with this session's token, before it ends
  try {
    await call('POST', '/site/signout');
  } catch (e) {
    if (e.status !== 401) {
      btn.disabled = false;
      window.alert('Sign-out failed: ' + errText(e));
      return;
    }
  }
  btn.disabled = false;
  state.returnTo = '';
  endSessionState();
  state.page = '';
  state.signinMessage = '';
  go('#/signin'); // drawn again when it is the route already: the sign-in form
}

whenSessionLost(sessionEnded);
