//! The perpetuals' driving: each market round steps the due contracts against the true books'
//! mids and hands every tick to its venue's wire module, then runs the perpetuals' timers. A
//! floor above `perp_binance`, `perp_bybit`, `perp_okx` and `perp_bitget`, as `drive` is above
//! the spot venue modules.

use rampart_engine::sim_perp::{PerpTick, PerpTickKind, PerpView};
use rampart_engine::Venue;

use super::market::State;
use super::perp::{Liq, BYBIT_BATCH_MS, CONTRACTS_PER_ROUND_MAX};
use super::{perp_binance, perp_bitget, perp_bybit, perp_okx};

/// One round of the perpetuals at `now`: steps the due contracts and hands each tick to its
/// venue's wire, then sends what waits for a timer: in the first round of each second,
/// Binance's held liquidations of the seconds before and its mark-price array and OKX's due
/// funding pushes; every [`BYBIT_BATCH_MS`], Bybit's batches.
pub(crate) fn round(st: &mut State, now: i64) {
    let mut ticks = std::mem::take(&mut st.perps.ticks);
    ticks.clear();
    {
        let books = &st.books;
        let mid = |b: rampart_engine::BookId| books.get(b.index()).and_then(|x| x.truth.mid());
        st.perps.sim.step_due_with(now, mid, CONTRACTS_PER_ROUND_MAX, &mut ticks);
    }
    for t in &ticks {
        on_tick(st, t, now);
    }
    st.perps.ticks = ticks;
    if now.div_euclid(1_000) != st.perps.second {
        // A new second: the timers that run once a second.
        st.perps.second = now.div_euclid(1_000);
        perp_binance::flush_held(st, now);
        perp_binance::mark_price_arr(st, now);
        perp_okx::funding_due(st, now);
    }
    if now - st.perps.bybit_batch_ms >= BYBIT_BATCH_MS {
        st.perps.bybit_batch_ms = now;
        perp_bybit::flush_liquidations(st, now);
    }
}

fn on_tick(st: &mut State, t: &PerpTick, now: i64) {
    let venue = st.perps.contract(t.perp).venue;
    if !st.cfg.venues.contains(&venue) {
        return;
    }
    match t.kind {
        PerpTickKind::Liquidation { side, price, qty } => {
            let liq = Liq { side, price, qty, ts_ms: t.ts_ms };
            match venue {
                Venue::Binance => perp_binance::on_liquidation(st, t.perp, liq),
                Venue::Bybit => perp_bybit::on_liquidation(st, t.perp, liq),
                Venue::Okx => perp_okx::on_liquidation(st, t.perp, liq),
                Venue::Bitget => {}
            }
        }
        PerpTickKind::Perp { oi, mark, funding_rate, interval_h, next_ms } => {
            if venue == Venue::Okx {
                perp_okx::end_of_step(st, t.perp, mark);
            }
            let w = &mut st.perps.wire[t.perp.index()];
            if w.stale {
                return;
            }
            w.view = Some(PerpView { listed: true, oi, mark, funding_rate, interval_h, next_ms, ts_ms: t.ts_ms });
            w.index = t.book.and_then(|b| st.books.get(b.index())).and_then(|b| b.truth.mid()).unwrap_or(mark);
            match venue {
                Venue::Binance => perp_binance::on_perp(st, t.perp, now),
                Venue::Bybit => perp_bybit::on_perp(st, t.perp, now),
                Venue::Okx => perp_okx::on_perp(st, t.perp, now),
                Venue::Bitget => perp_bitget::on_perp(st, t.perp, now),
            }
        }
    }
}
