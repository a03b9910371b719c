//! The threads of a server that write ([`Persistence`]): webhook delivery here or the publisher
//! to the firings stream, the firing writer, the checkpointer and the site alert watcher; started
//! after the shards and stopped after them.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use rampart_cluster::publisher::Publisher;
use rampart_cluster::BusNames;
use rampart_delivery::{Delivery, DeliveryConfig};
use rampart_net::api::metrics::{Metrics, Sources as MetricsSources};
use rampart_net::site_alerts::watch::SiteAlertWatcher;
use rampart_shard::ShardSet;
use rampart_state::clock::SharedClock;
use rampart_state::shutdown::Shutdown;
use rampart_state::EventQueue;
use rampart_store::handoff::Handoff;
use rampart_store::storage::{Checkpointer, Pruning, StorageHealth};
use rampart_store::store::Fence;
use rampart_store::text::Texts;
use rampart_store::writer::{OnCommitted, Writer, WriterHooks};

use super::settings::ServeSettings;

/// Where a server's deliveries go.
enum Sending {
    /// Sent by this process.
    Here(Delivery),
    /// Handed to the firings stream (`--nats`).
    Stream(Publisher),
}

/// The threads that write: webhook delivery, the firing writer (which wakes delivery) and the
/// checkpointer, with the storage health they report to; and the site alert watcher, whose set
/// the writer's firings change.
pub(super) struct Persistence {
    pub(super) health: Arc<StorageHealth>,
    webhooks: rampart_delivery::metrics::WebhookMetrics,
    /// The sender here, or (`--nats`) the publisher to the firings stream.
    delivery: Sending,
    pub(super) writer: Writer,
    checkpointer: Checkpointer,
    /// The board thread's queue of market alert firings, drained by the writer.
    pub(super) market_events: Arc<EventQueue>,
    /// Keeps the active site alerts published for the shards and the board thread.
    site_alerts: SiteAlertWatcher,
}

impl Persistence {
    // Long: the storage side's start-up in dependency order (store, writer, publisher, delivery,
    // watchers); wiring only.
    pub(super) fn start(
        s: &ServeSettings,
        shards: &ShardSet,
        clock: &SharedClock,
        fence: Option<Fence>,
    ) -> Result<Persistence> {
        // The board thread's queue of market alert firings, drained like a shard's.
        let market_events = Arc::new(EventQueue::new(rampart_state::EVENTS_MAX));
        // A market node (fenced) leaves pruning to the api nodes; the single process prunes.
        let pruning = fence.is_none().then_some(Pruning { keep: s.retention, gate: None });
        let health = Arc::new(StorageHealth::at(s.store.describe()));
        let webhooks = rampart_delivery::metrics::WebhookMetrics::default();
        let delivery_config = DeliveryConfig {
            allow_private: s.allow_private,
            health: Some(health.clone()),
            metrics: Some(webhooks.clone()),
            telegram: s.telegram.clone(),
            threads: s.delivery_threads,
            in_flight_max: s.in_flight_max,
            ..DeliveryConfig::default()
        };
        // A market node's writer hands its webhook deliveries to its publisher (issue #59).
        let handed = s.nats.as_ref().map(|_| Arc::new(Handoff::default()));
        let (delivery, wake) = match &s.nats {
            None => {
                let stores = (s.store.open()?.for_background()?, s.store.open()?.for_background()?);
                let d = Delivery::start(stores, delivery_config, clock.clone())?;
                let wake = d.waker();
                (Sending::Here(d), wake)
            }
            Some(url) => {
                let store = s.store.open()?.for_background()?;
                let wake = Arc::new(tokio::sync::Notify::new());
                let fault = s.faults.publisher_abort_after;
                let mine = fence.as_ref().map(|f| f.partition.clone());
                let held = handed.clone().unwrap_or_default();
                let p = Publisher::start(
                    (store, mine, held),
                    url.clone(),
                    BusNames::default(),
                    clock.clone(),
                    wake.clone(),
                    fault,
                )?;
                tracing::info!("deliveries go to the NATS firings stream; `rampart deliver` sends them");
                (Sending::Stream(p), wake)
            }
        };
        // With Telegram on, any firing may have queued a message (the account's chat is looked
        // up in the transaction); site firings and delistings are found by the sender's poll.
        let telegram = s.telegram.is_some();
        let committed_clock = clock.clone();
        let on_committed: OnCommitted = Box::new(move |done, deliveries| {
            if let Some(handed) = &handed {
                let dropped = handed.put(deliveries, committed_clock.now_ms());
                if dropped > 0 {
                    tracing::debug!(dropped, "writer: the handoff is full; these rows go to the stream as ids");
                }
            }
            if telegram || done.iter().any(|(row, _)| row.webhook_url.is_some()) {
                wake.notify_one();
            }
        });
        // Alerts end at their expiry where their shard runs (a market node: its partition's),
        // and leave the shard at once; so do those ended by `max_fires` or paused by the flood guard.
        let partition = s.role.partition();
        let commands = shards.commands();
        let hooks = WriterHooks {
            owns: Box::new(move |row| partition.owns_alert(&row.symbol)),
            // Each with the ended row's version: the shards apply it in storage's order with the
            // front's changes of the same alert (a full queue drops it: storage records no
            // firing of an ended or paused alert).
            on_ended: Box::new(move |rows| {
                for row in rows {
                    let _ = commands.alert(row.exchange, &row.symbol, row.change(false));
                }
            }),
            ..WriterHooks::new(Box::new(Texts), on_committed)
        };
        // A market node's writer writes only while its partition is this node's (`owner`).
        let writer_store = s.store.open()?.for_background()?.with_telegram(telegram).with_clock(clock.clone());
        let writer = Writer::start(
            match fence {
                Some(f) => writer_store.with_fence(f),
                None => writer_store,
            },
            shards.event_queues().into_iter().chain([market_events.clone()]).collect(),
            shards.shared().books.clone(),
            health.clone(),
            clock.clone(),
            hooks,
        )?;
        let period = Duration::from_secs(1);
        let checkpointer = Checkpointer::start(s.store.open()?, period, health.clone(), clock.clone(), pruning)?;
        let site_alerts = SiteAlertWatcher::start(s.store.open()?, shards.shared().clone())?;
        Ok(Persistence { health, webhooks, delivery, writer, checkpointer, market_events, site_alerts })
    }

    /// The process's metrics over the shards and this persistence side.
    pub(super) fn metrics(
        &self,
        s: &ServeSettings,
        shards: &ShardSet,
        clock: &SharedClock,
        cluster: Option<Arc<rampart_cluster::node::NodeHealth>>,
    ) -> Arc<Metrics> {
        let sources = MetricsSources {
            shared: shards.shared().clone(),
            venues: s.venues.clone(),
            commands: shards.command_queues(),
            events: shards.event_queues(),
            delivery: match &self.delivery {
                Sending::Here(d) => d.stats.clone(),
                Sending::Stream(_) => Arc::default(),
            },
            storage: self.health.clone(),
            started_ms: clock.now_ms(),
            clock: clock.clone(),
            cluster,
        };
        Arc::new(Metrics::new(sources, &self.webhooks))
    }

    /// Stops the writer, then delivery, then the checkpointer (after the shards).
    pub(super) fn stop(self, watch: &Shutdown) {
        drop(self.site_alerts);
        watch.stage("stopping the firing writer");
        self.writer.stop();
        watch.stage("stopping webhook delivery");
        match self.delivery {
            Sending::Here(d) => d.stop(),
            Sending::Stream(p) => drop(p),
        }
        watch.stage("stopping the checkpoint thread");
        drop(self.checkpointer);
    }
}
