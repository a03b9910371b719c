//! The memory of the perpetuals of about 2 000 pairs (issue #61; decisions §17 "Bounds": about
//! 21 KiB a pair, 42 MiB for 2 000). What a pair with a perpetual holds on its shard and in its
//! slot: its `PerpBook` (windows, OI, funding, the newest liquidation of each side), its
//! liquidation ring (the newest 128, the lists' and the streams' one copy) and its published
//! `PerpSnapshot`. Derivatives alerts are not counted (a book's alert book is made at its first
//! alert and grows with them).
//!
//! Measured as the process's resident memory (VmRSS) before and after the shard's perpetuals
//! are made, stepped for 60 simulated seconds, each ring filled to the 128 a day can hold (the
//! simulator's minute makes fewer) and each book's snapshot published; beside it the same figure
//! from the types' sizes.

use std::mem::size_of;
use std::sync::Arc;

use rampart_engine::perp_book::{Liquidation, PerpBook};
use rampart_engine::sim_perp_listing::listing;
use rampart_shard::perp::ShardPerps;
use rampart_state::perp::PerpSnapshot;

use crate::perp_round::{started, Started, SEED, T0};

const SIM_ROUND_MS: i64 = 5;

/// Resident memory now, KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap_or("0");
    line.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// The report of `pairs` spot pairs per venue (the perpetuals the simulator lists for them).
pub fn perp_memory(pairs: usize) -> String {
    let Started { universe, registry, ids, specs, market, .. } = started(pairs);
    let shared = rampart_state::Shared::replica(Arc::new(registry.clone()), 1, 0);
    let listed = listing(SEED, &universe);
    let before = rss_kib();
    let mut perps = ShardPerps::new(SEED, &universe, &listed, &registry, &specs, &market, T0);
    perps.make_feeds(&shared.slots);
    perps.step_all(T0, &market, &shared.slots);
    for r in 1..=(60_000 / SIM_ROUND_MS) {
        perps.step(T0 + r * SIM_ROUND_MS, &market, &shared.slots, &mut |_, _| {});
    }
    let now = T0 + 60_000;
    let pad = Liquidation { side: rampart_engine::perp_window::PositionSide::Long, price: 1.0, qty: 1.0, time_ms: now };
    let mut ring_bytes = 0;
    for &b in &ids {
        let Some(s) = perps.snapshot(b, now) else { continue };
        if let Some(feed) = shared.slots[b.index()].liquidations.get() {
            while feed.held().len() < rampart_state::liq_feed::LIQ_FEED_LEN {
                feed.push(&pad);
            }
            ring_bytes = feed.bytes();
        }
        shared.slots[b.index()].perp.store(Some(Arc::new(s)));
    }
    let after = rss_kib();
    let n = perps.len().max(1) as u64;
    let per_pair = (after.saturating_sub(before)) as f64 / n as f64;
    let typed = size_of::<PerpBook>() + ring_bytes + size_of::<PerpSnapshot>();
    format!(
        "| {} contracts ({} pairs × 4 venues) | {:.1} MiB | {:.1} KiB | {:.1} KiB | {:.1} MiB |",
        perps.len(),
        pairs,
        (after.saturating_sub(before)) as f64 / 1024.0,
        per_pair,
        typed as f64 / 1024.0,
        per_pair * 2_000.0 / 1024.0,
    )
}
