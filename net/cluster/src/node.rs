//! What a cluster node reports about its links (`/healthz`, `/metrics`): whether its NATS
//! connections are up and, on an api node, how old each partition's snapshots are.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

/// Snapshots older than this make an api node's `/healthz` say stale (the market node
/// publishes every [`super::snapshots::PUBLISH_PERIOD`]).
pub const STALE_MS: i64 = 3_000;

/// A node's role in a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Owns a partition of the books, evaluates their alerts, publishes snapshots.
    Market,
    /// Serves the API from the market nodes' snapshots.
    Api,
}

impl Role {
    /// As `--role` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Market => "market",
            Role::Api => "api",
        }
    }
}

/// What [`NodeHealth::problem`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// What, as `/healthz` says it.
    pub why: String,
    /// The node still serves (`/healthz` 200 "degraded"); false: 503.
    pub serving: bool,
}

/// One partition as an api node last heard of it.
#[derive(Debug, Default)]
pub struct PartitionSeen {
    /// When its last snapshot message arrived, this node's Unix ms (0: never).
    pub last_ms: AtomicI64,
    /// A whole snapshot of it has arrived (every book's every part).
    pub complete: AtomicBool,
    /// Snapshot messages applied.
    pub messages: AtomicU64,
    /// Messages refused as malformed or of another cluster shape.
    pub refused: AtomicU64,
}

/// A node's links, written by its cluster threads, read by the front.
#[derive(Debug)]
pub struct NodeHealth {
    /// The node's role.
    pub role: Role,
    /// Its partition (market) or the cluster's partition count (api: `index` unused).
    pub partition: rampart_state::partition::Partition,
    /// The snapshot thread's NATS connection is up.
    pub snapshots_connected: AtomicBool,
    /// The command thread's NATS connection is up.
    pub commands_connected: AtomicBool,
    /// Api nodes: per partition.
    pub partitions: Box<[PartitionSeen]>,
    /// Alert commands sent (api) or applied (market).
    pub commands: AtomicU64,
    /// Alert commands that could not be sent or applied (logged).
    pub commands_failed: AtomicU64,
    /// Api nodes: this node holds the `site-market-alerts` lock and runs the site's market
    /// alerts ([`NamedLock`]).
    pub market_alerts: std::sync::Arc<AtomicBool>,
    /// Market nodes on PostgreSQL: the partition's lease ([`super::owner`]).
    pub ownership: Option<std::sync::Arc<super::owner::Ownership>>,
}

impl NodeHealth {
    /// A node of `role` in `partition`.
    pub fn new(role: Role, partition: rampart_state::partition::Partition) -> NodeHealth {
        let seen = match role {
            Role::Api => partition.count as usize,
            Role::Market => 0,
        };
        NodeHealth {
            role,
            partition,
            snapshots_connected: AtomicBool::new(false),
            commands_connected: AtomicBool::new(false),
            partitions: (0..seen).map(|_| PartitionSeen::default()).collect(),
            commands: AtomicU64::new(0),
            commands_failed: AtomicU64::new(0),
            market_alerts: std::sync::Arc::new(AtomicBool::new(false)),
            ownership: None,
        }
    }

    /// The same node, holding `ownership` of its partition (a market node on PostgreSQL).
    pub fn with_ownership(mut self, ownership: std::sync::Arc<super::owner::Ownership>) -> NodeHealth {
        self.ownership = Some(ownership);
        self
    }

    /// What is wrong with the node now, if anything: a NATS link is down, (market) its
    /// partition's lease is not renewed, or (api) a partition's snapshots are older than
    /// [`STALE_MS`]. Only the last leaves the node serving ([`Problem::serving`]): every api
    /// node sees a dead market node alike and still answers every other partition's pairs and
    /// every write, so a load balancer should keep it.
    pub fn problem(&self, now_ms: i64) -> Option<Problem> {
        let down = |why: String| Some(Problem { why, serving: false });
        if !self.snapshots_connected.load(Ordering::Acquire) || !self.commands_connected.load(Ordering::Acquire) {
            return down("NATS is unreachable".into());
        }
        if self.ownership.as_ref().is_some_and(|o| !o.is_owner(now_ms)) {
            return down(format!(
                "the lease of partition {} is not renewed (PostgreSQL unreachable, or lost)",
                self.partition
            ));
        }
        let stale: Vec<String> = self.stale_partitions(now_ms).iter().map(u16::to_string).collect();
        match stale.is_empty() {
            true => None,
            false => Some(Problem {
                why: format!("market snapshots are stale for partition {}", stale.join(", ")),
                serving: true,
            }),
        }
    }

