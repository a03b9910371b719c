//! A cluster of two market nodes (`serve --role market --partition 0/2` and `1/2`), two api
//! nodes (`serve --role api --partitions 2`) and two `rampart deliver` processes on one
//! PostgreSQL database and one NATS server (Debian's, started by the test on loopback ports).
//! Alerts created through either api node fire on the market node that owns their pair and are
//! delivered once per firing; both api nodes answer reads alike; a market node, an api node and
//! a delivery process are each killed with SIGKILL in turn, and no acknowledged alert and no
//! firing is lost (the only repeats allowed are firings the killed delivery process held). A
//! site session made on one api node is served by the other, and signed out there.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rampart_state::partition::of_symbol;
use rampart_tests::cluster::{arrivals, create_firing as create, movers, roomy_config, unlimited_key};
use rampart_tests::resume::{every_id, Resumer};
use rampart_tests::{json_receiver, pg_database, Deliver, Server, SiteSession, FAST};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

fn deliver(postgres: &str, nats: &str, config: &str) -> Deliver {
    Deliver::start(BIN, postgres, nats, config)
}

/// Waits until every alert of `ids` has fired and its webhook arrived (at most 90 s).
fn wait_delivered(reader: &Server, key: &str, hits: &Arc<Mutex<Vec<Value>>>, ids: &BTreeSet<i64>, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let fired = triggered(reader, key);
        let got = arrivals(hits);
        if ids.iter().all(|id| fired.contains(id) && got.contains_key(id)) {
            return;
        }
        let missing: Vec<_> = ids.iter().filter(|id| !got.contains_key(id)).collect();
        assert!(Instant::now() < deadline, "{what}: not delivered {missing:?} (fired {fired:?})");
        thread::sleep(Duration::from_millis(500));
    }
}

/// The account's triggered alerts, read through `node`.
fn triggered(node: &Server, key: &str) -> BTreeSet<i64> {
    let list = node.get("/v1/alerts?status=triggered", Some(key));
    list.ok("alerts")["data"].as_array().expect("data").iter().filter_map(|a| a["id"].as_i64()).collect()
}

/// The same read from both api nodes, until they agree: each node's board is rebuilt every
/// second on its own clock and a snapshot may land between the two reads, so a pair of answers
/// computed at different times (`computedAt`) is read again (for at most 5 s); two answers
/// computed at the same time must be the same. `ts`, the time of the answer itself, is left out.
fn agree(a: &Server, b: &Server, key: &str, path: &str) -> Value {
    let read = |node: &Server| {
        let mut v = node.get(path, Some(key)).ok(path).clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("ts");
        }
        v
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (x, y) = (read(a), read(b));
        if x == y {
            return x;
        }
        let same_version = x.get("computedAt").is_some() && x.get("computedAt") == y.get("computedAt");
        assert!(!same_version && Instant::now() < deadline, "{path}: the api nodes disagree:\n{x}\n{y}");
        thread::sleep(Duration::from_millis(100));
    }
}

/// The account's newest inbox id (0: none).
fn newest_inbox_id(node: &Server, key: &str) -> i64 {
    let r = node.get("/v1/inbox?limit=1", Some(key));
    r.ok("inbox")["data"].as_array().and_then(|d| d.first()).and_then(|e| e["id"].as_i64()).unwrap_or(0)
}

/// The account's inbox ids after `after`, oldest first.
fn inbox_ids_after(node: &Server, key: &str, after: i64) -> Vec<i64> {
    let r = node.get("/v1/inbox?limit=1000", Some(key));
    let mut ids: Vec<i64> =
        r.ok("inbox")["data"].as_array().into_iter().flatten().filter_map(|e| e["id"].as_i64()).collect();
    ids.retain(|&id| id > after);
    ids.sort_unstable();
    ids
}

