//! simd-json's tape as a [`FrameParser`]: the frame parsed in place into a reused tape, which is
//! then walked key by key.

use rampart_engine::{Price, Qty, Venue};

use super::frame::{Decoded, Fail, FrameKind, FrameParser, TradeRow};
use super::values::{
    book_type_bybit, digits, fnv1a, i64_of, price, push_level, push_trade, qty, side_bybit, side_lower,
};

/// simd-json's tape (`fill_tape_padded`): the frame is copied into a reused padded buffer
/// (simd-json parses in place), the tape and `Buffers` are reused, and the tape is walked.
pub struct SimdTape {
    input: Vec<u8>,
    buffers: simd_json::Buffers,
    tape: Option<simd_json::Tape<'static>>,
}

impl SimdTape {
    /// Buffers for frames up to `frame_len_max` bytes (they grow if a frame is longer).
    pub fn new(frame_len_max: usize) -> SimdTape {
        SimdTape {
            input: Vec::with_capacity(frame_len_max + simd_json::INPUT_PADDING),
            buffers: simd_json::Buffers::new(frame_len_max),
            tape: Some(simd_json::Tape::null().reset()),
        }
    }
}

type TapeValue<'t, 'i> = simd_json::tape::Value<'t, 'i>;

mod tape {
    //! Readers over simd-json tape values that fail with [`Fail`] instead of panicking.
    use simd_json::prelude::{ValueAsScalar, ValueIntoArray, ValueIntoObject, ValueIntoString};
    use simd_json::tape::{Array, Object};

    use super::{push_level, Fail, TapeValue};

    pub(super) fn obj<'t, 'i>(v: TapeValue<'t, 'i>) -> Result<Object<'t, 'i>, Fail> {
        v.into_object().ok_or(Fail("expected an object"))
    }

    pub(super) fn arr<'t, 'i>(v: TapeValue<'t, 'i>) -> Result<Array<'t, 'i>, Fail> {
        v.into_array().ok_or(Fail("expected an array"))
    }

    pub(super) fn str<'i>(v: TapeValue<'_, 'i>) -> Result<&'i str, Fail> {
        v.into_string().ok_or(Fail("expected a string"))
    }

    pub(super) fn u64(v: TapeValue<'_, '_>) -> Result<u64, Fail> {
        v.as_u64().ok_or(Fail("expected a non-negative integer"))
    }

    pub(super) fn i64(v: TapeValue<'_, '_>) -> Result<i64, Fail> {
        v.as_i64().ok_or(Fail("expected an integer"))
    }

    pub(super) fn bool(v: TapeValue<'_, '_>) -> Result<bool, Fail> {
        v.as_bool().ok_or(Fail("expected a boolean"))
    }

    /// `[[price, qty, ...], ...]` into `out`.
    pub(super) fn levels(v: TapeValue<'_, '_>, out: &mut Vec<rampart_engine::Level>) -> Result<(), Fail> {
        for row in arr(v)?.iter() {
            let cells = arr(row)?;
            let mut it = cells.iter();
            let (Some(p), Some(q)) = (it.next(), it.next()) else {
                return Err(Fail("a level is not [price, qty]"));
            };
            push_level(out, str(p)?, str(q)?)?;
        }
        Ok(())
    }

    /// The one object of a `data` array.
    pub(super) fn single<'t, 'i>(v: TapeValue<'t, 'i>) -> Result<Object<'t, 'i>, Fail> {
        let a = arr(v)?;
        if a.len() != 1 {
            return Err(Fail("data does not hold exactly one object"));
        }
        a.iter().next().ok_or(Fail("data is empty")).and_then(obj)
    }
}

impl FrameParser for SimdTape {
    fn name(&self) -> &'static str {
        "simd-json (tape)"
    }

    fn parse(&mut self, venue: Venue, kind: FrameKind, frame: &[u8], out: &mut Decoded) -> Result<(), Fail> {
        out.clear();
        let SimdTape { input, buffers, tape } = self;
        input.clear();
        input.extend_from_slice(frame);
        input.resize(frame.len() + simd_json::INPUT_PADDING, 0);
        let mut t = tape.take().unwrap_or_else(simd_json::Tape::null).reset();
        let r = match simd_json::fill_tape_padded(input, frame.len(), buffers, &mut t) {
            Ok(()) => walk_tape(venue, kind, t.as_value(), out),
            Err(_) => Err(Fail("simd-json refused the frame")),
        };
        *tape = Some(t.reset());
        r
    }
}

