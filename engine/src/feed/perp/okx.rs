//! OKX v5 perpetual frames (decisions §17, venues.md §8.1): `liquidation-orders`,
//! `open-interest` and `funding-rate` pushes, `event` replies and the text `pong`.
//!
//! Shapes read: `{"arg":{"channel":"liquidation-orders","instType":"SWAP"},"data":[{"instId",
//! "instType","uly","instFamily","details":[{"side","posSide","bkPx","sz","bkLoss","ccy",
//! "ts"}]}]}`; `{"arg":{"channel":"open-interest",..},"data":[{"instId","instType","oi","oiCcy",
//! "oiUsd","ts"}]}`; `{"arg":{"channel":"funding-rate",..},"data":[{"instId","fundingRate",
//! "fundingTime","nextFundingTime","ts",..}]}`; `{"event":"subscribe"|"error"|"notice",..}`.
//!
//! Choices where venues.md is silent, and why:
//! - A liquidation's quantity is `sz` in **contracts** ([`QtyUnit::Contracts`]): the decoder
//!   knows no instrument; the caller multiplies by `ctVal`. Its price is the bankruptcy price
//!   `bkPx`, its side `side` (`sell`: a long liquidated; `posSide` is not read, it is `net` in
//!   one-way mode).
//! - Funding: `fundingTime` is the **next** settlement (pitfall 6) and the interval is
//!   `nextFundingTime − fundingTime` when both are sent and the difference is above zero, else
//!   `None`. A push without `ts` (an older shape of the funding push) is refused
//!   ([`DecodeError::MissingField`]): every [`Update`] carries the venue's time.
//! - `oi` is reported as contracts, `oiCcy` as base units, `oiUsd` as USD.
//! - Every channel's `data` element names its contract (`instId`); a push of another channel
//!   (books, trades, tickers) is [`PerpMessage::Other`].
//! - The REST `GET /api/v5/public/funding-rate` body (`{"code","msg","data":[…]}`, its elements
//!   the push's) is read by [`OkxPerpDecoder::decode_funding_rest`]: a `code` other than `"0"`
//!   is a refused [`Reply`]; a row's `ts` is the answer's time, so it carries the venue's time.

use super::{
    decimal, each_object, is_text_pong, message, opt_code, opt_qty, opt_str, req_price, req_qty, req_symbol,
    Liquidation, PerpBuffers, PerpMessage, QtyUnit, Reply, Update,
};
use crate::feed::{plain_str, string_ms, DecodeError};
use crate::Venue;

perp_keys! {
    K_ARG = b"arg",
    K_CHANNEL = b"channel",
    K_DATA = b"data",
    K_INST_ID = b"instId",
    K_DETAILS = b"details",
    K_SIDE = b"side",
    K_BK_PX = b"bkPx",
    K_SZ = b"sz",
    K_TS = b"ts",
    K_OI = b"oi",
    K_OI_CCY = b"oiCcy",
    K_OI_USD = b"oiUsd",
    K_RATE = b"fundingRate",
    K_FUNDING_TIME = b"fundingTime",
    K_NEXT_FUNDING_TIME = b"nextFundingTime",
    K_EVENT = b"event",
    K_CODE = b"code",
    K_MSG = b"msg",
}

/// Decodes OKX v5 perpetual messages into borrowed values, reusing its buffers.
#[derive(Clone, Debug)]
pub struct OkxPerpDecoder {
    buffers: PerpBuffers,
}

impl OkxPerpDecoder {
    /// A decoder holding at most `liquidations_max` liquidations and `updates_max` updates of
    /// one message (see [`super::LIQUIDATIONS_PER_MESSAGE_MAX`]: the rest are counted).
    pub fn new(liquidations_max: usize, updates_max: usize) -> OkxPerpDecoder {
        OkxPerpDecoder { buffers: PerpBuffers::new(liquidations_max, updates_max) }
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
        let arg = super::object_at(frame, arg, &KEYS, key_index, name(K_ARG))?;
        let channel = plain_str(arg.req(K_CHANNEL)?, name(K_CHANNEL))?;
        let data = f.req_span(K_DATA);
        match channel {
            b"liquidation-orders" => self.liquidations(frame, data?),
            b"open-interest" => self.updates(frame, data?, open_interest),
            b"funding-rate" => self.updates(frame, data?, funding),
            _ => Ok(PerpMessage::Other),
        }
    }

