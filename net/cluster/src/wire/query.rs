//! The queries a market node answers from its shard for an api node (`rampart.queries.<p>`,
//! request/reply) and their answers: candles, depth, and a perpetual's history and test trigger
//! (`decisions.md` §17 through an api node). Untrusted bytes: every count and tag is checked
//! before anything is kept.

use rampart_engine::firing::PerpTrigger;
use rampart_engine::perp_alert::{LiqDirection, PerpCondition};
use rampart_engine::perp_book::{HistorySlot, Liquidation, PerpInterval};
use rampart_engine::perp_window::{LiqSums, PositionSide, SLOTS};
use rampart_engine::{Candle, Price, Qty, Timeframe};
use rampart_state::DepthView;

use super::condition::{perp_condition, read_perp_condition};
use super::{index_of, BookName, In, Out, WireError};

/// A read that a market node answers from its shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Query {
    /// The newest `limit` bars of one ring.
    Candles(BookName, Timeframe, u32),
    /// The best `limit` levels per side.
    Depth(BookName, u32),
    /// A perpetual's history over a window (`GET /v1/perp/{symbol}/history`).
    PerpHistory(BookName, PerpInterval),
    /// The trigger object a derivatives alert of this condition would carry now (a test send).
    PerpTrigger(BookName, PerpCondition),
}

impl Query {
    /// The book asked about.
    pub fn book(&self) -> &BookName {
        match self {
            Query::Candles(b, ..) | Query::Depth(b, _) | Query::PerpHistory(b, _) | Query::PerpTrigger(b, _) => b,
        }
    }
}

/// A query's bytes.
pub fn query(q: &Query) -> Vec<u8> {
    let mut out = Out::new(48);
    match q {
        Query::Candles(book, tf, limit) => {
            out.u8(0);
            out.book(book);
            out.u8(tf.index() as u8);
            out.u32(*limit);
        }
        Query::Depth(book, limit) => {
            out.u8(1);
            out.book(book);
            out.u32(*limit);
        }
        Query::PerpHistory(book, window) => {
            out.u8(2);
            out.book(book);
            out.u8(index_of(&PerpInterval::ALL, window));
        }
        Query::PerpTrigger(book, condition) => {
            out.u8(3);
            out.book(book);
            perp_condition(&mut out, condition);
        }
    }
    out.0
}

/// Reads a query.
pub fn read_query(buf: &[u8]) -> Result<Query, WireError> {
    let mut r = In::new(buf)?;
    let q = match r.u8()? {
        0 => {
            let book = r.book()?;
            let tf = r.tag(&Timeframe::ALL, "timeframe")?;
            Query::Candles(book, tf, r.u32()?)
        }
        1 => {
            let book = r.book()?;
            Query::Depth(book, r.u32()?)
        }
        2 => {
            let book = r.book()?;
            Query::PerpHistory(book, r.tag(&PerpInterval::ALL, "perp window")?)
        }
        3 => {
            let book = r.book()?;
            let tag = r.u8()?;
            if !(4..=7).contains(&tag) {
                return Err(WireError::Invalid("derivatives condition"));
            }
            Query::PerpTrigger(book, read_perp_condition(tag, &mut r)?)
        }
        _ => return Err(WireError::Invalid("query")),
    };
    r.end()?;
    Ok(q)
}

/// The answer to [`Query::Candles`].
pub fn candles(bars: &[Candle]) -> Vec<u8> {
    let mut out = Out::new(8 + bars.len() * 58);
    out.count(bars.len());
    for c in bars {
        out.i64(c.open_ms);
        for p in [c.open, c.high, c.low, c.close] {
            out.i64(p.0);
        }
        out.f64(c.volume);
        out.opt_i64(c.trades.map(i64::from));
    }
    out.0
}

