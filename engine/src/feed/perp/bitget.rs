//! Bitget v2 USDT-FUTURES perpetual frames (decisions §17, venues.md §8.1): the `ticker` push
//! (mark, index, funding rate, next funding time, open interest), `event` replies and the text
//! `pong`. Bitget publishes no liquidations (venues.md §8.1), so this decoder never returns
//! [`PerpMessage::Liquidations`].
//!
//! Shape read: `{"action":"snapshot","arg":{"instType":"USDT-FUTURES","channel":"ticker",
//! "instId":"BTCUSDT"},"data":[{"instId","lastPr","markPrice","indexPrice","holdingAmount",
//! "fundingRate","nextFundingTime","ts",..}],"ts":..}`; `{"event":"subscribe"|"error",..}`.
//!
//! Choices where venues.md is silent, and why:
//! - Only a `ticker` push whose `arg.instType` is `USDT-FUTURES` is read; a spot ticker on the
//!   same host (no mark price, no open interest) is [`PerpMessage::Other`], as is any other
//!   channel.
//! - `holdingAmount` is open interest in base units (the unit is UNCONFIRMED for the WebSocket,
//!   venues.md §8.1); Bitget sends no USD figure.
//! - An element's time is its `ts` (a string), else the message's `ts` (a number); its contract
//!   is its `instId`, else the `arg`'s.
//! - The ticker carries no funding interval; the caller has it from the contract listing.

use super::{
    each_object, is_text_pong, message, object_at, opt_code, opt_decimal, opt_price, opt_qty, opt_str, req_symbol,
    PerpBuffers, PerpMessage, Reply, Update,
};
use crate::feed::{ms, plain_str, string_ms, DecodeError, Span};

perp_keys! {
    K_ARG = b"arg",
    K_INST_TYPE = b"instType",
    K_CHANNEL = b"channel",
    K_INST_ID = b"instId",
    K_DATA = b"data",
    K_TS = b"ts",
    K_MARK = b"markPrice",
    K_INDEX = b"indexPrice",
    K_HOLDING = b"holdingAmount",
    K_RATE = b"fundingRate",
    K_NEXT = b"nextFundingTime",
    K_EVENT = b"event",
    K_CODE = b"code",
    K_MSG = b"msg",
}

/// Decodes Bitget v2 USDT-FUTURES messages into borrowed values, reusing its buffers.
#[derive(Clone, Debug)]
pub struct BitgetPerpDecoder {
    buffers: PerpBuffers,
}

impl BitgetPerpDecoder {
    /// A decoder holding at most `updates_max` updates of one message (see
    /// [`super::UPDATES_PER_MESSAGE_MAX`]: the rest are counted). It holds one liquidation slot,
    /// never used: Bitget publishes none.
    pub fn new(updates_max: usize) -> BitgetPerpDecoder {
        BitgetPerpDecoder { buffers: PerpBuffers::new(1, updates_max) }
    }

    /// Decodes the bytes of one message. Never allocates and never panics.
    pub fn decode<'a>(&'a mut self, frame: &'a [u8]) -> Result<PerpMessage<'a>, DecodeError> {
        self.buffers.clear();
        if is_text_pong(frame) {
            return Ok(PerpMessage::Pong);
        }
        let f = message(frame, &KEYS, key_index)?;
        if let Some(event) = f.get(K_EVENT) {
            let event = plain_str(event, name(K_EVENT))?;
            let code = opt_code(&f, K_CODE)?;
            let msg = opt_str(&f, K_MSG)?;
            return Ok(PerpMessage::Reply(Reply { ok: event != b"error", op: Some(event), code, msg }));
        }
        let Some(arg) = f.span(K_ARG) else {
            return Ok(PerpMessage::Other);
        };
        let arg = object_at(frame, arg, &KEYS, key_index, name(K_ARG))?;
        let channel = plain_str(arg.req(K_CHANNEL)?, name(K_CHANNEL))?;
        let inst_type = arg.get(K_INST_TYPE).map(|t| plain_str(t, name(K_INST_TYPE))).transpose()?;
        if channel != b"ticker" || inst_type != Some(b"USDT-FUTURES".as_slice()) {
            return Ok(PerpMessage::Other);
        }
        let outer_ts = f.get(K_TS).map(|t| ms(t, name(K_TS))).transpose()?;
        let arg_symbol = arg.span(K_INST_ID).map(|_| req_symbol(&arg, K_INST_ID)).transpose()?;
        let rows = &mut self.buffers.updates;
        each_object(frame, f.req_span(K_DATA)?, &KEYS, key_index, name(K_DATA), |d| {
            let (symbol, u) = ticker(d, outer_ts, arg_symbol)?;
            rows.push(symbol, u);
            Ok(())
        })?;
        Ok(self.buffers.updates(frame))
    }
}

/// One ticker element of `data`, with the message's `ts` and the `arg`'s `instId` as fallbacks.
fn ticker(d: &Obj<'_>, outer_ts: Option<i64>, arg_symbol: Option<Span>) -> Result<(Span, Update), DecodeError> {
    let symbol = match (d.span(K_INST_ID), arg_symbol) {
        (None, Some(s)) => s,
        _ => req_symbol(d, K_INST_ID)?,
    };
    let ts_ms = match (d.get(K_TS), outer_ts) {
        (Some(t), _) => string_ms(t, name(K_TS))?,
        (None, Some(t)) => t,
        (None, None) => return Err(DecodeError::MissingField(name(K_TS))),
    };
    let mut u = Update::at(ts_ms);
    u.mark = opt_price(d, K_MARK)?;
    u.index = opt_price(d, K_INDEX)?;
    u.oi_base = opt_qty(d, K_HOLDING)?;
    u.funding_rate = opt_decimal(d, K_RATE)?;
    u.next_funding_ms = super::opt_string_ms(d, K_NEXT)?;
    Ok((symbol, u))
}
