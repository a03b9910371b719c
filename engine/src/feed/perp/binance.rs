//! Binance USDⓈ-M perpetual frames (decisions §17, venues.md §8.1): `forceOrder` liquidations,
//! `markPriceUpdate` (mark, index, funding rate, next funding time), the REST
//! `GET /fapi/v1/openInterest` body, and control replies.
//!
//! Shapes read: a raw event (`{"e":"forceOrder",..}`), the same wrapped by a combined stream
//! (`{"stream":"!forceOrder@arr","data":{..}}`), the `!markPrice@arr@1s` array of mark-price
//! events, raw (`[{..},..]`) or wrapped (`{"stream":..,"data":[..]}`), the open-interest body
//! (`{"openInterest":"10659.509","symbol":"BTCUSDT","time":1589437530011}`), a reply
//! (`{"result":null,"id":1}`) and an error (`{"code":2,"msg":".."}`, or `{"error":{..},"id":1}`).
//!
//! Choices where venues.md is silent, and why:
//! - A liquidation's price is the average fill price `ap` and its quantity the filled quantity
//!   `z`: what was actually liquidated. A zero `ap` or `z` (an order not filled yet, never seen on
//!   the stream) falls back to the order's `p` and `q`.
//! - A mark-price event's time is its event time `E`; `T` is the next funding time (a delivery
//!   contract sends `T: 0` and `r: ""`: no funding, reported as `None`).
//! - Every element of a mark-price array must be a `markPriceUpdate` event; another event there
//!   is [`DecodeError::OutOfRange`] on `e`.
//! - An event of another type (`e`) is [`PerpMessage::Other`].

use super::{
    decimal, each_object, message, non_negative, object_at, opt_price, opt_str, positive, req_qty, req_symbol,
    PerpBuffers, PerpMessage, Reply, Update,
};
use super::{Liquidation, QtyUnit};
use crate::feed::{int, ms, plain_str, Cursor, DecodeError, JsonErrorKind, Span};
use crate::Venue;

perp_keys! {
    K_EVENT = b"e",
    K_EVENT_TIME = b"E",
    K_SYMBOL = b"s",
    K_ORDER = b"o",
    K_SIDE = b"S",
    K_PRICE = b"p",
    K_QTY = b"q",
    K_AVG_PRICE = b"ap",
    K_FILLED = b"z",
    K_TIME = b"T",
    K_INDEX = b"i",
    K_RATE = b"r",
    K_OPEN_INTEREST = b"openInterest",
    K_REST_SYMBOL = b"symbol",
    K_REST_TIME = b"time",
    K_RESULT = b"result",
    K_ID = b"id",
    K_CODE = b"code",
    K_MSG = b"msg",
    K_ERROR = b"error",
    K_STREAM = b"stream",
    K_DATA = b"data",
}

/// Decodes Binance USDⓈ-M perpetual messages into borrowed values, reusing its buffers.
#[derive(Clone, Debug)]
pub struct BinancePerpDecoder {
    buffers: PerpBuffers,
}

impl BinancePerpDecoder {
    /// A decoder holding at most `liquidations_max` liquidations and `updates_max` updates of
    /// one message (see [`super::LIQUIDATIONS_PER_MESSAGE_MAX`]: the rest are counted).
    pub fn new(liquidations_max: usize, updates_max: usize) -> BinancePerpDecoder {
        BinancePerpDecoder { buffers: PerpBuffers::new(liquidations_max, updates_max) }
    }

    /// Decodes the bytes of one message. Never allocates and never panics.
    pub fn decode<'a>(&'a mut self, frame: &'a [u8]) -> Result<PerpMessage<'a>, DecodeError> {
        self.buffers.clear();
        let mut cur = Cursor::new(frame, 0);
        cur.skip_ws();
        if cur.peek() == Some(b'[') {
            let span = cur.skip_value()?;
            if !cur.at_end() {
                return Err(cur.error(JsonErrorKind::TrailingBytes).into());
            }
            return self.mark_prices(frame, span);
        }
        let f = message(frame, &KEYS, key_index)?;
        if let Some(stream) = f.get(K_STREAM) {
            plain_str(stream, name(K_STREAM))?;
            let data = f.req_span(K_DATA)?;
            return match frame.get(data.start) {
                Some(b'[') => self.mark_prices(frame, data),
                _ => {
                    let d = object_at(frame, data, &KEYS, key_index, name(K_DATA))?;
                    self.object(frame, &d)
                }
            };
        }
        self.object(frame, &f)
    }

