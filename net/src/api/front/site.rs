//! The web application served at `/` (`decisions.md` §10), as the front serves it: its JSON
//! routes under `/site/` (`routes`), its files embedded from `net/site/` under a strict
//! Content-Security-Policy (`assets`), the site streams' shared bound and event body (`events`),
//! and the signed-in sessions (`session`, kept by `front::gate`).

pub(super) mod assets;
pub(super) mod events;
pub(super) mod routes;
pub mod session;