/// Reads the answer to [`Query::Candles`].
pub fn read_candles(buf: &[u8]) -> Result<Vec<Candle>, WireError> {
    let mut r = In::new(buf)?;
    let n = r.count(57)?;
    let mut bars = Vec::with_capacity(n);
    for _ in 0..n {
        let open_ms = r.i64()?;
        let (open, high, low, close) = (Price(r.i64()?), Price(r.i64()?), Price(r.i64()?), Price(r.i64()?));
        let volume = r.f64()?;
        let trades = match r.opt_i64()? {
            Some(t) => Some(u32::try_from(t).map_err(|_| WireError::Invalid("trades"))?),
            None => None,
        };
        bars.push(Candle { open_ms, open, high, low, close, volume, trades });
    }
    r.end()?;
    Ok(bars)
}

/// The answer to [`Query::Depth`].
pub fn depth(view: &DepthView) -> Vec<u8> {
    let mut out = Out::new(24 + (view.bids.len() + view.asks.len()) * 16);
    out.i64(view.ts_ms);
    out.u8(view.in_sync as u8);
    for side in [&view.bids, &view.asks] {
        out.count(side.len());
        for l in side.iter() {
            out.i64(l.price.0);
            out.i64(l.qty.0 as i64);
        }
    }
    out.0
}

/// Reads the answer to [`Query::Depth`].
pub fn read_depth(buf: &[u8]) -> Result<DepthView, WireError> {
    let mut r = In::new(buf)?;
    let ts_ms = r.i64()?;
    let in_sync = r.bool()?;
    let mut sides = [Vec::new(), Vec::new()];
    for side in &mut sides {
        let n = r.count(16)?;
        side.reserve_exact(n);
        for _ in 0..n {
            let price = Price(r.i64()?);
            let qty = Qty(u64::try_from(r.i64()?).map_err(|_| WireError::Invalid("quantity"))?);
            side.push(rampart_engine::Level { price, qty });
        }
    }
    r.end()?;
    let [bids, asks] = sides;
    Ok(DepthView { ts_ms, bids, asks, in_sync })
}

/// Bytes of one history slot on the wire (its least).
const SLOT_BYTES: usize = 8 + 9 + 9 + 1;
const POSITION_SIDES: [PositionSide; 2] = [PositionSide::Long, PositionSide::Short];

/// The answer to [`Query::PerpHistory`]: the window's slots, oldest first.
pub fn perp_history(slots: &[HistorySlot]) -> Vec<u8> {
    let mut out = Out::new(8 + slots.len() * 50);
    out.count(slots.len());
    for s in slots {
        out.i64(s.time_ms);
        out.opt_f64(s.oi_base);
        out.opt_f64(s.oi_usd);
        out.u8(u8::from(s.liquidations.is_some()));
        if let Some(l) = s.liquidations {
            put_sums(&mut out, &l);
        }
    }
    out.0
}

/// Reads the answer to [`Query::PerpHistory`]: at most [`SLOTS`] slots.
pub fn read_perp_history(buf: &[u8]) -> Result<Vec<HistorySlot>, WireError> {
    let mut r = In::new(buf)?;
    let n = r.count(SLOT_BYTES)?;
    if n > SLOTS {
        return Err(WireError::Invalid("history slots"));
    }
    let mut slots = Vec::with_capacity(n);
    for _ in 0..n {
        let (time_ms, oi_base, oi_usd) = (r.i64()?, r.opt_f64()?, r.opt_f64()?);
        let liquidations = match r.bool()? {
            true => Some(read_sums(&mut r)?),
            false => None,
        };
        slots.push(HistorySlot { time_ms, oi_base, oi_usd, liquidations });
    }
    r.end()?;
    Ok(slots)
}

fn put_sums(out: &mut Out, l: &LiqSums) {
    out.f64(l.long_usd);
    out.f64(l.short_usd);
    out.u32(l.long_count);
    out.u32(l.short_count);
}

fn read_sums(r: &mut In<'_>) -> Result<LiqSums, WireError> {
    Ok(LiqSums { long_usd: r.f64()?, short_usd: r.f64()?, long_count: r.u32()?, short_count: r.u32()? })
}

fn put_liquidation(out: &mut Out, l: &Liquidation) {
    out.u8(index_of(&POSITION_SIDES, &l.side));
    out.f64(l.price);
    out.f64(l.qty);
    out.f64(l.usd());
    out.i64(l.time_ms);
}

