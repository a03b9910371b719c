//! Hardening through the real binary: what an attacker or an unlucky operator did to rampart,
//! each reproduced against a running server: a second server on the same data directory,
//! request bodies and connections from clients without a key, a locked database, errors produced
//! below the router, alert values kept exactly as sent, and a bounded shutdown.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{connect, raw_exchange, run_with_timeout, Server, FAST};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

fn bearer(key: &str) -> String {
    format!("Bearer {key}")
}

/// A second server on a data directory in use refuses to start, before printing a key or a
/// port, and the first one keeps serving.
#[test]
fn a_second_server_on_the_same_data_directory_refuses_to_start() {
    let server = Server::start(BIN, FAST);
    let mut second = Command::new(BIN);
    second.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(&server.data_dir).args(FAST);
    let out = run_with_timeout(second, Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "exit status; stderr: {stderr}");
    assert!(stderr.contains("another rampart server is using this data directory"), "stderr: {stderr}");
    assert!(!stdout.contains("listening") && !stdout.contains("api key"), "stdout: {stdout}");
    assert_eq!(server.get("/healthz", None).status, 200, "the first server still serves");
    assert!(server.alive());
}

/// The server's resident memory, KiB (`VmRSS`).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/PID/status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("a VmRSS line");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("VmRSS in kB")
}

/// The first response's status line and the raw text read within `window`.
fn first_answer(stream: &mut TcpStream, window: Duration) -> String {
    let (bytes, _) = rampart_tests::read_until_closed(stream, window);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Bodies of clients without a valid key are never read: the answer is 401 on the head alone
/// (no `100 Continue`), and a flood of such requests does not grow the server's memory by the
/// bodies' size. A declared body over the bound is refused at once with 413.
#[test]
fn unauthenticated_bodies_are_never_read() {
    let _ = rlimit::increase_nofile_limit(8_192);
    let server = Server::start(BIN, FAST);
    // `Expect: 100-continue` without a key: 401 at once, never `100 Continue`.
    let mut s = connect(server.port);
    let head = "POST /v1/alerts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 60000\r\nExpect: 100-continue\r\n\r\n";
    s.write_all(head.as_bytes()).expect("write head");
    let text = first_answer(&mut s, Duration::from_secs(3));
    assert!(text.starts_with("HTTP/1.1 401 "), "answered on the head alone: {text:?}");
    assert!(!text.contains("100 Continue"), "no 100 Continue without a key: {text:?}");
    // A huge declared length with a valid key: 413 at once (it used to wait 10 s for a 408).
    let head = format!(
        "POST /v1/alerts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Length: 10000000000\r\n\r\n{{",
        server.key
    );
    let out = raw_exchange(server.port, head.as_bytes(), false, Duration::from_secs(5));
    assert!(out.text.starts_with("HTTP/1.1 413 "), "{:?}", out.text);
    assert!(out.text.contains("request body too large (max 65536 bytes)"), "{:?}", out.text);
    // A flood: 1 000 connections, each a 64 KB body without a key.
    let before = rss_kib(server.pid);
    let body = vec![b'x'; 64 * 1024];
    let head = format!("POST /v1/alerts HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n", body.len());
    let mut flood = Vec::new();
    for _ in 0..1_000 {
        let mut s = connect(server.port);
        let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
        let _ = s.write_all(head.as_bytes());
        let _ = s.write_all(&body);
        flood.push(s);
    }
    thread::sleep(Duration::from_secs(1));
    let during = rss_kib(server.pid);
    drop(flood);
    let growth_mib = during.saturating_sub(before) / 1024;
    eprintln!("RSS before {before} KiB, during the flood {during} KiB (+{growth_mib} MiB)");
    // The bodies alone are 62.5 MiB; what the server holds is its per-connection buffers.
    assert!(growth_mib < 40, "RSS grew {growth_mib} MiB under 1 000 unauthenticated 64 KB bodies");
    server.assert_serving("an unauthenticated flood");
}

/// With the usual 1 024-descriptor limit, one client holding 1 100 connections gets a bounded
/// share: others are still served, and the log is not flooded with accept errors.
#[test]
fn one_client_cannot_take_every_connection() {
    let _ = rlimit::increase_nofile_limit(8_192);
    let (hook_port, hooks) = counting_receiver();
    let config = std::env::temp_dir().join(format!("rampart-hardening-flood-{}.toml", std::process::id()));
    std::fs::write(&config, "[webhooks]\nallow_private = true\n").expect("write config");
    let config = config.display().to_string();
    let server = Server::start_under_shell(BIN, "ulimit -n 1024", &[FAST, &["--config", config.as_str()]].concat());
    // Alerts that fire within seconds on the simulated market, each with a webhook.
    for symbol in ["BTCUSDT", "ETHUSDT", "SOLUSDT", "XRPUSDT", "DOGEUSDT"] {
        let body = json!({"symbol": symbol, "type": "pct", "direction": "any", "pct": 0.1, "window": "5m",
                          "repeat": true, "webhook_url": format!("http://127.0.0.1:{hook_port}/hook")});
        server.request("POST", "/v1/alerts", Some(&bearer(&server.key)), Some(&body.to_string())).ok("create");
    }
    let mut held = Vec::new();
    for _ in 0..1_100 {
        let Ok(s) = TcpStream::connect(("127.0.0.1", server.port)) else { continue };
        held.push(s);
    }
    // Connections past the address's share are closed at once, unanswered; the others stay.
    thread::sleep(Duration::from_millis(500));
    let mut open = 0;
    for s in &mut held {
        let _ = s.set_read_timeout(Some(Duration::from_millis(2)));
        let mut b = [0u8; 1];
        // Still open: nothing to read yet (a closed one reads end-of-file or a reset).
        let waiting =
            |e: &std::io::Error| matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut);
        if s.read(&mut b).is_err_and(|e| waiting(&e)) {
            open += 1;
        }
    }
    assert!(open <= 128, "{open} connections from one address stayed open");
    // Another address is served at once.
    let other = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    other.bind(&std::net::SocketAddr::from(([127, 0, 0, 2], 0)).into()).expect("bind 127.0.0.2");
    other.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], server.port)).into()).expect("connect");
    let mut other: TcpStream = other.into();
    let request = format!(
        "GET /v1/exchanges HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        server.key
    );
    other.write_all(request.as_bytes()).expect("write");
    let text = first_answer(&mut other, Duration::from_secs(5));
    assert!(text.starts_with("HTTP/1.1 200 "), "another address is served: {text:?}");
    // Webhooks still go out while the client holds its connections (descriptors are reserved).
    let before = hooks.load(std::sync::atomic::Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(90);
    while hooks.load(std::sync::atomic::Ordering::Relaxed) == before {
        assert!(Instant::now() < deadline, "no webhook delivered during the flood\n{}", server.diagnostics());
        thread::sleep(Duration::from_millis(100));
    }
    drop(held);
    server.assert_serving("one client holding 1 100 connections");
    let log = server.stderr_tail();
    let accept_errors = log.iter().filter(|l| l.contains("front: accept")).count();
    assert!(accept_errors <= 5, "{accept_errors} accept-error lines");
    assert!(
        log.iter().any(|l| l.contains("descriptor limit 1024: up to 512 HTTP connections, 128 per address")),
        "the bounds follow the descriptor limit: {log:?}"
    );
}

