//! Alert commands and shard queries between the nodes of a cluster. An api node's front sends
//! shard commands exactly as over local shards, into one bounded queue per partition
//! ([`rampart_state::Commands`] over [`rampart_state::Shared::replica`]); the api side here
//! (`Forwarder`), woken as the front queues one, drains those queues and sends each on NATS:
//! alert additions and removals to `rampart.commands.<partition>`, candle and depth copies as
//! requests to `rampart.queries.<partition>` whose replies answer the front's waiting request.
//! The market side (`CommandServer`) applies them to its own shards.
//!
//! Commands go over core NATS, and one can be lost (the api node dies before its client flushed
//! it, NATS or the owning node is away): storage, where every alert is committed before its
//! command is sent, is the record. A market node loads every active alert of its partition at
//! start and again each time its command subscription is (re)established, and every
//! [`CATCH_UP_PERIOD`] it reads the ids of the active alerts created in the last
//! [`CATCH_UP_WINDOW_MS`] and adds those of its partition whose command it has not seen, read
//! whole (so a lost command delays an alert by about a second). Every command and every alert
//! read from storage carries the version of its row (`decisions.md` §16, "One order"): a shard
//! applies an alert's change only when it is newer than the last it applied, so commands from
//! several api nodes, and a reload read just before a change committed, end in storage's order; a reload of an alert the shard holds at that
//! version changes nothing, so it never re-arms a repeating alert. A deleted alert it still
//! holds (its removal lost) fires nothing: storage records a firing only for an active alert.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use futures_lite::StreamExt;
use rampart_engine::{BookId, Registry};

use super::node::NodeHealth;
use super::snapshots::connect_until;
use super::wire::{self, AlertCommand, BookName, Query};
use rampart_state::clock::SharedClock;
use rampart_state::partition::{Partition, UNIVERSE};
use rampart_state::shutdown::StoppableThread;
use rampart_state::{Command, Commands, Pong, Shared};
use rampart_store::store::{AlertRow, Store};

/// How often a market node looks in storage for alerts whose command it missed.
pub const CATCH_UP_PERIOD: Duration = Duration::from_secs(1);
/// How far back it looks, by creation time (longer than any commit's delay after its alert's
/// creation time, which the storage thread bounds at 2 s).
pub const CATCH_UP_WINDOW_MS: i64 = 30_000;

/// How long an api node waits for a market node's answer to a query (the front's own wait is
/// as long).
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// The subject of a partition's alert commands.
pub fn command_subject(partition: u16) -> String {
    format!("rampart.commands.{partition}")
}

/// The subject of a partition's queries.
pub fn query_subject(partition: u16) -> String {
    format!("rampart.queries.{partition}")
}

fn name_of(registry: &Registry, book: BookId) -> Option<BookName> {
    (book.index() < registry.len()).then(|| {
        let i = registry.get(book);
        BookName { venue: i.venue, symbol: i.symbol.clone() }
    })
}

/// Longest wait of the api side's forwarder between two looks at its queues (and at its NATS
/// connection's state, for `/healthz`): the front wakes it as it queues a command, so this only
/// bounds the connection state's age and a missed wake-up.
const FORWARD_IDLE: Duration = Duration::from_millis(100);

/// The api side: one queue per partition, drained onto NATS by a thread woken by the front;
/// stopped on drop.
pub struct Forwarder {
    queues: Vec<Arc<ArrayQueue<Command>>>,
    wake: Arc<tokio::sync::Notify>,
    _thread: StoppableThread,
}

impl Forwarder {
    /// Starts forwarding commands for the books of `shared` (a replica) to their partitions.
    pub fn start(shared: Arc<Shared>, url: String, health: Arc<NodeHealth>) -> std::io::Result<Forwarder> {
        let queues: Vec<_> =
            (0..shared.stats.len()).map(|_| Arc::new(ArrayQueue::new(rampart_state::COMMANDS_MAX))).collect();
        let (drained, wake) = (queues.clone(), Arc::new(tokio::sync::Notify::new()));
        let woken = wake.clone();
        let thread = super::spawn_async("cluster-commands", move |stop| async move {
            forward(shared, drained, &url, health, &woken, &stop).await;
        })?;
        Ok(Forwarder { queues, wake, _thread: thread })
    }

    /// The front's handle: commands routed to their partition's queue, waking the forwarder.
    pub fn commands(&self, shared: Arc<Shared>) -> Commands {
        Commands::new(self.queues.clone(), shared).with_wake(self.wake.clone())
    }

    /// The queues (for `/metrics`).
    pub fn queues(&self) -> Vec<Arc<ArrayQueue<Command>>> {
        self.queues.clone()
    }
}

