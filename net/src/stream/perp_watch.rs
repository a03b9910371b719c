//! What changed in one book's perpetual since a stream last looked (sans-I/O; time is an
//! argument): the liquidations its shard fed since (`liquidations` channel) and the published
//! perpetual's values (`perp` channel), `decisions.md` §17 "Streams".
//!
//! Liquidations: the [`LiqFeed`] ring holds the pair's newest [`RECENT_MAX`] as the shard takes
//! them (a cluster's api node: as its replica relays them, every 100 ms). A look reads the ring
//! after the number last handed, so each liquidation is handed once, in order, within the
//! fan-out's round. The look keeps the newest [`RECENT_MAX`] handed itself, newest first by the
//! venue's time, so a snapshot written later shows exactly what was handed before it (the events
//! a snapshot in the same batch supersedes are dropped, `super::fanout`). A reader that fell more
//! than the ring behind (or whose ring was cleared: the pair lost its perpetual) starts again from
//! what the ring holds, and its subscribers get a snapshot instead of the events lost between (no
//! gap in `seq`, as a slow client's). A book whose ring is not made yet has handed nothing.
//!
//! Perp: the values as `GET /v1/perp/{symbol}` writes them, with `symbol`; handed when a newly
//! published snapshot's text differs from the last one handed (at most once a second per pair:
//! the shard publishes once a second).

use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;

use rampart_engine::perp_book::{Completeness, LiqFilter, Liquidation, RECENT_MAX};
use rampart_state::json::Json;
use rampart_state::liq_feed::{Gap, LiqFeed};
use rampart_state::perp::PerpSnapshot;
use rampart_state::perp_json::{write_liquidation, write_perp_fields};

/// Liquidations a `liquidations` snapshot holds (as `GET /v1/liquidations` answers by default).
pub const LIQ_SNAPSHOT_MAX: usize = 50;

/// One book's perpetual as the stream last handed it.
#[derive(Debug, Default)]
pub struct PerpSeen {
    /// A look has taken the book's liquidations (what its ring held then).
    started: bool,
    /// The number of the newest liquidation handed ([`LiqFeed`]'s numbering).
    liq_seq: u64,
    /// The book's liquidations up to `liq_seq`, newest first by the venue's time (of two with the
    /// same time, the one taken later first), at most [`RECENT_MAX`].
    recent: VecDeque<Liquidation>,
    /// When the book was last looked at (a snapshot's 24-hour cut).
    looked_ms: i64,
    /// The published snapshot's time last looked at, and its `perp` data as then encoded.
    perp: Option<(i64, Rc<str>)>,
}

/// What one look found of a book's liquidations.
#[derive(Debug, PartialEq)]
pub enum LiqChange {
    /// Nothing new (or the first look: its subscribers' snapshots show it).
    Nothing,
    /// These arrived since the last look, oldest first.
    New(Vec<Liquidation>),
    /// The look lost its place in the ring: the subscribers get a snapshot.
    Restarted,
}

