//! A partition's standby and its fencing (`decisions.md` §14, issue #33): two market nodes of
//! one partition on PostgreSQL and NATS, with an api node and a delivery process (Debian's
//! servers, started by the test on loopback ports). The second market node waits as the
//! standby. Every PostgreSQL session is then ended at once (what a restart of PostgreSQL does to
//! sessions: the session advisory lock that used to mark the owner vanished with it, and a
//! second owner was admitted): the owner keeps its partition and the standby stays a standby.
//! The owner is then killed with SIGKILL: the standby owns and serves the partition within the
//! bound, alerts made before and during the hand-over fire, and every firing is recorded and
//! delivered exactly once. And an owner cut off from PostgreSQL (while it still runs) gives way
//! to its standby and ends when it can reach PostgreSQL again. And an owner whose publisher dies
//! in mid-round (issue #59) loses and doubles no firing.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rampart_store::db::Db;
use rampart_tests::cluster::{arrivals, create_firing as create, movers, roomy_config, unlimited_key};
use rampart_tests::{json_receiver, pg_cut_off, pg_database, pg_database_with_role, Deliver, Server, FAST};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

/// How long after the owner's death the standby must serve the partition: the lease (2 s),
/// the standby's wait on an expired lease (0.2 s), its poll (0.1 s) and the hand-over (the
/// partition's alerts to the running shards), with room for a loaded 2-core machine.
const TAKE_OVER_BOUND: Duration = Duration::from_secs(15);

fn triggered(node: &Server, key: &str) -> BTreeMap<i64, i64> {
    let list = node.get("/v1/alerts?status=all", Some(key));
    let rows = list.ok("alerts")["data"].as_array().cloned().unwrap_or_default();
    rows.iter()
        .filter(|a| a["triggerCount"].as_i64().unwrap_or(0) > 0)
        .filter_map(|a| Some((a["id"].as_i64()?, a["triggerCount"].as_i64()?)))
        .collect()
}

/// Until every alert of `ids` fired, its webhook arrived and its delivery is recorded (its
/// delivery log says `delivered`). The record follows the arrival: a PostgreSQL restart between
/// the two makes the worker send the firing again (at least once, as designed), so the test's
/// "each delivered once" is asked only of firings recorded before the faults that follow.
fn wait_delivered(api: &Server, key: &str, hits: &Arc<Mutex<Vec<Value>>>, ids: &BTreeSet<i64>, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    let recorded = |id: &i64| {
        let log = api.get(&format!("/v1/alerts/{id}/deliveries"), Some(key));
        log.body["data"].as_array().is_some_and(|rows| rows.iter().any(|r| r["outcome"] == "delivered"))
    };
    loop {
        let (fired, got) = (triggered(api, key), arrivals(hits));
        if ids.iter().all(|id| fired.contains_key(id) && got.contains_key(id)) && ids.iter().all(recorded) {
            return;
        }
        let missing: Vec<_> = ids.iter().filter(|id| !got.contains_key(id)).collect();
        assert!(Instant::now() < deadline, "{what}: not delivered {missing:?} (fired {fired:?})");
        thread::sleep(Duration::from_millis(500));
    }
}

/// The market node's view of its lease in `/healthz`.
fn owner(node: &Server) -> Value {
    node.get("/healthz", None).body["cluster"]["owner"].clone()
}

/// Ends every client session of this test's PostgreSQL server but the one asking.
fn end_every_session() -> usize {
    let admin = Db::postgres(&rampart_testkit::pg::server().admin_url()).expect("connect as admin");
    let sql = "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
               WHERE pid <> pg_backend_pid() AND backend_type = 'client backend') ended";
    admin.query_one(sql, &[], |r| r.get::<i64>(0)).expect("end the sessions") as usize
}