    /// A message that is one object (the payload itself, or a combined stream's `data`).
    fn object<'a>(&'a mut self, frame: &'a [u8], f: &Obj<'a>) -> Result<PerpMessage<'a>, DecodeError> {
        if let Some(e) = f.get(K_EVENT) {
            return match plain_str(e, name(K_EVENT))? {
                b"forceOrder" => {
                    let o = object_at(frame, f.req_span(K_ORDER)?, &KEYS, key_index, name(K_ORDER))?;
                    let (symbol, liq) = force_order(&o)?;
                    self.buffers.liquidations.push(symbol, liq);
                    Ok(self.buffers.liquidations(frame))
                }
                b"markPriceUpdate" => {
                    let (symbol, update) = mark_price(f)?;
                    self.buffers.updates.push(symbol, update);
                    Ok(self.buffers.updates(frame))
                }
                _ => Ok(PerpMessage::Other),
            };
        }
        if f.has(K_OPEN_INTEREST) {
            let (symbol, update) = open_interest(f)?;
            self.buffers.updates.push(symbol, update);
            return Ok(self.buffers.updates(frame));
        }
        reply(frame, f)
    }

    /// The mark-price events of the array at `span`.
    fn mark_prices<'a>(&'a mut self, frame: &'a [u8], span: Span) -> Result<PerpMessage<'a>, DecodeError> {
        let updates = &mut self.buffers.updates;
        each_object(frame, span, &KEYS, key_index, name(K_DATA), |f| {
            if plain_str(f.req(K_EVENT)?, name(K_EVENT))? != b"markPriceUpdate" {
                return Err(DecodeError::OutOfRange(name(K_EVENT)));
            }
            let (symbol, update) = mark_price(f)?;
            updates.push(symbol, update);
            Ok(())
        })?;
        Ok(self.buffers.updates(frame))
    }
}

/// The order `o` of a `forceOrder` event.
fn force_order(o: &Obj<'_>) -> Result<(Span, Liquidation), DecodeError> {
    let symbol = req_symbol(o, K_SYMBOL)?;
    let side = super::side(o, K_SIDE, Venue::Binance)?;
    let avg = non_negative(decimal(o.req(K_AVG_PRICE)?, name(K_AVG_PRICE))?, name(K_AVG_PRICE))?;
    let price = if avg > 0.0 { avg } else { positive(decimal(o.req(K_PRICE)?, name(K_PRICE))?, name(K_PRICE))? };
    let filled = req_qty(o, K_FILLED)?;
    let qty = if filled > 0.0 { filled } else { req_qty(o, K_QTY)? };
    let ts_ms = ms(o.req(K_TIME)?, name(K_TIME))?;
    Ok((symbol, Liquidation { side, price, qty, qty_unit: QtyUnit::Base, ts_ms }))
}

/// A `markPriceUpdate` event.
fn mark_price(f: &Obj<'_>) -> Result<(Span, Update), DecodeError> {
    let symbol = req_symbol(f, K_SYMBOL)?;
    let mut u = Update::at(ms(f.req(K_EVENT_TIME)?, name(K_EVENT_TIME))?);
    u.mark = Some(positive(decimal(f.req(K_PRICE)?, name(K_PRICE))?, name(K_PRICE))?);
    u.index = opt_price(f, K_INDEX)?;
    u.funding_rate = super::opt_decimal(f, K_RATE)?;
    u.next_funding_ms = f.get(K_TIME).map(|t| ms(t, name(K_TIME))).transpose()?.filter(|&t| t > 0);
    Ok((symbol, u))
}

/// The REST open-interest body.
fn open_interest(f: &Obj<'_>) -> Result<(Span, Update), DecodeError> {
    let symbol = req_symbol(f, K_REST_SYMBOL)?;
    let mut u = Update::at(ms(f.req(K_REST_TIME)?, name(K_REST_TIME))?);
    u.oi_base = Some(req_qty(f, K_OPEN_INTEREST)?);
    Ok((symbol, u))
}

/// A reply, an error, or another object.
fn reply<'a>(frame: &'a [u8], f: &Obj<'a>) -> Result<PerpMessage<'a>, DecodeError> {
    if let Some(span) = f.span(K_ERROR) {
        let e = object_at(frame, span, &KEYS, key_index, name(K_ERROR))?;
        return error(&e);
    }
    if f.has(K_CODE) {
        return error(f);
    }
    if f.has(K_RESULT) {
        f.req(K_ID)?;
        return Ok(PerpMessage::Reply(Reply { ok: true, op: None, code: None, msg: None }));
    }
    Ok(PerpMessage::Other)
}

/// An error reply's `code` and `msg`.
fn error<'a>(f: &Obj<'a>) -> Result<PerpMessage<'a>, DecodeError> {
    let code = int(f.req(K_CODE)?, name(K_CODE))?;
    let msg = opt_str(f, K_MSG)?;
    Ok(PerpMessage::Reply(Reply { ok: false, op: None, code: Some(code), msg }))
}
