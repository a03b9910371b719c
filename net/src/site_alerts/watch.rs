//! The active site alerts as the running service evaluates them: a watcher thread reloads them
//! from the store whenever `site_alerts_version` moves (a create, a delete, or a firing that
//! ended an alert, from this process or another) and publishes [`SiteAlertSet`] in
//! [`Shared::site_alerts`]. Shards pick up the density alerts at their next wall scan, the board
//! thread the market alerts at its next build: a change takes effect within [`POLL_MS`] plus one
//! scan or build period.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rampart_engine::site_alert::{DensitySpec, MarketSpec};
use rampart_engine::Registry;

use rampart_state::site_alerts::{DensityEntry, MarketEntry, SiteAlertSet};
use rampart_state::Shared;
use rampart_store::store::{SiteAlertRow, SiteCondition};
use rampart_store::store::{Store, StoreError};

/// How often the watcher asks the store whether the site alerts changed.
pub const POLL_MS: u64 = 50;

/// The set for `rows` (active alerts) over `registry`, at `version`.
pub fn build_set(rows: &[SiteAlertRow], registry: &Registry, version: i64) -> SiteAlertSet {
    let mut set = SiteAlertSet { version, ..SiteAlertSet::default() };
    for row in rows {
        let id = row.id as u64;
        match &row.condition {
            SiteCondition::Density { symbol, side, min_usd, max_dist_pct, min_age_s } => {
                let book = match symbol {
                    None => None,
                    Some(s) => match registry.find(row.exchange, s) {
                        Some(b) => Some(b),
                        None => {
                            set.unlisted += 1;
                            continue;
                        }
                    },
                };
                let spec = DensitySpec {
                    id,
                    side: *side,
                    min_usd: *min_usd,
                    max_dist_pct: *max_dist_pct,
                    min_age_ms: i64::from(*min_age_s) * 1000,
                    repeat: row.repeat,
                };
                set.density.push(DensityEntry { venue: row.exchange, book, spec });
            }
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

/// Reloads the set if the version or the registry's size moved since `seen`.
fn reload_if_changed(store: &Store, shared: &Shared, seen: &mut (i64, usize)) -> Result<bool, StoreError> {
    let version = store.site_alerts_version()?;
    let registry = shared.registry();
    if (version, registry.len()) == *seen {
        return Ok(false);
    }
    let rows = store.active_site_alerts()?;
    let set = build_set(&rows, &registry, version);
    if set.unlisted > 0 {
        tracing::warn!("{} active density alerts are on pairs not listed now; evaluated once listed", set.unlisted);
    }
    tracing::info!("site alerts: {} density, {} market active", set.density.len(), set.market.len());
    shared.site_alerts.store(Arc::new(set));
    *seen = (version, registry.len());
    Ok(true)
}

impl SiteAlertWatcher {
    /// Loads the set once (an error here is the caller's) and starts the thread.
    pub fn start(store: Store, shared: Arc<Shared>) -> Result<SiteAlertWatcher, StoreError> {
        let mut seen = (0, usize::MAX);
        reload_if_changed(&store, &shared, &mut seen)?;
        let thread = rampart_state::shutdown::StoppableThread::spawn("site-alert-watch", move |stop| {
            watch(&store, &shared, seen, &stop);
        })
        .map_err(StoreError::Io)?;
        Ok(SiteAlertWatcher { _thread: thread })
    }
}

fn watch(store: &Store, shared: &Shared, mut seen: (i64, usize), stop: &AtomicBool) {
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