    /// Api nodes: the partitions whose last snapshot is older than [`STALE_MS`] at `now_ms`.
    pub fn stale_partitions(&self, now_ms: i64) -> Vec<u16> {
        let stale = |p: &PartitionSeen| now_ms - p.last_ms.load(Ordering::Acquire) > STALE_MS;
        (0..self.partitions.len()).filter(|&i| stale(&self.partitions[i])).map(|i| i as u16).collect()
    }

    /// Milliseconds since partition `i`'s last snapshot (`None`: never heard of).
    pub fn age_ms(&self, i: usize, now_ms: i64) -> Option<i64> {
        let last = self.partitions.get(i)?.last_ms.load(Ordering::Acquire);
        (last > 0).then(|| (now_ms - last).max(0))
    }
}

/// Holds a named lease (`rampart_store::store::owner`, the `partition_owners` table, as a
/// partition's) for as long as it can: on a cluster's api nodes, the one that runs the site's
/// market alerts (every api node builds the same board; only the holder fires). It renews every
/// [`super::owner::RENEW_EVERY`]; `held` turns false when a renewal finds another holder, or
/// when renewals have failed for [`super::owner::LEASE_MS`]; another node takes it by the
/// [`super::owner::ClaimRule`] (the lease seen expired, and its own reads unbroken for a
/// second), so two nodes never both hold it, a PostgreSQL restart included (the session
/// advisory lock used before did not survive one). A holder that dies is replaced about 2.5 s
/// after its last renewal.
pub struct NamedLock {
    /// True while this node holds the lock.
    pub held: std::sync::Arc<AtomicBool>,
    _thread: rampart_state::shutdown::StoppableThread,
}

impl NamedLock {
    /// Starts trying to hold `name` in `store`; `held` is set while it does. A clean stop
    /// releases it.
    pub fn start(
        store: rampart_store::store::Store,
        name: &'static str,
        held: std::sync::Arc<AtomicBool>,
        clock: rampart_state::clock::SharedClock,
    ) -> std::io::Result<NamedLock> {
        use super::owner::{Standby, LEASE_MS, RENEW_EVERY};
        let h = held.clone();
        let thread = rampart_state::shutdown::StoppableThread::spawn("named-lock", move |stop| {
            let mut standby = Standby::new(name, name);
            // The epoch held, and until when (this node's clock) it counts as held.
            let mut holding: Option<(i64, i64)> = None;
            while !stop.load(Ordering::Acquire) {
                let start = clock.now_ms();
                holding = match holding {
                    None => standby.try_claim(&store, start).map(|epoch| (epoch, start + LEASE_MS)),
                    Some((epoch, until)) => match store.renew_partition(name, &standby.holder, epoch, LEASE_MS) {
                        Ok(true) => Some((epoch, start + LEASE_MS)),
                        Ok(false) => None,
                        Err(e) => {
                            tracing::warn!("{name}: renewing: {e}");
                            Some((epoch, until))
                        }
                    },
                };
                let now = holding.is_some_and(|(_, until)| clock.now_ms() < until);
                if now != h.swap(now, Ordering::AcqRel) {
                    tracing::info!("{} the lock {name:?}", if now { "took" } else { "lost" });
                }
                std::thread::sleep(RENEW_EVERY);
            }
            if let Some((epoch, _)) = holding {
                h.store(false, Ordering::Release);
                if let Err(e) = store.release_partition(name, &standby.holder, epoch) {
                    tracing::warn!("{name}: releasing: {e}");
                }
            }
        })?;
        Ok(NamedLock { held, _thread: thread })
    }
}