/// The tests here take turns: the first ends every PostgreSQL session of the test's server.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn a_standby_takes_over_a_killed_owner_and_a_postgres_restart_never_makes_two_owners() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let postgres = pg_database();
    let nats = rampart_testkit::nats::server().url();
    let (hook, hits) = json_receiver();
    let mut cfg = roomy_config("failover");
    // `RAMPART_FAILOVER_SIM_PAIRS=500` measures the hand-over with a partition of 500 pairs;
    // `RAMPART_FAILOVER_LIVE_PAIRS=500` the same on the live-format feed (the venue simulator).
    let pairs = std::env::var("RAMPART_FAILOVER_SIM_PAIRS").unwrap_or_else(|_| FAST[1].to_owned());
    let live_pairs = std::env::var("RAMPART_FAILOVER_LIVE_PAIRS").ok();
    let _venue = live_pairs.as_ref().map(|n| {
        let sim = rampart_tests::SimVenue::start(BIN, &["--sim-pairs", n, "--venues", "binance"]);
        let plans = std::fs::read_to_string(&cfg).expect("the plans");
        cfg = sim.config(&["binance"], 100, &plans).display().to_string();
        sim
    });
    let market: Vec<&str> = match live_pairs {
        Some(_) => vec!["--feed", "live", "--venues", "binance", "--shards", "1"],
        None => vec!["--sim-pairs", &pairs, "--shards", "1"],
    };
    let common = [&market[..], &["--config", &cfg, "--postgres", &postgres, "--nats", &nats]].concat();
    let market_args: Vec<String> = [common.as_slice(), &["--role", "market", "--partition", "0/1"]]
        .concat()
        .iter()
        .map(|s| s.to_string())
        .collect();
    let first_args: Vec<&str> = market_args.iter().map(String::as_str).collect();
    let first = Server::start_with_key(BIN, &first_args, "");
    let api = Server::start(BIN, &[common.as_slice(), &["--role", "api", "--partitions", "1"]].concat());
    let key = unlimited_key(BIN, &cfg, &postgres);
    let _deliver = Deliver::start(BIN, &postgres, &nats, &cfg);
    let owned = owner(&first);
    assert_eq!((&owned["epoch"], &owned["current"]), (&json!(1), &json!(true)), "the first node owns: {owned}");

    // The second node of the partition waits as its standby: its port answers live, not
    // ready, naming the owner's lease (issue #50).
    let mut standby = Server::start_waiting(BIN, &first_args, "");
    standby_answers(&standby, 1);
    let symbols = movers(&api, &key);
    assert!(symbols.len() >= 8, "moving pairs: {symbols:?}");
    let before: BTreeSet<i64> = symbols.iter().take(3).map(|s| create(&api, &key, s, hook)).collect();
    wait_delivered(&api, &key, &hits, &before, "before any fault");

    // A PostgreSQL restart, as sessions see it: every one of them ends at once.
    let ended = end_every_session();
    assert!(ended >= 4, "the nodes' sessions ended: {ended}");
    thread::sleep(Duration::from_secs(6));
    let owned = owner(&first);
    assert_eq!((&owned["epoch"], &owned["current"]), (&json!(1), &json!(true)), "still the owner: {owned}");
    standby_answers(&standby, 1);
    let after_restart: BTreeSet<i64> = symbols.iter().skip(3).take(2).map(|s| create(&api, &key, s, hook)).collect();
    wait_delivered(&api, &key, &hits, &after_restart, "after the sessions ended");

    // Once the standby is hot (its books and history ready, as a standby long up is), the owner
    // dies; alerts made meanwhile are acknowledged (stored) and fire on the standby.
    let hot_by = Instant::now() + Duration::from_secs(120);
    while standby.get("/livez", None).body["hot"] != true {
        assert!(Instant::now() < hot_by, "the standby's books are not ready");
        thread::sleep(Duration::from_millis(200));
    }
    first.kill();
    let killed = Instant::now();
    let during: BTreeSet<i64> = symbols.iter().skip(5).take(3).map(|s| create(&api, &key, s, hook)).collect();
    let killed_ms = rampart_tests::now_ms();
    // When the dead owner's lease ends, by the database's clock (this machine's: one host).
    let lease = Db::postgres(&postgres).expect("connect");
    let sql = "SELECT expires_ms FROM partition_owners WHERE partition = '0/1'";
    let lease_ends_ms: i64 = lease.query_one(sql, &[], |r| r.get(0)).expect("the lease");
    standby.wait_ready();
    let (second, took) = (standby, killed.elapsed());
    let served_ms = rampart_tests::now_ms();
    // The hand-over as the node logged it (claim, alerts handed over), against the kill.
    eprintln!("owner killed at {}", rampart_state::clock::iso8601(killed_ms));
    for line in second.stderr_tail().iter().filter(|l| l.contains("held by this node") || l.contains("partition owned"))
    {
        eprintln!("standby: {line}");
    }
    eprintln!("the standby served the partition {took:?} after the owner was killed");
    eprintln!("served {} ms after the dead owner's lease ended", served_ms - lease_ends_ms);
    assert!(took <= TAKE_OVER_BOUND, "the standby took {took:?}");
    let owned = owner(&second);
    assert_eq!((&owned["epoch"], &owned["current"]), (&json!(2), &json!(true)), "the standby owns: {owned}");
    wait_delivered(&api, &key, &hits, &during, "alerts made during the hand-over");

    // Every alert fired and was recorded once, and delivered once.
    let all: BTreeSet<i64> = before.iter().chain(&after_restart).chain(&during).copied().collect();
    let fired = triggered(&api, &key);
    assert_eq!(fired.keys().copied().collect::<BTreeSet<_>>(), all, "every alert fired");
    assert!(fired.values().all(|&n| n == 1), "each once: {fired:?}");
    let got = arrivals(&hits);
    assert_eq!(got.keys().copied().collect::<BTreeSet<_>>(), all, "a webhook per alert");
    assert!(got.values().all(|&n| n == 1), "each delivered once: {got:?}");
    drop(second);
}

