//! Binance's open interest, polled (decisions §17: Binance has no open-interest stream): one
//! shard's Binance perpetuals asked round-robin, one every `binance_oi_poll_s / n` so each is
//! asked every `binance_oi_poll_s`, and each answer (`GET /fapi/v1/openInterest`) decoded by the
//! feed's decoder into the spot pair's units. Sans-I/O: the caller passes the time, sends the
//! [`RestJob`] it is given and hands back the body. The requests go on the venue's REST budget
//! and pause with it on a 429 or 418 (`rest`), and a shard has at most one poll out at a time:
//! while the venue is paused the polls wait instead of piling up on its budget (where they would
//! push the spot feed's snapshots back), and a turn that comes while one is out, or whose job
//! the REST queue cannot take, is skipped.

use rampart_engine::feed::perp::binance::BinancePerpDecoder;
use rampart_engine::feed::perp::PerpMessage;
use rampart_engine::BookId;

use super::perp_listing::PerpPair;
use super::protocol::PerpValues;
use super::rest::{ContractName, RestJob};

/// Least and most seconds between two polls of one perpetual (decisions §17).
pub const POLL_S_RANGE: std::ops::RangeInclusive<u64> = 1..=600;

/// One shard's Binance open-interest polls.
pub struct OiPoll {
    contracts: Vec<(BookId, PerpPair)>,
    /// Contracts delisted (their pair's perpetual only), not polled until listed again.
    parked: Vec<(BookId, PerpPair)>,
    decoder: BinancePerpDecoder,
    poll_ms: i64,
    every_ms: i64,
    next: usize,
    due_ms: i64,
    /// A poll is out (its answer not back yet).
    out: bool,
}

impl OiPoll {
    /// Polls for `contracts` (a book and its Binance perpetual), each every `poll_ms`, from `now_ms`.
    pub fn new(contracts: Vec<(BookId, PerpPair)>, poll_ms: i64, now_ms: i64) -> OiPoll {
        let decoder = BinancePerpDecoder::new(1, 1);
        let parked = Vec::new();
        let mut poll =
            OiPoll { contracts, parked, decoder, poll_ms, every_ms: poll_ms, next: 0, due_ms: now_ms, out: false };
        poll.pace();
        poll
    }

    /// Polls `book`'s perpetual `pair` too (gained after start: a listing change, allocates).
    pub fn add(&mut self, book: BookId, pair: PerpPair) {
        if !self.contracts.iter().chain(&self.parked).any(|(b, _)| *b == book) {
            self.contracts.push((book, pair));
            self.pace();
        }
    }

    /// Stops polling `book`'s perpetual (`park`: delisted) or polls it again (listed again).
    pub fn park(&mut self, book: BookId, park: bool) {
        let (from, to) = match park {
            true => (&mut self.contracts, &mut self.parked),
            false => (&mut self.parked, &mut self.contracts),
        };
        if let Some(k) = from.iter().position(|(b, _)| *b == book) {
            to.push(from.remove(k));
            self.pace();
        }
    }

    /// Each contract asked every `poll_ms`: one turn every `poll_ms / n`.
    fn pace(&mut self) {
        self.every_ms = (self.poll_ms / self.contracts.len().max(1) as i64).max(1);
        if self.next >= self.contracts.len() {
            self.next = 0;
        }
    }

    /// The job due at `now_ms`, if one is: the next contract in turn, unless a poll is out (the
    /// turn passes). The caller sends it, or says [`OiPoll::not_sent`].
    pub fn due(&mut self, now_ms: i64) -> Option<RestJob> {
        if self.contracts.is_empty() || now_ms < self.due_ms {
            return None;
        }
        self.due_ms = now_ms + self.every_ms;
        if self.out {
            return None;
        }
        self.out = true;
        let (book, pair) = &self.contracts[self.next];
        self.next = (self.next + 1) % self.contracts.len();
        ContractName::new(&pair.contract).map(|contract| RestJob::PerpOi { book: *book, contract })
    }

    /// The job [`OiPoll::due`] gave could not be queued (the REST queue is full).
    pub fn not_sent(&mut self) {
        self.out = false;
    }

    /// The poll out failed (it is asked again at its next turn).
    pub fn failed(&mut self) {
        self.out = false;
    }

