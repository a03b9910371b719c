//! OKX's funding, polled beside its push (decisions §17 "Freshness"): OKX pushes `funding-rate`
//! only every 30 to 90 s, so with §17's 60 s a pair's funding would read `stale` between pushes
//! for part of every minute (about one part in eight at evenly spread pushes). A shard asks
//! `GET /api/v5/public/funding-rate?instId=ANY` (every swap in one answer) every
//! `okx_funding_poll_s` (default [`POLL_MS`]) and
//! takes the rows of its own contracts, decoded by the feed's decoder into the pair's units as
//! a push is. Sans-I/O: the caller passes the time, sends the [`RestJob`] it is given and hands
//! back the body. The request goes on the venue's REST budget (`rest`) and a shard has at most
//! one poll out at a time (a turn that comes while one is out, or whose job the REST queue
//! cannot take, is skipped).
//!
//! Choices where §17 is silent, and why:
//! - Every [`POLL_MS`] by default (half of §17's 60 s): a poll that fails keeps the value fresh
//!   as long as the next one or a push comes within the minute. A period of 60 s or more lets
//!   the funding read stale between pushes again.
//! - A row whose `ts` is not after the last row taken for that contract is left out: a venue
//!   that answers with its old values (the simulator's `perp_stale`) does not make them fresh.
//! - Bound: [`ROWS_MAX`] rows an answer (OKX lists about 270 USDT swaps); rows past it are
//!   counted and left out, as a push's items past the decoder's bound.

use std::collections::HashMap;

use rampart_engine::feed::perp::okx::OkxPerpDecoder;
use rampart_engine::feed::perp::PerpMessage;
use rampart_engine::{BookId, Venue};

use super::perp_listing::PerpPair;
use super::perp_session::okx_funding_values;
use super::protocol::PerpValues;
use super::rest::RestJob;

/// How often a shard asks for OKX's funding by default (half of §17's 60 s of freshness).
pub const POLL_MS: i64 = 30_000;

/// Rows of one answer read at most (every OKX swap); the rest are counted as dropped.
pub const ROWS_MAX: usize = 1_024;

/// One shard's OKX funding polls.
pub struct FundingPoll {
    /// This shard's OKX perpetuals by contract name.
    contracts: HashMap<String, Contract>,
    decoder: OkxPerpDecoder,
    poll_ms: i64,
    due_ms: i64,
    /// A poll is out (its answer not back yet).
    out: bool,
}

/// One contract polled.
struct Contract {
    book: BookId,
    pair: PerpPair,
    /// The newest row's time taken.
    newest_ms: i64,
    /// Delisted (its pair's perpetual only): its rows are left out until it is listed again.
    parked: bool,
}

/// What one answer gave: each book's funding, and the rows left out past [`ROWS_MAX`].
#[derive(Debug, Default, PartialEq)]
pub struct Answered {
    /// Each of this shard's contracts the answer carried a newer row of.
    pub values: Vec<(BookId, PerpValues)>,
    /// Rows past [`ROWS_MAX`].
    pub dropped: usize,
}

impl FundingPoll {
    /// Polls for `contracts` (a book and its OKX perpetual) every `poll_ms`, the first at `now_ms`.
    pub fn new(contracts: Vec<(BookId, PerpPair)>, poll_ms: i64, now_ms: i64) -> FundingPoll {
        let decoder = OkxPerpDecoder::new(1, ROWS_MAX);
        let mut poll = FundingPoll { contracts: HashMap::new(), decoder, poll_ms, due_ms: now_ms, out: false };
        for (book, pair) in contracts {
            poll.add(book, pair);
        }
        poll
    }

    /// Takes `book`'s perpetual `pair` too (gained after start: a listing change, allocates).
    pub fn add(&mut self, book: BookId, pair: PerpPair) {
        let contract = Contract { book, pair: pair.clone(), newest_ms: i64::MIN, parked: false };
        self.contracts.entry(pair.contract).or_insert(contract);
    }

    /// Stops taking `book`'s funding (`park`: its perpetual delisted) or takes it again.
    pub fn park(&mut self, book: BookId, park: bool) {
        self.contracts.values_mut().filter(|c| c.book == book).for_each(|c| c.parked = park);
    }

    /// The job due at `now_ms`, if one is (none while a poll is out or the shard has no OKX
    /// perpetual). The caller sends it, or says [`FundingPoll::not_sent`].
    pub fn due(&mut self, now_ms: i64) -> Option<RestJob> {
        if self.contracts.is_empty() || now_ms < self.due_ms || self.out {
            return None;
        }
        self.due_ms = now_ms + self.poll_ms;
        self.out = true;
        Some(RestJob::PerpFunding { venue: Venue::Okx })
    }

    /// The job [`FundingPoll::due`] gave could not be queued (the REST queue is full).
    pub fn not_sent(&mut self) {
        self.out = false;
    }

    /// The poll out failed (asked again at its next turn).
    pub fn failed(&mut self) {
        self.out = false;
    }