/// A standby's port while it waits: `/livez` 200 and `/readyz` (and every other path) 503,
/// each naming the role, the state and the owner's lease at `epoch`.
fn standby_answers(standby: &Server, epoch: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (live, ready) = (standby.get("/livez", None), standby.get("/readyz", None));
        let seen = live.body["owner"]["epoch"] == epoch && ready.body["owner"]["epoch"] == epoch;
        if seen {
            assert_eq!(
                (live.status, &live.body["status"], &live.body["state"]),
                (200, &json!("live"), &json!("standby"))
            );
            assert_eq!((&live.body["role"], &live.body["partition"]), (&json!("market"), &json!("0/1")));
            assert_eq!(
                (ready.status, &ready.body["status"], &ready.body["state"]),
                (503, &json!("standby"), &json!("standby"))
            );
            let why = ready.body["error"].as_str().unwrap_or_default();
            assert!(
                why.starts_with("standby: partition 0/1 is owned by ") && why.ends_with(&format!("(epoch {epoch})")),
                "{why}"
            );
            assert_eq!(standby.get("/healthz", None).status, 503, "not healthy while it waits");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the standby's answers: {} {} / {} {}",
            live.status,
            live.text,
            ready.status,
            ready.text
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// Waits (at most 20 s) until `node`'s `/healthz` answers `status` with a body `done` accepts;
/// the body.
fn health_becomes(node: &Server, status: u16, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let h = node.get("/healthz", None);
        if h.status == status && done(&h.body) {
            return h.body;
        }
        assert!(Instant::now() < deadline, "{what}: /healthz {} {}", h.status, h.text);
        thread::sleep(Duration::from_millis(100));
    }
}

/// An owner cut off from PostgreSQL (its database role refused, its sessions ended) while it
/// still runs and reaches NATS: it says in `/healthz` that its lease is not renewed, the standby
/// takes the partition, alerts made meanwhile fire on the standby, and when the old owner can
/// reach PostgreSQL again it finds another epoch and ends with status 75, having recorded
/// nothing twice.
#[test]
fn an_owner_cut_off_from_postgres_gives_way_and_ends_when_it_returns() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (url_a, role_a) = pg_database_with_role();
    // A second role with the first one's rights, for every node but the owner.
    let role_b = format!("{role_a}_b");
    let admin = Db::postgres(&rampart_testkit::pg::server().admin_url()).expect("connect as admin");
    admin.batch(&format!("CREATE ROLE {role_b} LOGIN IN ROLE {role_a}")).expect("the second role");
    let url_b = url_a.replace(&format!("user={role_a} "), &format!("user={role_b} "));
    let nats = rampart_testkit::nats::server().url();
    let (hook, hits) = json_receiver();
    let cfg = roomy_config("fencing");
    let node = |url: &str, role: &[&str]| -> Vec<String> {
        [FAST, &["--config", &cfg, "--postgres", url, "--nats", &nats], role]
            .concat()
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    let market = ["--role", "market", "--partition", "0/1"];
    let owner_args = node(&url_a, &market);
    let first = Server::start_with_key(BIN, &owner_args.iter().map(String::as_str).collect::<Vec<_>>(), "");
    let api_args = node(&url_b, &["--role", "api", "--partitions", "1"]);
    let api = Server::start(BIN, &api_args.iter().map(String::as_str).collect::<Vec<_>>());
    let key = unlimited_key(BIN, &cfg, &url_b);
    let _deliver = Deliver::start(BIN, &url_b, &nats, &cfg);
    let standby_args = node(&url_b, &market);
    let mut standby = Server::start_waiting(BIN, &standby_args.iter().map(String::as_str).collect::<Vec<_>>(), "");
    standby_answers(&standby, 1);
    let symbols = movers(&api, &key);
    assert!(symbols.len() >= 5, "moving pairs: {symbols:?}");
    let before: BTreeSet<i64> = symbols.iter().take(2).map(|s| create(&api, &key, s, hook)).collect();
    wait_delivered(&api, &key, &hits, &before, "before the cut");

    pg_cut_off(&role_a, true);
    // Storage fails first (its probe), then the lease runs out: the owner no longer believes it
    // owns the partition, and says why once storage is not the first thing to say.
    let body = health_becomes(&first, 503, "the cut-off owner gives up its lease", |b| {
        b["cluster"]["owner"]["current"] == false
    });
    assert_eq!(body["cluster"]["owner"]["epoch"], 1, "{body}");
    let ready = first.get("/readyz", None);
    assert_eq!(
        (ready.status, &ready.body["state"], &ready.body["status"]),
        (503, &json!("fenced"), &json!("not ready"))
    );
    assert_eq!(first.get("/livez", None).status, 200, "still live: a supervisor leaves it running");
    standby.wait_ready();
    let second = standby;
    assert_eq!(owner(&second)["epoch"], 2, "the standby owns");
    // Owner now: live and ready, with its epoch.
    let ready = second.get("/readyz", None);
    assert_eq!(
        (ready.status, &ready.body["state"], &ready.body["epoch"]),
        (200, &json!("owner"), &json!(2)),
        "{}",
        ready.text
    );
    assert_eq!(second.get("/livez", None).body["state"], "owner");
    let during: BTreeSet<i64> = symbols.iter().skip(2).take(3).map(|s| create(&api, &key, s, hook)).collect();
    wait_delivered(&api, &key, &hits, &during, "alerts made while the owner was cut off");

    pg_cut_off(&role_a, false);
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = first.exit_status() {
            break s;
        }
        assert!(Instant::now() < deadline, "the old owner still runs 20 s after PostgreSQL came back");
        thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(75), "the old owner ends with status 75");

    let all: BTreeSet<i64> = before.iter().chain(&during).copied().collect();
    let fired = triggered(&api, &key);
    assert_eq!(fired.keys().copied().collect::<BTreeSet<_>>(), all, "every alert fired");
    assert!(fired.values().all(|&n| n == 1), "each once: {fired:?}");
    let got = arrivals(&hits);
    assert!(all.iter().all(|id| got.get(id) == Some(&1)), "each delivered once: {got:?}");
    drop(second);
}

