// Routing: hash routes to pages; without a session every route shows the sign-in form and returns after signing in.

import { focusHeading } from './dom.js';
import { leavePage } from './lifecycle.js';
import { drawWith, markNav, parseRoute } from './nav.js';
import { alertsPage } from './pages/alerts.js';
import { marketPage } from './pages/market.js';
import { notificationsPage } from './pages/notifications.js';
import { pairPage } from './pages/pair.js';
import { settingsPage } from './pages/settings.js';
import { showSignin } from './pages/signin.js';
import { state } from './state.js';

/** The page of the route: `#/market` (the default), `#/pair/{exchange}/{symbol}`, `#/alerts`, `#/notifications`, `#/settings`. */
function pageOf(name, a, b) {
  if (name === 'market' || !name) return () => marketPage();
  if (name === 'pair' && a && b) return () => pairPage(a.toLowerCase(), b.toUpperCase());
  if (name === 'alerts') return () => alertsPage();
  if (name === 'notifications') return () => notificationsPage();
  if (name === 'settings') return () => settingsPage();
  return null;
}

/** Draws the page of the current route (the previous page left first). */
export function route() {
  const parts = parseRoute();
  if (!state.session) {
    if (parts[0] !== 'signin' && location.hash) state.returnTo = location.hash;
    showSignin();
    return;
  }
  const [name, a, b] = parts;
  const page = pageOf(name, a, b);
  if (!page) {
    location.replace('#/market');
    return;
  }
  leavePage();
  state.page = name || 'market';
  markNav(state.page);
  page();
  focusHeading();
}

drawWith(route);
