//! The web application served at `/` (`decisions.md` §10), as the front serves it: its JSON
//! routes under `/site/` (`routes`), its files embedded from `net/site/` under a strict
//! Content-Security-Policy (`assets`) and the site streams' shared bound and event body
//! (`events`). Its signed-in sessions are `front::session`, kept by `front::gate`.

pub(super) mod assets;
pub(super) mod events;
pub(super) mod routes;
