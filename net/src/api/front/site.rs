//! The web application served at `/` (`decisions.md` §10), as the front serves it: its JSON
//! routes under `/site/` (`routes`), its files embedded from `net/site/` under a strict
//! Content-Security-Policy (`assets`), live push of the inbox as server-sent events (`events`),
//! and the signed-in sessions they share (`session`).

pub(super) mod assets;
pub(super) mod events;
mod routes;
pub mod session;
