//! The `soak` scenario (issue #62): the simulated market with a steady firing load for `--secs`
//! (30 minutes for the figures), retention set short, and every minute the database's
//! size, the server's resident memory and the firing → webhook latency of that minute's
//! deliveries. What must hold: all three flat once the first retention period has passed.
//!
//! Load: a repeating price alert on each of 400 Binance pairs just above its price, and a driver
//! that trades each of those pairs 0.2 % above and then below its level, one pair every 40 ms
//! (each pair fires every 32 s, under the flood guard's 15 in 3 minutes: about 12 firings a
//! second, 45 000 an hour, the day of a `*` alert in an hour); and one `*` alert
//! on every Binance pair (0.2 % in 5 m, cooldown 120 s). Every alert has a webhook to the
//! harness's receivers. Retention: every kind kept `SOAK_RETENTION` (set through the environment
//! the server inherits, `RAMPART_RETENTION__*`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::env::{hist, pct, sig, Env, Opts, Res};
use crate::harness::Receivers;

/// What the soak's server keeps of each kind.
const SOAK_RETENTION: &str = "2m";
/// Pairs with a repeating alert of their own, traded across it by the driver.
const PAIR_ALERTS: usize = 400;
/// The driver's pause between two trades.
const TRADE_EVERY: Duration = Duration::from_millis(40);
/// The receiver of the `*` alert's webhooks.
const EVERY_PAIR_RECEIVER: usize = 4;
/// One line of the per-minute table.
const MINUTE: Duration = Duration::from_secs(60);

/// Runs the soak; adds its per-minute rows to `result`.
pub fn run(o: &Opts, result: &mut Value, notes: &mut Vec<String>) -> Res<()> {
    for kind in ["INBOX", "OUTBOX", "ALERTS"] {
        std::env::set_var(format!("RAMPART_RETENTION__{kind}"), SOAK_RETENTION);
    }
    let env = Env::start(o)?;
    // Receivers 0 to 3 take the one-pair alerts' webhooks, 4 the `*` alert's (sent a second
    // after its first firing, as one body for that second's firings: not in the latencies).
    let rx = Receivers::start(EVERY_PAIR_RECEIVER + 1, 0).map_err(|e| e.to_string())?;
    let symbols = env.binance_symbols()?;
    let mut levels = Vec::with_capacity(PAIR_ALERTS);
    for (i, s) in symbols.iter().take(PAIR_ALERTS).enumerate() {
        let level = sig(env.price(s)? * 1.001);
        let url = rx.url(i % EVERY_PAIR_RECEIVER);
        let body = json!({"exchange":"binance","symbol":s,"type":"price","direction":"above","price":level,"repeat":true,"webhook_url":url});
        env.api.post("/v1/alerts", &body)?;
        levels.push((s.clone(), level));
    }
    let every = json!({"exchange":"binance","symbol":"*","type":"pct","direction":"any","pct":0.2,"window":"5m","cooldown_s":120,"webhook_url":rx.url(EVERY_PAIR_RECEIVER)});
    env.api.post("/v1/alerts", &every)?;
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let driver = {
        let (sim, stop) = (env.sim.clone(), stop.clone());
        thread::spawn(move || {
            for step in 0usize.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                // Each pair: above its level (fires), then below (re-arms), in turn.
                let (s, level) = &levels[step % levels.len()];
                let factor = if (step / levels.len()) % 2 == 0 { 1.002 } else { 0.998 };
                let _ = sim
                    .post("/trade", &json!({"venue":"binance","symbol":s,"price":format!("{}", sig(level * factor))}));
                thread::sleep(TRADE_EVERY);
            }
        })
    };
    let (mut rows, mut seen) = (Vec::new(), 0);
    while started.elapsed() < Duration::from_secs(o.secs) {
        thread::sleep(MINUTE.min(Duration::from_secs(o.secs).saturating_sub(started.elapsed())));
        let got = rx.received();
        let mut h = hist();
        for r in got[seen..].iter().filter(|r| r.receiver != EVERY_PAIR_RECEIVER) {
            let _ = h.record((r.at_us / 1_000 - r.trigger_ms).max(1) as u64);
        }
        let row = minute_row(&env, started.elapsed(), got.len() - seen, &h)?;
        eprintln!("{row}");
        rows.push(row);
        seen = got.len();
    }
    stop.store(true, Ordering::Relaxed);
    let _ = driver.join();
    result["retention"] = json!(SOAK_RETENTION);
    result["minutes"] = json!(rows);
    notes.push(format!(
        "Retention {SOAK_RETENTION} for every kind; {PAIR_ALERTS} repeating price alerts, each pair traded 0.2 % above and below its level in turn, one trade every 40 ms; one `*` pct alert on every Binance pair (0.2 %, cooldown 120 s). Each minute: the database's bytes and rows (rampart's /metrics, counted every 30 s), the server's VmRSS, and firing → webhook (ms) of that minute's one-pair deliveries (trigger.time → arrival)."
    ));
    Ok(())
}

/// One minute's figures: the database (from `/metrics`), the server's RSS and the latencies.
fn minute_row(env: &Env, at: Duration, webhooks: usize, h: &hdrhistogram::Histogram<u64>) -> Res<Value> {
    let metrics = ureq::get(&format!("{}/metrics", env.base))
        .call()
        .map_err(|e| e.to_string())?
        .into_string()
        .map_err(|e| e.to_string())?;
    let sample = |name: &str| {
        metrics.lines().find(|l| l.starts_with(name)).and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    let rss_kib = std::fs::read_to_string(format!("/proc/{}/status", env.srv_proc.pid()))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse::<u64>().ok());
    Ok(json!({
        "minute": (at.as_secs() + 30) / 60,
        "dbBytes": sample("rampart_storage_bytes "),
        "inboxRows": sample("rampart_storage_rows{table=\"inbox\"}"),
        "outboxRows": sample("rampart_storage_rows{table=\"outbox\"}"),
        "alertsRows": sample("rampart_storage_rows{table=\"alerts\"}"),
        "rssKiB": rss_kib,
        "webhooks": webhooks,
        "firingToWebhookMs": pct(h),
    }))
}
