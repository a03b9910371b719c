//! The whole server on PostgreSQL (`serve --postgres`), against a real server from Debian's
//! packages started by the test on a loopback port (`rampart_testkit::pg`): alerts made through
//! the API fire and reach a webhook receiver; the keys CLI reads the same database; a second
//! server on the database is refused; a SIGKILL loses no acknowledged alert, and the restarted
//! server keeps delivering.

use std::process::Command;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{
    alert_ids, allow_private_config, binance_symbols, describe_output, json_receiver as receiver, pg_cut_off,
    pg_database as database, pg_database_with_role, run_with_timeout, Server, FAST,
};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

fn wait_for_hits(hits: &Mutex<Vec<Value>>, n: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while hits.lock().expect("lock").len() < n {
        assert!(Instant::now() < deadline, "{what}: fewer than {n} webhooks in 120 s");
        thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_server_on_postgres_fires_delivers_and_survives_a_crash() {
    let url = database();
    let (port, hits) = receiver();
    let cfg = allow_private_config("pg");
    let args: Vec<&str> = [FAST, &["--config", &cfg, "--postgres", &url]].concat();
    let server = Server::start(BIN, &args);
    let names = binance_symbols(&server, 15);
    for s in &names {
        let body = json!({"symbol": s, "type": "pct", "direction": "any", "pct": 0.1, "window": "5m", "repeat": true,
                          "webhook_url": format!("http://127.0.0.1:{port}/hook")});
        server
            .request("POST", "/v1/alerts", Some(&format!("Bearer {}", server.key)), Some(&body.to_string()))
            .ok("create");
    }
    let created = alert_ids(&server, "all");
    assert_eq!(created.len(), names.len());
    wait_for_hits(&hits, 1, "before the crash");
    let first = hits.lock().expect("lock")[0].clone();
    assert_eq!(first["event"], "alert.triggered");
    assert!(created.contains(&first["alert"]["id"].as_i64().unwrap_or(-1)), "{first}");
    let inbox = server.get("/v1/inbox", Some(&server.key));
    assert!(!inbox.ok("inbox")["data"].as_array().expect("data").is_empty(), "the firing is in the inbox");

    // The keys CLI works on the same database.
    let mut cli = Command::new(BIN);
    cli.args(["keys", "list", "--postgres", &url]);
    let out = run_with_timeout(cli, Duration::from_secs(30));
    assert!(out.status.success(), "{}", describe_output(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2, "header and the first key");

    // A second whole server on the database is refused: two would deliver every webhook twice.
    let dir = std::env::temp_dir().join(format!("rampart-pg-second-{}", std::process::id()));
    let mut second = Command::new(BIN);
    second.args(["serve", "--listen", "127.0.0.1:0", "--postgres", &url, "--data-dir"]).arg(&dir);
    let out = run_with_timeout(second, Duration::from_secs(30));
    assert!(!out.status.success(), "a second server started: {}", describe_output(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("another rampart server is using this PostgreSQL database"),
        "{}",
        describe_output(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);

    // SIGKILL: every acknowledged alert is still there, the key still works, firings go on.
    let server = server.crash_and_restart(&args);
    assert_eq!(alert_ids(&server, "all"), created, "alerts after the crash");
    let before = hits.lock().expect("lock").len();
    wait_for_hits(&hits, before + 1, "after the restart");
}

fn storage_writable(server: &Server) -> bool {
    server.get("/healthz", None).body["storage"]["writable"].as_bool().unwrap_or(false)
}

#[test]
fn while_postgres_is_unreachable_writes_fail_with_503_reads_go_on_and_then_it_recovers() {
    let (url, role) = pg_database_with_role();
    let args: Vec<&str> = [FAST, &["--postgres", &url]].concat();
    let server = Server::start(BIN, &args);
    let auth = format!("Bearer {}", server.key);
    let price = server.get_authed("/v1/exchanges/binance/symbols").ok("symbols")["data"][0]["symbol"]
        .as_str()
        .expect("a symbol")
        .to_owned();
    let create = |server: &Server| {
        let body = json!({"symbol": price, "type": "pct", "direction": "any", "pct": 50, "window": "1h"});
        server.request("POST", "/v1/alerts", Some(&auth), Some(&body.to_string()))
    };
    create(&server).ok("a create before the outage");
    let before = alert_ids(&server, "all");

    pg_cut_off(&role, true);
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = loop {
        let r = create(&server);
        if r.status != 200 {
            break r;
        }
        assert!(Instant::now() < deadline, "creates still succeed 10 s into the outage");
        thread::sleep(Duration::from_millis(100));
    };
    refused.assert_some_error(503, "a create while PostgreSQL is unreachable");
    // Reads do not need the database: snapshots and the key table in memory.
    server.get(&format!("/v1/levels/{price}?exchange=binance"), Some(&server.key)).ok("levels during the outage");
    let deadline = Instant::now() + Duration::from_secs(10);
    while storage_writable(&server) {
        assert!(Instant::now() < deadline, "/healthz still says storage is writable 10 s into the outage");
        thread::sleep(Duration::from_millis(100));
    }

    pg_cut_off(&role, false);
    let deadline = Instant::now() + Duration::from_secs(15);
    while create(&server).status != 200 {
        assert!(Instant::now() < deadline, "creates still fail 15 s after PostgreSQL came back");
        thread::sleep(Duration::from_millis(200));
    }
    let after = alert_ids(&server, "all");
    assert!(before.iter().all(|id| after.contains(id)), "an alert acknowledged before the outage was lost");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !storage_writable(&server) {
        assert!(Instant::now() < deadline, "/healthz does not say storage is writable again");
        thread::sleep(Duration::from_millis(100));
    }
}

/// Runs one of Debian's PostgreSQL client tools against the test server as its superuser.
fn pg_tool(tool: &str, args: &[&str]) {
    let bin = rampart_testkit::pg::bin_dir().expect("PostgreSQL's binaries").join(tool);
    let port = rampart_testkit::pg::server().port().to_string();
    let mut c = Command::new(bin);
    c.args(["-h", "127.0.0.1", "-p", &port, "-U", "postgres", "-d", "postgres"]).args(args);
    let out = run_with_timeout(c, Duration::from_secs(60));
    assert!(out.status.success(), "{tool}: {}", describe_output(&out));
}

#[test]
fn a_pg_dump_taken_while_serving_restores_every_alert_key_and_inbox_entry() {
    // deploy/README.md's procedure, on the test server's schema (`-n`: the server is shared by
    // the tests; an operator dumps the whole database).
    let url = database();
    let schema = url.rsplit("search_path=").next().expect("schema").trim_end_matches('\'').to_owned();
    let args: Vec<&str> = [FAST, &["--postgres", &url]].concat();
    let server = Server::start(BIN, &args);
    let key = server.key.clone();
    for s in binance_symbols(&server, 3) {
        let body = json!({"symbol": s, "type": "pct", "direction": "any", "pct": 50, "window": "1h"});
        server.request("POST", "/v1/alerts", Some(&format!("Bearer {key}")), Some(&body.to_string())).ok("create");
    }
    // Some that fire soon (the simulated pairs move 0.1 % within a minute or two; the first of
    // twelve much sooner), so the inbox has entries to restore.
    for symbol in binance_symbols(&server, 15).into_iter().skip(3) {
        let fires = json!({"symbol": symbol, "type": "pct", "direction": "any", "pct": 0.1, "window": "5m"});
        server.request("POST", "/v1/alerts", Some(&format!("Bearer {key}")), Some(&fires.to_string())).ok("create");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let inbox = loop {
        let inbox = server.get("/v1/inbox", Some(&key)).ok("inbox")["data"].clone();
        if inbox.as_array().is_some_and(|a| !a.is_empty()) {
            break inbox;
        }
        assert!(Instant::now() < deadline, "the 0.1 % alert never fired");
        // Within the plan's 120 requests a minute.
        thread::sleep(Duration::from_secs(1));
    };
    let alerts = alert_ids(&server, "all");
    let dump = std::env::temp_dir().join(format!("rampart-pg-dump-{}.dump", std::process::id()));
    pg_tool("pg_dump", &["-n", &schema, "-Fc", "-f", &dump.display().to_string()]);
    // More may fire while the dump runs: the restored inbox lies between the two reads.
    let after = server.get("/v1/inbox", Some(&key)).ok("inbox")["data"].clone();
    assert_eq!(server.terminate().code(), Some(0));
    // The database is lost; the dump is restored into a fresh one and the server started on it.
    let admin = rampart_store::db::Db::postgres(&rampart_testkit::pg::server().admin_url()).expect("admin");
    admin.batch(&format!("DROP SCHEMA {schema} CASCADE")).expect("drop the schema");
    pg_tool("pg_restore", &[&dump.display().to_string()]);
    let _ = std::fs::remove_file(&dump);
    let restored = Server::start_with_key(BIN, &args, &key);
    assert_eq!(alert_ids(&restored, "all"), alerts, "every alert, its key working");
    let ids = |v: &Value| -> std::collections::BTreeSet<i64> {
        v.as_array().map(|a| a.iter().filter_map(|e| e["id"].as_i64()).collect()).unwrap_or_default()
    };
    let back = ids(&restored.get("/v1/inbox", Some(&key)).ok("inbox")["data"]);
    assert!(!ids(&inbox).is_empty(), "inbox entries carry ids: {inbox}");
    assert!(ids(&inbox).is_subset(&back), "every inbox entry before the dump is restored");
    assert!(back.is_subset(&ids(&after)), "nothing the server did not write");
}

/// A key of `plan` from `cfg`, made by the keys CLI on the server's database.
fn key_on(server: &Server, url: &str, cfg: &str, plan: &str) -> String {
    let mut cli = Command::new(BIN);
    cli.args(["keys", "create", "--plan", plan, "--config", cfg, "--postgres", url]);
    let out = run_with_timeout(cli, Duration::from_secs(30));
    assert!(out.status.success(), "{}", describe_output(&out));
    let key = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").trim().to_owned();
    server.await_key(&key);
    key
}

/// The price-alert cap on PostgreSQL, where a create below it is one statement
/// (`Store::insert_alert_below`) and one at its number is counted again with the wall alerts
/// left out (`decisions.md` §15): walls do not take a price alert's place, the cap's number is
/// refused, a delete makes room, and eight creates at once on one account leave exactly the
/// cap's number active.
#[test]
fn the_price_alert_cap_holds_on_postgres_beside_walls_and_for_creates_at_once() {
    let url = database();
    let cfg = std::env::temp_dir().join(format!("rampart-pg-cap-{}.toml", std::process::id()));
    let plan = "[plans.tiny]\napi = true\nprice_alert_cap = 2\npct_alerts = false\nrepeat = false\n\
                burst_per_min = 600\ndaily_quota = 1000\ndensity_alert_cap = 5\n";
    std::fs::write(&cfg, plan).expect("write the config");
    let cfg = cfg.display().to_string();
    let server = Server::start(BIN, &[FAST, &["--config", &cfg, "--postgres", &url]].concat());
    let post = |key: &str, body: &Value| {
        server.request("POST", "/v1/alerts", Some(&format!("Bearer {key}")), Some(&body.to_string()))
    };
    let level = json!({"type": "level", "symbol": "BTCUSDT", "event": "break"});
    let full = "active price-alert limit reached (2 on plan tiny)";

    let walls = key_on(&server, &url, &cfg, "tiny");
    for event in ["pulled", "filled", "appeared"] {
        post(&walls, &json!({"type": "wall", "symbol": "BTCUSDT", "event": event})).ok("a wall alert");
    }
    let first = post(&walls, &level).ok("below the price cap beside three walls")["data"]["id"].as_i64();
    post(&walls, &level).ok("the cap's second");
    post(&walls, &level).assert_error(422, full, "the third price alert");
    let first = first.expect("id");
    server.request("DELETE", &format!("/v1/alerts/{first}"), Some(&format!("Bearer {walls}")), None).ok("delete");
    post(&walls, &level).ok("room again after a delete");
    post(&walls, &level).assert_error(422, full, "full again");

    let racing = key_on(&server, &url, &cfg, "tiny");
    let statuses: Vec<u16> = thread::scope(|s| {
        let creates: Vec<_> = (0..8).map(|_| s.spawn(|| post(&racing, &level).status)).collect();
        creates.into_iter().map(|c| c.join().expect("a create")).collect()
    });
    let made = statuses.iter().filter(|&&s| s == 200).count();
    assert_eq!(made, 2, "exactly the cap's number made: {statuses:?}");
    assert!(statuses.iter().all(|&s| s == 200 || s == 422), "{statuses:?}");
    let active = server.get("/v1/alerts?status=active", Some(&racing)).ok("list")["data"].clone();
    assert_eq!(active.as_array().map(Vec::len), Some(2), "{active}");
    post(&racing, &level).assert_error(422, full, "after the race");
    let _ = std::fs::remove_file(&cfg);
}
