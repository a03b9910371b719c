//! Authentication, keys CLI, plans and rate limits, tested through the real binary.

use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{is_api_key, is_iso8601, Server, FAST};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

/// A small, quick server.
fn start() -> Server {
    Server::start(BIN, FAST)
}

#[test]
fn first_start_prints_key_once_and_restart_keeps_it() {
    let server = start();
    let key_lines: Vec<String> = server.stdout_lines().into_iter().filter(|l| l.starts_with("api key: ")).collect();
    assert_eq!(
        key_lines,
        vec![format!("api key: {}", server.key)],
        "first start prints exactly one key line\n{}",
        server.diagnostics()
    );
    assert!(is_api_key(&server.key), "key {:?}", server.key);
    assert!(
        server.stdout_lines().iter().any(|l| *l == format!("listening on 127.0.0.1:{}", server.port)),
        "listening line\n{}",
        server.diagnostics()
    );
    server.get_authed("/v1/exchanges").ok("first key, first run");

    // The first-start account is a developer account.
    let rows = server.key_rows();
    assert_eq!(rows.len(), 1, "one key after first start: {rows:?}");
    assert_eq!(rows[0].plan, "developer", "first-start key plan: {rows:?}");
    assert_eq!(rows[0].revoked, "-", "first-start key is active: {rows:?}");

    let first_key = server.key.clone();
    let server = server.restart(FAST);
    assert!(
        !server.stdout_lines().iter().any(|l| l.starts_with("api key:")),
        "second start with the same data dir must not print a key\n{}",
        server.diagnostics()
    );
    assert_eq!(server.key, first_key);
    server.get("/v1/exchanges/binance/symbols", Some(first_key.as_str())).ok("first key after restart");
    assert_eq!(server.key_rows().len(), 1, "restart created no new key: {:?}", server.key_rows());
}

#[test]
fn missing_malformed_and_unknown_keys_get_401() {
    let server = start();
    server.get_with_authorization("/v1/exchanges", None).assert_error(
        401,
        "missing API key",
        "no Authorization header",
    );
    for header in [
        "Basic xyz",
        "Bearer",
        "Bearer ",
        "bearer-ish rk_0123456789abcdefghijABCDEFGHIJ01",
        "Bearer not-a-key",
        // Well-formed but never issued.
        "Bearer rk_0123456789abcdefghijABCDEFGHIJ01",
        // The real key with one character changed.
        &format!("Bearer {}x", &server.key[..server.key.len() - 1]),
    ] {
        if header == format!("Bearer {}", server.key) {
            continue;
        }
        server.get_with_authorization("/v1/exchanges", Some(header)).assert_error(
            401,
            "invalid API key",
            &format!("Authorization: {header:?}"),
        );
    }
    // Auth applies to every /v1 endpoint, not just one.
    server.get("/v1/symbols/BTCUSDT", None).assert_error(401, "missing API key", "symbol without a key");
    server.get("/v1/exchanges/binance/symbols", Some(&format!("rk_{}", "Z".repeat(32)))).assert_error(
        401,
        "invalid API key",
        "symbols with an unknown key",
    );
    // The right key still works after the failures.
    server.get_authed("/v1/exchanges").ok("valid key");
}

/// How long a key change may take to reach a running server here. The watcher polls every
/// `KEYS_POLL_MS` (20 ms); the bound leaves room for a loaded test machine.
const KEY_CHANGE_WITHIN: Duration = Duration::from_secs(1);