fn walk_tape(venue: Venue, kind: FrameKind, root: TapeValue<'_, '_>, out: &mut Decoded) -> Result<(), Fail> {
    let top = tape::obj(root)?;
    match (venue, kind) {
        (Venue::Binance, FrameKind::BookSnapshot) => {
            for (k, v) in top.iter() {
                match k {
                    "lastUpdateId" => out.ids[0] = Some(i64_of(tape::u64(v)?)?),
                    "bids" => tape::levels(v, &mut out.bids)?,
                    "asks" => tape::levels(v, &mut out.asks)?,
                    _ => {}
                }
            }
        }
        (Venue::Binance, _) => {
            let data = tape::obj(top.get("data").ok_or(Fail("missing data"))?)?;
            let mut t = TradeRow { id: 0, ts_ms: 0, price: Price(0), qty: Qty(0), taker_sell: false, seq: None };
            for (k, v) in data.iter() {
                match k {
                    "s" => out.symbol_hash = fnv1a(tape::str(v)?.as_bytes()),
                    "E" => out.ts_ms = i64_of(tape::u64(v)?)?,
                    "U" => out.ids[0] = Some(i64_of(tape::u64(v)?)?),
                    "u" => out.ids[1] = Some(i64_of(tape::u64(v)?)?),
                    "b" => tape::levels(v, &mut out.bids)?,
                    "a" => tape::levels(v, &mut out.asks)?,
                    "t" => t.id = tape::u64(v)?,
                    "T" => t.ts_ms = i64_of(tape::u64(v)?)?,
                    "p" => t.price = price(tape::str(v)?)?,
                    "q" => t.qty = qty(tape::str(v)?)?,
                    "m" => t.taker_sell = tape::bool(v)?,
                    _ => {}
                }
            }
            if kind == FrameKind::Trade {
                push_trade(out, t)?;
            }
        }
        (Venue::Bybit, FrameKind::Trade) => {
            for (k, v) in top.iter() {
                match k {
                    "ts" => out.ts_ms = i64_of(tape::u64(v)?)?,
                    "data" => {
                        for item in tape::arr(v)?.iter() {
                            let mut t = TradeRow {
                                id: 0,
                                ts_ms: 0,
                                price: Price(0),
                                qty: Qty(0),
                                taker_sell: false,
                                seq: None,
                            };
                            for (k, v) in tape::obj(item)?.iter() {
                                match k {
                                    "s" => out.symbol_hash = fnv1a(tape::str(v)?.as_bytes()),
                                    "i" => t.id = fnv1a(tape::str(v)?.as_bytes()),
                                    "T" => t.ts_ms = i64_of(tape::u64(v)?)?,
                                    "p" => t.price = price(tape::str(v)?)?,
                                    "v" => t.qty = qty(tape::str(v)?)?,
                                    "S" => t.taker_sell = side_bybit(tape::str(v)?)?,
                                    "seq" => t.seq = Some(i64_of(tape::u64(v)?)?),
                                    _ => {}
                                }
                            }
                            push_trade(out, t)?;
                        }
                    }
                    _ => {}
                }
            }
        }
        (Venue::Bybit, _) => {
            for (k, v) in top.iter() {
                match k {
                    "ts" => out.ts_ms = i64_of(tape::u64(v)?)?,
                    "type" => book_type_bybit(tape::str(v)?)?,
                    "data" => {
                        for (k, v) in tape::obj(v)?.iter() {
                            match k {
                                "s" => out.symbol_hash = fnv1a(tape::str(v)?.as_bytes()),
                                "u" => out.ids[0] = Some(i64_of(tape::u64(v)?)?),
                                "seq" => out.ids[1] = Some(i64_of(tape::u64(v)?)?),
                                "b" => tape::levels(v, &mut out.bids)?,
                                "a" => tape::levels(v, &mut out.asks)?,
                                _ => {}
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        (Venue::Okx | Venue::Bitget, _) => {
            for (k, v) in top.iter() {
                match k {
                    "arg" => {
                        let inst = tape::obj(v)?.get("instId").ok_or(Fail("missing instId"))?;
                        out.symbol_hash = fnv1a(tape::str(inst)?.as_bytes());
                    }
                    "ts" if venue == Venue::Bitget => out.ts_ms = i64_of(tape::u64(v)?)?,
                    "data" if kind == FrameKind::Trade => {
                        for item in tape::arr(v)?.iter() {
                            let mut t = TradeRow {
                                id: 0,
                                ts_ms: 0,
                                price: Price(0),
                                qty: Qty(0),
                                taker_sell: false,
                                seq: None,
                            };
                            for (k, v) in tape::obj(item)?.iter() {
                                match k {
                                    "tradeId" => t.id = digits(tape::str(v)?)?,
                                    "ts" => t.ts_ms = i64_of(digits(tape::str(v)?)?)?,
                                    "px" | "price" => t.price = price(tape::str(v)?)?,
                                    "sz" | "size" => t.qty = qty(tape::str(v)?)?,
                                    "side" => t.taker_sell = side_lower(tape::str(v)?)?,
                                    "seqId" => t.seq = Some(tape::i64(v)?),
                                    _ => {}
                                }
                            }
                            push_trade(out, t)?;
                        }
                    }
                    "data" => {
                        for (k, v) in tape::single(v)?.iter() {
                            match k {
                                "ts" if venue == Venue::Okx => out.ts_ms = i64_of(digits(tape::str(v)?)?)?,
                                "seqId" | "seq" => out.ids[0] = Some(tape::i64(v)?),
                                "prevSeqId" | "pseq" => out.ids[1] = Some(tape::i64(v)?),
                                "bids" => tape::levels(v, &mut out.bids)?,
                                "asks" => tape::levels(v, &mut out.asks)?,
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
