//! The service's log, read from the real process's stderr: one line per event with time, level
//! and target; an access line per request with the key's id and never the key or the query;
//! `RUST_LOG` filters; `--log-format json` gives one JSON object per line.

use rampart_tests::Server;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");
const ARGS: [&str; 4] = ["--shards", "1", "--sim-pairs", "20"];

/// Waits until a stderr line satisfies `check`; returns it.
fn line(server: &Server, what: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(l) = server.stderr_tail().into_iter().find(|l| check(l)) {
            return l;
        }
        assert!(std::time::Instant::now() < deadline, "no {what} line:\n{}", server.stderr_tail().join("\n"));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn lines_have_time_level_target_and_requests_are_logged_without_secrets() {
    let server = Server::start(BIN, &ARGS);
    let ready = line(&server, "ready", |l| l.contains("shard 0 ready"));
    let fields: Vec<&str> = ready.split_whitespace().collect();
    assert!(rampart_tests::is_iso8601(fields[0]), "a timestamp first: {ready}");
    assert_eq!(fields[1], "INFO", "{ready}");
    assert!(fields[2].starts_with("rampart"), "a target: {ready}");
    server.get_authed("/v1/levels/BTCUSDT?exchange=binance&token=secret-in-query").ok("levels");
    let key_id = server.key_rows()[0].id.clone();
    let access = line(&server, "access", |l| l.contains("rampart::access") && l.contains("/v1/levels/BTCUSDT"));
    for want in ["method=GET", "status=200", &format!("key=\"{key_id}\""), "us="] {
        assert!(access.contains(want), "{want} in {access}");
    }
    assert!(!access.contains(&server.key), "the key is never logged: {access}");
    assert!(!access.contains("secret-in-query"), "nor the query: {access}");
    server.get("/v1/levels", None);
    let refused = line(&server, "refused", |l| l.contains("rampart::access") && l.contains("status=401"));
    assert!(refused.contains("key=\"-\""), "{refused}");
}

#[test]
fn rust_log_filters_and_json_is_one_object_per_line() {
    let quiet = Server::start_under_shell(BIN, "export RUST_LOG=warn", &ARGS);
    quiet.get_authed("/v1/levels/BTCUSDT").ok("levels");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let tail = quiet.stderr_tail();
    assert!(tail.iter().all(|l| !l.contains(" INFO ")), "RUST_LOG=warn: no info lines:\n{}", tail.join("\n"));
    let json = Server::start(BIN, &["--shards", "1", "--sim-pairs", "20", "--log-format", "json"]);
    json.get_authed("/v1/levels/BTCUSDT").ok("levels");
    let access = line(&json, "json access", |l| l.contains("rampart::access") && l.contains("/v1/levels/BTCUSDT"));
    let v: Value = serde_json::from_str(&access).unwrap_or_else(|e| panic!("{e}: {access}"));
    assert_eq!(v["level"], "INFO", "{v}");
    assert_eq!(v["target"], "rampart::access", "{v}");
    assert_eq!(v["fields"]["status"], 200, "{v}");
    for l in json.stderr_tail() {
        assert!(serde_json::from_str::<Value>(&l).is_ok(), "every line is JSON: {l}");
    }
}
