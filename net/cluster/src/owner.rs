//! A market node's ownership of its partition (`decisions.md` §14): claimed as a lease in
//! PostgreSQL (`rampart_store::store::owner`), renewed every [`RENEW_EVERY`], and fenced by its
//! epoch on every write of the node's firing writer.
//!
//! - A node starts as a **standby** while another owns the partition: it reads the lease every
//!   [`STANDBY_POLL`] and claims it by the [`ClaimRule`]: once it has seen the *same* lease
//!   expired for [`EXPIRED_FOR_MS`], and only after [`READING_FOR_MS`] of its own reads without
//!   a storage error. An owner that died is replaced within [`LEASE_MS`] + [`EXPIRED_FOR_MS`] +
//!   [`STANDBY_POLL`] of its last renewal (a hot standby then only hands its alerts to its
//!   running shards). An owner cut off from PostgreSQL together with the standby (a restart of
//!   PostgreSQL) renews within [`RENEW_EVERY`] of PostgreSQL's return, before the standby has
//!   read for [`READING_FOR_MS`], so it keeps its partition.
//! - The **owner** is believed by itself only until [`LEASE_MS`] after the start of its last
//!   successful renewal ([`Ownership::is_owner`]): past that it stops publishing snapshots,
//!   though it keeps evaluating, and its writer's firings wait for storage. The database's
//!   expiry is later than that moment (it counts from the renewal's statement, which starts
//!   after the owner read its clock), and a standby claims only past the database's expiry, so
//!   two nodes never both believe they own the partition (clocks running at the same rate
//!   suffice; they need not agree).
//! - If a renewal finds another epoch, the node lost the partition: `on_lost` runs (the binary
//!   ends the process; a supervisor starts it again, as a standby). Its writer's firings are
//!   refused by the fence meanwhile, so nothing is recorded twice.
//! - A clean stop releases the lease, so a standby claims within [`STANDBY_POLL`] +
//!   [`EXPIRED_FOR_MS`] (one node at a time can be upgraded).

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
pub const EXPIRED_FOR_MS: i64 = 200;
/// How long a standby must have read the lease without a storage error before it claims an
/// expired one: after an outage both it and the owner saw (a restart of PostgreSQL), the owner
/// renews first (its next renewal is due within [`RENEW_EVERY`], its reconnect within 0.5 s).
pub const READING_FOR_MS: i64 = 1_000;
/// How often a standby reads the lease.
pub const STANDBY_POLL: Duration = Duration::from_millis(100);

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

/// When a standby may claim a lease (sans I/O: each look is given what was read and when):
/// when there is none; or when it has seen the same expired lease for [`EXPIRED_FOR_MS`] and
/// has read without a storage error for [`READING_FOR_MS`].
#[derive(Debug, Default)]
pub struct ClaimRule {
    /// The expired lease seen: its epoch and when it was first seen so, this node's clock.
    seen_expired: Option<(i64, i64)>,
    /// When the current run of successful reads began, this node's clock.
    reading_since: Option<i64>,
}

impl ClaimRule {
    /// One look at `now_ms`: `read` is the lease read (`Ok(None)`: there is none), or `Err`
    /// when the read failed (forgets the expiry seen and restarts the run of reads). True when
    /// the lease may be claimed now.
    pub fn look(&mut self, read: Result<Option<&Lease>, ()>, now_ms: i64) -> bool {
        let Ok(lease) = read else {
            (self.seen_expired, self.reading_since) = (None, None);
            return false;
        };
        let since = *self.reading_since.get_or_insert(now_ms);
        match lease {
            None => true,
            Some(l) if l.expires_in_ms < 0 => {
                let first = match self.seen_expired {
                    Some((epoch, first)) if epoch == l.epoch => first,
                    _ => {
                        self.seen_expired = Some((l.epoch, now_ms));
                        now_ms
                    }
                };
                now_ms - first >= EXPIRED_FOR_MS && now_ms - since >= READING_FOR_MS
            }
            Some(_) => {
                self.seen_expired = None;
                false
            }
        }
    }

    /// The claim was refused (another node claimed first): what was seen is stale.
    pub fn lost_race(&mut self) {
        self.seen_expired = None;
    }
}