/// A webhook receiver on loopback that answers 200 to every request and counts them.
fn counting_receiver() -> (u16, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = count.clone();
    thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            // The head, then as many body bytes as it declares (the service always sends one).
            while let Ok(n @ 1..) = stream.read(&mut buf) {
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got);
                let Some((head, body)) = text.split_once("\r\n\r\n") else { continue };
                let len = head
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(0);
                if body.len() >= len {
                    break;
                }
            }
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    (port, count)
}

/// Errors hyper produces below the router carry `{"error": ...}` like every other error.
#[test]
fn errors_below_the_router_have_json_bodies() {
    let server = Server::start(BIN, FAST);
    let many_headers: String = (0..100).map(|i| format!("X-H{i}: v\r\n")).collect();
    let long_uri = format!("GET /v1/levels/{} HTTP/1.1\r\nHost: x\r\n\r\n", "A".repeat(70_000));
    for (what, request, status) in [
        ("bad request line", "GARBAGE\r\n\r\n".to_owned(), 400),
        ("bad Content-Length", "POST /v1/alerts HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n".to_owned(), 400),
        ("100 headers", format!("GET /v1/exchanges HTTP/1.1\r\nHost: x\r\n{many_headers}\r\n"), 431),
        ("a 70 KB URI", long_uri, 414),
    ] {
        let out = raw_exchange(server.port, request.as_bytes(), true, Duration::from_secs(5));
        let responses = out.responses();
        let first = responses.first().unwrap_or_else(|| panic!("{what}: no answer: {:?}", out.text));
        assert_eq!(first.status, status, "{what}: {:?}", out.text);
        assert!(first.header("content-type").is_some_and(|t| t.starts_with("application/json")), "{what}: {first:?}");
        let body: Value = serde_json::from_str(&first.body).unwrap_or(Value::Null);
        assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()), "{what}: body {:?}", first.body);
    }
    server.assert_serving("hyper-level errors");
}