fn read_liquidation(r: &mut In<'_>) -> Result<Liquidation, WireError> {
    let side = r.tag(&POSITION_SIDES, "side")?;
    let (price, qty, _usd, time_ms) = (r.f64()?, r.f64()?, r.f64()?, r.i64()?); // USD: price × qty
    Ok(Liquidation { side, price, qty, time_ms })
}

/// The answer to [`Query::PerpTrigger`]: a flag (0: none, the book has no perpetual or nothing
/// to say), then the trigger, a tag per kind.
pub fn perp_trigger(t: Option<&PerpTrigger>) -> Vec<u8> {
    let mut out = Out::new(96);
    out.u8(u8::from(t.is_some()));
    match t {
        None => {}
        Some(PerpTrigger::Order { liquidation, count }) => {
            out.u8(0);
            put_liquidation(&mut out, liquidation);
            out.u32(*count);
        }
        Some(PerpTrigger::Sum { side, sum_usd, count, window, from_ms, last }) => {
            out.u8(1);
            out.u8(index_of(LiqDirection::ALL, side));
            out.f64(*sum_usd);
            out.u32(*count);
            out.u8(index_of(&PerpInterval::ALL, window));
            out.i64(*from_ms);
            out.u8(u8::from(last.is_some()));
            if let Some(l) = last {
                put_liquidation(&mut out, l);
            }
        }
        Some(PerpTrigger::Oi { base, usd, change_pct, window, from_base, from_ms }) => {
            out.u8(2);
            out.f64(*base);
            out.opt_f64(*usd);
            out.f64(*change_pct);
            out.u8(index_of(&PerpInterval::ALL, window));
            out.f64(*from_base);
            out.i64(*from_ms);
        }
        Some(PerpTrigger::Funding { rate, rate8h, interval_h, next_ms }) => {
            out.u8(3);
            out.f64(*rate);
            out.f64(*rate8h);
            out.u32(*interval_h);
            out.i64(*next_ms);
        }
    }
    out.0
}

