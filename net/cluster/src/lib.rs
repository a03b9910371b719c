//! The firings stream of a cluster on NATS JetStream (issue #18): every recorded firing is
//! published once, under the message id `<alert id>:<trigger time ms>`, to a work-queue stream
//! that drops a repeated id within its duplicate window; delivery workers share one durable
//! pull consumer, so each firing goes to one worker at a time, is acknowledged explicitly after
//! its outcome is recorded, and is redelivered when a worker dies without answering (after the
//! consumer's ack wait) or asks for a retry (after the schedule's delay).
//!
//! Bounds: the stream holds at most [`STREAM_MESSAGES_MAX`] firings and refuses new ones at the
//! bound (`DiscardPolicy::New`: the publisher gets an error and keeps its firing to publish
//! again; nothing queued is dropped); a firing is delivered at most [`DELIVERIES_MAX`] times
//! (the webhook schedule's three attempts).
//!
//! `serve --nats` hands every outbox row to the stream (`publisher`) instead of sending it, and
//! `rampart deliver` runs the workers (`worker`) that send them.
//!
//! The other roles of a cluster live beside it: `snapshots` (market → api state), `commands`
//! (api → market alert commands and queries), `inbox` (inbox commits announced to the api nodes),
//! `wire` (their bytes), `node` (a node's links, for `/healthz` and `/metrics`), `owner` (a
//! market node's lease of its partition, and the standby that takes it over) and `health` (a
//! `rampart deliver` process's `/healthz` and `/metrics`). Which market node owns a pair is
//! `rampart_state::partition`.

use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, AckKind};
use futures_lite::StreamExt;

pub mod commands;
pub mod health;
pub mod inbox;
pub mod node;
pub mod owner;
pub mod publisher;
pub mod snapshots;
pub mod wire;
pub mod worker;

/// Firings a stream holds at most; a publish past it is refused.
pub const STREAM_MESSAGES_MAX: i64 = 1_000_000;

/// Times one firing is delivered at most: the schedule's three attempts (first, +10 s, +60 s),
/// plus redeliveries after a worker died or storage refused to read or record (each after the
/// ack wait or a second). Past it the stream stops delivering the firing; its outbox row stays
/// pending in the database, where it can be seen.
pub const DELIVERIES_MAX: i64 = 20;

/// Firings the workers may hold unanswered together (the consumer's `max_ack_pending`): as many
/// as the stream holds, so it never stalls the consumer. JetStream counts a firing asked again
/// after a delay (waiting for the schedule's next attempt) as unanswered; under the server's
/// default (1 000), one account's thousand failing receivers would stop every worker's deliveries
/// until their retries came due (issue #36). The workers pull only what they have room for, so
/// this bound never drives their flow.
pub const UNANSWERED_MAX: i64 = STREAM_MESSAGES_MAX;

/// How long the stream remembers a message id to drop its repeats: longer than any writer's
/// retry of one batch.
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// The header that carries a firing's id to its workers.
pub const FIRING_HEADER: &str = "Rampart-Firing";

/// The header that carries a firing's webhook delivery (base64 of `wire::delivery`) when its
/// publisher holds it (`rampart_store::handoff`): a worker sends a first delivery from it without
/// reading the row. The body stays the row's id, so a worker that reads only the body (an older
/// release's) still sends every firing.
pub const DELIVERY_HEADER: &str = "Rampart-Delivery";

/// Names of the stream, its subjects and the workers' consumer.
#[derive(Clone, Debug)]
pub struct BusNames {
    /// The stream.
    pub stream: String,
    /// Subjects are `<root>.<channel>` (`webhook`, `telegram`).
    pub subject_root: String,
    /// The delivery workers' durable consumer.
    pub consumer: String,
}

impl Default for BusNames {
    fn default() -> BusNames {
        BusNames {
            stream: "RAMPART_FIRINGS".into(),
            subject_root: "rampart.firings".into(),
            consumer: "delivery".into(),
        }
    }
}

/// A failure talking to NATS, with what was being done.
#[derive(Debug)]
pub struct BusError(String);

impl BusError {
    fn new(doing: &str, e: impl std::fmt::Display) -> BusError {
        BusError(format!("{doing}: {e}"))
    }
}

impl std::fmt::Display for BusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NATS: {}", self.0)
    }
}

impl std::error::Error for BusError {}

/// Spawns the thread `name` running `body` (given the thread's stop flag, which it must watch)
/// on a current-thread tokio runtime and its `LocalSet` (so `body` may `spawn_local`); stopped
/// and joined on drop. A system that refuses the runtime is logged and the thread ends.
fn spawn_async<F, Fut>(name: &'static str, body: F) -> std::io::Result<rampart_state::shutdown::StoppableThread>
where
    F: FnOnce(std::sync::Arc<std::sync::atomic::AtomicBool>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    rampart_state::shutdown::StoppableThread::spawn(
        name,
        move |stop| match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(runtime) => tokio::task::LocalSet::new().block_on(&runtime, body(stop)),
            Err(e) => tracing::error!("{name}: no runtime: {e}"),
        },
    )
}

