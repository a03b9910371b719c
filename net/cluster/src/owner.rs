//! A market node's ownership of its partition (`decisions.md` §14): claimed as a lease in
//! PostgreSQL (`rampart_store::store::owner`), renewed every [`RENEW_EVERY`], and fenced by its
//! epoch on every write of the node's firing writer.
//!
//! - A node starts as a **standby** while another owns the partition: it waits, reading the
//!   lease every [`STANDBY_POLL`], and claims it only once it has seen the *same* lease expired
//!   for [`CLAIM_AFTER_MS`] of its own reads. An owner cut off from PostgreSQL for a while (a
//!   restart) renews within [`RENEW_EVERY`] of PostgreSQL's return, so it keeps its partition;
//!   an owner that died does not, and is replaced within [`LEASE_MS`] + [`CLAIM_AFTER_MS`] +
//!   [`STANDBY_POLL`] of its last renewal (then the node starts: alerts loaded, books built).
//! - The **owner** is believed by itself only until [`LEASE_MS`] after the start of its last
//!   successful renewal ([`Ownership::is_owner`]): past that it stops publishing snapshots,
//!   though it keeps evaluating, and its writer's firings wait for storage. A standby cannot
//!   claim before that moment plus [`CLAIM_AFTER_MS`], so two nodes never both believe they own
//!   the partition (clocks running at the same rate suffice; they need not agree).
//! - If a renewal finds another epoch, the node lost the partition: `on_lost` runs (the binary
//!   ends the process; a supervisor starts it again, as a standby). Its writer's firings are
//!   refused by the fence meanwhile, so nothing is recorded twice.
//! - A clean stop releases the lease, so a standby claims within [`STANDBY_POLL`] +
//!   [`CLAIM_AFTER_MS`] (one node at a time can be upgraded).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rampart_state::clock::SharedClock;
use rampart_state::shutdown::StoppableThread;
use rampart_store::store::{Fence, Lease, Store};

/// How long a claim or renewal holds the partition, by the database's clock.
pub const LEASE_MS: i64 = 2_000;
/// How often the owner renews (four renewals per lease: three may fail in a row).
pub const RENEW_EVERY: Duration = Duration::from_millis(500);
/// How long a standby must see one lease expired before claiming it.
pub const CLAIM_AFTER_MS: i64 = 1_000;
/// How often a standby reads the lease.
pub const STANDBY_POLL: Duration = Duration::from_millis(250);

/// This node's claim of its partition, shared by the keeper thread, the snapshot publisher and
/// `/healthz`.
#[derive(Debug)]
pub struct Ownership {
    /// The partition, as `index/count`.
    pub partition: String,
    /// This process's id in the lease (random).
    pub holder: String,
    /// The epoch claimed.
    pub epoch: i64,
    /// This node's clock, Unix ms: owner until then unless renewed.
    valid_until_ms: AtomicI64,
    /// Another node claimed the partition.
    lost: AtomicBool,
}

impl Ownership {
    /// Whether this node may act as the owner at `now_ms` (its clock).
    pub fn is_owner(&self, now_ms: i64) -> bool {
        !self.lost.load(Ordering::Acquire) && now_ms < self.valid_until_ms.load(Ordering::Acquire)
    }

    /// Whether another node claimed the partition.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// The fence for the node's firing writer.
    pub fn fence(&self) -> Fence {
        Fence { partition: self.partition.clone(), epoch: self.epoch }
    }
}

/// A random holder id for this process.
fn holder_id() -> String {
    let mut b = [0u8; 8];
    let random = getrandom::getrandom(&mut b).is_ok();
    let n = if random { u64::from_le_bytes(b) } else { u64::from(std::process::id()) };
    format!("{}-{n:016x}", std::process::id())
}

/// A standby's watch of one lease: it claims the lease only once it has seen the same lease
/// expired for [`CLAIM_AFTER_MS`] of its own reads (or when there is none).
pub struct Standby {
    name: String,
    /// How the logs name it.
    label: String,
    /// This process's id in the lease.
    pub holder: String,
    /// The expired lease seen: its epoch and when it was first seen so, this node's clock.
    seen_expired: Option<(i64, i64)>,
    told: bool,
    /// The lease as last read (`None`: none yet, or the read failed).
    pub seen: Option<Lease>,
}

impl Standby {
    /// A standby of the lease `name` (`label` in the logs) with a fresh holder id.
    pub fn new(name: &str, label: &str) -> Standby {
        Standby {
            name: name.to_owned(),
            label: label.to_owned(),
            holder: holder_id(),
            seen_expired: None,
            told: false,
            seen: None,
        }
    }

