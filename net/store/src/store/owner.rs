//! Who owns a market partition (`decisions.md` §14, PostgreSQL schema version 5): a lease row
//! per partition with an epoch that grows at every change of owner. A market node claims the
//! partition when the lease has expired, renews it while it runs, and every write of its
//! firing writer checks, inside the write's transaction, that its epoch is still the row's
//! (fencing): a node that lost the partition can no longer record anything, whatever it
//! believes. Lease times are the database server's clock, so nodes' clocks need not agree.
//!
//! Rationale: the session advisory lock this replaces vanished silently when PostgreSQL
//! restarted, and a second node was then admitted for a running partition (both fired). A row
//! survives a restart; an epoch checked on every write makes a stale owner harmless even before
//! it notices.

use super::conn::{Fence, Store};
use crate::db::{vals, StoreError};

/// The database server's clock in Unix milliseconds (one clock for every node).
const DB_NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// A partition's lease as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// Grows by one at every claim.
    pub epoch: i64,
    /// The holding process's id (random per process).
    pub holder: String,
    /// Milliseconds until it expires by the database's clock (negative: expired).
    pub expires_in_ms: i64,
}

impl Store {
    /// This store's writes of firings, delistings and expiries refused once `fence` no longer
    /// owns its partition (a market node's writer).
    pub fn with_fence(mut self, fence: Fence) -> Store {
        self.fence = Some(fence);
        self
    }

    /// Inside a transaction: fails with [`StoreError::Fenced`] when this store writes for an
    /// owner that is no longer the partition's. The row is read `FOR SHARE`, so a claim by
    /// another node waits for this transaction, and a write never lands after a claim.
    pub(crate) fn check_fence(&self) -> Result<(), StoreError> {
        let Some(f) = &self.fence else { return Ok(()) };
        let sql = "SELECT epoch FROM partition_owners WHERE partition = ?1 FOR SHARE";
        match self.db.query_opt(sql, vals![f.partition.as_str()], |r| r.get::<i64>(0))? {
            Some(e) if e == f.epoch => Ok(()),
            _ => Err(StoreError::Fenced),
        }
    }

    /// Claims `partition` for `holder` for `lease_ms` when nobody holds it or its lease had
    /// expired by the database's clock: the new epoch, or `None` while another holds it.
    pub fn claim_partition(&self, partition: &str, holder: &str, lease_ms: i64) -> Result<Option<i64>, StoreError> {
        let sql = format!(
            "INSERT INTO partition_owners (partition, epoch, holder, expires_ms) VALUES (?1, 1, ?2, {DB_NOW_MS} + ?3)
             ON CONFLICT (partition) DO UPDATE SET epoch = partition_owners.epoch + 1, holder = excluded.holder,
                expires_ms = excluded.expires_ms
             WHERE partition_owners.expires_ms < {DB_NOW_MS}
             RETURNING epoch"
        );
        self.db.query_opt(&sql, vals![partition, holder, lease_ms], |r| r.get::<i64>(0))
    }

    /// Extends `holder`'s lease of `epoch` by `lease_ms` from now; false when the partition has
    /// another epoch (another node claimed it: this one must stop). An expired lease nobody
    /// claimed is extended: its owner simply goes on.
    pub fn renew_partition(
        &self,
        partition: &str,
        holder: &str,
        epoch: i64,
        lease_ms: i64,
    ) -> Result<bool, StoreError> {
        let sql = format!(
            "UPDATE partition_owners SET expires_ms = {DB_NOW_MS} + ?4 WHERE partition = ?1 AND holder = ?2 AND epoch = ?3"
        );
        Ok(self.db.execute(&sql, vals![partition, holder, epoch, lease_ms])? == 1)
    }

    /// Ends `holder`'s lease of `epoch` now (a clean stop), so a standby claims at once.
    pub fn release_partition(&self, partition: &str, holder: &str, epoch: i64) -> Result<(), StoreError> {
        self.db.execute(
            "UPDATE partition_owners SET expires_ms = 0 WHERE partition = ?1 AND holder = ?2 AND epoch = ?3",
            vals![partition, holder, epoch],
        )?;
        Ok(())
    }

    /// The partition's lease, if it was ever claimed.
    pub fn partition_lease(&self, partition: &str) -> Result<Option<Lease>, StoreError> {
        let sql = format!("SELECT epoch, holder, expires_ms - {DB_NOW_MS} FROM partition_owners WHERE partition = ?1");
        self.db.query_opt(&sql, vals![partition], |r| {
            Ok(Lease { epoch: r.get(0)?, holder: r.get(1)?, expires_in_ms: r.get(2)? })
        })
    }
}
