//! sonic-rs's lazy iterators as a [`FrameParser`]: no structs, no level `Vec`s; the frame is
//! walked once, key by key.

use rampart_engine::{Price, Qty, Venue};

use super::frame::{Decoded, Fail, FrameKind, FrameParser, TradeRow};
use super::values::{
    book_type_bybit, digits, fnv1a, i64_of, price, push_level, push_trade, qty, side_bybit, side_lower,
};

/// sonic-rs's lazy iterators (`to_object_iter`, `LazyValue::into_array_iter`, ...): no structs,
/// no level `Vec`s; the frame is walked once, key by key.
#[derive(Default)]
pub struct SonicLazy;

mod lazy {
    //! Readers over sonic-rs lazy values that fail with [`Fail`] instead of panicking.
    use sonic_rs::{JsonValueTrait, LazyValue};

    use super::{push_level, Fail};

    pub(super) fn str<'v>(v: &'v LazyValue<'_>) -> Result<&'v str, Fail> {
        v.as_str().ok_or(Fail("expected a string"))
    }

    pub(super) fn u64(v: &LazyValue<'_>) -> Result<u64, Fail> {
        v.as_u64().ok_or(Fail("expected a non-negative integer"))
    }

    pub(super) fn i64(v: &LazyValue<'_>) -> Result<i64, Fail> {
        v.as_i64().ok_or(Fail("expected an integer"))
    }

    pub(super) fn bool(v: &LazyValue<'_>) -> Result<bool, Fail> {
        v.as_bool().ok_or(Fail("expected a boolean"))
    }

    pub(super) fn object<'a>(v: LazyValue<'a>) -> Result<sonic_rs::ObjectJsonIter<'a>, Fail> {
        v.into_object_iter().ok_or(Fail("expected an object"))
    }

    pub(super) fn array<'a>(v: LazyValue<'a>) -> Result<sonic_rs::ArrayJsonIter<'a>, Fail> {
        v.into_array_iter().ok_or(Fail("expected an array"))
    }

    /// `[[price, qty, ...], ...]` into `out`.
    pub(super) fn levels(v: LazyValue<'_>, out: &mut Vec<rampart_engine::Level>) -> Result<(), Fail> {
        for row in array(v)? {
            let mut cells = array(row.map_err(|_| Fail("bad level row"))?)?;
            let (Some(Ok(p)), Some(Ok(q))) = (cells.next(), cells.next()) else {
                return Err(Fail("a level is not [price, qty]"));
            };
            push_level(out, str(&p)?, str(&q)?)?;
            for rest in cells {
                rest.map_err(|_| Fail("bad level cell"))?;
            }
        }
        Ok(())
    }
}

fn lazy_entry<'a, K>(e: sonic_rs::Result<(K, sonic_rs::LazyValue<'a>)>) -> Result<(K, sonic_rs::LazyValue<'a>), Fail> {
    e.map_err(|_| Fail("sonic-rs refused the frame"))
}

