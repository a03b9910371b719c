//! The engine's own hand-rolled decoders (`engine::feed`) as a [`FrameParser`]: the reference
//! every other parser is checked against.

use rampart_engine::feed::binance::{self, BinanceDecoder, TimeUnit};
use rampart_engine::feed::{bitget, bybit, okx};
use rampart_engine::{Level, Venue};

use super::frame::{Decoded, Fail, FrameKind, FrameParser, TradeRow, TRADES_MAX};
use super::values::{fnv1a, i64_of, push_trade};

/// The engine's decoders (`engine::feed`), their borrowed result copied into [`Decoded`].
pub struct Engine {
    binance: BinanceDecoder,
    bybit: bybit::BybitDecoder,
    okx: okx::OkxDecoder,
    bitget: bitget::BitgetDecoder,
}

impl Engine {
    /// Decoders that accept the deepest frame of each venue.
    pub fn new() -> Engine {
        Engine {
            binance: BinanceDecoder::new(TimeUnit::Millisecond, binance::SNAPSHOT_LEVELS_PER_SIDE_MAX),
            bybit: bybit::BybitDecoder::new(bybit::BOOK_LEVELS_PER_SIDE_MAX, bybit::TRADES_PER_MESSAGE_MAX),
            okx: okx::OkxDecoder::new(okx::BOOKS_LEVELS_PER_SIDE_MAX, TRADES_MAX),
            bitget: bitget::BitgetDecoder::new(bitget::BOOKS_LEVELS_PER_SIDE_MAX, bitget::TRADES_PER_PUSH_MAX),
        }
    }
}

impl Default for Engine {
    fn default() -> Engine {
        Engine::new()
    }
}

impl FrameParser for Engine {
    fn name(&self) -> &'static str {
        "engine (hand-rolled)"
    }

    fn supports(&self, venue: Venue, kind: FrameKind) -> bool {
        // Bitget's trade message has no push time (the outer `ts` of `Decoded`).
        venue != Venue::Bitget || kind != FrameKind::Trade
    }

    fn parse(&mut self, venue: Venue, _kind: FrameKind, frame: &[u8], out: &mut Decoded) -> Result<(), Fail> {
        out.clear();
        match venue {
            Venue::Binance => {
                let decoded = self.binance.decode(frame).map_err(|_| Fail("engine refused the frame"))?;
                match decoded.message {
                    binance::Message::Depth(d) => {
                        out.symbol_hash = fnv1a(d.symbol);
                        out.ts_ms = d.event_ms;
                        out.ids = [Some(i64_of(d.first_update_id)?), Some(i64_of(d.final_update_id)?)];
                        out.bids.extend_from_slice(d.bids);
                        out.asks.extend_from_slice(d.asks);
                    }
                    binance::Message::Snapshot(s) => {
                        out.ids = [Some(i64_of(s.last_update_id)?), None];
                        out.bids.extend_from_slice(s.bids);
                        out.asks.extend_from_slice(s.asks);
                    }
                    binance::Message::Trade(t) => {
                        out.symbol_hash = fnv1a(t.symbol);
                        out.ts_ms = t.event_ms;
                        let row = TradeRow {
                            id: t.trade_id,
                            ts_ms: t.trade_ms,
                            price: t.price,
                            qty: t.qty,
                            taker_sell: t.taker_sell(),
                            seq: None,
                        };
                        push_trade(out, row)?;
                    }
                    _ => return Err(Fail("not a book or trade frame")),
                }
            }
            Venue::Bybit => match self.bybit.decode(frame).map_err(|_| Fail("engine refused the frame"))? {
                bybit::Message::Book(b) => {
                    out.symbol_hash = fnv1a(b.symbol);
                    out.ts_ms = b.ts_ms;
                    out.ids = [Some(i64_of(b.update_id)?), b.seq.map(i64_of).transpose()?];
                    out.bids.extend_from_slice(b.bids);
                    out.asks.extend_from_slice(b.asks);
                }
                bybit::Message::Trades(ts) => {
                    out.ts_ms = ts.ts_ms;
                    for t in ts.iter() {
                        out.symbol_hash = fnv1a(t.symbol);
                        let row = TradeRow {
                            id: fnv1a(t.trade_id),
                            ts_ms: t.trade_ms,
                            price: t.price,
                            qty: t.qty,
                            taker_sell: t.taker_sell,
                            seq: t.seq.map(i64_of).transpose()?,
                        };
                        push_trade(out, row)?;
                    }
                }
                _ => return Err(Fail("not a book or trade frame")),
            },
            Venue::Okx => match self.okx.decode(frame).map_err(|_| Fail("engine refused the frame"))? {
                okx::Message::Book(b) => {
                    out.symbol_hash = fnv1a(b.inst_id);
                    out.ts_ms = b.ts_ms;
                    out.ids = [b.seq_id, b.prev_seq_id];
                    out.bids.extend(b.bids.iter().map(|l| Level { price: l.price, qty: l.qty }));
                    out.asks.extend(b.asks.iter().map(|l| Level { price: l.price, qty: l.qty }));
                }
                okx::Message::Trades { inst_id, trades, .. } => {
                    out.symbol_hash = fnv1a(inst_id);
                    for t in trades {
                        let row = TradeRow {
                            id: t.trade_id,
                            ts_ms: t.ts_ms,
                            price: t.price,
                            qty: t.qty,
                            taker_sell: t.taker_sell,
                            seq: t.seq_id,
                        };
                        push_trade(out, row)?;
                    }
                }
                _ => return Err(Fail("not a book or trade frame")),
            },
            Venue::Bitget => match self.bitget.decode(frame).map_err(|_| Fail("engine refused the frame"))? {
                bitget::Message::Book(b) => {
                    out.symbol_hash = fnv1a(b.inst_id);
                    out.ts_ms = b.push_ts_ms.unwrap_or(0);
                    out.ids = [Some(i64_of(b.seq)?), b.pseq];
                    out.bids.extend(b.bids.iter().map(|l| Level { price: l.price, qty: l.qty }));
                    out.asks.extend(b.asks.iter().map(|l| Level { price: l.price, qty: l.qty }));
                }
                _ => return Err(Fail("not a book frame")),
            },
        }
        Ok(())
    }
}