impl PerpSeen {
    /// The liquidations handed so far, newest first.
    pub fn recent(&self) -> impl Iterator<Item = &Liquidation> + '_ {
        self.recent.iter()
    }

    /// The `perp` data last encoded (`None`: no perpetual looked at yet).
    pub fn perp_data(&self) -> Option<Rc<str>> {
        self.perp.as_ref().map(|(_, d)| d.clone())
    }

    /// When the book was last looked at.
    pub fn looked_ms(&self) -> i64 {
        self.looked_ms
    }

    /// Looks at the book's liquidations: `snap` its published perpetual (`None`: it has none),
    /// `feed` its ring.
    pub fn look_liquidations(&mut self, snap: Option<&PerpSnapshot>, feed: Option<&LiqFeed>, now_ms: i64) -> LiqChange {
        self.looked_ms = now_ms;
        if snap.is_none() {
            return LiqChange::Nothing;
        }
        if !self.started {
            self.restart(feed);
            return LiqChange::Nothing;
        }
        let Some(feed) = feed else { return LiqChange::Nothing };
        if feed.head() == self.liq_seq {
            return LiqChange::Nothing;
        }
        let mut new = Vec::new();
        match feed.read_after(self.liq_seq, |_, l| new.push(l)) {
            Ok(last) => {
                self.liq_seq = last;
                for l in &new {
                    self.keep(*l);
                }
                LiqChange::New(new)
            }
            Err(Gap) => {
                self.restart(Some(feed));
                LiqChange::Restarted
            }
        }
    }

    /// Starts again from what `feed` holds now (nothing without one).
    fn restart(&mut self, feed: Option<&LiqFeed>) {
        self.started = true;
        self.recent.clear();
        let Some(feed) = feed else {
            self.liq_seq = 0;
            return;
        };
        // Those taken after the head read here are handed by the next look.
        let head = feed.head();
        self.recent = feed.held().into_iter().filter(|(n, _)| *n <= head).map(|(_, l)| l).collect();
        self.liq_seq = head;
    }

    /// Keeps `l` in its place by the venue's time (after every one newer, and every one of its
    /// time taken before it).
    fn keep(&mut self, l: Liquidation) {
        let at = self.recent.iter().position(|k| k.time_ms <= l.time_ms).unwrap_or(self.recent.len());
        self.recent.insert(at, l);
        self.recent.truncate(RECENT_MAX);
    }
    /// Looks at the published perpetual: its `perp` data when it changed since the last look
    /// (`None` on the first look: the subscribers' snapshots show it).
    pub fn look_perp(&mut self, snap: Option<&Arc<PerpSnapshot>>, symbol: &str) -> Option<Rc<str>> {
        let snap = snap?;
        if self.perp.as_ref().is_some_and(|(ts, _)| *ts == snap.ts_ms) {
            return None;
        }
        let data: Rc<str> = perp_data(symbol, snap).into();
        let changed = self.perp.as_ref().map(|(_, old)| **old != *data);
        self.perp = Some((snap.ts_ms, data.clone()));
        changed.filter(|c| *c).map(|_| data)
    }
}

/// A `perp` message's `data`: `{"symbol",…}` with the fields of `GET /v1/perp/{symbol}`'s `data`.
pub fn perp_data(symbol: &str, p: &PerpSnapshot) -> String {
    let mut j = Json::with_capacity(480);
    j.raw("{\"symbol\":").str(symbol).raw(",");
    write_perp_fields(&mut j, p);
    j.raw("}");
    j.finish()
}

/// A `liquidation` message's `data`: `{"symbol","liquidation":Liquidation}`.
pub fn liquidation_data(symbol: &str, l: &Liquidation) -> String {
    let mut j = Json::with_capacity(160);
    j.raw("{\"symbol\":").str(symbol).raw(",\"liquidation\":");
    write_liquidation(&mut j, l, None);
    j.raw("}");
    j.finish()
}

/// A `liquidations` snapshot's `data`: `{"symbol","completeness","liquidations":[…]}`, the
/// newest [`LIQ_SNAPSHOT_MAX`] of the last 24 h at `now_ms` worth `min_usd` or more; `items`
/// newest first, each with its pair's name when `symbol` is `*` (a venue's).
pub fn liquidations_snapshot<'a>(
    symbol: &str,
    completeness: Completeness,
    items: impl Iterator<Item = (&'a str, &'a Liquidation)>,
) -> String {
    let mut j = Json::with_capacity(96 + LIQ_SNAPSHOT_MAX * 120);
    j.raw("{\"symbol\":").str(symbol).raw(",\"completeness\":").str(completeness.as_str());
    j.raw(",\"liquidations\":[");
    for (i, (pair, l)) in items.enumerate() {
        if i > 0 {
            j.raw(",");
        }
        write_liquidation(&mut j, l, (symbol == "*").then_some(pair));
    }
    j.raw("]}");
    j.finish()
}

