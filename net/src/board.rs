//! The board thread: rebuilds the market board ([`rampart_state::board`]) from what the shards
//! published once per period and runs the site's market alerts against each build. It reads
//! atomics only and never blocks a shard.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::site_alerts::market::MarketAlerts;
use rampart_state::board::{Board, BOARD_PERIOD_MS};
use rampart_state::clock::SharedClock;
use rampart_state::Shared;

/// How often the board thread looks whether the shards are ready, before they are.
const BOARD_WAIT_MS: u64 = 50;

/// The thread that rebuilds the board every [`BOARD_PERIOD_MS`]. Stopped on drop.
pub struct BoardThread {
    _thread: rampart_state::shutdown::StoppableThread,
}

impl BoardThread {
    /// Starts rebuilding `cell` from `shared` (built once before this returns), running the
    /// site's market alerts against each build when `market` is given.
    pub fn start(
        shared: Arc<Shared>,
        cell: Arc<ArcSwap<Board>>,
        clock: SharedClock,
        mut market: Option<MarketAlerts>,
    ) -> std::io::Result<BoardThread> {
        cell.store(Arc::new(Board::build(&shared, clock.now_ms())));
        let thread = rampart_state::shutdown::StoppableThread::spawn("board", move |stop| {
            // Until the shards are ready the board is rebuilt as soon as they are, then once
            // per period.
            while !stop.load(Ordering::Acquire) {
                let wait = if cell.load().complete { BOARD_PERIOD_MS as u64 } else { BOARD_WAIT_MS };
                std::thread::sleep(Duration::from_millis(wait));
                let board = Arc::new(Board::build(&shared, clock.now_ms()));
                if let Some(m) = &mut market {
                    m.run(&shared.site_alerts.load(), &board);
                }
                cell.store(board);
            }
        })?;
        Ok(BoardThread { _thread: thread })
    }
}
