//! The serde side shared by serde_json, sonic-rs and simd-json's serde front: the borrowed structs
//! each venue's frames deserialize into, the [`SerdeFront`] entry point a backend provides, and
//! [`serde_parse`], which maps the structs into [`Decoded`].

use std::marker::PhantomData;

use rampart_engine::{Level, Venue};
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, SeqAccess, Visitor};

use super::frame::{Decoded, Fail, FrameKind, TradeRow};
use super::values::{
    book_type_bybit, digits, fnv1a, i64_of, price, push_level, push_trade, qty, side_bybit, side_lower,
};

/// `[price, qty, ...]` with the two strings borrowed; further cells are skipped.
struct RawLevel<'a> {
    price: &'a str,
    qty: &'a str,
}

impl<'de: 'a, 'a> Deserialize<'de> for RawLevel<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawLevel<'a>, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = RawLevel<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a level [price, qty, ...]")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawLevel<'a>, A::Error> {
                let price: &'a str = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let qty: &'a str = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(1, &self))?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(RawLevel { price, qty })
            }
        }
        d.deserialize_seq(V(PhantomData))
    }
}

fn serde_levels(rows: &[RawLevel<'_>], out: &mut Vec<Level>) -> Result<(), Fail> {
    rows.iter().try_for_each(|l| push_level(out, l.price, l.qty))
}

#[derive(serde::Deserialize)]
struct BnCombined<T> {
    data: T,
}

#[derive(serde::Deserialize)]
struct BnDepth<'a> {
    s: &'a str,
    #[serde(rename = "E")]
    event_ms: u64,
    #[serde(rename = "U")]
    first: u64,
    #[serde(rename = "u")]
    last: u64,
    #[serde(borrow)]
    b: Vec<RawLevel<'a>>,
    #[serde(borrow)]
    a: Vec<RawLevel<'a>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct BnSnapshot<'a> {
    last_update_id: u64,
    #[serde(borrow)]
    bids: Vec<RawLevel<'a>>,
    #[serde(borrow)]
    asks: Vec<RawLevel<'a>>,
}

#[derive(serde::Deserialize)]
struct BnTrade<'a> {
    s: &'a str,
    #[serde(rename = "E")]
    event_ms: u64,
    t: u64,
    p: &'a str,
    q: &'a str,
    #[serde(rename = "T")]
    trade_ms: u64,
    m: bool,
}

#[derive(serde::Deserialize)]
struct ByBook<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    ts: u64,
    #[serde(borrow)]
    data: ByBookData<'a>,
}

#[derive(serde::Deserialize)]
struct ByBookData<'a> {
    s: &'a str,
    u: u64,
    seq: Option<u64>,
    #[serde(borrow)]
    b: Vec<RawLevel<'a>>,
    #[serde(borrow)]
    a: Vec<RawLevel<'a>>,
}

#[derive(serde::Deserialize)]
struct ByTrades<'a> {
    ts: u64,
    #[serde(borrow)]
    data: Vec<ByTrade<'a>>,
}

#[derive(serde::Deserialize)]
struct ByTrade<'a> {
    #[serde(rename = "T")]
    trade_ms: u64,
    s: &'a str,
    #[serde(rename = "S")]
    side: &'a str,
    v: &'a str,
    p: &'a str,
    i: &'a str,
    seq: Option<u64>,
}

#[derive(serde::Deserialize)]
struct Arg<'a> {
    #[serde(rename = "instId")]
    inst_id: &'a str,
}

/// OKX and Bitget book pushes (the field names differ only for the sequence ids).
#[derive(serde::Deserialize)]
struct BookPush<'a> {
    #[serde(borrow)]
    arg: Arg<'a>,
    /// Bitget's outer push time (OKX has none).
    ts: Option<u64>,
    #[serde(borrow)]
    data: [BookData<'a>; 1],
}

#[derive(serde::Deserialize)]
struct BookData<'a> {
    #[serde(borrow)]
    asks: Vec<RawLevel<'a>>,
    #[serde(borrow)]
    bids: Vec<RawLevel<'a>>,
    ts: &'a str,
    #[serde(rename = "seqId", alias = "seq")]
    seq: Option<i64>,
    #[serde(rename = "prevSeqId", alias = "pseq")]
    prev: Option<i64>,
}

/// OKX and Bitget trade pushes.
#[derive(serde::Deserialize)]
struct TradePush<'a> {
    #[serde(borrow)]
    arg: Arg<'a>,
    ts: Option<u64>,
    #[serde(borrow)]
    data: Vec<PushTrade<'a>>,
}