/// The filter of a `liquidations` snapshot.
pub fn snapshot_filter(min_usd: Option<f64>) -> LiqFilter {
    LiqFilter { side: None, min_usd: min_usd.unwrap_or(0.0), limit: LIQ_SNAPSHOT_MAX }
}

/// The newest [`LIQ_SNAPSHOT_MAX`] of several books' (each `(symbol, seen)`) that pass `f` at
/// `now_ms`, newest first; ties in the order the books come.
pub fn venue_newest<'a>(
    books: impl Iterator<Item = (&'a str, &'a PerpSeen)>,
    f: LiqFilter,
    now_ms: i64,
) -> Vec<(&'a str, &'a Liquidation)> {
    let mut all: Vec<(&str, &Liquidation)> =
        books.flat_map(|(s, seen)| f.apply(now_ms, seen.recent()).map(move |l| (s, l))).collect();
    all.sort_by_key(|(_, l)| std::cmp::Reverse(l.time_ms));
    all.truncate(f.limit);
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use rampart_engine::perp_window::PositionSide;

    fn liq(usd: f64, time_ms: i64) -> Liquidation {
        Liquidation { side: PositionSide::Long, price: 10.0, qty: usd / 10.0, time_ms }
    }

    fn snap(ts_ms: i64) -> PerpSnapshot {
        PerpSnapshot {
            contract: "BTCUSDT".into(),
            multiplier: 1,
            completeness: Completeness::All,
            mark: Some(100.0),
            oi: None,
            funding: None,
            last: None,
            ts_ms,
        }
    }

    fn usds(seen: &PerpSeen) -> Vec<f64> {
        seen.recent().map(|l| l.usd()).collect()
    }

    #[test]
    fn each_liquidation_is_handed_once_after_what_the_ring_held_at_the_start() {
        let feed = LiqFeed::new();
        feed.push(&liq(1.0, 1));
        feed.push(&liq(2.0, 2));
        let s = snap(1_000);
        let mut seen = PerpSeen::default();
        assert_eq!(seen.look_liquidations(Some(&s), Some(&feed), 10), LiqChange::Nothing);
        assert_eq!(usds(&seen), [2.0, 1.0], "what the ring held");
        assert_eq!(seen.look_liquidations(Some(&s), Some(&feed), 20), LiqChange::Nothing);
        feed.push(&liq(3.0, 3));
        feed.push(&liq(4.0, 4));
        assert_eq!(seen.look_liquidations(Some(&s), Some(&feed), 30), LiqChange::New(vec![liq(3.0, 3), liq(4.0, 4)]));
        assert_eq!(usds(&seen), [4.0, 3.0, 2.0, 1.0]);
        // An OKX push out of order: handed as it came, kept in its place by the venue's time.
        feed.push(&liq(2.5, 2));
        assert_eq!(seen.look_liquidations(Some(&s), Some(&feed), 35), LiqChange::New(vec![liq(2.5, 2)]));
        assert_eq!(usds(&seen), [4.0, 3.0, 2.5, 2.0, 1.0]);
        assert_eq!(seen.look_liquidations(None, Some(&feed), 40), LiqChange::Nothing, "no perpetual");
    }

    #[test]
    fn a_reader_behind_the_ring_or_whose_ring_was_cleared_starts_again_from_it() {
        let feed = LiqFeed::new();
        let s = snap(1_000);
        let mut seen = PerpSeen::default();
        seen.look_liquidations(Some(&s), Some(&feed), 10);
        let len = rampart_state::liq_feed::LIQ_FEED_LEN as i64;
        for k in 1..=len + 5 {
            feed.push(&liq(k as f64, k));
        }
        assert_eq!(seen.look_liquidations(Some(&s), Some(&feed), 20), LiqChange::Restarted);
        assert_eq!(seen.recent().count(), RECENT_MAX);
        assert_eq!(seen.recent().next().map(|l| l.usd()), Some((len + 5) as f64));
        feed.push(&liq(1e6, len + 6));
        assert_eq!(seen.look_liquidations(Some(&s), Some(&feed), 30), LiqChange::New(vec![liq(1e6, len + 6)]));
        feed.clear();
        assert_eq!(seen.look_liquidations(Some(&s), Some(&feed), 40), LiqChange::Restarted);
        assert_eq!(seen.recent().count(), 0, "nothing from before the clearing");
        feed.push(&liq(5.0, len + 7));
        assert_eq!(seen.look_liquidations(Some(&s), Some(&feed), 50), LiqChange::New(vec![liq(5.0, len + 7)]));
    }

    #[test]
    fn without_a_ring_nothing_is_handed() {
        let mut seen = PerpSeen::default();
        assert_eq!(seen.look_liquidations(Some(&snap(1_000)), None, 10), LiqChange::Nothing);
        assert_eq!(seen.look_liquidations(Some(&snap(2_000)), None, 20), LiqChange::Nothing);
        assert_eq!(seen.recent().count(), 0);
    }

    #[test]
    fn perp_is_handed_when_its_text_changes() {
        let mut seen = PerpSeen::default();
        let a = Arc::new(snap(1_000));
        assert_eq!(seen.look_perp(Some(&a), "BTCUSDT"), None, "the first look: the snapshot shows it");
        let data = seen.perp_data().expect("encoded");
        assert!(data.starts_with("{\"symbol\":\"BTCUSDT\",\"contract\":\"BTCUSDT\""), "{data}");
        let same = Arc::new(snap(2_000));
        assert_eq!(seen.look_perp(Some(&same), "BTCUSDT"), None, "nothing changed");
        let moved = Arc::new(PerpSnapshot { mark: Some(101.0), ..snap(3_000) });
        let sent = seen.look_perp(Some(&moved), "BTCUSDT").expect("the mark moved");
        assert!(sent.contains("\"markPrice\":101"), "{sent}");
        assert_eq!(seen.look_perp(Some(&moved), "BTCUSDT"), None, "the same snapshot");
    }

    #[test]
    fn snapshots_hold_the_newest_fifty_passing_min_usd() {
        let mut a = PerpSeen::default();
        let mut b = PerpSeen::default();
        let (feed_a, feed_b) = (LiqFeed::new(), LiqFeed::new());
        for k in (0..60).rev() {
            feed_a.push(&liq(100.0 * k as f64, 1_000 - 2 * k));
        }
        feed_b.push(&liq(5.0, 10));
        feed_b.push(&liq(9e6, 999));
        a.look_liquidations(Some(&snap(1)), Some(&feed_a), 5);
        b.look_liquidations(Some(&snap(1)), Some(&feed_b), 5);
        let got = venue_newest([("AUSDT", &a), ("BUSDT", &b)].into_iter(), snapshot_filter(None), 5);
        assert_eq!(got.len(), LIQ_SNAPSHOT_MAX);
        assert_eq!((got[0].0, got[1].0, got[1].1.usd()), ("AUSDT", "BUSDT", 9e6), "newest first across books");
        let big = venue_newest([("AUSDT", &a), ("BUSDT", &b)].into_iter(), snapshot_filter(Some(5_000.0)), 5);
        assert_eq!(big.len(), 11);
        let text = liquidations_snapshot("*", Completeness::All, big.iter().map(|(s, l)| (*s, *l)));
        assert!(
            text.starts_with("{\"symbol\":\"*\",\"completeness\":\"all\",\"liquidations\":[{\"symbol\":\"BUSDT\""),
            "{text}"
        );
        let one = liquidations_snapshot("AUSDT", Completeness::All, a.recent().take(1).map(|l| ("AUSDT", l)));
        assert!(one.contains("\"liquidations\":[{\"side\":\"long\""), "{one}");
        let data = liquidation_data("AUSDT", &liq(1e6, 7));
        assert!(data.starts_with("{\"symbol\":\"AUSDT\",\"liquidation\":{\"side\":\"long\""), "{data}");
    }
}