    /// The values an answer for `book` says: its open interest in spot base units, stamped with
    /// the venue's time; `None` for a body that does not decode or a book not polled here.
    pub fn answer(&mut self, book: BookId, body: &[u8]) -> Option<PerpValues> {
        self.out = false;
        let pair = &self.contracts.iter().chain(&self.parked).find(|(b, _)| *b == book)?.1;
        let PerpMessage::Updates(batch) = self.decoder.decode(body).ok()? else { return None };
        let u = batch.get(0)?.value;
        let oi = u.oi_base.map(|b| (pair.base_qty(b), u.oi_usd))?;
        Some(PerpValues { ts_ms: u.ts_ms, mark: None, oi: Some(oi), funding: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(contract: &str, multiplier: u32) -> PerpPair {
        PerpPair {
            symbol: contract.trim_start_matches("1000").to_owned(),
            contract: contract.to_owned(),
            multiplier,
            contract_size: 1.0,
            interval_h: None,
        }
    }

    #[test]
    fn each_contract_is_asked_in_turn_within_the_period() {
        let mut p =
            OiPoll::new(vec![(BookId(1), pair("BTCUSDT", 1)), (BookId(2), pair("1000PEPEUSDT", 1000))], 30_000, 0);
        let asked = |j: Option<RestJob>| match j {
            Some(RestJob::PerpOi { book, contract }) => (book, contract.as_str().to_owned()),
            other => panic!("{other:?}"),
        };
        assert_eq!(asked(p.due(0)), (BookId(1), "BTCUSDT".into()));
        p.failed();
        assert_eq!(p.due(14_999), None, "one every 15 s for two contracts");
        assert_eq!(asked(p.due(15_000)), (BookId(2), "1000PEPEUSDT".into()));
        p.not_sent();
        assert_eq!(asked(p.due(30_000)), (BookId(1), "BTCUSDT".into()), "every contract every 30 s");
        assert_eq!(p.due(45_000), None, "one poll out at a time: the turn passes");
        let body = br#"{"openInterest":"1","symbol":"BTCUSDT","time":1}"#;
        assert!(p.answer(BookId(1), body).is_some());
        assert_eq!(asked(p.due(60_000)), (BookId(2), "1000PEPEUSDT".into()), "the skipped contract is next");
    }

    /// A perpetual gained after start is polled in turn, the period shared again; a delisted one
    /// is not polled until it is listed again.
    #[test]
    fn gained_and_delisted_perpetuals_join_and_leave_the_turns() {
        let mut p = OiPoll::new(Vec::new(), 30_000, 0);
        assert_eq!(p.due(0), None, "nothing to poll");
        // The books asked at each 15 s turn from `from` on, `n` turns.
        let turns = |p: &mut OiPoll, from: i64, n: i64| -> Vec<u32> {
            (0..n)
                .filter_map(|k| {
                    let job = p.due(from + 15_000 * k);
                    p.failed();
                    match job {
                        Some(RestJob::PerpOi { book, .. }) => Some(book.0),
                        _ => None,
                    }
                })
                .collect()
        };
        p.add(BookId(4), pair("ETHUSDT", 1));
        p.add(BookId(4), pair("ETHUSDT", 1));
        assert_eq!(turns(&mut p, 30_000, 2), [4], "one contract: every 30 s");
        p.add(BookId(5), pair("SOLUSDT", 1));
        let mut two = turns(&mut p, 60_000, 4);
        two.sort();
        assert_eq!(two, [4, 4, 5, 5], "two contracts: one every 15 s, each every 30 s");
        p.park(BookId(5), true);
        assert_eq!(turns(&mut p, 120_000, 4), [4, 4], "the delisted one is not asked");
        p.park(BookId(5), false);
        let mut again = turns(&mut p, 180_000, 2);
        again.sort();
        assert_eq!(again, [4, 5], "listed again: asked again");
    }

    #[test]
    fn an_answer_is_open_interest_in_the_spot_pairs_units() {
        let mut p = OiPoll::new(vec![(BookId(2), pair("1000PEPEUSDT", 1000))], 30_000, 0);
        let body = br#"{"openInterest":"123.5","symbol":"1000PEPEUSDT","time":1589437530011}"#;
        let v = p.answer(BookId(2), body).expect("decoded");
        assert_eq!((v.ts_ms, v.oi, v.mark, v.funding), (1_589_437_530_011, Some((123_500.0, None)), None, None));
        assert_eq!(p.answer(BookId(3), body), None, "a book not polled here");
        assert_eq!(p.answer(BookId(2), b"{\"code\":-1121"), None, "a body that does not decode");
    }
}
