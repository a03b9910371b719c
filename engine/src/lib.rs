//! rampart's sans-I/O engine: books, candles, instruments and the simulated market.
//!
//! Invariant: nothing here opens a socket, reads a clock, spawns a thread or takes a lock.
//! Time is always an argument (`now_ms`, or the event's own timestamp), so every function is
//! deterministic and testable on its own.

pub mod alert;
pub mod book;
pub mod candle;
mod cooldown;
pub mod feed;
pub mod firing;
pub mod fixed;
pub mod instrument;
pub mod level;
pub mod level_alert;
pub mod market;
pub mod metrics;
pub mod perp_alert;
pub mod perp_alert_book;
mod perp_alert_heap;
mod perp_alert_keys;
pub mod perp_book;
pub mod perp_interval;
mod perp_liquidation;
pub mod perp_window;
pub mod sim;
pub mod sim_perp;
pub mod sim_perp_listing;
pub mod site_alert;
pub mod venue;
pub mod wall;
pub mod wall_alert;
pub mod wall_life;

pub use book::{Applied, Book, Level, Side};
pub use candle::{Candle, CandleRing, CandleSet, Timeframe};
pub use fixed::{Price, Qty};
pub use instrument::{BookId, Instrument, Registry, Status};
pub use market::{Market, Tick, TickKind};
pub use venue::Venue;