/// Resetting the process-wide latency histograms is for operators: a tenant's key gets 403 (and
/// can still read them); a key on a plan with `operator = true` may reset.
#[test]
fn latency_reset_is_for_operators_only() {
    let config = std::env::temp_dir().join(format!("rampart-hardening-ops-{}.toml", std::process::id()));
    std::fs::write(
        &config,
        "[plans.ops]\napi = true\nprice_alert_cap = 1\npct_alerts = false\nrepeat = false\nburst_per_min = 120\ndaily_quota = 1000\noperator = true\n",
    )
    .expect("write config");
    let config = config.display().to_string();
    let server = Server::start(BIN, &[FAST, &["--config", config.as_str()]].concat());
    let tenant = bearer(&server.key);
    server.request("DELETE", "/v1/debug/latency", Some(&tenant), None).assert_error(
        403,
        "operator access needed: this key's plan does not have operator = true",
        "a tenant resetting the histograms",
    );
    server.get_authed("/v1/debug/latency").ok("a tenant may read them");
    let out = server.keys(&["create", "--plan", "ops", "--config", config.as_str()]);
    assert!(out.status.success(), "{out:?}");
    let ops = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").trim().to_owned();
    server.await_key(&ops);
    let reply = server.request("DELETE", "/v1/debug/latency", Some(&bearer(&ops)), None);
    assert_eq!(reply.ok("an operator resets")["reset"], json!(true));
    let _ = std::fs::remove_file(&config);
}

