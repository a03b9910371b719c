//! A book's perpetual on the wire (`decisions.md` §17 in a cluster): the market node's published
//! [`PerpSnapshot`] (a part of a book's update, `super::book_update`) and the derivatives metrics
//! of its [`PairMetrics`](rampart_state::pair_metrics::PairMetrics), so an api node answers the
//! derivatives reads, metrics, rankings and board numbers from its replica as the market node
//! does. Untrusted bytes: every count, name and tag is bounded before anything is kept.

use rampart_engine::perp_book::{Completeness, FundingNow, Liquidation, OiNow, CONTRACT_LEN_MAX};
use rampart_engine::perp_window::{LiqSums, PositionSide};
use rampart_state::liq_feed::LIQ_FEED_LEN;
use rampart_state::pair_metrics::PerpMetrics;
use rampart_state::perp::PerpSnapshot;

use super::{index_of, In, Out, WireError};

const COMPLETENESS: [Completeness; 4] =
    [Completeness::LargestPerSecond, Completeness::All, Completeness::Partial, Completeness::Unpublished];
const SIDES: [PositionSide; 2] = [PositionSide::Long, PositionSide::Short];
/// Bytes of one relayed liquidation: its number, side, price, quantity and time.
const RELAYED_BYTES: usize = 8 + 1 + 8 * 3;

/// A pair's liquidations new in the market node's feed since the last round
/// ([`rampart_state::liq_feed::LiqFeed`]), sent every snapshot round so that an api node's
/// streams hand them as soon as the market node's do and its lists read the same ring (its replica
/// relays them into its own feed; a full snapshot sends the whole ring).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiqRelay {
    /// The market node's snapshot publisher (drawn at its start): whose numbering `entries` use.
    pub origin: u64,
    /// The number of the newest liquidation in that feed when sent (past the entries' when the
    /// ring was cleared: the replica skips to it).
    pub head: u64,
    /// Each liquidation with its number in that feed, oldest first, numbers rising; at most
    /// [`LIQ_FEED_LEN`].
    pub entries: Vec<(u64, Liquidation)>,
}

/// A [`LiqRelay`]: the origin, the head, a count, each entry's number then the liquidation.
pub(super) fn put_relay(out: &mut Out, relay: &LiqRelay) {
    out.i64(relay.origin as i64);
    out.i64(relay.head as i64);
    out.count(relay.entries.len());
    for (n, l) in &relay.entries {
        out.i64(*n as i64);
        out.u8(index_of(&SIDES, &l.side));
        out.f64(l.price);
        out.f64(l.qty);
        out.i64(l.time_ms);
    }
}

/// Reads [`put_relay`]'s bytes: at most [`LIQ_FEED_LEN`] entries, their numbers rising, none
/// past the head.
pub(super) fn read_relay(r: &mut In<'_>) -> Result<LiqRelay, WireError> {
    let origin = r.i64()? as u64;
    let head = u64::try_from(r.i64()?).map_err(|_| WireError::Invalid("liquidation number"))?;
    let count = r.count(RELAYED_BYTES)?;
    if count > LIQ_FEED_LEN {
        return Err(WireError::Invalid("relayed liquidations"));
    }
    let mut entries = Vec::with_capacity(count);
    let mut last = 0;
    for _ in 0..count {
        let n = u64::try_from(r.i64()?).map_err(|_| WireError::Invalid("liquidation number"))?;
        if n <= last {
            return Err(WireError::Invalid("liquidation numbers not rising"));
        }
        last = n;
        let side = r.tag(&SIDES, "side")?;
        let (price, qty, time_ms) = (r.f64()?, r.f64()?, r.i64()?);
        entries.push((n, Liquidation { side, price, qty, time_ms }));
    }
    if last > head {
        return Err(WireError::Invalid("liquidation numbers past the head"));
    }
    Ok(LiqRelay { origin, head, entries })
}

/// A book's perpetual: a flag (0: it has none now), then the snapshot, its newest liquidation
/// behind a flag (the list is the ring, sent as [`LiqRelay`]).
pub(super) fn put_perp(out: &mut Out, p: Option<&PerpSnapshot>) {
    out.u8(u8::from(p.is_some()));
    let Some(p) = p else { return };
    let name = &p.contract.as_bytes()[..p.contract.len().min(CONTRACT_LEN_MAX)];
    out.u8(name.len() as u8);
    out.bytes(name);
    out.u32(p.multiplier);
    out.u8(index_of(&COMPLETENESS, &p.completeness));
    out.opt_f64(p.mark);
    out.u8(u8::from(p.oi.is_some()));
    if let Some(oi) = p.oi {
        out.f64(oi.base);
        out.opt_f64(oi.usd);
        out.i64(oi.time_ms);
        out.u8(u8::from(oi.stale));
    }
    put_funding(out, p.funding.as_ref());
    out.u8(u8::from(p.last.is_some()));
    if let Some(l) = &p.last {
        out.u8(index_of(&SIDES, &l.side));
        out.f64(l.price);
        out.f64(l.qty);
        out.i64(l.time_ms);
    }
    out.i64(p.ts_ms);
}

