//! A market node's books as the api nodes see them. The market side (`publish`) reads what its
//! shards publish in `Shared` and sends, every [`PUBLISH_PERIOD`], what changed (prices and
//! trade ranges, level sets, wall scans, metrics with their derivatives part, listing status, the
//! pair's perpetual of `decisions.md` §17) on
//! `rampart.snapshots.<partition>`, and every [`FULL_PERIOD`] everything. The api side
//! (`Replica`) applies those messages to its own `Shared`, so its front, board and rankings read
//! exactly as they do over local shards.
//!
//! Core NATS, not a stream: a lost message is repaired by the next change or the next full
//! snapshot, and a reader wants the newest state, not a backlog. Bounds: a message carries at
//! most [`SNAPSHOT_BYTES_MAX`] (a full snapshot is cut into several; the last is marked);
//! an api node counts a partition complete after one whole full snapshot, and its `/healthz`
//! says stale once a partition's messages stop for [`super::node::STALE_MS`] (reads go on
//! answering the last state).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_lite::StreamExt;
use rampart_engine::{BookId, Registry};

use super::node::NodeHealth;
use super::wire::{self, BookName, BookUpdate, LiqRelay, Out, PricePart, SnapshotHead};
use super::BusError;
use rampart_state::clock::SharedClock;
use rampart_state::liq_feed::{LiqFeed, LIQ_FEED_LEN};
use rampart_state::partition::Partition;
use rampart_state::shutdown::StoppableThread;
use rampart_state::{BookSlot, Shared};

/// How often a market node sends what changed.
pub const PUBLISH_PERIOD: Duration = Duration::from_millis(100);
/// How often it sends everything.
pub const FULL_PERIOD: Duration = Duration::from_secs(5);
/// Bytes of one message at most (NATS's default payload limit is 1 MiB).
pub const SNAPSHOT_BYTES_MAX: usize = 256 * 1024;

/// The subject of a partition's snapshots.
pub fn subject(partition: u16) -> String {
    format!("rampart.snapshots.{partition}")
}

/// Connects a core NATS client to `url` (5 s at most), named for the server's monitoring.
pub async fn connect(url: &str, name: &str) -> Result<async_nats::Client, BusError> {
    async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(Duration::from_secs(5))
        .connect(url)
        .await
        .map_err(|e| BusError::new("connecting", e))
}

