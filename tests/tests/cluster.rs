//! The delivery role on NATS JetStream: `serve --postgres --nats` hands every firing's delivery
//! to the firings stream instead of sending it; two `rampart deliver` processes (two workers
//! each) send them. Every firing reaches the receiver, and once unless a worker died with it in
//! hand (sent, not yet acknowledged): one of the two processes is killed with SIGKILL midway,
//! and the other delivers the rest.
//! PostgreSQL and nats-server are Debian's, started by the test on loopback ports. Also: a pair
//! listed after start served through the api nodes, and the venues' perpetuals through a cluster
//! of market nodes on the live feed (decisions.md §17).

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{
    alert_ids, allow_private_config, binance_symbols, json_receiver, pg_cut_off, pg_database, pg_database_with_role,
    Deliver, Server, SimVenue, FAST,
};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

fn deliver(postgres: &str, nats: &str, config: &str) -> (Deliver, String) {
    let d = Deliver::start(BIN, postgres, nats, config);
    let health = d.health.clone();
    (d, health)
}

fn get(url: &str) -> (u16, String) {
    match ureq::get(url).call() {
        Ok(r) => (r.status(), r.into_string().unwrap_or_default()),
        Err(ureq::Error::Status(code, r)) => (code, r.into_string().unwrap_or_default()),
        Err(e) => panic!("GET {url}: {e}"),
    }
}

/// Alert id → times its webhook arrived.
fn arrivals(hits: &[Value]) -> BTreeMap<i64, usize> {
    let mut m = BTreeMap::new();
    for h in hits {
        *m.entry(h["alert"]["id"].as_i64().unwrap_or(-1)).or_insert(0) += 1;
    }
    m
}

