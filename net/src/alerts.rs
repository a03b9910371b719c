//! The API's price and percent alerts apart from HTTP: request parsing and validation
//! (`request`) and the rules a valid request must still meet against the plan and the market
//! (`rules`), each with its exact message and unit-tested.

pub mod request;
pub mod rules;