impl FrameParser for SonicLazy {
    fn name(&self) -> &'static str {
        "sonic-rs (lazy iterators)"
    }

    fn parse(&mut self, venue: Venue, kind: FrameKind, frame: &[u8], out: &mut Decoded) -> Result<(), Fail> {
        out.clear();
        match (venue, kind) {
            (Venue::Binance, FrameKind::BookSnapshot) => {
                for e in sonic_rs::to_object_iter(frame) {
                    let (k, v) = lazy_entry(e)?;
                    match &*k {
                        "lastUpdateId" => out.ids[0] = Some(i64_of(lazy::u64(&v)?)?),
                        "bids" => lazy::levels(v, &mut out.bids)?,
                        "asks" => lazy::levels(v, &mut out.asks)?,
                        _ => {}
                    }
                }
            }
            (Venue::Binance, _) => {
                let mut t = TradeRow { id: 0, ts_ms: 0, price: Price(0), qty: Qty(0), taker_sell: false, seq: None };
                for e in sonic_rs::to_object_iter(frame) {
                    let (k, v) = lazy_entry(e)?;
                    if &*k != "data" {
                        continue;
                    }
                    for e in lazy::object(v)? {
                        let (k, v) = lazy_entry(e)?;
                        match &*k {
                            "s" => out.symbol_hash = fnv1a(lazy::str(&v)?.as_bytes()),
                            "E" => out.ts_ms = i64_of(lazy::u64(&v)?)?,
                            "U" => out.ids[0] = Some(i64_of(lazy::u64(&v)?)?),
                            "u" => out.ids[1] = Some(i64_of(lazy::u64(&v)?)?),
                            "b" => lazy::levels(v, &mut out.bids)?,
                            "a" => lazy::levels(v, &mut out.asks)?,
                            "t" => t.id = lazy::u64(&v)?,
                            "T" => t.ts_ms = i64_of(lazy::u64(&v)?)?,
                            "p" => t.price = price(lazy::str(&v)?)?,
                            "q" => t.qty = qty(lazy::str(&v)?)?,
                            "m" => t.taker_sell = lazy::bool(&v)?,
                            _ => {}
                        }
                    }
                }
                if kind == FrameKind::Trade {
                    push_trade(out, t)?;
                }
            }
            (Venue::Bybit, _) => {
                for e in sonic_rs::to_object_iter(frame) {
                    let (k, v) = lazy_entry(e)?;
                    match &*k {
                        "ts" => out.ts_ms = i64_of(lazy::u64(&v)?)?,
                        "type" if kind != FrameKind::Trade => book_type_bybit(lazy::str(&v)?)?,
                        "data" if kind == FrameKind::Trade => {
                            for item in lazy::array(v)? {
                                let item = item.map_err(|_| Fail("bad trade"))?;
                                let mut t = TradeRow {
                                    id: 0,
                                    ts_ms: 0,
                                    price: Price(0),
                                    qty: Qty(0),
                                    taker_sell: false,
                                    seq: None,
                                };
                                for e in lazy::object(item)? {
                                    let (k, v) = lazy_entry(e)?;
                                    match &*k {
                                        "s" => out.symbol_hash = fnv1a(lazy::str(&v)?.as_bytes()),
                                        "i" => t.id = fnv1a(lazy::str(&v)?.as_bytes()),
                                        "T" => t.ts_ms = i64_of(lazy::u64(&v)?)?,
                                        "p" => t.price = price(lazy::str(&v)?)?,
                                        "v" => t.qty = qty(lazy::str(&v)?)?,
                                        "S" => t.taker_sell = side_bybit(lazy::str(&v)?)?,
                                        "seq" => t.seq = Some(i64_of(lazy::u64(&v)?)?),
                                        _ => {}
                                    }
                                }
                                push_trade(out, t)?;
                            }
                        }
                        "data" => {
                            for e in lazy::object(v)? {
                                let (k, v) = lazy_entry(e)?;
                                match &*k {
                                    "s" => out.symbol_hash = fnv1a(lazy::str(&v)?.as_bytes()),
                                    "u" => out.ids[0] = Some(i64_of(lazy::u64(&v)?)?),
                                    "seq" => out.ids[1] = Some(i64_of(lazy::u64(&v)?)?),
                                    "b" => lazy::levels(v, &mut out.bids)?,
                                    "a" => lazy::levels(v, &mut out.asks)?,
                                    _ => {}
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            (Venue::Okx | Venue::Bitget, _) => {
                for e in sonic_rs::to_object_iter(frame) {
                    let (k, v) = lazy_entry(e)?;
                    match &*k {
                        "arg" => {
                            for e in lazy::object(v)? {
                                let (k, v) = lazy_entry(e)?;
                                if &*k == "instId" {
                                    out.symbol_hash = fnv1a(lazy::str(&v)?.as_bytes());
                                }
                            }
                        }
                        "ts" if venue == Venue::Bitget => out.ts_ms = i64_of(lazy::u64(&v)?)?,
                        "data" if kind == FrameKind::Trade => {
                            for item in lazy::array(v)? {
                                let item = item.map_err(|_| Fail("bad trade"))?;
                                let mut t = TradeRow {
                                    id: 0,
                                    ts_ms: 0,
                                    price: Price(0),
                                    qty: Qty(0),
                                    taker_sell: false,
                                    seq: None,
                                };
                                for e in lazy::object(item)? {
                                    let (k, v) = lazy_entry(e)?;
                                    match &*k {
                                        "tradeId" => t.id = digits(lazy::str(&v)?)?,
                                        "ts" => t.ts_ms = i64_of(digits(lazy::str(&v)?)?)?,
                                        "px" | "price" => t.price = price(lazy::str(&v)?)?,
                                        "sz" | "size" => t.qty = qty(lazy::str(&v)?)?,
                                        "side" => t.taker_sell = side_lower(lazy::str(&v)?)?,
                                        "seqId" => t.seq = Some(lazy::i64(&v)?),
                                        _ => {}
                                    }
                                }
                                push_trade(out, t)?;
                            }
                        }
                        "data" => {
                            let mut items = lazy::array(v)?;
                            let book = match (items.next(), items.next()) {
                                (Some(Ok(book)), None) => book,
                                _ => return Err(Fail("data does not hold exactly one object")),
                            };
                            for e in lazy::object(book)? {
                                let (k, v) = lazy_entry(e)?;
                                match &*k {
                                    "ts" if venue == Venue::Okx => out.ts_ms = i64_of(digits(lazy::str(&v)?)?)?,
                                    "seqId" | "seq" => out.ids[0] = Some(lazy::i64(&v)?),
                                    "prevSeqId" | "pseq" => out.ids[1] = Some(lazy::i64(&v)?),
                                    "bids" => lazy::levels(v, &mut out.bids)?,
                                    "asks" => lazy::levels(v, &mut out.asks)?,
                                    _ => {}
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }
}
