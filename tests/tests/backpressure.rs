//! The backlog and backpressure path between a shard and the persistence side, through real
//! processes: with each shard's event queue shrunk to one slot (`--events-max 1`, hidden), one
//! trade that fires forty alerts at once must record every firing exactly once (triggered
//! state, count, inbox entry), in order, and a later trade must fire nothing more.

use std::collections::HashSet;
use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{Server, SimVenue};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");
const ALERTS: usize = 40;

fn price(server: &Server) -> f64 {
    let r = server.get_authed("/v1/symbols/BTCUSDT?exchange=binance");
    let p = r.ok("symbol")["data"]["price"].as_f64().unwrap_or(0.0);
    assert!(p > 0.0, "{}", r.text);
    p
}

fn triggered_ids(server: &Server) -> Vec<Value> {
    let list = server.get_authed("/v1/alerts?status=triggered&limit=100");
    list.ok("alerts")["data"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_burst_of_firings_through_a_one_slot_queue_loses_nothing() {
    let sim = SimVenue::start(BIN, &["--sim-pairs", "8", "--venues", "binance", "--step-ms", "600000"]);
    let config = sim.config(&["binance"], 4, "").display().to_string();
    let server = Server::start(
        BIN,
        &["--feed", "live", "--config", &config, "--shards", "1", "--venues", "binance", "--events-max", "1"],
    );
    let p = price(&server);
    let mut ids = HashSet::new();
    for i in 0..ALERTS {
        let level = ((p * (1.0 + 0.001 * (i + 1) as f64)) * 100.0).round() / 100.0;
        let body = json!({"exchange":"binance","symbol":"BTCUSDT","type":"price","direction":"above","price":level});
        let r = server.request("POST", "/v1/alerts", Some(&format!("Bearer {}", server.key)), Some(&body.to_string()));
        ids.insert(r.ok("create")["data"]["id"].as_i64().expect("id"));
    }
    // One trade above every level: forty firings from one tick.
    sim.control("trade", &json!({"venue":"binance","symbol":"BTCUSDT","price":format!("{:.2}", p * 1.06)}));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let done = triggered_ids(&server);
        if done.len() >= ALERTS {
            for a in &done {
                assert_eq!(a["triggerCount"], 1, "{a}");
            }
            let got: HashSet<i64> = done.iter().filter_map(|a| a["id"].as_i64()).collect();
            assert_eq!(got, ids, "every alert fired once");
            break;
        }
        assert!(Instant::now() < deadline, "{} of {ALERTS} recorded\n{}", done.len(), server.diagnostics());
        thread::sleep(Duration::from_millis(200));
    }
    let inbox = server.get_authed("/v1/inbox?limit=100");
    let entries = inbox.ok("inbox")["data"].as_array().cloned().unwrap_or_default();
    let fired: Vec<i64> =
        entries.iter().filter(|e| e["kind"] == "alert.triggered").filter_map(|e| e["alertId"].as_i64()).collect();
    assert_eq!(fired.len(), ALERTS, "one inbox entry per firing: {}", inbox.text);
    assert_eq!(fired.iter().copied().collect::<HashSet<_>>(), ids);
    // Another trade through the levels: the alerts are spent, nothing more is recorded.
    sim.control("trade", &json!({"venue":"binance","symbol":"BTCUSDT","price":format!("{:.2}", p * 0.97)}));
    sim.control("trade", &json!({"venue":"binance","symbol":"BTCUSDT","price":format!("{:.2}", p * 1.07)}));
    thread::sleep(Duration::from_millis(1_000));
    assert!(triggered_ids(&server).iter().all(|a| a["triggerCount"] == 1));
    let health = server.get("/healthz", None);
    assert_eq!(health.status, 200, "{}", health.text);
}