#[derive(serde::Deserialize)]
struct PushTrade<'a> {
    #[serde(rename = "tradeId")]
    trade_id: &'a str,
    #[serde(alias = "price")]
    px: &'a str,
    #[serde(alias = "size")]
    sz: &'a str,
    side: &'a str,
    ts: &'a str,
    #[serde(rename = "seqId")]
    seq: Option<i64>,
}

/// A serde entry point: deserializes `T`, borrowing from `frame` or from the backend's buffer.
pub(super) trait SerdeFront {
    fn deserialize<'a, T: Deserialize<'a>>(&'a mut self, frame: &'a [u8]) -> Result<T, Fail>;
}

pub(super) fn serde_parse<B: SerdeFront>(
    b: &mut B,
    venue: Venue,
    kind: FrameKind,
    frame: &[u8],
    out: &mut Decoded,
) -> Result<(), Fail> {
    out.clear();
    match (venue, kind) {
        (Venue::Binance, FrameKind::BookDiff) => {
            let m: BnCombined<BnDepth<'_>> = b.deserialize(frame)?;
            let d = m.data;
            out.symbol_hash = fnv1a(d.s.as_bytes());
            out.ts_ms = i64_of(d.event_ms)?;
            out.ids = [Some(i64_of(d.first)?), Some(i64_of(d.last)?)];
            serde_levels(&d.b, &mut out.bids)?;
            serde_levels(&d.a, &mut out.asks)?;
        }
        (Venue::Binance, FrameKind::BookSnapshot) => {
            let s: BnSnapshot<'_> = b.deserialize(frame)?;
            out.ids = [Some(i64_of(s.last_update_id)?), None];
            serde_levels(&s.bids, &mut out.bids)?;
            serde_levels(&s.asks, &mut out.asks)?;
        }
        (Venue::Binance, FrameKind::Trade) => {
            let m: BnCombined<BnTrade<'_>> = b.deserialize(frame)?;
            let t = m.data;
            out.symbol_hash = fnv1a(t.s.as_bytes());
            out.ts_ms = i64_of(t.event_ms)?;
            let row = TradeRow {
                id: t.t,
                ts_ms: i64_of(t.trade_ms)?,
                price: price(t.p)?,
                qty: qty(t.q)?,
                taker_sell: t.m,
                seq: None,
            };
            push_trade(out, row)?;
        }
        (Venue::Bybit, FrameKind::Trade) => {
            let m: ByTrades<'_> = b.deserialize(frame)?;
            out.ts_ms = i64_of(m.ts)?;
            for t in &m.data {
                out.symbol_hash = fnv1a(t.s.as_bytes());
                let row = TradeRow {
                    id: fnv1a(t.i.as_bytes()),
                    ts_ms: i64_of(t.trade_ms)?,
                    price: price(t.p)?,
                    qty: qty(t.v)?,
                    taker_sell: side_bybit(t.side)?,
                    seq: t.seq.map(i64_of).transpose()?,
                };
                push_trade(out, row)?;
            }
        }
        (Venue::Bybit, _) => {
            let m: ByBook<'_> = b.deserialize(frame)?;
            book_type_bybit(m.kind)?;
            out.symbol_hash = fnv1a(m.data.s.as_bytes());
            out.ts_ms = i64_of(m.ts)?;
            out.ids = [Some(i64_of(m.data.u)?), m.data.seq.map(i64_of).transpose()?];
            serde_levels(&m.data.b, &mut out.bids)?;
            serde_levels(&m.data.a, &mut out.asks)?;
        }
        (Venue::Okx | Venue::Bitget, FrameKind::Trade) => {
            let m: TradePush<'_> = b.deserialize(frame)?;
            out.symbol_hash = fnv1a(m.arg.inst_id.as_bytes());
            if venue == Venue::Bitget {
                out.ts_ms = i64_of(m.ts.ok_or(Fail("missing ts"))?)?;
            }
            for t in &m.data {
                let row = TradeRow {
                    id: digits(t.trade_id)?,
                    ts_ms: i64_of(digits(t.ts)?)?,
                    price: price(t.px)?,
                    qty: qty(t.sz)?,
                    taker_sell: side_lower(t.side)?,
                    seq: t.seq,
                };
                push_trade(out, row)?;
            }
        }
        (Venue::Okx | Venue::Bitget, _) => {
            let m: BookPush<'_> = b.deserialize(frame)?;
            let [d] = &m.data;
            out.symbol_hash = fnv1a(m.arg.inst_id.as_bytes());
            out.ts_ms =
                if venue == Venue::Bitget { i64_of(m.ts.ok_or(Fail("missing ts"))?)? } else { i64_of(digits(d.ts)?)? };
            out.ids = [d.seq, d.prev];
            serde_levels(&d.bids, &mut out.bids)?;
            serde_levels(&d.asks, &mut out.asks)?;
        }
    }
    Ok(())
}