/// A partition owner's publisher dies in mid-round (issue #59): the stream has stored rows the
/// outbox never marked published (the hidden fault flag makes the process exit right there, as a
/// crash would). The standby owns the partition; the rows still pending are published again, the
/// stream drops the repeats by their message ids, and every firing is recorded and delivered
/// exactly once; alerts the dead owner had not fired yet fire on the standby. Messages carrying
/// their delivery (the dead owner's stored ones, the standby's own) are among them.
#[test]
fn a_publisher_killed_in_mid_round_loses_nothing_and_doubles_nothing() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let postgres = pg_database();
    let nats = rampart_testkit::nats::server().url();
    let (hook, hits) = json_receiver();
    let cfg = roomy_config("publisher");
    let common = [FAST, &["--config", &cfg, "--postgres", &postgres, "--nats", &nats]].concat();
    let market = [common.as_slice(), &["--role", "market", "--partition", "0/1"]].concat();
    let faulty = [market.as_slice(), &["--fault-publisher-abort-after", "3"]].concat();
    let first = Server::start_with_key(BIN, &faulty, "");
    let api = Server::start(BIN, &[common.as_slice(), &["--role", "api", "--partitions", "1"]].concat());
    let key = unlimited_key(BIN, &cfg, &postgres);
    let deliver = Deliver::start(BIN, &postgres, &nats, &cfg);
    let mut standby = Server::start_waiting(BIN, &market, "");
    standby_answers(&standby, 1);
    let hot_by = Instant::now() + Duration::from_secs(120);
    while standby.get("/livez", None).body["hot"] != true {
        assert!(Instant::now() < hot_by, "the standby's books are not ready");
        thread::sleep(Duration::from_millis(200));
    }
    let symbols = movers(&api, &key);
    assert!(symbols.len() >= 2, "moving pairs: {symbols:?}");
    // Made at once on one pair, they fire on its next trade together: one writer batch, one
    // publish round of more than three rows, which ends the owner after three are stored.
    let mut ids: BTreeSet<i64> = thread::scope(|s| {
        let made: Vec<_> = (0..12).map(|_| s.spawn(|| create(&api, &key, &symbols[0], hook))).collect();
        made.into_iter().map(|h| h.join().expect("a create")).collect()
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = first.exit_status() {
            break s;
        }
        assert!(Instant::now() < deadline, "no publish round of more than three rows in 60 s");
        thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(86), "the fault injection's exit");
    let said = first.stderr_tail();
    let fault = said.iter().find(|l| l.contains("fault injection: exiting with"));
    eprintln!("the owner: {}", fault.unwrap_or_else(|| panic!("no fault injection logged: {said:?}")));
    // And an alert the dead owner never saw fire.
    ids.insert(create(&api, &key, &symbols[1], hook));
    standby.wait_ready();
    assert_eq!(owner(&standby)["epoch"], 2, "the standby owns");
    wait_delivered(&api, &key, &hits, &ids, "firings around the publisher's crash");
    let fired = triggered(&api, &key);
    assert_eq!(fired.keys().copied().collect::<BTreeSet<_>>(), ids, "every alert fired");
    assert!(fired.values().all(|&n| n == 1), "each once: {fired:?}");
    // Repeats would arrive after the first: give them the time a worker's round takes.
    thread::sleep(Duration::from_secs(3));
    let got = arrivals(&hits);
    assert_eq!(got.keys().copied().collect::<BTreeSet<_>>(), ids, "a webhook per alert");
    assert!(got.values().all(|&n| n == 1), "each delivered once: {got:?}");
    // The messages the dead owner stored, and the standby's own firing, carried their delivery:
    // those were sent without reading their rows (`rampart_store::handoff`), once like the rest.
    let metrics = ureq::get(&format!("{}/metrics", deliver.health)).call().expect("metrics");
    let metrics = metrics.into_string().expect("text");
    let carried = metrics.lines().find_map(|l| l.strip_prefix("rampart_deliver_carried_total "));
    let carried = carried.and_then(|v| v.trim().parse::<u64>().ok());
    eprintln!("first deliveries sent from their message: {carried:?} of {}", ids.len());
    assert!(carried.is_some_and(|n| (1..=ids.len() as u64).contains(&n)), "{metrics}");
    // Each attempt's log row says when its worker pulled it (the storm's "pulled" stage), before
    // the attempt started, carried or read.
    let alerts: Vec<i64> = ids.iter().copied().collect();
    let log = Db::postgres(&postgres).expect("connect");
    let sql = "SELECT count(*), count(*) FILTER (WHERE pulled_ms IS NOT NULL AND pulled_ms <= at_ms - latency_ms)
               FROM attempts WHERE alert_id = ANY(?1::bigint[])";
    let deadline = Instant::now() + Duration::from_secs(30);
    let logged = loop {
        let cols = [rampart_store::db::Col::I64(alerts.clone())];
        let counted = log.query_columns(sql, &cols, |r| Ok((r.get::<i64>(0)?, r.get::<i64>(1)?))).expect("the log");
        let (all, pulled) = counted.first().copied().unwrap_or((0, 0));
        if all >= alerts.len() as i64 || Instant::now() > deadline {
            break (all, pulled);
        }
        thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(logged, (alerts.len() as i64, alerts.len() as i64), "attempts logged, and pulled before they started");
    drop(standby);
}