/// Polls `path` with `key` every 20 ms until it answers `status`; the time it took. Only
/// `before` (the answer the old table gives) is accepted meanwhile.
fn until_status(server: &Server, path: &str, key: &str, status: u16, before: u16) -> Duration {
    let started = Instant::now();
    loop {
        let r = server.get(path, Some(key));
        if r.status == status {
            return started.elapsed();
        }
        assert_eq!(r.status, before, "{path} while the key change propagates: {}", r.text);
        assert!(started.elapsed() < KEY_CHANGE_WITHIN, "{path}: still {} after {KEY_CHANGE_WITHIN:?}", r.status);
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn cli_keys_work_on_a_running_server_and_revoked_keys_are_refused_promptly() {
    let server = start();

    let dev = server.create_key("developer", Some("dev-key"));
    assert_ne!(dev, server.key);
    // Usable with no restart, as soon as the key watcher has seen it.
    let took = until_status(&server, "/v1/exchanges", &dev, 200, 401);
    eprintln!("new key usable after {took:?}");
    server.get("/v1/exchanges", Some(&dev)).ok("developer key created while running");

    let lite = server.create_key("developer-lite", None);
    until_status(&server, "/v1/symbols/BTCUSDT", &lite, 200, 401);

    let rows = server.key_rows();
    let dev_row = rows
        .iter()
        .find(|r| r.label == "dev-key")
        .unwrap_or_else(|| panic!("keys list has the labelled key: {rows:?}"))
        .clone();

    let output = server.keys(&["revoke", &dev_row.id]);
    assert!(output.status.success(), "revoke {}: {}", dev_row.id, rampart_tests::describe_output(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.lines().any(|l| l.trim() == format!("revoked key {}", dev_row.id)),
        "revoke prints `revoked key {}`: {stdout:?}",
        dev_row.id
    );
    // Refused as soon as the watcher has seen it.
    let took = until_status(&server, "/v1/exchanges", &dev, 401, 200);
    eprintln!("revoked key refused after {took:?}");
    server.get("/v1/exchanges", Some(&dev)).assert_error(401, "revoked API key", "revoked key");
    server.get("/v1/symbols/ETHUSDT", Some(&dev)).assert_error(401, "revoked API key", "revoked key, other endpoint");
    // Other keys are unaffected.
    server.get("/v1/exchanges", Some(&lite)).ok("lite key after revoke");
    server.get_authed("/v1/exchanges").ok("first key after revoke");

    let rows = server.key_rows();
    let revoked =
        rows.iter().find(|r| r.id == dev_row.id).unwrap_or_else(|| panic!("revoked key still listed: {rows:?}"));
    assert!(is_iso8601(&revoked.revoked), "revoked column is ISO 8601 after revoke: {revoked:?}");

    let output = server.keys(&["revoke", "999999"]);
    assert!(!output.status.success(), "revoking an unknown id must fail: {}", rampart_tests::describe_output(&output));
}

#[test]
fn keys_list_shows_every_key() {
    let server = start();
    server.create_key("free", Some("free one"));
    server.create_key("developer-lite", None);
    server.create_key("developer", Some("dev"));

    let rows = server.key_rows();
    assert_eq!(rows.len(), 4, "first-start key + 3 created: {rows:?}");
    for row in &rows {
        assert!(!row.id.is_empty(), "id: {row:?}");
        assert!(!row.label.is_empty(), "label is `-` when none: {row:?}");
        assert!(is_iso8601(&row.created), "created is ISO 8601: {row:?}");
        assert_eq!(row.revoked, "-", "not revoked: {row:?}");
        assert!(["free", "developer", "developer-lite"].contains(&row.plan.as_str()), "plan: {row:?}");
    }
    let ids: std::collections::HashSet<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids.len(), rows.len(), "ids are distinct: {rows:?}");
    let find = |label: &str| rows.iter().find(|r| r.label == label);
    assert_eq!(find("free one").map(|r| r.plan.as_str()), Some("free"), "{rows:?}");
    assert_eq!(find("dev").map(|r| r.plan.as_str()), Some("developer"), "{rows:?}");
    assert!(
        rows.iter().any(|r| r.label == "-" && r.plan == "developer-lite"),
        "unlabelled developer-lite key shows label `-`: {rows:?}"
    );
    // The raw key is never listed (only its hash is stored).
    let output = server.keys(&["list"]);
    assert!(!String::from_utf8_lossy(&output.stdout).contains(&server.key), "keys list must not show a key");
}

#[test]
fn unknown_plan_is_refused_with_the_allowed_list() {
    let server = start();
    let output = server.keys(&["create", "--plan", "gold"]);
    assert!(!output.status.success(), "unknown plan must fail: {}", rampart_tests::describe_output(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("Allowed: free, developer, developer-lite"), "stderr names the allowed plans: {stderr:?}");
    assert!(!String::from_utf8_lossy(&output.stdout).lines().any(is_api_key), "no key printed for an unknown plan");
    assert_eq!(server.key_rows().len(), 1, "no key was created");
}

#[test]
fn free_plan_gets_403() {
    let server = start();
    let free = server.create_key("free", Some("free"));
    for path in ["/v1/exchanges", "/v1/exchanges/binance/symbols", "/v1/symbols/BTCUSDT"] {
        server.get(path, Some(&free)).assert_error(
            403,
            "API access needs an active Developer plan",
            &format!("free key on {path}"),
        );
    }
}

#[test]
fn burst_over_120_per_minute_gets_429_with_retry_after() {
    let server = start();
    let started = Instant::now();
    for i in 1..=120 {
        let reply = server.get_authed("/v1/exchanges");
        assert_eq!(reply.status, 200, "request {i} of 120: {reply:?}");
    }
    let reply = server.get_authed("/v1/exchanges");
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(55), "the burst took {elapsed:?}, too slow for the test to mean anything");
    reply.assert_some_error(429, "request 121");
    let retry_after_s = reply.retry_after_s("request 121");
    assert!((1..=60).contains(&retry_after_s), "Retry-After {retry_after_s} not in 1..=60");
    // Still limited on another endpoint: the budget is per key, not per path.
    server.get_authed("/v1/symbols/BTCUSDT").assert_some_error(429, "request 122, other endpoint");
    // Another key has its own budget.
    let other = server.create_key("developer", Some("other"));
    server.get("/v1/exchanges", Some(&other)).ok("other key");
}

/// The front threads (`--fronts`) answering `server`'s requests so far, from its access log.
fn fronts_seen(server: &Server) -> std::collections::BTreeSet<String> {
    server
        .stderr_tail()
        .iter()
        .filter(|l| l.contains("rampart::access"))
        .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("front=")).map(str::to_owned))
        .collect()
}