#[test]
fn firings_go_through_the_stream_to_the_workers_and_survive_a_killed_worker() {
    let postgres = pg_database();
    // A NATS server of its own: on one shared by the tests here, their delivery processes would
    // take each other's firings (one stream, one consumer name).
    let owned_nats = rampart_testkit::nats::start_owned(None).expect("a NATS server");
    let nats = owned_nats.url();
    let (port, hits) = json_receiver();
    let cfg = allow_private_config("cluster");
    let server = Server::start(BIN, &[FAST, &["--config", &cfg, "--postgres", &postgres, "--nats", &nats]].concat());
    let (mut first, _) = deliver(&postgres, &nats, &cfg);
    let (mut second, second_at) = deliver(&postgres, &nats, &cfg);
    let names = binance_symbols(&server, 30);
    let auth = format!("Bearer {}", server.key);
    for s in &names {
        let body = json!({"symbol": s, "type": "pct", "direction": "any", "pct": 0.1, "window": "5m",
                          "webhook_url": format!("http://127.0.0.1:{port}/hook")});
        server.request("POST", "/v1/alerts", Some(&auth), Some(&body.to_string())).ok("create");
    }
    // Midway, one worker process dies without a word.
    let deadline = Instant::now() + Duration::from_secs(60);
    while hits.lock().expect("lock").len() < 5 {
        assert!(Instant::now() < deadline, "fewer than 5 webhooks in 60 s");
        thread::sleep(Duration::from_millis(20));
    }
    first.kill();
    let at_kill = arrivals(&hits.lock().expect("lock")).len();
    // Every alert that fired (each fires once: not repeating) reaches the receiver.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let fired = alert_ids(&server, "triggered");
        let got = arrivals(&hits.lock().expect("lock"));
        // At least one delivery after the kill, so the survivor's part is tested.
        if fired.len() >= 10 && got.len() > at_kill && fired.iter().all(|id| got.contains_key(id)) {
            assert!(got.keys().all(|id| fired.contains(id)), "a webhook for an alert that did not fire: {got:?}");
            let twice: Vec<_> = got.iter().filter(|(_, n)| **n > 1).collect();
            // A repeat is a firing the killed process had sent but not yet acknowledged.
            let in_hand_max = 2 * rampart_cluster::worker::IN_FLIGHT_MAX;
            assert!(twice.len() <= in_hand_max, "more repeats than the killed process could hold: {twice:?}");
            eprintln!("{} alerts fired, {at_kill} delivered when a worker process was killed", fired.len());
            break;
        }
        assert!(Instant::now() < deadline, "fired {fired:?}, delivered {got:?}");
        // Polled once a second: the account's plan allows 120 requests a minute.
        thread::sleep(Duration::from_secs(1));
    }
    // The surviving process says it is healthy and counts what it delivered.
    let (status, health) = get(&format!("{second_at}/healthz"));
    assert_eq!(status, 200, "{health}");
    let health: Value = serde_json::from_str(&health).expect("JSON");
    assert_eq!((health["status"].as_str(), health["connected"].as_i64()), (Some("ok"), Some(2)), "{health}");
    let (status, metrics) = get(&format!("{second_at}/metrics"));
    assert_eq!(status, 200);
    let delivered = metrics
        .lines()
        .find_map(|l| l.strip_prefix("rampart_deliver_delivered_total "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert!(delivered.is_some_and(|n| n >= 1), "{metrics}");
    assert_eq!(get(&format!("{second_at}/nothing")).0, 404);
    second.kill();
}

/// NATS goes away while alerts fire: the firings wait in the database's outbox (nothing is
/// lost, nothing acknowledged is dropped), and when a NATS server is back on the same address
/// (with an empty store) the publisher makes the stream again, the workers reconnect, and every
/// alert that fired is delivered: those that waited in the outbox, and those the lost stream
/// held unanswered (published while no worker was alive to take them), which the publisher
/// hands to the new stream.
#[test]
fn firings_wait_out_a_nats_outage_in_the_outbox() {
    let postgres = pg_database();
    let nats_server = rampart_testkit::nats::start_owned(None).expect("a NATS server");
    let (nats, port_n) = (nats_server.url(), nats_server.port());
    let (port, hits) = json_receiver();
    let cfg = allow_private_config("cluster-outage");
    let server = Server::start(BIN, &[FAST, &["--config", &cfg, "--postgres", &postgres, "--nats", &nats]].concat());
    let (mut first_worker, _) = deliver(&postgres, &nats, &cfg);
    let auth = format!("Bearer {}", server.key);
    let create = |symbols: &[String]| {
        for s in symbols {
            let body = json!({"symbol": s, "type": "pct", "direction": "any", "pct": 0.1, "window": "5m",
                              "webhook_url": format!("http://127.0.0.1:{port}/hook")});
            server.request("POST", "/v1/alerts", Some(&auth), Some(&body.to_string())).ok("create");
        }
    };
    // A few alerts before the outage, more while no worker runs, the rest during the outage:
    // had all been created at first, a slow machine could see every one fire before NATS went
    // away, and none left to fire during it.
    let symbols = binance_symbols(&server, 25);
    let (before, rest) = symbols.split_at(5);
    let (held, during) = rest.split_at(5);
    create(before);
    let deadline = Instant::now() + Duration::from_secs(60);
    while hits.lock().expect("lock").is_empty() {
        assert!(Instant::now() < deadline, "no webhook in 60 s");
        thread::sleep(Duration::from_millis(20));
    }
    // No worker alive: the firings of these alerts are published and held by the stream,
    // which is then lost with its server.
    first_worker.kill();
    create(held);
    let outbox = rampart_store::db::Db::postgres(&postgres).expect("the database");
    let in_stream = || {
        let sql = "SELECT count(*) FROM outbox WHERE state = 'pending' AND published_ms IS NOT NULL";
        outbox.query(sql, &[], |r| r.get::<i64>(0)).expect("count").first().copied().unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while in_stream() < 2 {
        assert!(Instant::now() < deadline, "no firing held by the stream in 60 s");
        thread::sleep(Duration::from_millis(200));
    }
    // NATS away until more alerts have fired; the delivery process says so.
    drop(nats_server);
    let (mut worker, _) = deliver(&postgres, &nats, &cfg);
    let health = wait_health(&format!("{}/healthz", worker.health), 503);
    assert!(health.contains("not every worker is connected"), "{health}");
    let fired_before = alert_ids(&server, "triggered").len();
    create(during);
    let deadline = Instant::now() + Duration::from_secs(60);
    // Polled once a second: the account's plan allows 120 requests a minute.
    while alert_ids(&server, "triggered").len() < fired_before + 2 {
        assert!(Instant::now() < deadline, "no alert fired during the outage");
        thread::sleep(Duration::from_secs(1));
    }
    let _back = rampart_testkit::nats::start_owned(Some(port_n)).expect("NATS back on the same port");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let fired = alert_ids(&server, "triggered");
        let got = arrivals(&hits.lock().expect("lock"));
        if fired.len() >= fired_before + 2 && fired.iter().all(|id| got.contains_key(id)) {
            break;
        }
        assert!(Instant::now() < deadline, "after the outage: fired {fired:?}, delivered {got:?}");
        thread::sleep(Duration::from_secs(1));
    }
    wait_health(&format!("{}/healthz", worker.health), 200);
    worker.kill();
}

/// `GET url` until it answers `status` (at most 30 s); the body.
fn wait_health(url: &str, status: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (s, body) = get(url);
        if s == status {
            return body;
        }
        assert!(Instant::now() < deadline, "{url} not {status} in 30 s: {body}");
        thread::sleep(Duration::from_millis(200));
    }
}

