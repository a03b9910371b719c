//! The API's alerts apart from HTTP: request parsing and validation (`request`, `patch` for a
//! change, and `structure` for the level alerts' fields) and the rules a valid request must still meet against the plan
//! and the market (`rules`), each with its exact message and unit-tested.

mod decimal;
pub mod derivatives;
pub mod lifecycle;
pub mod patch;
pub mod request;
pub mod rules;
pub mod structure;
