//! The web application served at `/` (decisions.md §10): its sign-in sessions. Its routes,
//! assets and live events are served by the front (`api::front::site_api`, `site_assets`,
//! `site_events`); its files are embedded from `net/site/`.

pub mod session;