/// With four front threads, each request on a connection of its own lands on whichever thread
/// accepts it; a key's burst and the keyless budget of an address are still counted once for the
/// process: the 121st request of a key and the 61st keyless one of an address are refused.
#[test]
fn a_keys_limits_are_exact_across_front_threads() {
    // Both ways of accepting: one shared socket, and a socket per thread (`SO_REUSEPORT`).
    for accept in ["shared", "reuseport"] {
        a_keys_limits_are_exact_across_front_threads_accepting(accept);
    }
}

fn a_keys_limits_are_exact_across_front_threads_accepting(accept: &str) {
    let server = Server::start(BIN, &[FAST, &["--fronts", "4", "--accept", accept]].concat());
    for i in 1..=120 {
        let reply = server.get_authed("/v1/exchanges");
        assert_eq!(reply.status, 200, "{accept}: request {i} of 120: {reply:?}");
    }
    server.get_authed("/v1/exchanges").assert_some_error(429, "request 121");
    server.get_authed("/v1/symbols/BTCUSDT").assert_some_error(429, "request 122, other endpoint");
    for i in 1..=60 {
        let reply = server.get("/v1/exchanges", None);
        assert_eq!(reply.status, 401, "keyless request {i} of 60: {reply:?}");
    }
    server.get("/v1/exchanges", None).assert_some_error(429, "keyless request 61");
    let seen = fronts_seen(&server);
    assert!(seen.len() >= 2, "{accept}: the requests were spread over front threads: {seen:?}");
    assert!(seen.iter().all(|f| ["0", "1", "2", "3"].contains(&f.as_str())), "{seen:?}");
}