    /// The body of `GET /api/v5/public/funding-rate` (one contract, or every swap with
    /// `instId=ANY`): an update per row as a `funding-rate` push's, or the venue's refusal.
    /// Never allocates and never panics; rows past the decoder's bound are counted as dropped.
    pub fn decode_funding_rest<'a>(&'a mut self, body: &'a [u8]) -> Result<PerpMessage<'a>, DecodeError> {
        self.buffers.clear();
        let f = message(body, &KEYS, key_index)?;
        let code = opt_code(&f, K_CODE)?;
        if code.is_some_and(|c| c != 0) {
            let msg = opt_str(&f, K_MSG)?;
            return Ok(PerpMessage::Reply(Reply { ok: false, op: None, code, msg }));
        }
        self.updates(body, f.req_span(K_DATA)?, funding)
    }

    /// A `liquidation-orders` push: each contract's `details`.
    fn liquidations<'a>(
        &'a mut self,
        frame: &'a [u8],
        data: crate::feed::Span,
    ) -> Result<PerpMessage<'a>, DecodeError> {
        let rows = &mut self.buffers.liquidations;
        each_object(frame, data, &KEYS, key_index, name(K_DATA), |d| {
            let symbol = req_symbol(d, K_INST_ID)?;
            each_object(frame, d.req_span(K_DETAILS)?, &KEYS, key_index, name(K_DETAILS), |x| {
                let side = super::side(x, K_SIDE, Venue::Okx)?;
                let price = req_price(x, K_BK_PX)?;
                let qty = req_qty(x, K_SZ)?;
                let ts_ms = string_ms(x.req(K_TS)?, name(K_TS))?;
                rows.push(symbol, Liquidation { side, price, qty, qty_unit: QtyUnit::Contracts, ts_ms });
                Ok(())
            })
        })?;
        Ok(self.buffers.liquidations(frame))
    }

    /// An `open-interest` or `funding-rate` push: one update per element of `data`, read by
    /// `read`.
    fn updates<'a>(
        &'a mut self,
        frame: &'a [u8],
        data: crate::feed::Span,
        read: fn(&Obj<'_>, &mut Update) -> Result<(), DecodeError>,
    ) -> Result<PerpMessage<'a>, DecodeError> {
        let rows = &mut self.buffers.updates;
        each_object(frame, data, &KEYS, key_index, name(K_DATA), |d| {
            let symbol = req_symbol(d, K_INST_ID)?;
            let mut u = Update::at(string_ms(d.req(K_TS)?, name(K_TS))?);
            read(d, &mut u)?;
            rows.push(symbol, u);
            Ok(())
        })?;
        Ok(self.buffers.updates(frame))
    }
}

/// An `open-interest` element: `oi` contracts, `oiCcy` base units, `oiUsd`.
fn open_interest(d: &Obj<'_>, u: &mut Update) -> Result<(), DecodeError> {
    u.oi_contracts = Some(req_qty(d, K_OI)?);
    u.oi_base = opt_qty(d, K_OI_CCY)?;
    u.oi_usd = opt_qty(d, K_OI_USD)?;
    Ok(())
}

/// A `funding-rate` element: the rate for the settlement at `fundingTime`, and the interval.
fn funding(d: &Obj<'_>, u: &mut Update) -> Result<(), DecodeError> {
    let rate = decimal(d.req(K_RATE)?, name(K_RATE))?;
    let next = string_ms(d.req(K_FUNDING_TIME)?, name(K_FUNDING_TIME))?;
    let after = super::opt_string_ms(d, K_NEXT_FUNDING_TIME)?;
    u.funding_rate = Some(rate);
    u.next_funding_ms = Some(next);
    u.funding_interval_ms = after.map(|a| a - next).filter(|&i| i > 0);
    Ok(())
}