fn put_funding(out: &mut Out, f: Option<&FundingNow>) {
    out.u8(u8::from(f.is_some()));
    if let Some(f) = f {
        out.f64(f.rate);
        out.f64(f.rate8h);
        out.u32(f.interval_h);
        out.i64(f.next_ms);
        out.i64(f.time_ms);
        out.u8(u8::from(f.stale));
    }
}

/// Reads [`put_perp`]'s bytes.
pub(super) fn read_perp(r: &mut In<'_>) -> Result<Option<PerpSnapshot>, WireError> {
    if !r.bool()? {
        return Ok(None);
    }
    let n = r.u8()? as usize;
    if n == 0 || n > CONTRACT_LEN_MAX {
        return Err(WireError::Invalid("contract"));
    }
    let contract = std::str::from_utf8(r.take(n)?).map_err(|_| WireError::Invalid("contract"))?.to_owned();
    let multiplier = r.u32()?;
    let completeness = r.tag(&COMPLETENESS, "completeness")?;
    let mark = r.opt_f64()?;
    let oi = match r.bool()? {
        true => Some(OiNow { base: r.f64()?, usd: r.opt_f64()?, time_ms: r.i64()?, stale: r.bool()? }),
        false => None,
    };
    let funding = read_funding(r)?;
    let last = match r.bool()? {
        true => Some(Liquidation { side: r.tag(&SIDES, "side")?, price: r.f64()?, qty: r.f64()?, time_ms: r.i64()? }),
        false => None,
    };
    let ts_ms = r.i64()?;
    Ok(Some(PerpSnapshot { contract, multiplier, completeness, mark, oi, funding, last, ts_ms }))
}

fn read_funding(r: &mut In<'_>) -> Result<Option<FundingNow>, WireError> {
    if !r.bool()? {
        return Ok(None);
    }
    let (rate, rate8h, interval_h, next_ms, time_ms) = (r.f64()?, r.f64()?, r.u32()?, r.i64()?, r.i64()?);
    Ok(Some(FundingNow { rate, rate8h, interval_h, next_ms, time_ms, stale: r.bool()? }))
}

/// A book's derivatives metrics: a flag (0: none), then each interval's liquidation sums and OI
/// change, OI now and funding now.
pub(super) fn put_perp_metrics(out: &mut Out, m: Option<&PerpMetrics>) {
    out.u8(u8::from(m.is_some()));
    let Some(m) = m else { return };
    for l in &m.liquidations {
        out.u8(u8::from(l.is_some()));
        if let Some(l) = l {
            out.f64(l.long_usd);
            out.f64(l.short_usd);
            out.u32(l.long_count);
            out.u32(l.short_count);
        }
    }
    out.u8(u8::from(m.oi.is_some()));
    if let Some((base, usd)) = m.oi {
        out.f64(base);
        out.f64(usd);
    }
    for c in &m.oi_change {
        out.opt_f64(*c);
    }
    put_funding(out, m.funding.as_ref());
}

/// Reads [`put_perp_metrics`]'s bytes.
pub(super) fn read_perp_metrics(r: &mut In<'_>) -> Result<Option<PerpMetrics>, WireError> {
    if !r.bool()? {
        return Ok(None);
    }
    let mut m = PerpMetrics::default();
    for l in &mut m.liquidations {
        if r.bool()? {
            *l = Some(LiqSums { long_usd: r.f64()?, short_usd: r.f64()?, long_count: r.u32()?, short_count: r.u32()? });
        }
    }
    if r.bool()? {
        m.oi = Some((r.f64()?, r.f64()?));
    }
    for c in &mut m.oi_change {
        *c = r.opt_f64()?;
    }
    m.funding = read_funding(r)?;
    Ok(Some(m))
}

/// A perpetual and its metrics with every field set, for the wire's tests.
#[cfg(test)]
pub(super) mod samples {
    pub(in crate::wire) fn perp_metrics() -> rampart_state::pair_metrics::PerpMetrics {
        use rampart_engine::perp_window::LiqSums;
        let mut m = rampart_state::pair_metrics::PerpMetrics {
            oi: Some((81_234.5, 7.6e9)),
            funding: Some(rampart_engine::perp_book::FundingNow {
                rate: 0.0375,
                rate8h: 0.075,
                interval_h: 4,
                next_ms: 10,
                time_ms: 9,
                stale: false,
            }),
            ..Default::default()
        };
        m.liquidations[1] = Some(LiqSums { long_usd: 1.5, short_usd: 2.5, long_count: 3, short_count: 4 });
        m.oi_change[5] = Some(-1.25);
        m
    }

    pub(in crate::wire) fn perp_snapshot() -> rampart_state::perp::PerpSnapshot {
        use rampart_engine::perp_book::{Completeness, Liquidation, OiNow};
        use rampart_engine::perp_window::PositionSide;
        let l = |side, usd: f64, time_ms| Liquidation { side, price: 2.0, qty: usd / 2.0, time_ms };
        rampart_state::perp::PerpSnapshot {
            contract: "BTC-USDT-SWAP".into(),
            multiplier: 1,
            completeness: Completeness::Partial,
            mark: Some(94_210.5),
            oi: Some(OiNow { base: 81_234.5, usd: None, time_ms: 7, stale: true }),
            funding: None,
            last: Some(l(PositionSide::Short, 10.0, 6)),
            ts_ms: 11,
        }
    }
}