/// `rampart deliver` says in `/healthz` when PostgreSQL is away, though no firing needs it,
/// and is healthy again when it is back.
#[test]
fn the_delivery_process_says_when_postgres_is_away() {
    let (postgres, role) = pg_database_with_role();
    // A NATS server of its own: on one shared by the tests here, their delivery processes would
    // take each other's firings (one stream, one consumer name).
    let owned_nats = rampart_testkit::nats::start_owned(None).expect("a NATS server");
    let nats = owned_nats.url();
    let cfg = allow_private_config("deliver-health");
    let worker = Deliver::start(BIN, &postgres, &nats, &cfg);
    let url = format!("{}/healthz", worker.health);
    wait_health(&url, 200);
    pg_cut_off(&role, true);
    let body = wait_health(&url, 503);
    assert!(body.contains("storage cannot be read or written"), "{body}");
    pg_cut_off(&role, false);
    wait_health(&url, 200);
}

/// A pair the venue lists after the cluster started (here: not trading when the nodes listed
/// it) is served through a running api node without a restart (its listing watch adds the pair,
/// and the market node publishes the book it added), with its live price, and through an api
/// node started after it.
#[test]
fn a_pair_listed_after_start_is_served_through_the_api_nodes() {
    let sim = SimVenue::start(BIN, &["--sim-pairs", "8", "--venues", "binance", "--delist", "binance:SOLUSDT@0"]);
    let config = sim.config(&["binance"], 4, "").display().to_string();
    let postgres = pg_database();
    // A NATS server of its own: on one shared by the tests here, their delivery processes would
    // take each other's firings (one stream, one consumer name).
    let owned_nats = rampart_testkit::nats::start_owned(None).expect("a NATS server");
    let nats = owned_nats.url();
    let live = ["--feed", "live", "--config", &config, "--shards", "1", "--venues", "binance"];
    let common = [live.as_slice(), &["--postgres", &postgres, "--nats", &nats]].concat();
    let api_args = [common.as_slice(), &["--role", "api", "--partitions", "1"]].concat();
    let _market =
        Server::start_with_key(BIN, &[common.as_slice(), &["--role", "market", "--partition", "0/1"]].concat(), "");
    let api = Server::start(BIN, &api_args);
    let path = "/v1/symbols/SOLUSDT?exchange=binance";
    assert_eq!(api.get_authed(path).status, 404, "not trading at start");
    sim.control("relist", &json!({"venue": "binance", "symbol": "SOLUSDT"}));
    let live_price = |node: &Server, what: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let r = node.get(path, Some(&api.key));
            if r.status == 200 && r.body["data"]["price"].as_f64().is_some_and(|p| p > 0.0) {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: {} {}", r.status, r.text);
            thread::sleep(Duration::from_millis(500));
        }
    };
    live_price(&api, "the running api node serves the new pair");
    let later = Server::start_with_key(BIN, &api_args, &api.key);
    live_price(&later, "an api node started after the listing serves it");
}

