//! Issue #59: a delivery worker's record of a batch of attempts' outcomes (`Store::record_attempts`),
//! all delivered (the baseline: one statement on PostgreSQL since #59's step 3) or all failed
//! (a receiver down: hundreds of hanging attempts timing out together), per backend.

use super::{bench_store, histogram, webhook_alert, Backend, Summary};
use rampart_store::store::{AttemptResult, FailKind, FiringRecord, Outcome};
use std::time::Instant;

/// What every attempt of a run came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Came {
    /// A 200.
    Delivered,
    /// No answer within the attempt's time (rescheduled: the first failure of each).
    TimedOut,
}

/// `deliveries` firings (one-shot alerts with webhooks, committed beforehand), then their first
/// attempts' outcomes recorded `batch` at a time, as a worker thread records what it held.
/// Latency is per batch's record; the rate is outcomes recorded per second of the whole run.
pub fn attempt_records(backend: Backend, batch: usize, deliveries: usize, came: Came) -> Summary {
    let (at, dir) = bench_store(backend, &format!("records-{came:?}"));
    let mut store = at.open().expect("store").for_background().expect("tuned");
    let account = store.create_account_with_key("developer", None, 0).expect("account").account_id;
    store.begin_group().expect("a group");
    let alerts: Vec<i64> = (0..deliveries)
        .map(|i| {
            store.insert_alert(&webhook_alert(account, false, format!("http://127.0.0.1:9/r/{i}"))).expect("alert").id
        })
        .collect();
    store.commit_group().expect("the alerts");
    for chunk in alerts.chunks(4_096) {
        let firings: Vec<FiringRecord> = chunk.iter().map(|&id| FiringRecord::at_price(id, 2, 1_000, true)).collect();
        store.record_firings(&firings, &rampart_store::text::Texts).expect("the firings");
    }
    let ids: Vec<i64> = alerts.iter().flat_map(|&a| store.deliveries_of(a).expect("rows")).map(|row| row.id).collect();
    assert_eq!(ids.len(), deliveries, "one delivery a firing");
    let result = match came {
        Came::Delivered => AttemptResult::Delivered { status: 200 },
        Came::TimedOut => {
            AttemptResult::Failed { status: None, error: "timed out after 10 s".into(), kind: FailKind::Timeout }
        }
    };
    let mut h = histogram();
    let started = Instant::now();
    for chunk in ids.chunks(batch.max(1)) {
        let outcomes: Vec<Outcome> = chunk
            .iter()
            .map(|&id| Outcome { id, result: result.clone(), at_ms: 11_000, latency_ms: 10_000, pulled_ms: 1_000 })
            .collect();
        let t = Instant::now();
        let due = store.record_attempts(&outcomes, rampart_delivery::schedule::next_attempt_ms).expect("recorded");
        let _ = h.record(t.elapsed().as_nanos() as u64);
        let rescheduled = due.iter().filter(|d| d.is_some()).count();
        assert_eq!(rescheduled, if came == Came::TimedOut { chunk.len() } else { 0 });
    }
    let took = started.elapsed();
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Summary::from_hist(
        &format!("record of {batch} outcomes, {came:?} ({backend:?}; {deliveries} in all)"),
        &h,
        Some(deliveries as f64 / took.as_secs_f64()),
    )
}