/// While another process holds the database's write lock, an alert creation answers 503
/// within the storage bound, reads are not held up, and `/healthz` says storage cannot be
/// written; once the lock is released all is well again and nothing half-done remains.
#[test]
fn a_locked_database_stalls_no_read() {
    let server = Server::start(BIN, FAST);
    let key = bearer(&server.key);
    let price = server.get_authed("/v1/symbols/BTCUSDT").ok("price")["data"]["price"].as_f64().expect("price");
    let create =
        json!({"symbol":"BTCUSDT","type":"price","direction":"above","price":(price * 2.0).round()}).to_string();
    let db = rusqlite::Connection::open(server.data_dir.join("rampart.db")).expect("open the database");
    db.execute_batch("BEGIN IMMEDIATE; INSERT INTO meta (key, value) VALUES ('test_lock', 1) ON CONFLICT(key) DO UPDATE SET value = 1;")
        .expect("take the write lock");
    let started = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    let port = server.port;
    let (k, body) = (key.clone(), create.clone());
    thread::spawn(move || {
        let req = format!(
            "POST /v1/alerts HTTP/1.1\r\nHost: x\r\nAuthorization: {k}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let out = raw_exchange(port, req.as_bytes(), false, Duration::from_secs(15));
        let _ = tx.send((out.text, started.elapsed()));
    });
    // Reads are served while the creation waits on the lock.
    thread::sleep(Duration::from_millis(300));
    for _ in 0..5 {
        let t = Instant::now();
        server.get_authed("/v1/levels/BTCUSDT").ok("a read during the lock");
        assert!(t.elapsed() < Duration::from_secs(1), "a read took {:?} during the lock", t.elapsed());
    }
    let (text, took) = rx.recv_timeout(Duration::from_secs(20)).expect("the creation is answered");
    assert!(text.starts_with("HTTP/1.1 503 "), "a creation that cannot commit: {text:?}");
    assert!(took < Duration::from_secs(4), "503 within the storage bound, took {took:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let health = loop {
        let h = server.get("/healthz", None);
        if h.status == 503 {
            break h;
        }
        assert!(Instant::now() < deadline, "healthz still says {h:?}");
        thread::sleep(Duration::from_millis(200));
    };
    let v: Value = serde_json::from_str(&health.text).expect("healthz JSON");
    assert_eq!((v["status"].as_str(), v["storage"]["writable"].as_bool()), (Some("degraded"), Some(false)), "{v}");
    db.execute_batch("ROLLBACK;").expect("release the lock");
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.get("/healthz", None).status != 200 {
        assert!(Instant::now() < deadline, "healthz did not recover");
        thread::sleep(Duration::from_millis(200));
    }
    let listed = server.get("/v1/alerts?status=all", Some(&server.key));
    assert_eq!(listed.ok("list")["data"].as_array().map(Vec::len), Some(0), "the refused creation left nothing");
    server.request("POST", "/v1/alerts", Some(&key), Some(&create)).ok("a creation after the lock");
}

/// Alert values are kept as sent: a pct of 2.125 is 2.125 (not 2.13), a price level keeps its
/// eight decimals, and a value the service cannot keep exactly is refused with its own message.
#[test]
fn alert_values_are_kept_as_sent() {
    let server = Server::start(BIN, FAST);
    let key = server.key.clone();
    let post = |body: Value| server.request("POST", "/v1/alerts", Some(&bearer(&key)), Some(&body.to_string()));
    let pct = post(json!({"symbol":"BTCUSDT","type":"pct","direction":"up","pct":2.125,"window":"1h"}));
    assert_eq!(pct.ok("pct 2.125")["data"]["pct"], json!(2.125));
    let fine = post(json!({"symbol":"BTCUSDT","type":"pct","direction":"up","pct":3.004,"window":"4h"}));
    assert_eq!(fine.ok("pct 3.004")["data"]["pct"], json!(3.004));
    let price = server.get_authed("/v1/symbols/BTCUSDT").ok("price")["data"]["price"].as_f64().expect("price");
    let level = format!("{:.0}.12345678", price * 2.0);
    let body = format!(r#"{{"symbol":"BTCUSDT","type":"price","direction":"above","price":{level}}}"#);
    let created = server.request("POST", "/v1/alerts", Some(&bearer(&key)), Some(&body));
    let answered = created.ok("an 8-decimal level")["data"]["price"].to_string();
    assert_eq!(answered, level, "the level as sent");
    let listed = server.get("/v1/alerts", Some(&key));
    let prices: Vec<String> =
        listed.ok("list")["data"].as_array().expect("data").iter().map(|a| a["price"].to_string()).collect();
    assert!(prices.contains(&level), "{prices:?}");
    for (body, message) in [
        (
            r#"{"symbol":"BTCUSDT","type":"price","direction":"below","price":0.0000269804}"#,
            "price has more than 8 decimal places (the finest price step on any venue is 0.00000001)",
        ),
        (
            r#"{"symbol":"BTCUSDT","type":"price","direction":"below","price":0.000000001}"#,
            "price must be at least 0.00000001",
        ),
        (
            r#"{"symbol":"BTCUSDT","type":"price","direction":"above","price":100000000000}"#,
            "price must be at most 90000000000",
        ),
        (
            r#"{"symbol":"BTCUSDT","type":"pct","direction":"up","pct":1.0000001,"window":"1h"}"#,
            "pct has more than 6 decimal places",
        ),
    ] {
        server.request("POST", "/v1/alerts", Some(&bearer(&key)), Some(body)).assert_error(422, message, body);
    }
}

/// A stop that does not finish (a shard that never sees it) does not keep the process alive:
/// it exits within the grace period and names what it abandoned.
#[test]
fn shutdown_is_bounded_and_names_what_it_abandoned() {
    let server = Server::start(BIN, &[FAST, &["--fault-hang-shard-stop"]].concat());
    let started = Instant::now();
    let status = server.terminate();
    let took = started.elapsed();
    assert_eq!(status.code(), Some(1), "an abandoned stop exits 1");
    assert!(took < Duration::from_secs(15), "exited {took:?} after SIGTERM");
    let log = server.stderr_tail();
    assert!(
        log.iter().any(|l| l.contains("shutdown did not finish within 5 s: abandoned while stopping the shards")),
        "{log:?}"
    );
}

/// With a locked-memory limit too low for io_uring (and a hard limit that forbids raising it),
/// the server refuses to start with one line that says what to run, before printing a key.
#[test]
fn a_low_memlock_limit_is_refused_before_the_key_is_printed() {
    let dir = rampart_tests::DataDir::new();
    let mut c = Command::new("sh");
    c.arg("-c").arg("ulimit -l 64; exec \"$0\" \"$@\"").arg(BIN);
    c.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(dir.path()).args(FAST);
    let out = run_with_timeout(c, Duration::from_secs(30));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(stdout.is_empty(), "nothing on stdout (no key, no port): {stdout}");
    assert!(stderr.contains("RLIMIT_MEMLOCK) is 64 KiB") && stderr.contains("ulimit -l"), "{stderr}");
    assert!(!dir.path().join("rampart.db").exists(), "no database was created");
}

/// A full disk (a file-size limit on the server process, below the database's size): the
/// server still serves reads, `/healthz` says storage cannot be written, and an alert creation
/// answers 503 within the storage bound instead of hanging or claiming success.
#[test]
fn a_full_disk_is_reported_and_writes_fail_fast() {
    let first = Server::start(BIN, FAST);
    let key = first.key.clone();
    let dir = first.data_dir.clone();
    // Keep the directory: stop the server without removing it.
    let kept = rampart_tests::DataDir::new();
    assert_eq!(first.terminate().code(), Some(0));
    for name in ["rampart.db", "rampart.db-wal", "rampart.db-shm"] {
        let _ = std::fs::copy(dir.join(name), kept.path().join(name));
    }
    drop(first);
    // 64 blocks of 512 bytes: every write past 32 KiB fails with EFBIG (SIGXFSZ ignored).
    let mut c = Command::new("sh");
    c.arg("-c").arg("trap '' XFSZ; ulimit -f 64; exec \"$0\" \"$@\"").arg(BIN);
    c.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(kept.path()).args(FAST);
    c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null());
    let mut child = c.spawn().expect("spawn the server");
    let stdout = child.stdout.take().expect("stdout");
    let port = std::io::BufRead::lines(std::io::BufReader::new(stdout))
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("listening on 127.0.0.1:").and_then(|p| p.trim().parse::<u16>().ok()))
        .expect("a listening line");
    let get = |path: &str| {
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n");
        raw_exchange(port, req.as_bytes(), false, Duration::from_secs(5)).text
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let health = loop {
        let h = get("/healthz");
        if h.contains("\"writable\":false") {
            break h;
        }
        assert!(Instant::now() < deadline, "healthz never reported the full disk: {h}");
        thread::sleep(Duration::from_millis(200));
    };
    assert!(health.starts_with("HTTP/1.1 503 ") && health.contains("\"status\":\"degraded\""), "{health}");
    assert!(get("/v1/levels/BTCUSDT").starts_with("HTTP/1.1 200 "), "reads are served");
    let body = r#"{"symbol":"BTCUSDT","type":"price","direction":"below","price":1}"#;
    let req = format!(
        "POST /v1/alerts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let started = Instant::now();
    let out = raw_exchange(port, req.as_bytes(), false, Duration::from_secs(10));
    assert!(out.text.starts_with("HTTP/1.1 503 "), "a creation on a full disk: {:?}", out.text);
    assert!(started.elapsed() < Duration::from_secs(4), "answered in {:?}", started.elapsed());
    let _ = child.kill();
    let _ = child.wait();
}

/// The CPUs a thread of `pid` whose name starts with `name` may run on (from `/proc`; glommio
/// appends an id to an executor's name).
fn thread_cpus(pid: u32, name: &str) -> Option<String> {
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim().starts_with(name) {
            let status = std::fs::read_to_string(task.path().join("status")).ok()?;
            return status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).map(|l| l.trim().to_owned());
        }
    }
    None
}