/// A standby's watch of one lease, claiming it by the [`ClaimRule`].
pub struct Standby {
    name: String,
    /// How the logs name it.
    label: String,
    /// This process's id in the lease.
    pub holder: String,
    rule: ClaimRule,
    told: bool,
    /// The last read failed (logged once per run of failures: the standby reads every 0.1 s).
    failing: bool,
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
            rule: ClaimRule::default(),
            told: false,
            failing: false,
            seen: None,
        }
    }

    /// One look at the lease at `now_ms`: the epoch when this claimed it now. Storage errors
    /// are logged (the first of a run, and the read that ends it).
    pub fn try_claim(&mut self, store: &Store, now_ms: i64) -> Option<i64> {
        let (name, label) = (self.name.as_str(), self.label.as_str());
        let read = store.partition_lease(name);
        match (&read, std::mem::replace(&mut self.failing, read.is_err())) {
            (Err(e), false) => tracing::warn!("{label}: reading its lease: {e}; retrying"),
            (Ok(_), true) => tracing::info!("{label}: its lease read again"),
            _ => {}
        }
        let lease = read.as_ref().ok().cloned().flatten();
        let due = self.rule.look(read.as_ref().map(Option::as_ref).map_err(|_| ()), now_ms);
        self.seen.clone_from(&lease);
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
                self.rule.lost_race();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(epoch: i64, expires_in_ms: i64) -> Lease {
        Lease { epoch, holder: "h".into(), expires_in_ms }
    }

    /// Looks every [`STANDBY_POLL`] from `from_ms` at what `read` answers then; the first time
    /// the rule says claim.
    fn first_due(rule: &mut ClaimRule, from_ms: i64, read: impl Fn(i64) -> Result<Option<Lease>, ()>) -> Option<i64> {
        let poll = STANDBY_POLL.as_millis() as i64;
        (0..100)
            .map(|i| from_ms + i * poll)
            .find(|&t| rule.look(read(t).as_ref().map(Option::as_ref).map_err(|_| ()), t))
    }

    #[test]
    fn no_lease_is_claimed_at_the_first_look() {
        assert!(ClaimRule::default().look(Ok(None), 0));
    }

    #[test]
    fn a_lease_that_ends_while_the_standby_reads_is_claimed_after_it_was_seen_expired_for_the_margin() {
        let mut rule = ClaimRule::default();
        // Reading for 5 s; the owner's last renewal made the lease end at 3 000.
        let due = first_due(&mut rule, -2_000, |t| Ok(Some(lease(4, 3_000 - t - 1))));
        let due = due.expect("claimed");
        assert!(due >= 3_000 + EXPIRED_FOR_MS, "{due}");
        assert!(due <= 3_000 + EXPIRED_FOR_MS + 2 * STANDBY_POLL.as_millis() as i64, "{due}");
    }

    #[test]
    fn after_an_outage_the_standby_reads_for_a_second_before_claiming_so_the_owner_renews_first() {
        let mut rule = ClaimRule::default();
        // Reads fail from 0 to 5 000 (PostgreSQL restarting); the lease ended at 1 000.
        let due =
            first_due(
                &mut rule,
                -1_000,
                |t| if (0..5_000).contains(&t) { Err(()) } else { Ok(Some(lease(4, 1_000 - t))) },
            );
        let due = due.expect("claimed");
        assert!(due >= 5_000 + READING_FOR_MS, "{due}");
        // The owner renewed at 5 400: its lease is live again, and nothing is claimed.
        let mut rule = ClaimRule::default();
        let renewed = |t: i64| {
            if (0..5_000).contains(&t) {
                Err(())
            } else if t < 5_400 {
                Ok(Some(lease(4, 1_000 - t)))
            } else {
                Ok(Some(lease(4, 7_400 - t)))
            }
        };
        assert_eq!(first_due(&mut rule, -1_000, |t| renewed(t.min(7_000))), None);
    }

    #[test]
    fn a_fresh_standby_that_finds_an_expired_lease_reads_for_the_margin_first() {
        let mut rule = ClaimRule::default();
        let due = first_due(&mut rule, 10_000, |_| Ok(Some(lease(2, -60_000)))).expect("claimed");
        assert_eq!(due, 10_000 + READING_FOR_MS);
    }

    #[test]
    fn a_new_epoch_restarts_the_expiry_seen() {
        let mut rule = ClaimRule::default();
        assert!(!rule.look(Ok(Some(&lease(1, 500))), 0));
        assert!(!rule.look(Ok(Some(&lease(1, -1))), 1_000));
        // Another standby claimed and lost it at once: epoch 2 expired, first seen now.
        assert!(!rule.look(Ok(Some(&lease(2, -1))), 1_100));
        assert!(rule.look(Ok(Some(&lease(2, -1))), 1_100 + EXPIRED_FOR_MS));
    }
}
