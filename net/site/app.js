// rampart site, the entry module: wires the header and starts the single-page app (hash routes, no framework) over the server's /site/ JSON routes and event stream.

import { resetChartHandle } from './js/chart.js';
import { call, errText } from './js/http.js';
import { savePrefs } from './js/prefs.js';
import { route } from './js/router.js';
import { signOut, startSession } from './js/session.js';
import { state } from './js/state.js';
import { showZone } from './js/time.js';

/** Switches every time shown between the browser's zone and UTC, and draws the page again. */
function toggleZone() {
  state.zone = state.zone === 'utc' ? 'local' : 'utc';
  savePrefs('zone', state.zone);
  showZone();
  if (state.session) {
    state.page = '';
    route(); // every time on the page, and the chart's axis, drawn again in the new zone
  }
}

/** Wires the header, finds the session (if any) and draws the route. */
async function boot() {
  document.getElementById('signout').addEventListener('click', signOut);
  document.getElementById('zone').addEventListener('click', toggleZone);
  showZone();
  document.getElementById('skip-link').addEventListener('click', (ev) => {
    ev.preventDefault();
    document.getElementById('main').focus();
  });
  window.addEventListener('hashchange', route);
  resetChartHandle();
  try {
    const r = await call('GET', '/site/session');
    startSession(r.data);
  } catch (e) {
    if (e.status !== 401) state.signinMessage = 'Could not check the session: ' + errText(e);
  }
  route();
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', boot);
else boot();
