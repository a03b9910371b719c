//! What kind of process `serve` is (`--role`): the whole service in one process, or a cluster's
//! market or api node; the server lock each role takes, and a market node's ownership of its
//! partition (`rampart_cluster::owner`), held for the process's life.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use rampart_cluster::owner::{Keeper, Ownership};
use rampart_state::clock::SharedClock;
use rampart_state::partition::Partition;
use rampart_store::store::{Lease, ServerLock, StoreLocation};

use crate::starting::Phase;

/// What kind of process `serve` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeRole {
    /// The whole service in one process (no cluster configuration).
    Single,
    /// A cluster's market node for one partition.
    Market(Partition),
    /// A cluster's api node over this many partitions.
    Api(u16),
}

impl NodeRole {
    /// From `--role`, `--partition` and `--partitions`.
    pub(crate) fn parse(role: Option<&str>, partition: Option<&str>, partitions: Option<u16>) -> Result<NodeRole> {
        match (role.unwrap_or("single"), partition, partitions) {
            ("single", None, None) => Ok(NodeRole::Single),
            ("single", _, _) => bail!("--partition and --partitions are for --role market and --role api"),
            ("market", Some(p), None) => Ok(NodeRole::Market(p.parse()?)),
            ("market", _, _) => bail!("--role market needs --partition I/N (and no --partitions)"),
            ("api", None, Some(n)) => {
                let p = Partition { index: 0, count: n };
                if n == 0 || n > rampart_state::partition::PARTITIONS_MAX {
                    bail!("--partitions must be between 1 and {}", rampart_state::partition::PARTITIONS_MAX);
                }
                Ok(NodeRole::Api(p.count))
            }
            ("api", _, _) => bail!("--role api needs --partitions N, the market nodes' N (and no --partition)"),
            (other, _, _) => bail!("invalid role '{other}'. Allowed: single, market, api"),
        }
    }

    /// The pairs this process owns.
    pub(crate) fn partition(self) -> Partition {
        match self {
            NodeRole::Market(p) => p,
            _ => Partition::default(),
        }
    }

    /// The server lock this role takes.
    pub(crate) fn lock(self, store: &StoreLocation) -> Result<ServerLock> {
        Ok(match (self, store) {
            (NodeRole::Market(p), StoreLocation::Postgres(url)) => ServerLock::acquire_partition(url, p.count)?,
            _ => ServerLock::acquire(store)?,
        })
    }

    /// Whether this role may wait as a standby before it serves (a market node on PostgreSQL).
    pub(crate) fn may_wait(self, store: &StoreLocation) -> bool {
        matches!((self, store), (NodeRole::Market(_), StoreLocation::Postgres(_)))
    }

    /// A market node on PostgreSQL: waits as its partition's standby until it owns it (its
    /// port answering `phase`: live, not ready, and the owner's lease), then keeps the lease
    /// renewed (`rampart_cluster::owner`) for the life of the returned value; if another node
    /// claims the partition, the process ends with [`EXIT_OWNERSHIP_LOST`]. Other roles: `None`.
    /// `hot` says whether its books are ready (a hot standby's shards have their books and
    /// history).
    pub(crate) fn own(
        self,
        store: &StoreLocation,
        clock: &SharedClock,
        phase: &Phase,
        hot: &dyn Fn() -> bool,
    ) -> Result<Option<Owner>> {
        let (NodeRole::Market(p), StoreLocation::Postgres(url)) = (self, store) else {
            return Ok(None);
        };
        let store = rampart_store::store::Store::open_postgres(url).context("opening PostgreSQL for the lease")?;
        let partition = p.to_string();
        let mut waiting = |lease: Option<&Lease>| {
            let (not_ready, live) = standby_bodies(&partition, lease, hot());
            phase.set(not_ready, live);
        };
        let ownership = rampart_cluster::owner::claim(&store, &partition, clock, &mut waiting);
        let on_lost = Box::new(|| {
            tracing::error!("exiting: this node no longer owns its partition (status {EXIT_OWNERSHIP_LOST})");
            std::process::exit(EXIT_OWNERSHIP_LOST);
        });
        let keeper = Keeper::start(store, ownership.clone(), clock.clone(), on_lost)?;
        Ok(Some(Owner { ownership, _keeper: keeper }))
    }
}

/// What a standby's port answers while it waits (`/livez` 200 with the second; everything else
/// 503 with the first): the role, the state, the partition, whether its books are ready (`hot`)
/// and the lease it waits on.
pub(crate) fn standby_bodies(partition: &str, lease: Option<&Lease>, hot: bool) -> (String, String) {
    let mut owner = rampart_state::json::Json::with_capacity(96);
    match lease {
        Some(l) => {
            owner.raw("{\"epoch\":").int(l.epoch).raw(",\"holder\":").str(&l.holder);
            owner.raw(",\"expiresInMs\":").int(l.expires_in_ms).raw("}");
        }
        None => {
            owner.raw("null");
        }
    }
    let owner = owner.finish();
    let why = match lease {
        Some(l) => format!("standby: partition {partition} is owned by {} (epoch {})", l.holder, l.epoch),
        None => format!("standby: claiming partition {partition}"),
    };
    let mut j = rampart_state::json::Json::with_capacity(256);
    j.raw("{\"error\":").str(&why).raw(",\"status\":\"standby\",\"role\":\"market\",\"state\":\"standby\"");
    j.raw(",\"partition\":").str(partition).raw(",\"hot\":").bool(hot).raw(",\"owner\":").raw(&owner).raw("}");
    let mut live = rampart_state::json::Json::with_capacity(192);
    live.raw("{\"status\":\"live\",\"role\":\"market\",\"state\":\"standby\",\"partition\":").str(partition);
    live.raw(",\"hot\":").bool(hot).raw(",\"owner\":").raw(&owner).raw("}");
    (j.finish(), live.finish())
}

/// The exit status of a market node that lost its partition to another node (a supervisor
/// starts it again, and it waits as a standby).
pub(crate) const EXIT_OWNERSHIP_LOST: i32 = 75;

/// A market node's ownership of its partition; the lease is released when this is dropped.
pub(crate) struct Owner {
    pub(crate) ownership: Arc<Ownership>,
    _keeper: Keeper,
}
