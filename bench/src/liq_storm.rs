//! The `liquidations` scenario (issue #61, decisions §17): a market-wide liquidation storm on the
//! live feed. `rampart sim-venue` puts one liquidation on every perpetual of Binance, Bybit and
//! OKX at once (`POST /sim/liquidation` with `"symbol":"*"`), several rounds a little apart, each
//! round's worth its own (so each is known in the bodies); `*` `order` alerts of each venue
//! (cooldown 0) collect them. Checked per alert: at most one body a second (bodies of one alert at
//! least `BODY_GAP_MS` apart) and nothing lost (every injected liquidation of every pair of
//! the venue in its bodies once). Binance sends one liquidation per contract per second (the
//! largest), so rounds are `ROUND_GAP` apart.

use std::collections::{HashMap, HashSet};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::env::{Env, Opts, Res};
use crate::harness::{self, Receivers};

/// The venues stormed (Bitget publishes no liquidations).
const STORMED: [&str; 3] = ["binance", "bybit", "okx"];
/// Time between two rounds: more than Binance's one-a-second rule.
const ROUND_GAP: Duration = Duration::from_millis(1_300);
/// Least gap between two bodies of one alert that still counts as "one a second" (the batch
/// closes a second after its first firing; arrival times jitter by the delivery's work).
const BODY_GAP_MS: f64 = 900.0;
/// Round `r`'s liquidation is worth this plus `r` × [`ROUND_STEP_USD`] (so each round is known
/// in a body).
const ROUND_USD: f64 = 1_000_000.0;
/// The step between two rounds' worth: more than the rounding up to a contract's lot adds (an OKX
/// contract is worth $100 to $1 000).
const ROUND_STEP_USD: f64 = 10_000.0;

/// Runs the storm with `alerts_per_venue` `*` alerts on each venue; fills `result`.
pub fn run(o: &Opts, result: &mut Value, notes: &mut Vec<String>) -> Res<()> {
    let env = Env::start(o)?;
    let (per_venue, rounds) = (o.storm_alerts.max(1), o.liq_rounds.max(1));
    let rx = Receivers::start(8, 0).map_err(|e| e.to_string())?;
    let mut pairs: HashMap<&str, HashSet<String>> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    for v in STORMED {
        loop {
            let list = env.api.get(&format!("/v1/perp?exchange={v}"))?;
            let names: HashSet<String> = list["data"]
                .as_array()
                .map(|l| l.iter().filter_map(|p| p["symbol"].as_str().map(str::to_owned)).collect())
                .unwrap_or_default();
            if !names.is_empty() {
                pairs.insert(v, names);
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("{v}: no perpetual served within 60 s"));
            }
            thread::sleep(Duration::from_millis(500));
        }
    }
    let mut alerts: HashMap<i64, &str> = HashMap::new();
    for v in STORMED {
        for i in 0..per_venue {
            let body = json!({"type":"liquidations","symbol":"*","exchange":v,"event":"order","min_usd":100,
                "cooldown_s":0,"webhook_url":rx.url(i % 8)});
            let a = env.api.post("/v1/alerts", &body)?;
            alerts.insert(a["data"]["id"].as_i64().ok_or("no id")?, v);
        }
    }
    let t0 = harness::now_us();
    for r in 0..rounds {
        for v in STORMED {
            let usd = ROUND_USD + ROUND_STEP_USD * r as f64;
            env.sim.post("/liquidation", &json!({"venue":v,"symbol":"*","side":"long","usd":usd}))?;
        }
        thread::sleep(ROUND_GAP);
    }
    // Every alert's every (pair, round) delivered, or the wait is over.
    let want: usize = alerts.values().map(|v| pairs[v].len() * rounds).sum();
    let wait = Instant::now() + Duration::from_secs(60);
    let check = loop {
        let got = rx.received();
        let c = judge(&got, &alerts, (&pairs, rounds));
        if c.found >= want || Instant::now() > wait {
            break c;
        }
        thread::sleep(Duration::from_millis(250));
    };
    let secs = (check.last_us - t0) as f64 / 1e6;
    // The same spacing as the bodies left the writer (committed), before delivery's work.
    let commits = env.body_commits()?;
    let committed: usize = alerts.keys().filter_map(|a| commits.get(a)).map(Vec::len).sum();
    let committed_close: usize = alerts
        .keys()
        .filter_map(|a| commits.get(a))
        .map(|t| t.windows(2).filter(|w| ((w[1] - w[0]) as f64) < BODY_GAP_MS).count())
        .sum();
    result["liquidationStorm"] = json!({
        "venues": STORMED, "alertsPerVenue": per_venue, "rounds": rounds,
        "perpetuals": STORMED.map(|v| pairs[v].len()),
        "expected": want, "delivered": check.found, "duplicates": check.duplicates,
        "bodies": check.bodies, "bodiesCloserThanASecond": check.too_close,
        "closeGapsMs": {"under100": check.close_gaps[0], "100to500": check.close_gaps[1], "500to900": check.close_gaps[2]},
        "triggersPerBodyMax": check.triggers_max, "lastBodyAfterS": secs,
        "bodiesCommitted": committed, "bodiesCommittedCloserThanASecond": committed_close,
        "ok": check.found == want && check.duplicates == 0 && check.too_close == 0,
    });
    env.describe(result)?;
    notes.push(format!(
        "{rounds} rounds {} ms apart, each one liquidation of ${ROUND_USD} + round x ${ROUND_STEP_USD} on every perpetual of {}; `*` order alerts, min_usd 100, cooldown 0, 8 receivers.",
        ROUND_GAP.as_millis(),
        STORMED.join(", ")
    ));
    notes.push("The simulator's own liquidations arrive too: they are in the bodies and not counted.".into());
    Ok(())
}