async fn forward(
    shared: Arc<Shared>,
    queues: Vec<Arc<ArrayQueue<Command>>>,
    url: &str,
    health: Arc<NodeHealth>,
    wake: &tokio::sync::Notify,
    stop: &AtomicBool,
) {
    let Some(client) = connect_until(url, "rampart-api-commands", stop).await else { return };
    let registry = shared.registry();
    while !stop.load(Ordering::Acquire) {
        // A command queued since the last drain left a permit: this returns at once.
        let _ = tokio::time::timeout(FORWARD_IDLE, wake.notified()).await;
        let connected = client.connection_state() == async_nats::connection::State::Connected;
        health.commands_connected.store(connected, Ordering::Release);
        for (partition, queue) in queues.iter().enumerate() {
            while let Some(cmd) = queue.pop() {
                send(&client, &registry, partition as u16, cmd, &health).await;
            }
        }
    }
}

/// Sends one command to its partition; a query's answer goes to the front's waiting request
/// from a task of its own (a request the market node does not answer drops the reply, which
/// the front answers 503).
async fn send(client: &async_nats::Client, registry: &Registry, partition: u16, cmd: Command, health: &NodeHealth) {
    let named = |book| name_of(registry, book);
    let (alert, query) = match cmd {
        Command::Alert { book, change } => (named(book).map(|book| AlertCommand { book, change }), None),
        // A `*` alert's reach every partition (queued on each partition's queue), named by the
        // venue and the symbol `*`.
        Command::Universe { venue, change } => (Some(AlertCommand { book: every_pair(venue), change }), None),
        Command::Ping { reply } => {
            let _ = reply.send(Pong { shard: usize::from(partition), ticks: 0 });
            return;
        }
        Command::Candles { book, tf, limit, reply } => {
            let Some(b) = named(book) else { return };
            let q = Query::Candles(b, tf, limit as u32);
            (
                None,
                Some((
                    q,
                    Box::new(move |bytes: &[u8]| wire::read_candles(bytes).map(|v| drop(reply.send(v)))) as Answer,
                )),
            )
        }
        Command::Depth { book, limit, reply } => {
            let Some(b) = named(book) else { return };
            let q = Query::Depth(b, limit as u32);
            (
                None,
                Some((q, Box::new(move |bytes: &[u8]| wire::read_depth(bytes).map(|v| drop(reply.send(v)))) as Answer)),
            )
        }
        Command::PerpHistory { book, window, reply } => {
            let Some(b) = named(book) else { return };
            let read = move |bytes: &[u8]| wire::read_perp_history(bytes).map(|v| drop(reply.send(v)));
            (None, Some((Query::PerpHistory(b, window), Box::new(read) as Answer)))
        }
        Command::PerpTrigger { book, condition, reply } => {
            let Some(b) = named(book) else { return };
            let read = move |bytes: &[u8]| {
                wire::read_perp_trigger(bytes).map(|v| {
                    let _ = reply.send(v);
                })
            };
            (None, Some((Query::PerpTrigger(b, condition), Box::new(read) as Answer)))
        }
        other => return tracing::warn!("cluster-commands: an api node does not send {other:?}"),
    };
    if let Some(c) = alert {
        health.commands.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = client.publish(command_subject(partition), wire::alert_command(&c).into()).await {
            health.commands_failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("cluster-commands: {c:?} not sent ({e}); the owning node loads it from storage");
        }
    }
    if let Some((q, answer)) = query {
        let (client, subject) = (client.clone(), query_subject(partition));
        tokio::task::spawn_local(async move {
            match tokio::time::timeout(QUERY_TIMEOUT, client.request(subject, wire::query(&q).into())).await {
                Ok(Ok(m)) => {
                    if let Err(e) = answer(&m.payload) {
                        tracing::warn!("cluster-commands: a malformed answer to {q:?}: {e}");
                    }
                }
                Ok(Err(e)) => tracing::debug!("cluster-commands: {q:?}: {e}"),
                Err(_) => tracing::debug!("cluster-commands: {q:?}: no answer in {QUERY_TIMEOUT:?}"),
            }
        });
    }
}

/// The name a `*` alert's commands carry: the venue, and the symbol `*`.
fn every_pair(venue: rampart_engine::Venue) -> BookName {
    BookName { venue, symbol: UNIVERSE.to_owned() }
}

type Answer = Box<dyn FnOnce(&[u8]) -> Result<(), wire::WireError>>;

/// The market side: a thread applying its partition's commands and answering its queries;
/// stopped on drop.
pub struct CommandServer {
    _thread: StoppableThread,
}