/// The venues' own perpetuals through a cluster (decisions.md §17, issue #61): two market nodes
/// on the live feed each run the perpetual sessions of their partition (`perp: up` on each); an
/// api node serves every pair's perpetual from their snapshots; and a `*` liquidations alert made
/// on it, decided on both market nodes, fires through each one's fenced writer for a
/// liquidation injected at the venue on every perpetual: each pair once, none twice.
#[test]
fn the_venues_perpetuals_go_through_a_cluster() {
    let sim = SimVenue::start(BIN, &["--sim-pairs", "8", "--venues", "binance"]);
    let config = sim.config(&["binance"], 4, "[derivatives]\nbinance_oi_poll_s = 2\n").display().to_string();
    let postgres = pg_database();
    let owned_nats = rampart_testkit::nats::start_owned(None).expect("a NATS server");
    let nats = owned_nats.url();
    let live = ["--feed", "live", "--config", &config, "--shards", "1", "--venues", "binance"];
    let common = [live.as_slice(), &["--postgres", &postgres, "--nats", &nats]].concat();
    let market = |part: &str| {
        Server::start_with_key(BIN, &[common.as_slice(), &["--role", "market", "--partition", part]].concat(), "")
    };
    let markets = [market("0/2"), market("1/2")];
    let api = Server::start(BIN, &[common.as_slice(), &["--role", "api", "--partitions", "2"]].concat());
    for m in &markets {
        m.wait_venue("binance", "the market node's perpetual sessions up", 60, |h| h["perp"] == "up");
    }
    api.wait_venue("binance", "perpetuals relayed", 60, |h| h["perp"] == "up");
    let listed = api.get_authed("/v1/exchanges/binance/symbols").ok("symbols")["data"].clone();
    let with: Vec<String> = listed
        .as_array()
        .map(|a| {
            a.iter().filter(|s| !s["perp"].is_null()).filter_map(|s| s["symbol"].as_str().map(str::to_owned)).collect()
        })
        .unwrap_or_default();
    assert!(with.len() >= 4, "too few perpetuals to span both partitions: {listed}");
    // Every perpetual of both partitions through the api node, with the venue's values.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let all = api.get_authed("/v1/perp?exchange=binance").ok("perp")["data"].clone();
        let known = |p: &Value| !p["markPrice"].is_null() && !p["funding"].is_null() && !p["oi"].is_null();
        let served: Vec<&str> =
            all.as_array().into_iter().flatten().filter(|p| known(p)).filter_map(|p| p["symbol"].as_str()).collect();
        if with.iter().all(|s| served.contains(&s.as_str())) {
            break;
        }
        assert!(Instant::now() < deadline, "the api node does not serve every perpetual's values: {all}");
        thread::sleep(Duration::from_millis(300));
    }
    let body = json!({"type":"liquidations","symbol":"*","exchange":"binance","event":"order","direction":"long",
                      "min_usd":5_000_000,"repeat":true,"cooldown_s":0});
    let auth = format!("Bearer {}", api.key);
    let made = api.request("POST", "/v1/alerts", Some(&auth), Some(&body.to_string())).ok("a * liquidations alert")
        ["data"]
        .clone();
    thread::sleep(Duration::from_millis(1_500)); // the command reaches both market nodes
    let injected = sim.control("liquidation", &json!({"venue":"binance","symbol":"*","side":"long","usd":6_000_000}));
    // Every perpetual of the venue: the served ones, and one without a spot pair (not read).
    assert!(injected["contracts"].as_u64().is_some_and(|n| n as usize > with.len()), "{injected}");
    let fired = |symbols: &mut Vec<String>| {
        symbols.clear();
        let inbox = api.get_authed("/v1/inbox?limit=1000").ok("inbox")["data"].clone();
        for e in inbox.as_array().into_iter().flatten().filter(|e| e["alertId"] == made["id"]) {
            for t in e["event"]["triggers"].as_array().into_iter().flatten() {
                let usd = t["liquidation"]["usd"].as_f64().unwrap_or(0.0);
                if (usd - 6_000_000.0).abs() < 100_000.0 {
                    symbols.push(t["symbol"].as_str().unwrap_or("?").to_owned());
                }
            }
        }
        symbols.sort();
    };
    let mut symbols = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        fired(&mut symbols);
        if symbols.len() >= with.len() {
            break;
        }
        assert!(Instant::now() < deadline, "fired for {symbols:?} of {with:?}");
        thread::sleep(Duration::from_millis(300));
    }
    thread::sleep(Duration::from_secs(2)); // nothing more comes
    fired(&mut symbols);
    let mut want = with.clone();
    want.sort();
    assert_eq!(symbols, want, "each perpetual's injected liquidation fired once");
}