/// A firing's headers: the id the stream deduplicates by, and the same id where consumers see
/// it (the server keeps `Nats-Msg-Id` for itself).
fn headers(id: &str) -> async_nats::HeaderMap {
    let mut h = async_nats::HeaderMap::new();
    h.insert("Nats-Msg-Id", id);
    h.insert(FIRING_HEADER, id);
    h
}

/// One firing to publish ([`FiringBus::publish_batch`]).
pub struct Outgoing<'a> {
    /// The subject's last part: the channel (`webhook`, `telegram`).
    pub leaf: &'a str,
    /// The message id (the firing's).
    pub id: String,
    /// The body: the outbox row's id.
    pub body: Vec<u8>,
    /// The webhook delivery's bytes (`wire::delivery`), when the publisher holds them: carried
    /// in [`DELIVERY_HEADER`].
    pub delivery: Option<Vec<u8>>,
}

/// What the stream answered a publish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Published {
    /// The stream's sequence number of the message.
    pub sequence: u64,
    /// The id was seen within the duplicate window: nothing new was stored.
    pub duplicate: bool,
}

/// A connection to the firings stream.
pub struct FiringBus {
    client: async_nats::Client,
    js: jetstream::Context,
    stream: jetstream::stream::Stream,
    names: BusNames,
}

impl FiringBus {
    /// Connects to `url` (5 s at most) and makes sure the stream exists with its settings.
    pub async fn connect(url: &str, names: BusNames) -> Result<FiringBus, BusError> {
        let client = async_nats::ConnectOptions::new()
            .connection_timeout(Duration::from_secs(5))
            .connect(url)
            .await
            .map_err(|e| BusError::new("connecting", e))?;
        let js = jetstream::new(client.clone());
        let config = jetstream::stream::Config {
            name: names.stream.clone(),
            subjects: vec![format!("{}.>", names.subject_root)],
            retention: jetstream::stream::RetentionPolicy::WorkQueue,
            storage: jetstream::stream::StorageType::File,
            duplicate_window: DUPLICATE_WINDOW,
            max_messages: STREAM_MESSAGES_MAX,
            discard: jetstream::stream::DiscardPolicy::New,
            ..Default::default()
        };
        let stream = js.get_or_create_stream(config).await.map_err(|e| BusError::new("the stream", e))?;
        Ok(FiringBus { client, js, stream, names })
    }

    /// When the stream as it is now was created, in nanoseconds since the epoch: a stream made
    /// again (after a NATS server lost its store) has another. The stream missing is an error.
    pub async fn stream_created_ns(&self) -> Result<i64, BusError> {
        let stream = self.js.get_stream(&self.names.stream).await.map_err(|e| BusError::new("the stream", e))?;
        let ns = stream.cached_info().created.unix_timestamp_nanos();
        Ok(i64::try_from(ns).unwrap_or(i64::MAX))
    }

    fn subject(&self, leaf: &str) -> String {
        format!("{}.{leaf}", self.names.subject_root)
    }

    /// Publishes one firing on subject `<root>.<leaf>` under message id `id` and waits for the
    /// stream to store it (or to say it is a repeat).
    pub async fn publish(&self, leaf: &str, id: &str, body: Vec<u8>) -> Result<Published, BusError> {
        let ack = self
            .js
            .publish_with_headers(self.subject(leaf), headers(id), body.into())
            .await
            .map_err(|e| BusError::new("publishing", e))?
            .await
            .map_err(|e| BusError::new("the stream's answer", e))?;
        Ok(Published { sequence: ack.sequence, duplicate: ack.duplicate })
    }

    /// Publishes several firings with every message sent before the
    /// first acknowledgement is awaited (one round trip for the batch); whether the stream
    /// stored each one (or had it already), in order.
    pub async fn publish_batch(&self, items: Vec<Outgoing<'_>>) -> Vec<bool> {
        use base64::Engine as _;
        let mut pending = Vec::with_capacity(items.len());
        for item in items {
            let mut h = headers(&item.id);
            if let Some(d) = &item.delivery {
                h.insert(DELIVERY_HEADER, base64::engine::general_purpose::STANDARD.encode(d).as_str());
            }
            pending.push(self.js.publish_with_headers(self.subject(item.leaf), h, item.body.into()).await.ok());
        }
        let mut stored = Vec::with_capacity(pending.len());
        for ack in pending {
            stored.push(match ack {
                Some(ack) => ack.await.is_ok(),
                None => false,
            });
        }
        stored
    }

    /// A delivery worker on the shared durable consumer; a firing a worker holds longer than
    /// `ack_wait` without answering is given to another. The consumer is created, or updated to
    /// this configuration when it exists with another (one made before [`UNANSWERED_MAX`] was
    /// set has the server's default).
    pub async fn worker(&self, ack_wait: Duration) -> Result<FiringWorker, BusError> {
        let config = pull::Config {
            durable_name: Some(self.names.consumer.clone()),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ack_wait,
            max_deliver: DELIVERIES_MAX,
            max_ack_pending: UNANSWERED_MAX,
            ..Default::default()
        };
        let consumer = self.stream.create_consumer(config).await.map_err(|e| BusError::new("the consumer", e))?;
        Ok(FiringWorker { consumer, client: self.client.clone() })
    }
}