impl CommandServer {
    /// Starts serving `partition`'s subjects onto `commands` (this node's shards).
    pub fn start(
        shared: Arc<Shared>,
        commands: Commands,
        partition: Partition,
        store: Store,
        url: String,
        clock: SharedClock,
        health: Arc<NodeHealth>,
    ) -> std::io::Result<CommandServer> {
        let thread = super::spawn_async("cluster-commands", move |stop| async move {
            let recent = RefCell::new(HashMap::new());
            let node = Node { shared, commands, partition, store, clock, health, recent };
            serve(node, &url, &stop).await;
        })?;
        Ok(CommandServer { _thread: thread })
    }
}

struct Node {
    shared: Arc<Shared>,
    commands: Commands,
    partition: Partition,
    store: Store,
    clock: SharedClock,
    health: Arc<NodeHealth>,
    /// Alerts put on a shard lately (by command or from storage), with when: the catch-up adds
    /// only the others. Entries older than twice the catch-up window are dropped.
    recent: RefCell<HashMap<u64, i64>>,
}

async fn serve(node: Node, url: &str, stop: &AtomicBool) {
    let Some(client) = connect_until(url, "rampart-market-commands", stop).await else { return };
    let subscribe = |s: String| {
        let c = client.clone();
        async move { c.subscribe(s).await }
    };
    let (mut alerts, mut queries) = match (
        subscribe(command_subject(node.partition.index)).await,
        subscribe(query_subject(node.partition.index)).await,
    ) {
        (Ok(a), Ok(q)) => (a, q),
        (Err(e), _) | (_, Err(e)) => return tracing::error!("cluster-commands: subscribing: {e}"),
    };
    // Subscribed: whatever was committed before is in storage.
    let mut was_connected = false;
    let mut check = tokio::time::interval(Duration::from_millis(100));
    let mut catch_up = tokio::time::interval(CATCH_UP_PERIOD);
    let node = Rc::new(node);
    while !stop.load(Ordering::Acquire) {
        tokio::select! {
            m = alerts.next() => match m {
                Some(m) => node.alert_command(&m.payload).await,
                None => return tracing::error!("cluster-commands: subscription ended"),
            },
            m = queries.next() => match m {
                Some(m) => {
                    let (node, client) = (node.clone(), client.clone());
                    tokio::task::spawn_local(async move { node.answer(&client, m).await });
                }
                None => return tracing::error!("cluster-commands: subscription ended"),
            },
            _ = check.tick() => {
                let connected = client.connection_state() == async_nats::connection::State::Connected;
                node.health.commands_connected.store(connected, Ordering::Release);
                if connected && !was_connected {
                    node.reload().await;
                }
                was_connected = connected;
            }
            _ = catch_up.tick() => node.catch_up().await,
        }
    }
}

impl Node {
    /// The book `name` names, if this node owns it.
    fn owned(&self, name: &BookName) -> Option<BookId> {
        self.partition.owns(&name.symbol).then(|| self.shared.registry().find(name.venue, &name.symbol)).flatten()
    }