#[test]
fn a_cluster_fires_and_delivers_through_any_node_and_survives_a_killed_node_of_each_role() {
    let postgres = pg_database();
    let nats = rampart_testkit::nats::server().url();
    let (hook, hits) = json_receiver();
    let cfg = roomy_config("cluster-roles");
    let common = [FAST, &["--config", &cfg, "--postgres", &postgres, "--nats", &nats]].concat();
    let market_args = |p: &'static str| [common.as_slice(), &["--role", "market", "--partition", p]].concat();
    let api_args = [common.as_slice(), &["--role", "api", "--partitions", "2"]].concat();
    let market0 = Server::start_with_key(BIN, &market_args("0/2"), "");
    let market1 = Server::start_with_key(BIN, &market_args("1/2"), "");
    // The first api node makes the account and prints its key.
    let api_a = Server::start(BIN, &api_args);
    let api_b = Server::start_with_key(BIN, &api_args, &api_a.key);
    let key = unlimited_key(BIN, &cfg, &postgres);
    let _first = deliver(&postgres, &nats, &cfg);
    let mut second = Some(deliver(&postgres, &nats, &cfg));

    // A site session made on one api node is served by the other (sessions are stored), and a
    // sign-out on the other ends it on the first within a second (its copy's recheck).
    let (reply, signed) = SiteSession::signin(&api_a, &api_a.key);
    let session = signed.unwrap_or_else(|| panic!("signed in on api node a: {reply:?}"));
    assert_eq!(
        session.get(&api_b, "/site/session").ok("the session on api node b")["data"]["csrf"],
        session.csrf.as_str()
    );
    session.change(&api_b, "PUT", "/site/channels", Some(&json!({"telegramChatId": null}))).ok("a change on b");
    session.change(&api_b, "POST", "/site/signout", None).ok("sign out on b");
    thread::sleep(Duration::from_millis(1_100));
    session.get(&api_a, "/site/session").assert_error(401, "not signed in", "signed out elsewhere");

    // A market node serves no API; an api node says it is one.
    market0.get("/v1/alerts", Some(&key)).assert_some_error(404, "the API on a market node");
    let health = api_a.get("/healthz", None);
    assert_eq!(health.ok("healthz")["cluster"]["role"], "api");
    // A market node's shards run the simulated perpetuals; an api node serves them from its
    // market nodes' snapshots (decisions §17 in a cluster): the same contract and figures.
    let perp = |node: &Server| -> Vec<String> {
        let h = node.get("/healthz", None);
        let list = h.ok("healthz")["exchanges"].as_array().cloned().unwrap_or_default();
        list.iter().map(|e| e["perp"].as_str().unwrap_or("?").to_owned()).collect()
    };
    assert!(perp(&market0).iter().all(|p| p == "up"), "{:?}", perp(&market0));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !perp(&api_a).iter().all(|p| p == "up") {
        assert!(std::time::Instant::now() < deadline, "the api node relays no perpetual: {:?}", perp(&api_a));
        thread::sleep(Duration::from_millis(200));
    }
    let relayed = api_a.get("/v1/perp/BTCUSDT?exchange=okx", Some(&key));
    let relayed = relayed.ok("perp on the api node")["data"].clone();
    assert_eq!(relayed["contract"], "BTC-USDT-SWAP", "{relayed}");
    assert!(relayed["funding"]["rate8h"].is_number() && relayed["oi"]["base"].is_number(), "{relayed}");
    let metrics = api_a.get("/v1/metrics/BTCUSDT?exchange=okx&metric=funding", Some(&key));
    assert!(metrics.ok("metrics on the api node")["data"]["funding"]["rate8h"].is_number(), "{}", metrics.text);
    // A perpetual's history and a derivatives test send's trigger object come from the owning
    // market node's shard (queries through NATS), as on a single process.
    let history = api_b.get("/v1/perp/BTCUSDT/history?exchange=okx&interval=1h", Some(&key));
    let slots = history.ok("perp history on the api node")["data"].as_array().cloned().unwrap_or_default();
    assert_eq!(slots.len(), 60, "{}", history.text);
    assert!(slots[59]["oiBase"].as_f64().is_some_and(|b| b > 0.0), "{}", history.text);
    let auth = format!("Bearer {key}");
    // Its own receiver: the webhooks counted below are the firings'.
    let (test_hook, test_hits) = json_receiver();
    let hook_url = format!("http://127.0.0.1:{test_hook}/test-send");
    let funding = json!({"type":"funding","symbol":"BTCUSDT","exchange":"okx","direction":"above",
        "funding_pct":50,"webhook_url":hook_url});
    let made = api_a.request("POST", "/v1/alerts", Some(&auth), Some(&funding.to_string())).ok("a funding alert")
        ["data"]["id"]
        .clone();
    let id = made.as_i64().map_or_else(|| made.as_str().unwrap_or_default().to_owned(), |n| n.to_string());
    let answer = api_b.request("POST", &format!("/v1/alerts/{id}/test"), Some(&auth), None);
    assert_eq!(answer.ok("a test send on an api node")["data"]["outcome"], "delivered", "{}", answer.text);
    let body = test_hits.lock().expect("hits").iter().rev().find(|b| b["event"] == "alert.test").cloned();
    let f = body.as_ref().map(|b| b["trigger"]["funding"].clone()).unwrap_or_default();
    assert!(f["rate8h"].is_number() && f["intervalH"].is_number(), "no funding trigger object: {body:?}");
    api_a.request("DELETE", &format!("/v1/alerts/{id}"), Some(&auth), None).ok("the funding alert deleted");
    // A derivatives alert made on an api node is decided on the market nodes' perpetuals and
    // fires through their writers into the inbox the other api node reads; then it goes.
    let body =
        json!({"type":"liquidations","symbol":"*","exchange":"binance","event":"order","min_usd":100,"cooldown_s":0});
    let made = api_a.request("POST", "/v1/alerts", Some(&auth), Some(&body.to_string())).ok("a liquidations alert")
        ["data"]["id"]
        .clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let inbox = api_b.get("/v1/inbox?limit=1000", Some(&key));
        let entries = inbox.ok("inbox")["data"].as_array().cloned().unwrap_or_default();
        if let Some(e) = entries.iter().find(|e| e["alertId"] == made) {
            assert_eq!(e["event"]["alert"]["type"], "liquidations", "{e}");
            break;
        }
        assert!(Instant::now() < deadline, "the liquidations alert {made} did not fire through the cluster");
        thread::sleep(Duration::from_millis(200));
    }
    let id = made.as_i64().map_or_else(|| made.as_str().unwrap_or_default().to_owned(), |n| n.to_string());
    api_a.request("DELETE", &format!("/v1/alerts/{id}"), Some(&auth), None).ok("the liquidations alert deleted");
    // Each market node counts its own pairs; together they are the api node's, once each.
    let pairs = |node: &Server| -> Vec<i64> {
        let h = node.get("/healthz", None);
        let list = h.ok("healthz")["exchanges"].as_array().cloned().unwrap_or_default();
        list.iter().map(|e| e["pairs"].as_i64().unwrap_or(-1)).collect()
    };
    let (all, own0, own1) = (pairs(&api_a), pairs(&market0), pairs(&market1));
    assert!(!all.is_empty() && all.iter().all(|&n| n > 0), "{all:?}");
    for (i, n) in all.iter().enumerate() {
        assert!(own0[i] > 0 && own1[i] > 0 && own0[i] + own1[i] == *n, "{all:?} {own0:?} {own1:?}");
    }

    let symbols = movers(&api_a, &key);
    let (p0, p1): (Vec<&String>, Vec<&String>) = symbols.iter().partition(|s| of_symbol(s, 2) == 0);
    assert!(p0.len() >= 9 && p1.len() >= 9, "both partitions have moving pairs: {p0:?} {p1:?}");

    // Reads agree: a pair of each partition, and the alerts both nodes list from storage.
    for s in [p0[0], p1[0]] {
        let levels = agree(&api_a, &api_b, &key, &format!("/v1/levels/{s}?exchange=binance"));
        assert!(levels["data"].as_array().is_some_and(|d| !d.is_empty()), "{s}: {levels}");
        agree(&api_a, &api_b, &key, &format!("/v1/metrics/{s}?exchange=binance"));
    }
    let candles = api_b.get(&format!("/v1/candles/{}?exchange=binance&interval=5m&limit=3", p1[1]), Some(&key));
    assert_eq!(candles.ok("candles from the owning market node")["data"].as_array().map(Vec::len), Some(3));

    // Alerts on both partitions, through both api nodes, while a client follows its `alerts`
    // stream by reconnecting every half second with `since` (issue #50: the two market nodes'
    // inbox entries never appear out of order, so no resume skips one).
    let nodes = [api_a.port, api_b.port].map(|p| std::net::SocketAddr::from(([127, 0, 0, 1], p))).to_vec();
    let resumer = Resumer::start(nodes.clone(), &key, newest_inbox_id(&api_a, &key));
    let mut ids = BTreeSet::new();
    for (i, s) in p0.iter().take(4).chain(p1.iter().take(4)).enumerate() {
        for _ in 0..3 {
            ids.insert(create(if i % 2 == 0 { &api_a } else { &api_b }, &key, s, hook));
        }
    }
    wait_delivered(&api_b, &key, &hits, &ids, "first round");
    let got = resumer.finish();
    let resumed = &got.ids;
    let listed = inbox_ids_after(&api_b, &key, resumed.first().copied().unwrap_or(0) - 1);
    assert!(listed.len() >= ids.len(), "the firings are in the inbox: {listed:?}");
    assert_eq!(*resumed, listed, "every entry once, in order, across {} resumes", got.resumes);
    assert_eq!(got.mismatches, Vec::<String>::new(), "resumes from earlier ids while both partitions fired");
    assert_eq!(every_id(&nodes, &key, &got), Vec::<String>::new(), "a resume from every id seen");
    agree(&api_a, &api_b, &key, "/v1/alerts?status=triggered");

    // A market node dies; alerts on its pairs are acknowledged meanwhile (their commands reach
    // nobody) and fire once it is back, from storage.
    market0.kill();
    // The api nodes go on answering its pairs from the last snapshot, and say it is stale,
    // staying in a load balancer's rotation (200 "degraded": they serve everything else).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let health = api_b.get("/healthz", None);
        if health.body["status"] == "degraded" {
            assert_eq!(health.status, 200, "{:?}", health.body);
            let why = health.body["error"].as_str().unwrap_or_default().to_owned();
            assert_eq!(why, "market snapshots are stale for partition 0", "{:?}", health.body);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "an api node does not say a partition is stale 10 s after its market node died: {:?}",
            health.body
        );
        thread::sleep(Duration::from_millis(200));
    }
    api_b.get(&format!("/v1/levels/{}?exchange=binance", p0[0]), Some(&key)).ok("levels of a dead node's pair");
    // A query only its market node can answer says which partition and why (issue #50).
    let candles = api_b.get(&format!("/v1/candles/{}?exchange=binance&interval=5m&limit=3", p0[0]), Some(&key));
    let why = candles.body["error"].as_str().unwrap_or_default().to_owned();
    assert_eq!(candles.status, 503, "{}", candles.text);
    let lead = format!("partition 0 ({}) has no market node serving it: its last snapshot is ", p0[0]);
    assert!(why.starts_with(&lead) && why.ends_with(" s old; retry shortly"), "{why}");
    // Readiness: the api node stays ready (it serves everything else) and names the partition.
    let ready = api_b.get("/readyz", None);
    assert_eq!((ready.status, &ready.body["stalePartitions"]), (200, &json!([0])), "{}", ready.text);
    let mut during = BTreeSet::new();
    for s in p0.iter().skip(4).take(3) {
        during.insert(create(&api_b, &key, s, hook));
    }
    let market0 = market0.relaunch();
    wait_delivered(&api_b, &key, &hits, &during, "alerts made while their market node was down");
    ids.extend(&during);

    // An api node dies: what was acknowledged through it is kept; the other one serves on.
    let mut through_a = BTreeSet::new();
    for s in p1.iter().skip(4).take(3) {
        through_a.insert(create(&api_a, &key, s, hook));
    }
    api_a.kill();
    wait_delivered(&api_b, &key, &hits, &through_a, "alerts made through the killed api node");
    ids.extend(&through_a);

    // A delivery process dies; the other delivers what it held and what comes after.
    let mut late = BTreeSet::new();
    for s in p0.iter().skip(7).take(2).chain(p1.iter().skip(7).take(2)) {
        late.insert(create(&api_b, &key, s, hook));
    }
    drop(second.take());
    wait_delivered(&api_b, &key, &hits, &late, "alerts delivered after a delivery process died");
    ids.extend(&late);

    // Every firing arrived; none of an alert that did not fire; repeats only of firings the
    // killed delivery process held unacknowledged.
    let fired = triggered(&api_b, &key);
    assert_eq!(fired, ids, "every alert made fired once");
    let got = arrivals(&hits);
    assert_eq!(got.keys().copied().collect::<BTreeSet<_>>(), ids, "a webhook per fired alert");
    let twice: Vec<_> = got.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.len() <= 2 * rampart_cluster::worker::IN_FLIGHT_MAX, "repeats: {twice:?}");
    eprintln!("{} alerts delivered; {} delivered twice", ids.len(), twice.len());
    drop((market0, market1));
}