/// A worker's NATS connection, watched ([`FiringWorker::link`]).
#[derive(Clone)]
pub struct Link(async_nats::Client);

impl Link {
    /// Whether the connection is up now.
    pub fn up(&self) -> bool {
        self.0.connection_state() == async_nats::connection::State::Connected
    }
}

/// One worker's handle on the shared consumer.
pub struct FiringWorker {
    consumer: jetstream::consumer::Consumer<pull::Config>,
    client: async_nats::Client,
}

impl FiringWorker {
    /// Whether its connection to NATS is up now (the client reconnects by itself meanwhile).
    pub fn connected(&self) -> bool {
        self.link().up()
    }

    /// A handle on its connection's state, for a watch that does not wait on its fetches.
    pub fn link(&self) -> Link {
        Link(self.client.clone())
    }

    /// The next firing due, waiting at most `wait` (at least 1 ms) for one.
    pub async fn next(&self, wait: Duration) -> Result<Option<Firing>, BusError> {
        Ok(self.next_batch(1, wait).await?.pop())
    }

    /// Whether the consumer still exists on the server (a NATS server restarted without its
    /// store has neither the stream nor the consumer; fetches then just come back empty).
    pub async fn check(&mut self) -> Result<(), BusError> {
        self.consumer.info().await.map(|_| ()).map_err(|e| BusError::new("the consumer", e))
    }

    /// Up to `max` firings due (at least one is asked for), waiting at most `wait` for the
    /// first; fewer when fewer are due.
    pub async fn next_batch(&self, max: usize, wait: Duration) -> Result<Vec<Firing>, BusError> {
        let mut batch = self
            .consumer
            .fetch()
            .max_messages(max.max(1))
            .expires(wait.max(Duration::from_millis(1)))
            .messages()
            .await
            .map_err(|e| BusError::new("fetching", e))?;
        let mut out = Vec::new();
        while let Some(msg) = batch.next().await {
            let msg = msg.map_err(|e| BusError::new("receiving", e))?;
            let info = msg.info().map_err(|e| BusError::new("the message's metadata", e))?;
            let (attempt, sequence) = (info.delivered, info.stream_sequence);
            let id = msg.headers.as_ref().and_then(|h| h.get(FIRING_HEADER)).map(|v| v.as_str().to_owned());
            out.push(Firing { attempt, sequence, id: id.unwrap_or_default(), msg, client: self.client.clone() });
        }
        Ok(out)
    }
}

/// A firing handed to one worker: answered with [`Firing::done`] or [`Firing::retry_in`]
/// (or not at all, when the worker dies: then it is redelivered after the ack wait).
pub struct Firing {
    msg: jetstream::Message,
    /// For progress answers that outlive a borrow of the firing.
    client: async_nats::Client,
    /// Which delivery of it this is (1 for the first).
    pub attempt: i64,
    /// The stream's sequence number.
    pub sequence: u64,
    /// Its message id (`<alert id>:<trigger time ms>`).
    pub id: String,
}

impl Firing {
    /// The published body.
    pub fn body(&self) -> &[u8] {
        &self.msg.payload
    }

    /// The webhook delivery its message carries ([`DELIVERY_HEADER`]), if any; an error when
    /// the header holds bytes that are not one.
    pub fn delivery(&self) -> Option<Result<wire::Delivery, wire::WireError>> {
        use base64::Engine as _;
        let value = self.msg.headers.as_ref()?.get(DELIVERY_HEADER)?;
        let bytes = base64::engine::general_purpose::STANDARD.decode(value.as_str());
        Some(bytes.map_err(|_| wire::WireError::Invalid("delivery header")).and_then(|b| wire::read_delivery(&b)))
    }

    /// Its outcome is recorded: the stream forgets it (the server confirms the ack).
    pub async fn done(self) -> Result<(), BusError> {
        self.msg.double_ack().await.map_err(|e| BusError::new("acknowledging", e))
    }

    /// A progress answer ("still working on it"): the stream waits another ack wait before it
    /// gives the firing to another worker, and no delivery of the `DELIVERIES_MAX` is spent.
    /// Owns what it needs, so the firing can stay where it waits meanwhile.
    pub fn progress(&self) -> impl std::future::Future<Output = Result<(), BusError>> + 'static {
        let (reply, client) = (self.msg.reply.clone(), self.client.clone());
        async move {
            let Some(reply) = reply else { return Ok(()) };
            client.publish(reply, "+WPI".into()).await.map_err(|e| BusError::new("answering progress", e))
        }
    }

    /// Deliver it again after `delay` (the schedule's next attempt), to any worker.
    pub async fn retry_in(self, delay: Duration) -> Result<(), BusError> {
        self.msg.ack_with(AckKind::Nak(Some(delay))).await.map_err(|e| BusError::new("asking for a retry", e))
    }
}