    /// Queues `cmd` for its shard, waiting out a full queue (it drains every millisecond).
    async fn send(&self, book: BookId, mut cmd: Command) {
        while let Err(back) = self.commands.send(book, cmd) {
            cmd = back;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Asks `book`'s shard the query `make` builds; `None` when it does not answer within
    /// [`QUERY_TIMEOUT`].
    async fn ask<T>(&self, book: BookId, make: impl FnOnce(tokio::sync::oneshot::Sender<T>) -> Command) -> Option<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(book, make(tx)).await;
        tokio::time::timeout(QUERY_TIMEOUT, rx).await.ok()?.ok()
    }

    /// Queues the command `make` builds on every shard of this node, waiting out a full queue.
    async fn broadcast(&self, make: impl Fn() -> Command) {
        while self.commands.broadcast(&make).is_err() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    async fn alert_command(&self, payload: &[u8]) {
        let AlertCommand { book: name, change } = match wire::read_alert_command(payload) {
            Ok(c) => c,
            Err(e) => {
                self.health.commands_failed.fetch_add(1, Ordering::Relaxed);
                return tracing::warn!("cluster-commands: dropped a malformed command: {e}");
            }
        };
        // Every command goes to the shards, which apply it only when its version is newer than
        // the last they applied for the alert (a catch-up's read included); `recent` only spares
        // the catch-up re-sending what a command brought.
        if change.spec().is_some() {
            self.recent.borrow_mut().insert(change.id, self.clock.now_ms());
        }
        if name.symbol == UNIVERSE {
            self.health.commands.fetch_add(1, Ordering::Relaxed);
            self.broadcast(|| Command::Universe { venue: name.venue, change }).await;
        } else {
            self.apply(&name, |book| Command::Alert { book, change }).await;
        }
    }

    /// Sends the command `make` builds to the shard of `name`'s book, if this node owns it.
    async fn apply(&self, name: &BookName, make: impl FnOnce(BookId) -> Command) {
        let Some(book) = self.owned(name) else { return self.not_owned(name) };
        self.health.commands.fetch_add(1, Ordering::Relaxed);
        self.send(book, make(book)).await;
    }

    fn not_owned(&self, name: &BookName) {
        self.health.commands_failed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            "cluster-commands: a command for {} {}, which partition {} does not own (are the nodes' --partition counts the same?)",
            name.venue,
            name.symbol,
            self.partition
        );
    }

    /// Puts every active alert of this partition on its shard (after a (re)connection, when a
    /// command may have been missed).
    async fn reload(&self) {
        let rows = match self.store.active_alerts() {
            Ok(r) => r,
            Err(e) => {
                return tracing::warn!("cluster-commands: reloading alerts: {e}; loaded at the next reconnection")
            }
        };
        let n = self.add_rows(rows, true).await;
        tracing::info!(
            "cluster-commands: connected; {n} active alerts of partition {} loaded from storage",
            self.partition
        );
    }

    /// Adds the alerts of the last [`CATCH_UP_WINDOW_MS`] whose command has not arrived.
    async fn catch_up(&self) {
        let now_ms = self.clock.now_ms();
        self.recent.borrow_mut().retain(|_, seen| now_ms - *seen < 2 * CATCH_UP_WINDOW_MS);
        // The ids first; only the alerts of this partition not seen lately are read whole.
        let missed = self.store.recent_active_alert_ids(now_ms - CATCH_UP_WINDOW_MS).map(|ids| {
            let recent = self.recent.borrow();
            let unseen = |(id, symbol): &(i64, String)| {
                self.partition.owns_alert(symbol) && !recent.contains_key(&id.unsigned_abs())
            };
            ids.into_iter().filter(unseen).map(|(id, _)| id).collect::<Vec<i64>>()
        });
        let rows = match missed.and_then(|ids| self.store.active_alerts_among(&ids)) {
            Ok(r) => r,
            Err(e) => return tracing::debug!("cluster-commands: catching up: {e}"),
        };
        let n = self.add_rows(rows, false).await;
        if n > 0 {
            tracing::info!("cluster-commands: {n} alerts whose command did not arrive added from storage");
        }
    }

    /// Puts `rows` of this partition on their shards (all of them with `again`, else only those
    /// not added lately); how many were added.
    async fn add_rows(&self, rows: Vec<AlertRow>, again: bool) -> usize {
        let registry = self.shared.registry();
        let now_ms = self.clock.now_ms();
        let mut n = 0;
        for row in rows.into_iter().filter(|r| self.partition.owns_alert(&r.symbol)) {
            let Some(spec) = row.spec() else { continue };
            if self.recent.borrow_mut().insert(spec.id, now_ms).is_some() && !again {
                continue;
            }
            // At the row's version: a change newer than this read, already applied, stays.
            let change = row.change(false);
            if row.symbol == UNIVERSE {
                let venue = row.exchange;
                self.broadcast(|| Command::Universe { venue, change }).await;
            } else if let Some(book) = registry.find(row.exchange, &row.symbol) {
                self.send(book, Command::Alert { book, change }).await;
            } else {
                continue;
            }
            n += 1;
        }
        n
    }

    /// Answers one query from the owning shard (no answer when the book is not owned here or
    /// the shard does not answer in time: the asking node's wait runs out).
    async fn answer(&self, client: &async_nats::Client, m: async_nats::Message) {
        let Some(reply_to) = m.reply.clone() else { return };
        let query = match wire::read_query(&m.payload) {
            Ok(q) => q,
            Err(e) => return tracing::warn!("cluster-commands: dropped a malformed query: {e}"),
        };
        let Some(book) = self.owned(query.book()) else { return self.not_owned(query.book()) };
        let bytes = match query {
            Query::Candles(_, tf, limit) => {
                let limit = limit.min(10_000) as usize;
                self.ask(book, |reply| Command::Candles { book, tf, limit, reply }).await.map(|b| wire::candles(&b))
            }
            Query::Depth(_, limit) => {
                let limit = limit.min(10_000) as usize;
                self.ask(book, |reply| Command::Depth { book, limit, reply }).await.map(|v| wire::depth(&v))
            }
            Query::PerpHistory(_, window) => {
                let asked = self.ask(book, |reply| Command::PerpHistory { book, window, reply }).await;
                asked.map(|slots| wire::perp_history(&slots))
            }
            Query::PerpTrigger(_, condition) => {
                let asked = self.ask(book, |reply| Command::PerpTrigger { book, condition, reply }).await;
                asked.map(|t| wire::perp_trigger(t.as_ref()))
            }
        };
        let Some(bytes) = bytes else { return };
        if let Err(e) = client.publish(reply_to, bytes.into()).await {
            tracing::debug!("cluster-commands: answering: {e}");
        }
    }
}