#[test]
fn failed_auth_floods_are_limited_per_address() {
    let server = start();
    for i in 1..=60 {
        let reply = if i % 2 == 0 {
            server.get("/v1/exchanges", None)
        } else {
            server.get("/v1/exchanges", Some(&format!("rk_{}x", "0".repeat(31))))
        };
        assert_eq!(reply.status, 401, "failed-auth request {i} of 60: {reply:?}");
    }
    let reply = server.get("/v1/exchanges", Some(&format!("rk_{}y", "0".repeat(31))));
    reply.assert_some_error(429, "failed-auth request 61");
    let retry_after_s = reply.retry_after_s("failed-auth request 61");
    assert!((1..=60).contains(&retry_after_s), "Retry-After {retry_after_s} not in 1..=60");
    server.get("/v1/exchanges", None).assert_some_error(429, "failed-auth request 62, no key");
    assert!(server.alive(), "server alive after the flood");
}

/// `keys` on a directory without a database is refused (a mistyped `--data-dir` must not become
/// a new, empty database) unless `--create` asks for one.
#[test]
fn keys_refuse_a_data_dir_without_a_database_unless_asked() {
    let dir = rampart_tests::DataDir::new();
    let missing = dir.path().join("typo");
    let run = |args: &[&str]| {
        let mut c = std::process::Command::new(BIN);
        c.arg("keys").args(args).arg("--data-dir").arg(&missing);
        rampart_tests::run_with_timeout(c, rampart_tests::CLI_TIMEOUT)
    };
    let out = run(&["list"]);
    assert_eq!(out.status.code(), Some(2), "{}", rampart_tests::describe_output(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no rampart database in") && stderr.contains("--create"), "{stderr}");
    assert!(!missing.join("rampart.db").exists(), "nothing was created");
    let out = run(&["create", "--plan", "developer", "--create"]);
    assert!(out.status.success(), "{}", rampart_tests::describe_output(&out));
    let out = run(&["list"]);
    assert!(out.status.success(), "the database exists now: {}", rampart_tests::describe_output(&out));
}

/// Each subcommand's help shows only its own options: `sim-venue` has no `--config` or
/// `--data-dir` (it takes neither).
#[test]
fn sim_venue_help_lists_only_its_own_options() {
    let mut c = std::process::Command::new(BIN);
    c.args(["sim-venue", "--help"]);
    let out = rampart_tests::run_with_timeout(c, rampart_tests::CLI_TIMEOUT);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--fault-gap-every"), "{help}");
    assert!(!help.contains("--data-dir") && !help.contains("--config"), "{help}");
}

/// The first key is made only once the port is bound: a first start that cannot bind its port
/// exits with the reason and creates no account, so the next start still prints the key.
#[test]
fn a_start_that_cannot_bind_loses_no_key() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("a port to occupy");
    let port = busy.local_addr().expect("addr").port();
    let dir = rampart_tests::DataDir::new();
    let mut c = std::process::Command::new(BIN);
    c.args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"]).arg(dir.path());
    let out = rampart_tests::run_with_timeout(c, rampart_tests::CLI_TIMEOUT);
    assert_eq!(out.status.code(), Some(2), "{}", rampart_tests::describe_output(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stdout.contains("api key:"), "no key printed: {stdout}");
    assert!(stderr.contains(&format!("binding 127.0.0.1:{port}")), "{stderr}");
    let mut c = std::process::Command::new(BIN);
    c.args(["keys", "list", "--data-dir"]).arg(dir.path());
    let out = rampart_tests::run_with_timeout(c, rampart_tests::CLI_TIMEOUT);
    let listed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(listed.lines().count(), 1, "only the header: no account was created: {listed}");
    drop(busy);
}
