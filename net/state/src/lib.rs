//! The ground floor: what the shards and the board thread publish and every other part reads
//! (`Shared` and its per-book records, the board, per-pair metrics, counters), the commands and
//! events that cross between threads with their bounded queues, which shard and which cluster
//! partition own a pair, the active site alerts and each book's wall history (`wall_history`);
//! beside them the process's one clock (`clock`), its one JSON writer (`json`) and the bounded
//! stop sequence (`shutdown`). It depends on no other crate of the runtime.

pub mod board;
pub mod clock;
pub mod commands;
pub mod events;
pub mod json;
pub mod liq_feed;
pub mod market_json;
pub mod pair_metrics;
pub mod partition;
pub mod perp;
pub mod perp_json;
pub mod shared;
pub mod shutdown;
pub mod site_alerts;
pub mod wall_history;

pub use commands::*;
pub use events::*;
pub use shared::*;
