//! Bybit v5 linear perpetual frames (decisions §17, venues.md §8.1): `allLiquidation.{symbol}`
//! liquidations, `tickers.{symbol}` snapshots and deltas (mark, index, funding, open interest),
//! `op` replies and pongs.
//!
//! Shapes read: `{"topic":"allLiquidation.BTCUSDT","type":"snapshot","ts":..,"data":[{"T","s",
//! "S","v","p"}]}`; `{"topic":"tickers.BTCUSDT","type":"snapshot"|"delta","data":{"symbol",
//! "markPrice","indexPrice","openInterest","openInterestValue","fundingRate","nextFundingTime",
//! "fundingIntervalHour",..},"cs":..,"ts":..}`; `{"success":true,"ret_msg":"","op":"subscribe",
//! ..}`; the pong `{"success":true,"ret_msg":"pong","op":"ping",..}` (or `"op":"pong"`).
//!
//! Choices where venues.md is silent, and why:
//! - A ticker's time is the message's `ts` (the ticker object has none).
//! - A ticker delta carries only what changed: a field it lacks is `None` in the [`Update`], and
//!   so is one sent as the empty string; the caller merges. A ticker without `symbol` takes it
//!   from the topic (`tickers.BTCUSDT`), which always names it.
//! - `fundingIntervalHour` (sent by newer ticker versions) gives the interval when present.
//! - A liquidation's quantity `v` is in base units and its price `p` is the bankruptcy price.
//! - Another topic (the deprecated `liquidation.{symbol}`, books, trades) is
//!   [`PerpMessage::Other`].

use super::{
    each_object, message, object_at, opt_decimal, opt_price, opt_qty, opt_str, req_price, req_qty, req_symbol,
    Liquidation, PerpBuffers, PerpMessage, QtyUnit, Reply, Update,
};
use crate::candle::HOUR_MS;
use crate::feed::{ms, plain_str, DecodeError, Span};
use crate::Venue;

perp_keys! {
    K_TOPIC = b"topic",
    K_TS = b"ts",
    K_DATA = b"data",
    K_TIME = b"T",
    K_S = b"s",
    K_SIDE = b"S",
    K_SIZE = b"v",
    K_PRICE = b"p",
    K_SYMBOL = b"symbol",
    K_MARK = b"markPrice",
    K_INDEX = b"indexPrice",
    K_OI = b"openInterest",
    K_OI_VALUE = b"openInterestValue",
    K_RATE = b"fundingRate",
    K_NEXT = b"nextFundingTime",
    K_INTERVAL_H = b"fundingIntervalHour",
    K_SUCCESS = b"success",
    K_OP = b"op",
    K_RET_MSG = b"ret_msg",
}

/// Decodes Bybit v5 linear perpetual messages into borrowed values, reusing its buffers.
#[derive(Clone, Debug)]
pub struct BybitPerpDecoder {
    buffers: PerpBuffers,
}

impl BybitPerpDecoder {
    /// A decoder holding at most `liquidations_max` liquidations and `updates_max` updates of
    /// one message (see [`super::LIQUIDATIONS_PER_MESSAGE_MAX`]: the rest are counted).
    pub fn new(liquidations_max: usize, updates_max: usize) -> BybitPerpDecoder {
        BybitPerpDecoder { buffers: PerpBuffers::new(liquidations_max, updates_max) }
    }

    /// Decodes the bytes of one message. Never allocates and never panics.
    pub fn decode<'a>(&'a mut self, frame: &'a [u8]) -> Result<PerpMessage<'a>, DecodeError> {
        self.buffers.clear();
        let f = message(frame, &KEYS, key_index)?;
        if let Some(topic) = f.get(K_TOPIC) {
            let topic = plain_str(topic, name(K_TOPIC))?;
            if topic.starts_with(b"allLiquidation.") {
                return self.liquidations(frame, &f);
            }
            if topic.starts_with(b"tickers.") {
                return self.ticker(frame, &f);
            }
            return Ok(PerpMessage::Other);
        }
        if let Some(op) = f.get(K_OP) {
            return op_reply(&f, plain_str(op, name(K_OP))?);
        }
        Ok(PerpMessage::Other)
    }