    /// The funding an answer gives this shard's contracts, in their pairs' units (percent per
    /// interval); `None` for a body that does not decode or the venue's refusal.
    pub fn answer(&mut self, body: &[u8]) -> Option<Answered> {
        self.out = false;
        let Ok(PerpMessage::Updates(batch)) = self.decoder.decode_funding_rest(body) else { return None };
        let mut values = Vec::new();
        for row in batch.iter() {
            let name = std::str::from_utf8(row.symbol).ok();
            let Some(c) = name.and_then(|name| self.contracts.get_mut(name)).filter(|c| !c.parked) else {
                continue;
            };
            if row.value.ts_ms <= c.newest_ms {
                continue;
            }
            c.newest_ms = row.value.ts_ms;
            let v = okx_funding_values(&c.pair, &row.value);
            if v.funding.is_some() {
                values.push((c.book, v));
            }
        }
        Some(Answered { values, dropped: batch.dropped() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(contract: &str, interval_h: Option<u32>) -> PerpPair {
        PerpPair {
            symbol: contract.replace("-USDT-SWAP", "USDT"),
            contract: contract.to_owned(),
            multiplier: 1,
            contract_size: 0.01,
            interval_h,
        }
    }

    fn row(contract: &str, rate: &str, ts: i64) -> String {
        format!(
            r#"{{"fundingRate":"{rate}","fundingTime":"1703088000000","instId":"{contract}","nextFundingTime":"1703116800000","ts":"{ts}"}}"#
        )
    }

    fn body(rows: &[String]) -> Vec<u8> {
        format!(r#"{{"code":"0","data":[{}],"msg":""}}"#, rows.join(",")).into_bytes()
    }

    #[test]
    fn one_poll_every_thirty_seconds_and_one_out_at_a_time() {
        let mut p = FundingPoll::new(vec![(BookId(3), pair("BTC-USDT-SWAP", None))], POLL_MS, 1_000);
        assert_eq!(p.due(999), None);
        assert!(matches!(p.due(1_000), Some(RestJob::PerpFunding { venue: Venue::Okx })));
        assert_eq!(p.due(1_000 + POLL_MS), None, "the one out is not answered: the turn passes");
        p.failed();
        assert!(p.due(1_000 + 2 * POLL_MS).is_some());
        p.not_sent();
        assert!(p.due(1_000 + 2 * POLL_MS + 1).is_none(), "not before the next turn");
        assert!(p.due(1_000 + 3 * POLL_MS).is_some());
        assert_eq!(FundingPoll::new(Vec::new(), POLL_MS, 0).due(0), None, "no OKX perpetual on this shard");
    }

    #[test]
    fn an_answer_gives_this_shards_contracts_in_percent_and_newer_rows_only() {
        let mut p = FundingPoll::new(vec![(BookId(3), pair("BTC-USDT-SWAP", None))], POLL_MS, 0);
        p.add(BookId(4), pair("ETH-USDT-SWAP", Some(4)));
        let first = body(&[
            row("BTC-USDT-SWAP", "0.0001", 10),
            row("SOL-USDT-SWAP", "0.0002", 10),
            row("ETH-USDT-SWAP", "-0.0003", 10),
        ]);
        let mut got = p.answer(&first).expect("decodes").values;
        got.sort_by_key(|(b, _)| b.0);
        let funding: Vec<_> = got.iter().map(|(b, v)| (b.0, v.funding)).collect();
        assert_eq!(funding.len(), 2, "another shard's contract is left out: {funding:?}");
        assert_eq!(funding[0].0, 3);
        let (rate, hours, next) = funding[0].1.expect("funding");
        assert!((rate - 0.01).abs() < 1e-12 && (hours, next) == (8, 1_703_088_000_000), "{funding:?}");
        assert_eq!(funding[1].1.map(|f| f.1), Some(8), "the answer's interval before the listing's");
        assert_eq!(got[0].1.ts_ms, 10, "the row's time");
        // The same rows again (a venue answering with old values): nothing new.
        assert_eq!(p.answer(&first), Some(Answered::default()));
        let later = body(&[row("BTC-USDT-SWAP", "0.0002", 11)]);
        let values = |p: &mut FundingPoll, b: &[u8]| p.answer(b).map_or(0, |a| a.values.len());
        assert_eq!(values(&mut p, &later), 1);
        p.park(BookId(3), true);
        assert_eq!(values(&mut p, &body(&[row("BTC-USDT-SWAP", "0.0002", 12)])), 0, "delisted");
        p.park(BookId(3), false);
        assert_eq!(values(&mut p, &body(&[row("BTC-USDT-SWAP", "0.0002", 13)])), 1, "listed again");
    }

    #[test]
    fn a_refusal_or_a_malformed_body_gives_nothing() {
        let mut p = FundingPoll::new(vec![(BookId(3), pair("BTC-USDT-SWAP", None))], POLL_MS, 0);
        let refused = br#"{"code":"50011","data":[],"msg":"Too Many Requests"}"#;
        for bad in [&refused[..], b"", b"{\"code\":\"0\"", b"<html>", b"{\"code\":\"0\",\"data\":[{\"instId\":1}]}"] {
            p.out = true;
            assert_eq!(p.answer(bad), None, "{}", String::from_utf8_lossy(bad));
            assert!(!p.out, "the poll is answered");
        }
    }
}
