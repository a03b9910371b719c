//! A live shard's REST polls of its perpetuals (decisions §17): Binance's open interest, which
//! has no stream (`rampart_venue::perp_oi`), and OKX's funding, whose push comes only every 30
//! to 90 s (`rampart_venue::perp_funding`). Asked on the shard's loop through the REST thread;
//! their answers are taken as a venue push is (`Sink::perp_values`).

use rampart_engine::instrument::Registry;
use rampart_engine::{BookId, Venue};
use rampart_venue::perp_funding::FundingPoll;
use rampart_venue::perp_listing::PerpPair;
use rampart_venue::perp_oi::OiPoll;
use rampart_venue::rest::{RestHandle, RestReply};
use rampart_venue::session::{Count, Sink};

use super::Shard;

/// The two polls of one shard.
pub(crate) struct PerpPolls {
    oi: OiPoll,
    funding: FundingPoll,
}

impl PerpPolls {
    /// The polls of `held` (the shard's books with a perpetual and their contracts), from `now_ms`,
    /// each Binance perpetual's OI every `oi_ms` and OKX's funding every `funding_ms`.
    pub(crate) fn new(
        held: &[(BookId, PerpPair)],
        registry: &Registry,
        (oi_ms, funding_ms): (i64, i64),
        now_ms: i64,
    ) -> PerpPolls {
        let of = |venue: Venue| -> Vec<(BookId, PerpPair)> {
            held.iter().filter(|(b, _)| registry.get(*b).venue == venue).cloned().collect()
        };
        PerpPolls {
            oi: OiPoll::new(of(Venue::Binance), oi_ms, now_ms),
            funding: FundingPoll::new(of(Venue::Okx), funding_ms, now_ms),
        }
    }

    /// Sends the polls due at `now_ms`; a full REST queue skips the turn (asked at the next one).
    pub(crate) fn ask(&mut self, rest: &RestHandle, now_ms: i64) {
        if let Some(job) = self.oi.due(now_ms) {
            if rest.ask(job).is_err() {
                self.oi.not_sent();
            }
        }
        if let Some(job) = self.funding.due(now_ms) {
            if rest.ask(job).is_err() {
                self.funding.not_sent();
            }
        }
    }

    /// `book` gained its perpetual `pair` on `venue` (a listing change).
    pub(crate) fn add(&mut self, venue: Venue, book: BookId, pair: &PerpPair) {
        match venue {
            Venue::Binance => self.oi.add(book, pair.clone()),
            Venue::Okx => self.funding.add(book, pair.clone()),
            Venue::Bybit | Venue::Bitget => {}
        }
    }

    /// `book`'s perpetual was delisted (`park`) or listed again.
    pub(crate) fn park(&mut self, book: BookId, park: bool) {
        self.oi.park(book, park);
        self.funding.park(book, park);
    }

    /// Takes a poll's answer; gives back any other reply.
    pub(crate) fn take(&mut self, shard: &mut Shard, reply: RestReply) -> Option<RestReply> {
        match reply {
            RestReply::PerpOi { book, body } => match self.oi.answer(book, &body) {
                Some(values) => {
                    shard.count(Venue::Binance, Count::PerpMessage);
                    shard.perp_values(book, &values);
                }
                None => shard.count(Venue::Binance, Count::PerpDecodeError),
            },
            // Asked again at its next turn; the book's OI reads stale after three missed polls.
            RestReply::PerpOiFailed { book, error } => {
                self.oi.failed();
                tracing::debug!("open interest of {}: {error}", shard.shared.registry().get(book).symbol);
            }
            RestReply::PerpFunding { body } => {
                let Some(answered) = self.funding.answer(&body) else {
                    shard.count(Venue::Okx, Count::PerpDecodeError);
                    return None;
                };
                shard.count(Venue::Okx, Count::PerpMessage);
                if answered.dropped > 0 {
                    tracing::warn!("okx funding: {} rows past the poll's bound left out", answered.dropped);
                }
                for (book, values) in &answered.values {
                    shard.perp_values(*book, values);
                }
            }
            // Asked again at its next turn; a push or the next poll keeps the funding fresh.
            RestReply::PerpFundingFailed { error } => {
                self.funding.failed();
                tracing::debug!("okx funding: {error}");
            }
            other => return Some(other),
        }
        None
    }
}