/// #14: two instances on one host never pin their shards to the same core: each claims free
/// CPUs of its allowed set, and one that finds none runs unpinned (and says so).
#[test]
fn two_instances_do_not_share_a_pinned_core() {
    let a = Server::start(BIN, &["--shards", "1", "--sim-pairs", "20"]);
    let b = Server::start(BIN, &["--shards", "1", "--sim-pairs", "20"]);
    let ca = thread_cpus(a.pid, "shard-0").expect("a's shard thread");
    let cb = thread_cpus(b.pid, "shard-0").expect("b's shard thread");
    let single = |c: &str| !c.contains(',') && !c.contains('-');
    assert!(!(ca == cb && single(&ca)), "both pinned to CPU {ca}");
    for (s, c) in [(&a, &ca), (&b, &cb)] {
        let log = s.stderr_tail().join("\n");
        let said = if single(c) { format!("shard 0 on CPU {c}") } else { "shard 0 unpinned".to_owned() };
        assert!(log.contains(&said), "{said:?} not in the log:\n{log}");
    }
}

/// The front's accept mode and the shards' spin take only what they document; anything else is
/// refused at start with the allowed values, before a key or a port is printed.
#[test]
fn bad_accept_and_spin_settings_are_refused_naming_what_is_allowed() {
    for (flags, says) in [
        (["--accept", "fork"], "invalid accept 'fork'. Allowed: shared, reuseport"),
        (["--shard-spin-us", "1000001"], "--shard-spin-us must be between 0 and 1000000, not 1000001"),
    ] {
        let dir = rampart_tests::DataDir::new();
        let mut c = Command::new(BIN);
        c.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(dir.path()).args(FAST).args(flags);
        let out = run_with_timeout(c, Duration::from_secs(30));
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(2), "{flags:?}: stderr: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
        assert!(!stdout.contains("api key") && !stdout.contains("listening"), "{flags:?}: {stdout}");
    }
}