/// What the bodies show.
struct Check {
    found: usize,
    duplicates: usize,
    bodies: usize,
    too_close: usize,
    /// Gaps under a second between two bodies of one alert, ms: under 100, 100 to 500, 500 to 900.
    close_gaps: [usize; 3],
    triggers_max: usize,
    last_us: i64,
}

fn judge(
    got: &[harness::Received],
    alerts: &HashMap<i64, &str>,
    (pairs, rounds): (&HashMap<&str, HashSet<String>>, usize),
) -> Check {
    let mut seen: HashSet<(i64, String, u64)> = HashSet::new();
    let (mut duplicates, mut too_close, mut triggers_max, mut last_us) = (0, 0, 0, 0);
    let mut arrivals: HashMap<i64, Vec<i64>> = HashMap::new();
    for r in got.iter().filter(|r| alerts.contains_key(&r.alert_id)) {
        arrivals.entry(r.alert_id).or_default().push(r.at_us);
        triggers_max = triggers_max.max(r.liquidations.len());
        last_us = last_us.max(r.at_us);
        let venue = alerts[&r.alert_id];
        for (symbol, usd) in &r.liquidations {
            // Worth at least its round's amount at the mark, rounded up to the lot.
            let round = (usd - ROUND_USD) / ROUND_STEP_USD;
            if !(0.0..rounds as f64).contains(&round) || !pairs[venue].contains(symbol) {
                continue;
            }
            let r_ix = round.floor() as u64;
            if !seen.insert((r.alert_id, symbol.clone(), r_ix)) {
                duplicates += 1;
            }
        }
    }
    let mut close_gaps = [0usize; 3];
    for times in arrivals.values_mut() {
        times.sort_unstable();
        for gap_ms in times.windows(2).map(|w| (w[1] - w[0]) as f64 / 1e3).filter(|g| *g < BODY_GAP_MS) {
            too_close += 1;
            close_gaps[usize::from(gap_ms >= 100.0) + usize::from(gap_ms >= 500.0)] += 1;
        }
    }
    let bodies = arrivals.values().map(Vec::len).sum();
    Check { found: seen.len(), duplicates, bodies, too_close, close_gaps, triggers_max, last_us }
}