/// Connects, trying again every 500 ms until it succeeds or `stop` is set.
pub async fn connect_until(url: &str, name: &str, stop: &AtomicBool) -> Option<async_nats::Client> {
    let mut logged = false;
    while !stop.load(Ordering::Acquire) {
        match connect(url, name).await {
            Ok(c) => return Some(c),
            Err(e) if !logged => {
                tracing::warn!("{name}: {e}; trying again every 500 ms");
                logged = true;
            }
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

/// What was last sent of one book.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Sent {
    price: Option<PricePart>,
    levels_ms: i64,
    densities_ms: i64,
    metrics_ms: i64,
    /// The perpetual's publication time (`None`: none published).
    perp_ms: Option<i64>,
    /// The number of the newest liquidation of the pair's feed sent ([`LiqRelay`]).
    liq_head: u64,
}

/// The market side: a thread publishing the node's books; stopped on drop.
pub struct SnapshotPublisher {
    _thread: StoppableThread,
}

impl SnapshotPublisher {
    /// Starts publishing the books of `partition` that `shared` holds.
    pub fn start(
        shared: Arc<Shared>,
        partition: Partition,
        url: String,
        clock: SharedClock,
        health: Arc<NodeHealth>,
    ) -> std::io::Result<SnapshotPublisher> {
        let thread = super::spawn_async("snapshots", move |stop| async move {
            publish(shared, partition, &url, clock, health, &stop).await;
        })?;
        Ok(SnapshotPublisher { _thread: thread })
    }
}

async fn publish(
    shared: Arc<Shared>,
    partition: Partition,
    url: &str,
    clock: SharedClock,
    health: Arc<NodeHealth>,
    stop: &AtomicBool,
) {
    let Some(client) = connect_until(url, "rampart-market-snapshots", stop).await else { return };
    let origin = origin();
    let (mut owned, mut known) = (Vec::new(), 0);
    let mut sent = Vec::new();
    let mut tick = tokio::time::interval(PUBLISH_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_full = None::<std::time::Instant>;
    let subject = subject(partition.index);
    while !stop.load(Ordering::Acquire) {
        tick.tick().await;
        // Books listed since the last round (the venue's listing watch grows the registry) are
        // published from now on, in full at their first round.
        let registry = shared.registry();
        if registry.len() > known {
            owned.extend(
                registry
                    .ids()
                    .skip(known)
                    .filter(|b| partition.owns(&registry.get(*b).symbol))
                    .map(|b| (b, BookName { venue: registry.get(b).venue, symbol: registry.get(b).symbol.clone() })),
            );
            sent.resize(owned.len(), Sent::default());
            known = registry.len();
        }
        let connected = client.connection_state() == async_nats::connection::State::Connected;
        health.snapshots_connected.store(connected, Ordering::Release);
        // A node that cannot renew its partition's lease stops publishing before a standby may
        // claim it (`owner`): api nodes never hear two owners of one partition.
        if health.ownership.as_ref().is_some_and(|o| !o.is_owner(clock.now_ms())) {
            last_full = None;
            continue;
        }
        let full = last_full.is_none_or(|t| t.elapsed() >= FULL_PERIOD);
        let head = SnapshotHead {
            partition: partition.index,
            partitions: partition.count,
            full,
            last: false,
            ready: shared.ready(),
            sent_ms: clock.now_ms(),
        };
        let messages = round(&shared, &owned, &mut sent, head, origin);
        for m in messages {
            if let Err(e) = client.publish(subject.clone(), m.into()).await {
                tracing::debug!("snapshots: publish: {e}");
            }
        }
        if full {
            last_full = Some(std::time::Instant::now());
        }
    }
}

/// This publisher's name for its feeds' numbering ([`LiqRelay::origin`]): drawn at random at
/// each start (the standard library's per-process hash keys), never 0 (a replica's feed that
/// relays nothing yet).
fn origin() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new().build_hasher().finish() | 1
}

/// One round's messages: each owned book's changed parts (every part when `head.full`), cut at
/// [`SNAPSHOT_BYTES_MAX`]; at least one message (the heartbeat that keeps api nodes current).
fn round(
    shared: &Shared,
    owned: &[(BookId, BookName)],
    sent: &mut [Sent],
    head: SnapshotHead,
    origin: u64,
) -> Vec<Vec<u8>> {
    let start = |out: &mut Out| wire::snapshot_head(out, &head);
    let mut messages = Vec::new();
    let mut out = Out::new(4096);
    start(&mut out);
    let empty_len = out.len();
    for ((book, name), last) in owned.iter().zip(sent.iter_mut()) {
        let Some(slot) = shared.slots.get(book.index()) else { continue };
        let (update, now) = changes(slot, last, head.full, origin);
        *last = now;
        let nothing = update.price.is_none() && update.levels.is_none() && update.densities.is_none();
        if nothing && update.metrics.is_none() && update.perp.is_none() && update.liquidations.is_none() {
            continue;
        }
        wire::book_update(&mut out, name, &update);
        if out.len() >= SNAPSHOT_BYTES_MAX {
            messages.push(std::mem::replace(&mut out, Out::new(4096)).0);
            start(&mut out);
        }
    }
    if out.len() > empty_len || messages.is_empty() {
        messages.push(out.0);
    }
    if head.full {
        // Marks the last message: the flags byte follows the version and two u16.
        if let Some(m) = messages.last_mut() {
            m[5] |= 2;
        }
    }
    messages
}

/// What of `slot` differs from `last` (everything when `full`), and the new `last`.
fn changes(slot: &BookSlot, last: &Sent, full: bool, origin: u64) -> (BookUpdate, Sent) {
    let price = PricePart {
        price: slot.price.load(Ordering::Acquire),
        ts_ms: slot.price_ts.load(Ordering::Acquire),
        trade_high: slot.trade_high.load(Ordering::Acquire),
        trade_low: slot.trade_low.load(Ordering::Acquire),
        status: slot.status.load(Ordering::Acquire),
    };
    let (levels, densities, metrics) = (slot.levels.load_full(), slot.densities.load_full(), slot.metrics.load_full());
    let perp = slot.perp.load_full();
    let (liquidations, liq_head) = match slot.liquidations.get() {
        Some(feed) => relayed(feed, if full { 0 } else { last.liq_head }, full, origin),
        None => (None, last.liq_head),
    };
    let now = Sent {
        price: Some(price),
        levels_ms: levels.computed_ms,
        densities_ms: densities.ts_ms,
        metrics_ms: metrics.ts_ms,
        perp_ms: perp.as_ref().map(|p| p.ts_ms),
        liq_head,
    };
    let update = BookUpdate {
        price: (full || last.price != now.price).then_some(price),
        levels: (full || last.levels_ms != now.levels_ms).then(|| (*levels).clone()),
        densities: (full || last.densities_ms != now.densities_ms).then(|| (*densities).clone()),
        metrics: (full || last.metrics_ms != now.metrics_ms).then(|| (*metrics).clone()),
        perp: (full || last.perp_ms != now.perp_ms).then(|| perp.map(|p| (*p).clone())),
        liquidations,
    };
    (update, now)
}

/// The liquidations `feed` took after number `after` (the newest [`LIQ_FEED_LEN`] at most: a
/// full snapshot's is the whole ring), and the head sent; `None` when none is new (unless `full`:
/// the replica learns the origin). A number the ring does not hold (overwritten while read, the
/// shard taking more than the ring holds meanwhile, or never written: the ring was cleared) is
/// left out; the replica skips it as this node's readers do.
fn relayed(feed: &LiqFeed, after: u64, full: bool, origin: u64) -> (Option<LiqRelay>, u64) {
    let head = feed.head();
    if head == after && !full {
        return (None, after);
    }
    let from = after.max(head.saturating_sub(LIQ_FEED_LEN as u64)) + 1;
    let entries = (from..=head).filter_map(|n| Some((n, feed.get(n).ok()?))).collect();
    (Some(LiqRelay { origin, head, entries }), head)
}

/// The api side: a thread applying every partition's snapshots to this node's `Shared`;
/// stopped on drop.
pub struct Replica {
    _thread: StoppableThread,
}

impl Replica {
    /// Starts applying the snapshots of `health.partition.count` partitions to `shared` (made
    /// by [`Shared::replica`]).
    pub fn start(
        shared: Arc<Shared>,
        url: String,
        clock: SharedClock,
        health: Arc<NodeHealth>,
    ) -> std::io::Result<Replica> {
        let thread = super::spawn_async("snapshots", move |stop| async move {
            replicate(shared, &url, clock, health, &stop).await;
        })?;
        Ok(Replica { _thread: thread })
    }
}

async fn replicate(shared: Arc<Shared>, url: &str, clock: SharedClock, health: Arc<NodeHealth>, stop: &AtomicBool) {
    let Some(client) = connect_until(url, "rampart-api-snapshots", stop).await else { return };
    let mut subscription = match client.subscribe("rampart.snapshots.*").await {
        Ok(s) => s,
        Err(e) => return tracing::error!("snapshots: subscribing: {e}"),
    };
    let mut check = tokio::time::interval(Duration::from_millis(100));
    while !stop.load(Ordering::Acquire) {
        tokio::select! {
            // The registry of the moment: an api node's listing watch adds books as venues list them.
            m = subscription.next() => match m {
                Some(m) => apply_message(&shared, &shared.registry(), &health, &m.payload, clock.now_ms()),
                None => return tracing::error!("snapshots: subscription ended"),
            },
            _ = check.tick() => {
                let connected = client.connection_state() == async_nats::connection::State::Connected;
                health.snapshots_connected.store(connected, Ordering::Release);
            }
        }
    }
}

/// Applies one snapshot message; a malformed one, or one of another cluster shape, is counted
/// and dropped whole.
pub fn apply_message(shared: &Shared, registry: &Registry, health: &NodeHealth, payload: &[u8], now_ms: i64) {
    let (head, books) = match wire::read_snapshot(payload) {
        Ok(m) => m,
        Err(e) => {
            if let Some(p) = health.partitions.first() {
                p.refused.fetch_add(1, Ordering::Relaxed);
            }
            return tracing::warn!("snapshots: dropped a malformed message: {e}");
        }
    };
    let Some(seen) =
        health.partitions.get(head.partition as usize).filter(|_| head.partitions == health.partition.count)
    else {
        if let Some(p) = health.partitions.first() {
            p.refused.fetch_add(1, Ordering::Relaxed);
        }
        return tracing::warn!(
            "snapshots: dropped a message of partition {}/{}: this node expects {} partitions",
            head.partition,
            head.partitions,
            health.partition.count
        );
    };
    let mut densities_moved = false;
    for (name, update) in books {
        let Some(book) = registry.find(name.venue, &name.symbol) else { continue };
        let Some(slot) = shared.slots.get(book.index()) else { continue };
        densities_moved |= apply(slot, update, head.full);
    }
    if densities_moved {
        shared.densities_generation.fetch_add(1, Ordering::Release);
    }
    seen.last_ms.store(now_ms, Ordering::Release);
    seen.messages.fetch_add(1, Ordering::Relaxed);
    if head.full && head.last && head.ready {
        seen.complete.store(true, Ordering::Release);
        if let Some(stats) = shared.stats.get(head.partition as usize) {
            stats.ready.store(true, Ordering::Release);
        }
    }
}

/// Writes one book's update into its slot; true when its densities or status changed.
fn apply(slot: &BookSlot, u: BookUpdate, full: bool) -> bool {
    let mut moved = false;
    if let Some(p) = u.price {
        slot.price.store(p.price, Ordering::Release);
        slot.price_ts.store(p.ts_ms, Ordering::Release);
        slot.trade_high.store(p.trade_high, Ordering::Release);
        slot.trade_low.store(p.trade_low, Ordering::Release);
        moved |= slot.status.swap(p.status, Ordering::AcqRel) != p.status;
    }
    if let Some(l) = u.levels {
        slot.levels.store(Arc::new(l));
    }
    if let Some(d) = u.densities {
        slot.densities.store(Arc::new(d));
        moved = true;
    }
    if let Some(m) = u.metrics {
        slot.metrics.store(Arc::new(m));
    }
    if let Some(l) = &u.liquidations {
        slot.liquidations.get_or_init(LiqFeed::new).relay(l.origin, l.head, &l.entries, full);
    }
    if let Some(p) = u.perp {
        slot.perp.store(p.map(Arc::new));
    }
    moved
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::Role;
    use rampart_engine::sim;

    fn registry() -> Arc<Registry> {
        let universe = sim::universe(7, 12);
        Arc::new(Registry::new(sim::instruments(&universe, &rampart_engine::Venue::ALL)).expect("registry"))
    }

    fn market(registry: &Arc<Registry>) -> Shared {
        Shared::new(Arc::new(arc_swap::ArcSwap::new(registry.clone())), registry.len(), 1, false)
    }

    fn owned(registry: &Registry, p: Partition) -> Vec<(BookId, BookName)> {
        registry
            .ids()
            .filter(|b| p.owns(&registry.get(*b).symbol))
            .map(|b| (b, BookName { venue: registry.get(b).venue, symbol: registry.get(b).symbol.clone() }))
            .collect()
    }

    const ORIGIN: u64 = 5;

    fn head(full: bool) -> SnapshotHead {
        SnapshotHead { partition: 1, partitions: 2, full, last: false, ready: true, sent_ms: 0 }
    }

    fn set(shared: &Shared, b: BookId, price: i64, levels_ms: i64) {
        let slot = &shared.slots[b.index()];
        slot.price.store(price, Ordering::Release);
        slot.price_ts.store(price * 10, Ordering::Release);
        let level = rampart_engine::level::Level {
            price: rampart_engine::Price(price - 1),
            side: rampart_engine::level::Formation::Low,
            origin: rampart_engine::level::Origin::H1,
            time_ms: 1,
            strength: 2,
        };
        slot.levels.store(Arc::new(rampart_state::LevelSnapshot { computed_ms: levels_ms, levels: vec![level] }));
    }

    #[test]
    fn an_api_node_holds_what_its_market_nodes_publish_full_then_changed() {
        let registry = registry();
        let p = Partition { index: 1, count: 2 };
        let (source, replica) = (market(&registry), Shared::replica(registry.clone(), 2, 0));
        let health = NodeHealth::new(Role::Api, Partition { index: 0, count: 2 });
        let books = owned(&registry, p);
        assert!(books.len() >= 4, "{} books", books.len());
        for (i, (b, _)) in books.iter().enumerate() {
            set(&source, *b, 100 + i as i64, 5);
        }
        let mut sent = vec![Sent::default(); books.len()];
        // The full snapshot: the partition is complete (and its replica shard ready) after the
        // message marked last.
        let messages = round(&source, &books, &mut sent, head(true), ORIGIN);
        assert_eq!(messages.len(), 1);
        apply_message(&replica, &registry, &health, &messages[0], 1_000);
        assert!(
            health.partitions[1].complete.load(Ordering::Acquire) && replica.stats[1].ready.load(Ordering::Acquire)
        );
        assert!(!replica.stats[0].ready.load(Ordering::Acquire), "partition 0 sent nothing");
        for (b, _) in &books {
            assert_eq!(replica.price(*b), source.price(*b));
            assert_eq!(replica.levels(*b), source.levels(*b));
            assert_eq!(replica.slots[b.index()].shard.load(Ordering::Acquire), 1, "routed to partition 1's queue");
        }
        // One price moves: the next round carries that book's price alone.
        set(&source, books[2].0, 999, 5);
        let before = messages[0].len();
        let messages = round(&source, &books, &mut sent, head(false), ORIGIN);
        assert!(messages[0].len() < before / 4, "a delta of one price: {} bytes", messages[0].len());
        apply_message(&replica, &registry, &health, &messages[0], 2_000);
        assert_eq!(replica.price(books[2].0).0, 999);
        // Nothing moves: a heartbeat (the head alone) keeps the partition current.
        let messages = round(&source, &books, &mut sent, head(false), ORIGIN);
        assert_eq!(
            messages,
            vec![{
                let mut o = Out::new(16);
                wire::snapshot_head(&mut o, &head(false));
                o.0
            }]
        );
        apply_message(&replica, &registry, &health, &messages[0], 3_000);
        assert_eq!(health.age_ms(1, 3_500), Some(500));
        assert_eq!(health.age_ms(0, 3_500), None);
        assert_eq!(health.partitions[1].messages.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn liquidations_reach_an_api_nodes_feed_every_round_for_its_streams_and_lists() {
        use rampart_engine::perp_book::{Completeness, Liquidation};
        use rampart_engine::perp_window::PositionSide;
        let registry = registry();
        let p = Partition { index: 1, count: 2 };
        let replica = Shared::replica(registry.clone(), 2, 0);
        let health = NodeHealth::new(Role::Api, Partition { index: 0, count: 2 });
        let books = owned(&registry, p);
        let b = books[0].0;
        let liq = |usd: f64| Liquidation { side: PositionSide::Long, price: 2.0, qty: usd / 2.0, time_ms: usd as i64 };
        let snapshot = |last: f64| rampart_state::perp::PerpSnapshot {
            contract: "BTCUSDT".into(),
            multiplier: 1,
            completeness: Completeness::All,
            mark: None,
            oi: None,
            funding: None,
            last: Some(liq(last)),
            ts_ms: 1,
        };
        // A market node whose pair took 3 liquidations, its perpetual published after the second.
        let source = market(&registry);
        let feed = source.slots[b.index()].liquidations.get_or_init(LiqFeed::new);
        feed.push(&liq(10.0));
        feed.push(&liq(20.0));
        source.slots[b.index()].perp.store(Some(Arc::new(snapshot(20.0))));
        feed.push(&liq(30.0));
        let mut sent = vec![Sent::default(); books.len()];
        let usd = |shared: &Shared, after: u64| {
            let mut got = Vec::new();
            let feed = shared.slots[b.index()].liquidations.get().expect("the replica's feed");
            feed.read_after(after, |n, l| got.push((n, l.usd()))).expect("held");
            got
        };
        let held = || {
            let feed = replica.slots[b.index()].liquidations.get().expect("the replica's feed");
            feed.held().iter().map(|(_, l)| l.usd()).collect::<Vec<f64>>()
        };
        for m in round(&source, &books, &mut sent, head(true), ORIGIN) {
            apply_message(&replica, &registry, &health, &m, 1_000);
        }
        assert_eq!(usd(&replica, 0), vec![(1, 10.0), (2, 20.0), (3, 30.0)]);
        assert_eq!(held(), [30.0, 20.0, 10.0], "a list reads the replica's ring");
        let last = replica.slots[b.index()].perp.load().as_ref().and_then(|p| p.last);
        assert_eq!(last, Some(liq(20.0)), "the snapshot as published");
        // The next round carries the new ones alone, without the pair's perpetual.
        feed.push(&liq(40.0));
        let messages = round(&source, &books, &mut sent, head(false), ORIGIN);
        let (_, updates) = wire::read_snapshot(&messages[0]).expect("decodes");
        assert_eq!(updates.len(), 1);
        assert!(updates[0].1.perp.is_none());
        apply_message(&replica, &registry, &health, &messages[0], 1_100);
        assert_eq!(usd(&replica, 3), vec![(4, 40.0)]);
        // The same round again (a lost message's repair) adds nothing; a standby's publisher,
        // its own numbering from 1, adds its liquidation after them.
        for m in round(&source, &books, &mut vec![Sent::default(); books.len()], head(true), ORIGIN) {
            apply_message(&replica, &registry, &health, &m, 1_200);
        }
        assert_eq!(usd(&replica, 3), vec![(4, 40.0)]);
        // The market node's pair delisted: its ring cleared, the replica's too.
        feed.clear();
        for m in round(&source, &books, &mut sent, head(false), ORIGIN) {
            apply_message(&replica, &registry, &health, &m, 1_250);
        }
        assert!(held().is_empty(), "the lists show nothing from before");
        let cleared = replica.slots[b.index()].liquidations.get().map_or(0, |f| f.head());
        let standby = market(&registry);
        let fresh = standby.slots[b.index()].liquidations.get_or_init(LiqFeed::new);
        fresh.push(&liq(50.0));
        standby.slots[b.index()].perp.store(Some(Arc::new(snapshot(50.0))));
        for m in round(&standby, &books, &mut vec![Sent::default(); books.len()], head(true), ORIGIN + 1) {
            apply_message(&replica, &registry, &health, &m, 1_300);
        }
        let now = replica.slots[b.index()].liquidations.get().map_or(0, |f| f.head());
        assert_eq!(usd(&replica, now - 1), vec![(now, 50.0)]);
        assert!(now > cleared + LIQ_FEED_LEN as u64, "past the ring: readers start again");
        assert_eq!(held(), [50.0], "the new owner's alone");
    }

    #[test]
    fn a_full_snapshot_is_cut_at_the_message_bound_and_its_last_part_marked() {
        let registry = registry();
        let books = owned(&registry, Partition::default());
        let source = market(&registry);
        let big: Vec<_> = (0..2_000)
            .map(|i| rampart_engine::level::Level {
                price: rampart_engine::Price(i),
                side: rampart_engine::level::Formation::High,
                origin: rampart_engine::level::Origin::D1,
                time_ms: 0,
                strength: 1,
            })
            .collect();
        for (b, _) in &books {
            source.slots[b.index()]
                .levels
                .store(Arc::new(rampart_state::LevelSnapshot { computed_ms: 1, levels: big.clone() }));
        }
        let mut sent = vec![Sent::default(); books.len()];
        let head = SnapshotHead { partition: 0, partitions: 1, ..head(true) };
        let messages = round(&source, &books, &mut sent, head, ORIGIN);
        assert!(messages.len() > 1, "{} books of 2 000 levels in one message", books.len());
        let mut seen = 0;
        for (i, m) in messages.iter().enumerate() {
            assert!(m.len() < SNAPSHOT_BYTES_MAX + 64 * 1024, "message {i}: {} bytes", m.len());
            let (h, b) = wire::read_snapshot(m).expect("decodes");
            assert_eq!(h.last, i == messages.len() - 1, "message {i}");
            seen += b.len();
        }
        assert_eq!(seen, books.len());
    }

    #[test]
    fn malformed_messages_and_other_cluster_shapes_are_dropped_whole() {
        let registry = registry();
        let replica = Shared::replica(registry.clone(), 2, 0);
        let health = NodeHealth::new(Role::Api, Partition { index: 0, count: 2 });
        apply_message(&replica, &registry, &health, b"\x01\x00", 1_000);
        let mut out = Out::new(16);
        wire::snapshot_head(&mut out, &SnapshotHead { partition: 0, partitions: 3, ..head(true) });
        apply_message(&replica, &registry, &health, &out.0, 1_000);
        assert_eq!(health.partitions[0].refused.load(Ordering::Relaxed), 2);
        assert!(health.partitions.iter().all(|p| p.last_ms.load(Ordering::Relaxed) == 0));
    }
}