    /// One look at the lease at `now_ms`: the epoch when this claimed it now. Storage errors
    /// are logged and forget what was seen (an expiry must be seen across successful reads).
    pub fn try_claim(&mut self, store: &Store, now_ms: i64) -> Option<i64> {
        let (name, label) = (self.name.as_str(), self.label.as_str());
        let lease = match store.partition_lease(name) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!("{label}: reading its lease: {e}; waiting");
                self.seen_expired = None;
                self.seen = None;
                return None;
            }
        };
        self.seen.clone_from(&lease);
        let due = match &lease {
            None => true,
            Some(l) if l.expires_in_ms < 0 => match self.seen_expired {
                Some((epoch, since)) if epoch == l.epoch => now_ms - since >= CLAIM_AFTER_MS,
                _ => {
                    self.seen_expired = Some((l.epoch, now_ms));
                    false
                }
            },
            Some(_) => {
                self.seen_expired = None;
                false
            }
        };
        if !due {
            if let (Some(l), false) = (&lease, self.told) {
                tracing::info!(
                    "{label}: standby (held by {}, epoch {}); taking over when its lease ends",
                    l.holder,
                    l.epoch
                );
                self.told = true;
            }
            return None;
        }
        match store.claim_partition(name, &self.holder, LEASE_MS) {
            Ok(Some(epoch)) => {
                tracing::info!("{label}: held by this node (epoch {epoch})");
                self.told = false;
                Some(epoch)
            }
            Ok(None) => {
                self.seen_expired = None;
                None
            }
            Err(e) => {
                tracing::warn!("{label}: claiming it: {e}; waiting");
                None
            }
        }
    }
}

/// Waits, as a standby, until this node owns `partition` (`index/count`) in `store`; logs what
/// it waits for, and every storage error (it keeps trying); `waiting` is told the lease it
/// read at each look while it waits (`None`: no lease, or the read failed), for the node's
/// health answers.
pub fn claim(
    store: &Store,
    partition: &str,
    clock: &SharedClock,
    waiting: &mut dyn FnMut(Option<&Lease>),
) -> Arc<Ownership> {
    let mut standby = Standby::new(partition, &format!("partition {partition}"));
    loop {
        let start = clock.now_ms();
        if let Some(epoch) = standby.try_claim(store, start) {
            return Arc::new(Ownership {
                partition: partition.to_owned(),
                holder: standby.holder,
                epoch,
                valid_until_ms: AtomicI64::new(start + LEASE_MS),
                lost: AtomicBool::new(false),
            });
        }
        waiting(standby.seen.as_ref());
        std::thread::sleep(STANDBY_POLL);
    }
}

/// Renews the lease until stopped, then releases it; `on_lost` runs once if another node
/// claimed the partition.
pub struct Keeper {
    _thread: StoppableThread,
}

impl Keeper {
    /// Starts renewing `own` through `store`.
    pub fn start(
        store: Store,
        own: Arc<Ownership>,
        clock: SharedClock,
        on_lost: Box<dyn FnOnce() + Send>,
    ) -> std::io::Result<Keeper> {
        let thread = StoppableThread::spawn("owner", move |stop: Arc<AtomicBool>| {
            let mut on_lost = Some(on_lost);
            let mut failing = false;
            while !stop.load(Ordering::Acquire) {
                let start = clock.now_ms();
                match store.renew_partition(&own.partition, &own.holder, own.epoch, LEASE_MS) {
                    Ok(true) => {
                        own.valid_until_ms.fetch_max(start + LEASE_MS, Ordering::AcqRel);
                        if std::mem::take(&mut failing) {
                            tracing::info!("partition {}: lease renewed again (epoch {})", own.partition, own.epoch);
                        }
                    }
                    Ok(false) => {
                        own.lost.store(true, Ordering::Release);
                        tracing::error!(
                            "partition {}: another node claimed it; this node (epoch {}) stops",
                            own.partition,
                            own.epoch
                        );
                        if let Some(f) = on_lost.take() {
                            f();
                        }
                        return;
                    }
                    Err(e) => {
                        if !std::mem::replace(&mut failing, true) {
                            tracing::warn!("partition {}: renewing its lease: {e}; retrying", own.partition);
                        }
                    }
                }
                std::thread::sleep(RENEW_EVERY);
            }
            if !own.is_lost() {
                match store.release_partition(&own.partition, &own.holder, own.epoch) {
                    Ok(()) => tracing::info!("partition {}: released (epoch {})", own.partition, own.epoch),
                    Err(e) => tracing::warn!("partition {}: releasing: {e}", own.partition),
                }
            }
        })?;
        Ok(Keeper { _thread: thread })
    }
}