/// Reads the answer to [`Query::PerpTrigger`].
pub fn read_perp_trigger(buf: &[u8]) -> Result<Option<PerpTrigger>, WireError> {
    let mut r = In::new(buf)?;
    if !r.bool()? {
        r.end()?;
        return Ok(None);
    }
    let t = match r.u8()? {
        0 => PerpTrigger::Order { liquidation: read_liquidation(&mut r)?, count: r.u32()? },
        1 => {
            let side = r.tag(LiqDirection::ALL, "liquidations direction")?;
            let (sum_usd, count) = (r.f64()?, r.u32()?);
            let window = r.tag(&PerpInterval::ALL, "perp window")?;
            let from_ms = r.i64()?;
            let last = match r.bool()? {
                true => Some(read_liquidation(&mut r)?),
                false => None,
            };
            PerpTrigger::Sum { side, sum_usd, count, window, from_ms, last }
        }
        2 => {
            let (base, usd, change_pct) = (r.f64()?, r.opt_f64()?, r.f64()?);
            let window = r.tag(&PerpInterval::ALL, "perp window")?;
            PerpTrigger::Oi { base, usd, change_pct, window, from_base: r.f64()?, from_ms: r.i64()? }
        }
        3 => PerpTrigger::Funding { rate: r.f64()?, rate8h: r.f64()?, interval_h: r.u32()?, next_ms: r.i64()? },
        _ => return Err(WireError::Invalid("trigger")),
    };
    r.end()?;
    Ok(Some(t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::perp_alert::{FundingDirection, FundingLevel, LiqSum};
    use rampart_engine::Venue;

    fn name(symbol: &str) -> BookName {
        BookName { venue: Venue::Okx, symbol: symbol.to_owned() }
    }

    fn liquidation(usd: f64) -> Liquidation {
        Liquidation { side: PositionSide::Short, price: 2.5, qty: usd / 2.5, time_ms: 1_700_000_000_123 }
    }

    fn triggers() -> Vec<Option<PerpTrigger>> {
        vec![
            None,
            Some(PerpTrigger::Order { liquidation: liquidation(1_000_000.0), count: 2 }),
            Some(PerpTrigger::Sum {
                side: LiqDirection::Any,
                sum_usd: 3.5e6,
                count: 9,
                window: PerpInterval::M5,
                from_ms: 60_000,
                last: Some(liquidation(10.0)),
            }),
            Some(PerpTrigger::Sum {
                side: LiqDirection::Long,
                sum_usd: 0.0,
                count: 0,
                window: PerpInterval::D1,
                from_ms: 0,
                last: None,
            }),
            Some(PerpTrigger::Oi {
                base: 12.5,
                usd: None,
                change_pct: -10.25,
                window: PerpInterval::H4,
                from_base: 13.9,
                from_ms: 7,
            }),
            Some(PerpTrigger::Funding { rate: 0.01, rate8h: 0.02, interval_h: 4, next_ms: 99 }),
        ]
    }

    fn slots() -> Vec<HistorySlot> {
        let sums = LiqSums { long_usd: 5.0, short_usd: 7.5, long_count: 1, short_count: 3 };
        vec![
            HistorySlot { time_ms: 0, oi_base: None, oi_usd: None, liquidations: None },
            HistorySlot { time_ms: 60_000, oi_base: Some(3.0), oi_usd: Some(9.0), liquidations: Some(sums) },
        ]
    }

    /// The derivatives queries and their answers read back as written.
    #[test]
    fn perpetual_queries_and_answers_round_trip() {
        let condition = PerpCondition::Funding(FundingLevel { direction: FundingDirection::Above, pct_micro: 50_000 });
        let sum = PerpCondition::Sum {
            window: PerpInterval::M15,
            sum: LiqSum { direction: LiqDirection::Short, min_usd_cents: 100_000_000 },
        };
        for q in [
            Query::PerpHistory(name("BTCUSDT"), PerpInterval::W1),
            Query::PerpTrigger(name("ETHUSDT"), condition),
            Query::PerpTrigger(name("ETHUSDT"), sum),
        ] {
            assert_eq!(read_query(&query(&q)), Ok(q));
        }
        assert_eq!(read_perp_history(&perp_history(&slots())), Ok(slots()));
        assert_eq!(read_perp_history(&perp_history(&[])), Ok(vec![]));
        for t in triggers() {
            assert_eq!(read_perp_trigger(&perp_trigger(t.as_ref())), Ok(t));
        }
    }

    /// Every cut and every extension of the new messages is an error; so are more slots than a
    /// window has, a condition tag that is not a derivatives one, and an unknown trigger tag.
    #[test]
    fn malformed_perpetual_queries_and_answers_are_refused() {
        let history = perp_history(&slots());
        let q = query(&Query::PerpHistory(name("BTCUSDT"), PerpInterval::H1));
        for cut in 0..history.len() {
            assert!(read_perp_history(&history[..cut]).is_err(), "history cut at {cut}");
        }
        for cut in 0..q.len() {
            assert!(read_query(&q[..cut]).is_err(), "query cut at {cut}");
        }
        for t in triggers() {
            let bytes = perp_trigger(t.as_ref());
            for cut in 0..bytes.len() {
                assert!(read_perp_trigger(&bytes[..cut]).is_err(), "{t:?} cut at {cut}");
            }
            assert_eq!(read_perp_trigger(&[bytes.as_slice(), &[0]].concat()), Err(WireError::Trailing));
        }
        assert_eq!(read_perp_history(&[history.as_slice(), &[0]].concat()), Err(WireError::Trailing));
        let many = vec![slots()[0]; SLOTS + 1];
        assert_eq!(read_perp_history(&perp_history(&many)), Err(WireError::Invalid("history slots")));
        let mut spot = query(&Query::PerpTrigger(
            name("X"),
            PerpCondition::Funding(FundingLevel { direction: FundingDirection::Below, pct_micro: 1 }),
        ));
        // The condition: its tag, the direction, the rate (8 bytes).
        let tag_at = spot.len() - 10;
        spot[tag_at] = 0;
        assert_eq!(read_query(&spot), Err(WireError::Invalid("derivatives condition")));
        let mut trigger = perp_trigger(triggers()[5].as_ref());
        trigger[2] = 9;
        assert_eq!(read_perp_trigger(&trigger), Err(WireError::Invalid("trigger")));
    }
}
