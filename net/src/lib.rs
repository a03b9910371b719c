//! rampart's runtime, top floor: the HTTP front and the web application (`api`), the API's price
//! and percent alerts apart from HTTP (`alerts`), the site's density and market alerts
//! (`site_alerts`), the board thread (`board`), request parsing shared by the API and the site
//! (`request`), streams' messages and per-connection state apart from HTTP (`stream`) and the
//! configuration (`config`).
//!
//! The floors below are crates of their own, so an import back up does not compile
//! (ARCHITECTURE.md, "Floors of the runtime"): `rampart-state` (the ground floor),
//! `rampart-outbound`, `rampart-venue`, `rampart-store`, `rampart-delivery`, `rampart-shard` and
//! `rampart-cluster`; the market logic they drive is `rampart-engine`.

pub mod alerts;
pub mod api;
pub mod board;
pub mod config;
pub mod request;
pub mod site_alerts;
pub mod stream;
