//! The fault test's checker, over PostgreSQL's rows (what was recorded) and the receiver's
//! bodies (what was delivered): every acknowledged alert fired; every firing is recorded once
//! per `(alert.id, trigger.time)` and each one-shot alert once at all; every recorded firing
//! was delivered at least once, and nothing was delivered that was not recorded; the client
//! that resumed the `alerts` stream again and again received every inbox entry once, in order.

use std::collections::{BTreeMap, BTreeSet};

use rampart_store::db::Db;
use serde_json::Value;

/// A firing: `(alert.id, trigger.time)`.
pub type Firing = (i64, i64);

/// What storage holds: each recorded firing with how many times it was recorded, and each
/// alert's `trigger_count`.
pub struct Recorded {
    pub firings: BTreeMap<Firing, usize>,
    pub counts: BTreeMap<i64, i64>,
}

/// Reads the recorded firings (the `alert.triggered` inbox rows) and the alerts' counts.
pub fn recorded(url: &str) -> Result<Recorded, String> {
    let db = Db::postgres(url).map_err(|e| e.to_string())?;
    let sql = "SELECT alert_id, body FROM inbox WHERE kind = 'alert.triggered'";
    let rows = db.query(sql, &[], |r| Ok((r.get::<i64>(0)?, r.get::<String>(1)?))).map_err(|e| e.to_string())?;
    let mut firings = BTreeMap::new();
    for (alert, body) in rows {
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("inbox body {body}: {e}"))?;
        *firings.entry((alert, v["trigger"]["time"].as_i64().unwrap_or(-1))).or_default() += 1;
    }
    let sql = "SELECT id, trigger_count FROM alerts";
    let counts = db.query(sql, &[], |r| Ok((r.get::<i64>(0)?, r.get::<i64>(1)?))).map_err(|e| e.to_string())?;
    Ok(Recorded { firings, counts: counts.into_iter().collect() })
}

/// Delivered firings with how many times each arrived.
pub fn delivered(bodies: &[Value]) -> BTreeMap<Firing, usize> {
    let mut m = BTreeMap::new();
    for b in bodies {
        let f = (b["alert"]["id"].as_i64().unwrap_or(-1), b["trigger"]["time"].as_i64().unwrap_or(-1));
        *m.entry(f).or_default() += 1;
    }
    m
}

/// Whether every acknowledged alert has fired and been delivered (the end of the wait).
pub fn settled(acked: &BTreeSet<i64>, rec: &Recorded, got: &BTreeMap<Firing, usize>) -> bool {
    let fired: BTreeSet<i64> = rec.firings.keys().map(|f| f.0).collect();
    let arrived: BTreeSet<i64> = got.keys().map(|f| f.0).collect();
    acked.is_subset(&fired) && fired.is_subset(&arrived)
}

/// Every violation of the properties above, as text (empty: all hold).
pub fn violations(acked: &BTreeSet<i64>, rec: &Recorded, got: &BTreeMap<Firing, usize>) -> Vec<String> {
    let mut out = Vec::new();
    let fired: BTreeSet<i64> = rec.firings.keys().map(|f| f.0).collect();
    let lost: Vec<&i64> = acked.difference(&fired).collect();
    if !lost.is_empty() {
        out.push(format!("acknowledged alerts that never fired: {lost:?}"));
    }
    let twice: Vec<_> = rec.firings.iter().filter(|(_, &n)| n > 1).collect();
    if !twice.is_empty() {
        out.push(format!("firings recorded more than once: {twice:?}"));
    }
    let mut per_alert: BTreeMap<i64, usize> = BTreeMap::new();
    for f in rec.firings.keys() {
        *per_alert.entry(f.0).or_default() += 1;
    }
    let doubled: Vec<_> = per_alert.iter().filter(|(_, &n)| n > 1).collect();
    if !doubled.is_empty() {
        out.push(format!("one-shot alerts fired more than once (alert, firings): {doubled:?}"));
    }
    let counts: Vec<_> =
        rec.counts.iter().filter(|(id, &n)| n != per_alert.get(id).copied().unwrap_or(0) as i64).collect();
    if !counts.is_empty() {
        out.push(format!("trigger counts that differ from the recorded firings (alert, count): {counts:?}"));
    }
    let undelivered: Vec<_> = rec.firings.keys().filter(|f| !got.contains_key(f)).collect();
    if !undelivered.is_empty() {
        out.push(format!("recorded firings never delivered: {undelivered:?}"));
    }
    let unrecorded: Vec<_> = got.keys().filter(|f| !rec.firings.contains_key(f)).collect();
    if !unrecorded.is_empty() {
        out.push(format!("deliveries of firings never recorded: {unrecorded:?}"));
    }
    out
}

/// What is wrong with what the resuming stream client received (`resumed`): it must be every
/// inbox entry of the account, each once, in id order (issue #50: a resume never skips or
/// repeats an entry, two partitions' market nodes writing).
pub fn resumed(url: &str, resumed: &rampart_tests::resume::Resumed) -> Vec<String> {
    let ids = &resumed.ids;
    eprintln!("stream: {} entries over {} resumes", ids.len(), resumed.resumes);
    let Some(&first) = ids.first() else { return vec!["the resuming stream received nothing".to_owned()] };
    let listed = Db::postgres(url).map_err(|e| e.to_string()).and_then(|db| {
        let sql = "SELECT id FROM inbox WHERE account_id = (SELECT account_id FROM inbox WHERE id = ?1) ORDER BY id";
        db.query(sql, &[first.into()], |r| r.get::<i64>(0)).map_err(|e| e.to_string())
    });
    match listed {
        Err(e) => vec![format!("reading the inbox: {e}")],
        Ok(listed) if listed != *ids => {
            let missed: Vec<_> = listed.iter().filter(|id| !ids.contains(id)).collect();
            let mut seen = BTreeSet::new();
            let repeated: Vec<_> = ids.iter().filter(|&&id| !seen.insert(id)).collect();
            vec![format!(
                "the resuming stream: {} entries received, {} in the inbox; missed {missed:?}, repeated {repeated:?}",
                ids.len(),
                listed.len()
            )]
        }
        Ok(_) => Vec::new(),
    }
}
