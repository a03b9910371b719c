//! The active site alerts as the running service evaluates them: a watcher thread reloads them
//! from the store whenever `site_alerts_version` moves (a create, a delete, or a firing that
//! ended an alert, from this process or another) and publishes [`SiteAlertSet`] in
//! [`Shared::site_alerts`]. The board thread picks up the market alerts at its next build: a
//! change takes effect within [`POLL_MS`] plus one build period. (Density alerts are wall alerts
//! since `decisions.md` §15: stored with the API's alerts and handed to the shards at create.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rampart_engine::site_alert::MarketSpec;

use rampart_state::site_alerts::{MarketEntry, SiteAlertSet};
use rampart_state::Shared;
use rampart_store::store::{SiteAlertRow, SiteCondition};
use rampart_store::store::{Store, StoreError};

/// How often the watcher asks the store whether the site alerts changed.
pub const POLL_MS: u64 = 50;

/// The set for `rows` (active alerts), at `version`.
pub fn build_set(rows: &[SiteAlertRow], version: i64) -> SiteAlertSet {
    let mut set = SiteAlertSet { version, ..SiteAlertSet::default() };
    for row in rows {
        let id = row.id as u64;
        match &row.condition {
            // None is stored since schema step 17 (they are wall alerts).
            SiteCondition::Density { .. } => {}
            SiteCondition::Market { number, interval, direction, threshold } => {
                let spec = MarketSpec { id, direction: *direction, threshold: *threshold, repeat: row.repeat };
                set.market.push(MarketEntry { venue: row.exchange, number: *number, interval: *interval, spec });
            }
        }
    }
    set
}

/// The thread that keeps [`Shared::site_alerts`] current. Stopped on drop.
pub struct SiteAlertWatcher {
    _thread: rampart_state::shutdown::StoppableThread,
}

/// Reloads the set if the version moved since `seen`.
fn reload_if_changed(store: &Store, shared: &Shared, seen: &mut i64) -> Result<bool, StoreError> {
    let version = store.site_alerts_version()?;
    if version == *seen {
        return Ok(false);
    }
    let rows = store.active_site_alerts()?;
    let set = build_set(&rows, version);
    tracing::info!("site alerts: {} market active", set.market.len());
    shared.site_alerts.store(Arc::new(set));
    *seen = version;
    Ok(true)
}

impl SiteAlertWatcher {
    /// Loads the set once (an error here is the caller's) and starts the thread.
    pub fn start(store: Store, shared: Arc<Shared>) -> Result<SiteAlertWatcher, StoreError> {
        let mut seen = 0;
        reload_if_changed(&store, &shared, &mut seen)?;
        let thread = rampart_state::shutdown::StoppableThread::spawn("site-alert-watch", move |stop| {
            watch(&store, &shared, seen, &stop);
        })
        .map_err(StoreError::Io)?;
        Ok(SiteAlertWatcher { _thread: thread })
    }
}

fn watch(store: &Store, shared: &Shared, mut seen: i64, stop: &AtomicBool) {
    let mut failing = false;
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(POLL_MS));
        match reload_if_changed(store, shared, &mut seen) {
            Ok(_) => failing = false,
            Err(e) => {
                if !failing {
                    tracing::error!("site alerts: cannot read them ({e}); the last set stays in use");
                }
                failing = true;
            }
        }
    }
}