    /// An `allLiquidation` push.
    fn liquidations<'a>(&'a mut self, frame: &'a [u8], f: &Obj<'a>) -> Result<PerpMessage<'a>, DecodeError> {
        let rows = &mut self.buffers.liquidations;
        each_object(frame, f.req_span(K_DATA)?, &KEYS, key_index, name(K_DATA), |d| {
            let symbol = req_symbol(d, K_S)?;
            let side = super::side(d, K_SIDE, Venue::Bybit)?;
            let price = req_price(d, K_PRICE)?;
            let qty = req_qty(d, K_SIZE)?;
            let ts_ms = ms(d.req(K_TIME)?, name(K_TIME))?;
            rows.push(symbol, Liquidation { side, price, qty, qty_unit: QtyUnit::Base, ts_ms });
            Ok(())
        })?;
        Ok(self.buffers.liquidations(frame))
    }

    /// A `tickers` snapshot or delta.
    fn ticker<'a>(&'a mut self, frame: &'a [u8], f: &Obj<'a>) -> Result<PerpMessage<'a>, DecodeError> {
        let ts_ms = ms(f.req(K_TS)?, name(K_TS))?;
        let d = object_at(frame, f.req_span(K_DATA)?, &KEYS, key_index, name(K_DATA))?;
        let symbol = match d.span(K_SYMBOL) {
            Some(_) => req_symbol(&d, K_SYMBOL)?,
            None => topic_symbol(f)?,
        };
        let mut u = Update::at(ts_ms);
        u.mark = opt_price(&d, K_MARK)?;
        u.index = opt_price(&d, K_INDEX)?;
        u.oi_base = opt_qty(&d, K_OI)?;
        u.oi_usd = opt_qty(&d, K_OI_VALUE)?;
        u.funding_rate = opt_decimal(&d, K_RATE)?;
        u.next_funding_ms = super::opt_string_ms(&d, K_NEXT)?;
        u.funding_interval_ms = interval_ms(&d)?;
        self.buffers.updates.push(symbol, u);
        Ok(self.buffers.updates(frame))
    }
}

/// The contract id a `tickers.{symbol}` topic names.
fn topic_symbol(f: &Obj<'_>) -> Result<Span, DecodeError> {
    let topic = req_symbol(f, K_TOPIC)?;
    let start = topic.start + b"tickers.".len();
    if start >= topic.end {
        return Err(DecodeError::OutOfRange(name(K_TOPIC)));
    }
    Ok(Span { start, end: topic.end })
}

/// `fundingIntervalHour`, a string of whole hours, as milliseconds; `None` when absent or empty;
/// zero or above a week is [`DecodeError::OutOfRange`].
fn interval_ms(d: &Obj<'_>) -> Result<Option<i64>, DecodeError> {
    match d.get(K_INTERVAL_H) {
        None | Some(b"\"\"") => Ok(None),
        Some(text) => {
            let hours = crate::feed::string_uint(text, name(K_INTERVAL_H))?;
            if !(1..=168).contains(&hours) {
                return Err(DecodeError::OutOfRange(name(K_INTERVAL_H)));
            }
            // At most 168: the product fits.
            Ok(Some(hours as i64 * HOUR_MS))
        }
    }
}

/// An `op` reply: a pong, or a reply to a request.
fn op_reply<'a>(f: &Obj<'a>, op: &'a [u8]) -> Result<PerpMessage<'a>, DecodeError> {
    let ok = match f.get(K_SUCCESS) {
        None | Some(b"true") => true,
        Some(b"false") => false,
        Some(_) => return Err(DecodeError::WrongType(name(K_SUCCESS))),
    };
    let msg = opt_str(f, K_RET_MSG)?;
    if op == b"pong" || (op == b"ping" && msg == Some(b"pong".as_slice())) {
        return Ok(PerpMessage::Pong);
    }
    Ok(PerpMessage::Reply(Reply { ok, op: Some(op), code: None, msg }))
}
