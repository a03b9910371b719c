//! The site's market alerts in a cluster: every api node builds the same board from the
//! snapshots, and exactly one of them (the holder of the `site-market-alerts` lock in
//! PostgreSQL) evaluates the alerts against it. A board number crossed by a trade fires once;
//! every PostgreSQL session ended at once (a restart, as sessions see it) leaves the lock with
//! its holder and fires nothing twice; when the holder is killed (SIGKILL) the other api node
//! takes the lock and the next crossing fires once on it. Live feed from the venue simulator (its `/sim/trade` moves the board), one
//! market node, two api nodes, PostgreSQL and NATS on loopback.

use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{describe_output, pg_database, Server, SimVenue};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

fn created(node: &Server, postgres: &str, body: &Value) -> Value {
    let out = node.site_alerts(&["create", "--key", &node.key, "--postgres", postgres, &body.to_string()]);
    assert!(out.status.success(), "create {body}: {}", describe_output(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("the created alert as JSON");
    v["data"].clone()
}

fn fired(node: &Server, alert: &Value) -> usize {
    let all = node.get_authed("/v1/inbox?limit=1000");
    let data = all.ok("inbox")["data"].as_array().cloned().unwrap_or_default();
    data.iter().filter(|e| e["kind"] == "market.triggered" && e["alertId"] == *alert).count()
}

/// Which api node holds the lock, once exactly one does (at most 20 s).
fn holder<'a>(nodes: &[&'a Server]) -> &'a Server {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let holding: Vec<&Server> = nodes
            .iter()
            .copied()
            .filter(|n| n.alive() && n.get("/healthz", None).body["cluster"]["marketAlerts"] == json!(true))
            .collect();
        if holding.len() == 1 {
            return holding[0];
        }
        assert!(Instant::now() < deadline, "{} api nodes hold the market-alerts lock", holding.len());
        thread::sleep(Duration::from_millis(250));
    }
}

/// An `up5` alert one above its value now, then a trade 8 % up on the pair that moved least:
/// the alert fires once, on the node holding the lock; read through `reader`.
fn crossing_fires_once(sim: &SimVenue, reader: &Server, postgres: &str) {
    let board = reader.get_authed("/v1/market?exchange=binance&interval=5m");
    let up5 = board.ok("market")["data"]["up5"].as_f64().expect("up5");
    let body = json!({"type":"market","exchange":"binance","number":"up5","interval":"5m","direction":"above","threshold":up5 + 1.0});
    let alert = created(reader, postgres, &body);
    // Taken by the holder's board thread at its next build (every second) before the trade.
    thread::sleep(Duration::from_millis(2_500));
    assert_eq!(fired(reader, &alert["id"]), 0, "nothing crossed yet");
    let ranking = reader.get_authed("/v1/rankings/all?exchange=binance&metric=change&interval=5m&order=asc&limit=1");
    let lowest = ranking.ok("ranking")["data"][0].clone();
    let symbol = lowest["symbol"].as_str().expect("a symbol").to_owned();
    let p = lowest["price"].as_f64().expect("a price");
    sim.control("trade", &json!({"venue":"binance","symbol":symbol,"price":format!("{:.2}", p * 1.08)}));
    let deadline = Instant::now() + Duration::from_secs(20);
    while fired(reader, &alert["id"]) == 0 {
        assert!(Instant::now() < deadline, "the market alert did not fire in 20 s");
        thread::sleep(Duration::from_millis(500));
    }
    thread::sleep(Duration::from_secs(3));
    assert_eq!(fired(reader, &alert["id"]), 1, "one api node fired it, once");
}

#[test]
fn one_api_node_runs_the_market_alerts_and_another_takes_over_when_it_dies() {
    let sim = SimVenue::start(BIN, &["--sim-pairs", "8", "--venues", "binance"]);
    let config = sim.config(&["binance"], 8, "").display().to_string();
    let postgres = pg_database();
    let nats = rampart_testkit::nats::server().url();
    let common = [
        "--feed",
        "live",
        "--venues",
        "binance",
        "--config",
        &config,
        "--shards",
        "1",
        "--postgres",
        &postgres,
        "--nats",
        &nats,
    ];
    let _market = Server::start_with_key(BIN, &[&common[..], &["--role", "market", "--partition", "0/1"]].concat(), "");
    let api = [&common[..], &["--role", "api", "--partitions", "1"]].concat();
    let api_a = Server::start(BIN, &api);
    let api_b = Server::start_with_key(BIN, &api, &api_a.key);
    let first = holder(&[&api_a, &api_b]);
    let other = if std::ptr::eq(first, &api_a) { &api_b } else { &api_a };
    crossing_fires_once(&sim, other, &postgres);
    // A PostgreSQL restart, as sessions see it: every one ends at once. The lease outlives them:
    // the holder keeps it and the other never holds it too.
    let admin = rampart_store::db::Db::postgres(&rampart_testkit::pg::server().admin_url()).expect("connect as admin");
    admin
        .batch("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'")
        .expect("end every session");
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        assert!(std::ptr::eq(holder(&[&api_a, &api_b]), first), "the lock changed hands after the sessions ended");
        thread::sleep(Duration::from_millis(300));
    }
    crossing_fires_once(&sim, other, &postgres);
    first.kill();
    assert!(std::ptr::eq(holder(&[&api_a, &api_b]), other), "the surviving api node took the lock");
    crossing_fires_once(&sim, other, &postgres);
}
