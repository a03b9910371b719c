//! Webhook delivery through the real binary under hostile conditions, with firings driven by a
//! trade on the venue simulator: a database that cannot be written after the firing (a full
//! disk, by a file-size limit) must not make the sender re-send; a truncated answer is a
//! failure, retried 10 s later; other accounts' hundreds of dead receivers do not delay another
//! account's healthy one on the same host, nor three accounts' hanging receivers one on the same
//! host and port, in one process and through the cluster's delivery role (PostgreSQL, NATS
//! JetStream and a `rampart deliver` process).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{file_size_limit, file_size_limited, now_ms, pg_database, DataDir, Deliver, Server, SimVenue};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

/// Plans and webhook settings of every server here: loopback receivers allowed, room for many
/// alerts and fast creation.
const EXTRA_CONFIG: &str = "[webhooks]\nallow_private = true\n[plans.big]\napi = true\nprice_alert_cap = 5000\n\
pct_alerts = true\nrepeat = true\nburst_per_min = 1000000\ndaily_quota = 100000000\n";

/// How a receiver answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `200`, empty body.
    Ok,
    /// `200` declaring 100 bytes, then 7 bytes and a close.
    Truncated,
    /// Waits for the gate to open, then `200`.
    Gated,
    /// One receiver shared by every account (a chat service's endpoint): a request to
    /// `/dead/{account}/...` is read and never answered (held until the attempt is cut or times
    /// out), any other is answered `200` at once.
    Shared,
}

/// One request received: when, and its body.
#[derive(Clone, Debug)]
struct Hit {
    at_ms: i64,
    body: String,
}

/// A webhook receiver on loopback.
struct Hook {
    port: u16,
    hits: Arc<Mutex<Vec<Hit>>>,
    gate: Arc<AtomicBool>,
    /// [`Mode::Shared`]: the requests to `/dead/{account}/...`.
    dead: Arc<Dead>,
}

/// Accounts a [`Mode::Shared`] receiver counts apart (`/dead/0/...` to `/dead/23/...`).
const ACCOUNTS: usize = 24;

/// The hanging requests of a [`Mode::Shared`] receiver.
#[derive(Default)]
struct Dead {
    /// Received, by account.
    by_account: Mutex<[usize; ACCOUNTS]>,
    /// Held open now.
    now: AtomicUsize,
    /// The most held open at once.
    max: AtomicUsize,
}

impl Hook {
    fn start(mode: Mode) -> Hook {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let hits = Arc::new(Mutex::new(Vec::new()));
        let gate = Arc::new(AtomicBool::new(false));
        let dead = Arc::new(Dead::default());
        let (h, g, d) = (hits.clone(), gate.clone(), dead.clone());
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (h, g, d) = (h.clone(), g.clone(), d.clone());
                thread::spawn(move || serve(stream, mode, &h, &g, &d));
            }
        });
        Hook { port, hits, gate, dead }
    }

    /// Waits up to 30 s until the dead requests by account satisfy `enough`; returns them.
    fn wait_dead(&self, enough: impl Fn(&[usize; ACCOUNTS]) -> bool, server: &Server) -> [usize; ACCOUNTS] {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let dead = self.dead.by_account.lock().map(|d| *d).unwrap_or_default();
            if enough(&dead) {
                return dead;
            }
            assert!(Instant::now() < deadline, "dead requests by account: {dead:?}\n{}", server.diagnostics());
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().map(|h| h.clone()).unwrap_or_default()
    }

    /// Waits up to `within` for `n` hits.
    fn wait_for(&self, n: usize, within: Duration, server: &Server) -> Vec<Hit> {
        let deadline = Instant::now() + within;
        loop {
            let hits = self.hits();
            if hits.len() >= n {
                return hits;
            }
            assert!(Instant::now() < deadline, "{} of {n} hits in {within:?}\n{}", hits.len(), server.diagnostics());
            thread::sleep(Duration::from_millis(10));
        }
    }
}

fn serve(mut stream: TcpStream, mode: Mode, hits: &Mutex<Vec<Hit>>, gate: &AtomicBool, dead: &Dead) {
    let Ok(clone) = stream.try_clone() else { return };
    let mut reader = BufReader::new(clone);
    let mut request_line = String::new();
    let _ = reader.read_line(&mut request_line);
    let path = request_line.split(' ').nth(1).unwrap_or("").to_owned();
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.trim_end().split_once(": ") {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; len];
    let _ = reader.read_exact(&mut body);
    if mode == Mode::Shared {
        if let Some(account) = path.strip_prefix("/dead/").and_then(|p| p.split('/').next()?.parse::<usize>().ok()) {
            return hang(&mut stream, account, dead);
        }
    }
    if let Ok(mut h) = hits.lock() {
        h.push(Hit { at_ms: now_ms(), body: String::from_utf8_lossy(&body).into_owned() });
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while mode == Mode::Gated && !gate.load(Ordering::SeqCst) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    let answer: &[u8] = match mode {
        Mode::Ok | Mode::Gated | Mode::Shared => b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        Mode::Truncated => b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort!!",
    };
    let _ = stream.write_all(answer);
}

/// Counts a dead request of `account` and never answers it: reads until the sender closes the
/// connection (its attempt cut or timed out), at most a minute.
fn hang(stream: &mut TcpStream, account: usize, dead: &Dead) {
    if let Ok(mut d) = dead.by_account.lock() {
        if let Some(n) = d.get_mut(account) {
            *n += 1;
        }
    }
    let now = dead.now.fetch_add(1, Ordering::SeqCst) + 1;
    dead.max.fetch_max(now, Ordering::SeqCst);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    let mut buf = [0u8; 256];
    while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
    dead.now.fetch_sub(1, Ordering::SeqCst);
}

/// The simulator (binance only) and a live-fed server on it, started through `bin` (the binary
/// or a wrapper around it).
fn start(bin: &str) -> (SimVenue, Server, String) {
    start_in(bin, DataDir::new())
}

/// [`start`] on the data directory `dir`.
fn start_in(bin: &str, dir: DataDir) -> (SimVenue, Server, String) {
    let sim = SimVenue::start(BIN, &["--sim-pairs", "8", "--venues", "binance"]);
    let config = sim.config(&["binance"], 3, EXTRA_CONFIG).display().to_string();
    let server =
        Server::start_in(bin, dir, &["--feed", "live", "--config", &config, "--shards", "1", "--venues", "binance"]);
    (sim, server, config)
}

/// A key of a new account on plan `big`.
fn big_key(server: &Server, config: &str) -> String {
    let out = server.keys(&["create", "--plan", "big", "--config", config]);
    assert!(out.status.success(), "{out:?}");
    let key = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").trim().to_owned();
    server.await_key(&key);
    key
}

fn price(server: &Server) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = server.get_authed("/v1/symbols/BTCUSDT?exchange=binance");
        if let Some(p) = r.body["data"]["price"].as_f64().filter(|p| *p > 0.0) {
            return p;
        }
        assert!(Instant::now() < deadline, "no BTCUSDT price: {}\n{}", r.text, server.diagnostics());
        thread::sleep(Duration::from_millis(200));
    }
}

/// Creates a BTCUSDT alert 2 % above `p` (the simulated market does not get there by itself)
/// with webhook `url`.
fn alert_above(server: &Server, key: &str, p: f64, url: &str) -> i64 {
    let level = (p * 1.02 * 100.0).round() / 100.0;
    let body = json!({"exchange":"binance","symbol":"BTCUSDT","type":"price","direction":"above","price":level,"webhook_url":url});
    let reply = server.request("POST", "/v1/alerts", Some(&format!("Bearer {key}")), Some(&body.to_string()));
    reply.ok("create alert")["data"]["id"].as_i64().expect("id")
}

/// A trade 3 % above `p`: every alert of [`alert_above`] fires on it.
fn trade_through(sim: &SimVenue, p: f64) {
    sim.control("trade", &json!({"venue":"binance","symbol":"BTCUSDT","price":format!("{:.2}", p * 1.03)}));
}

/// The outbox row of `alert`: (state, attempts, last_error).
fn outbox_row(db: &rusqlite::Connection, alert: i64) -> (String, i64, Option<String>) {
    db.query_row("SELECT state, attempts, last_error FROM outbox WHERE alert_id = ?1", [alert], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
    })
    .expect("outbox row")
}

fn open_db(dir: &Path) -> rusqlite::Connection {
    let db = rusqlite::Connection::open(dir.join("rampart.db")).expect("open the server's database");
    db.busy_timeout(Duration::from_secs(10)).expect("busy timeout");
    // Never checkpoint from here unless told: the ballast must stay in the WAL.
    db.pragma_update(None, "wal_autocheckpoint", 0).expect("autocheckpoint off");
    db
}

#[test]
fn a_full_disk_after_the_firing_does_not_make_the_sender_resend() {
    // Every file the server writes is limited to 4 MiB; the database and its WAL stay far
    // below until the test adds a ballast of 6 MiB to the WAL (written from this process, which
    // has no limit). The server cannot then append to the WAL (past the limit) nor checkpoint
    // the ballast into the database (past the limit either): every write of the server fails
    // with EFBIG, as on a full disk, until the test removes the ballast.
    const LIMIT: u64 = 4 << 20;
    let wrapper = file_size_limited(BIN, LIMIT);
    let (sim, server, config) = start(&wrapper.display().to_string());
    assert_eq!(file_size_limit(server.pid), Some(LIMIT), "the server runs under the file-size limit");
    let key = big_key(&server, &config);
    let hook = Hook::start(Mode::Gated);
    let p = price(&server);
    let alert = alert_above(&server, &key, p, &hook.url());
    trade_through(&sim, p);
    // The firing is committed (its delivery is being sent); the receiver holds its answer.
    hook.wait_for(1, Duration::from_secs(30), &server);
    let db = open_db(&server.data_dir);
    db.execute_batch("CREATE TABLE ballast (b BLOB); INSERT INTO ballast VALUES (zeroblob(6 * 1024 * 1024));")
        .expect("ballast");
    hook.gate.store(true, Ordering::SeqCst);
    // The answer is a 200 the server cannot record. Many poll rounds (20 ms each) pass.
    thread::sleep(Duration::from_secs(3));
    let hits = hook.hits().len();
    assert_eq!(hits, 1, "sent {hits} times while its outcome could not be recorded\n{}", server.diagnostics());
    assert_eq!(outbox_row(&db, alert).1, 0, "nothing could be recorded");
    let log = server.diagnostics();
    assert!(log.contains("delivery: recording"), "the disk was not full:\n{log}");
    server.assert_serving("a full disk");
    // Space again: the kept outcome is recorded, nothing is sent again.
    db.execute_batch("DROP TABLE ballast; VACUUM; PRAGMA wal_checkpoint(TRUNCATE);").expect("remove the ballast");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (state, attempts, _) = outbox_row(&db, alert);
        if state == "delivered" {
            assert_eq!(attempts, 1);
            break;
        }
        assert!(Instant::now() < deadline, "never recorded: {state}\n{}", server.diagnostics());
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(hook.hits().len(), 1, "delivered exactly once");
    let _ = std::fs::remove_file(&wrapper);
}

/// A tmpfs of `size_mb` mounted on a directory for one test, unmounted when dropped.
struct SmallDisk {
    path: std::path::PathBuf,
}

impl SmallDisk {
    /// Mounts it on `dir` (needs root, as `.ci/run` runs; the cluster's fault test needs it too).
    fn mount(dir: &Path, size_mb: u32) -> SmallDisk {
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m"), "tmpfs"])
            .arg(dir)
            .output()
            .expect("run mount");
        assert!(out.status.success(), "mounting a {size_mb} MiB tmpfs (needs root): {out:?}");
        SmallDisk { path: dir.to_owned() }
    }

    /// Fills what is left of it with a ballast file; returns the file.
    fn fill(&self) -> std::path::PathBuf {
        let ballast = self.path.join("ballast");
        let mut f = std::fs::File::create(&ballast).expect("create the ballast");
        let chunk = vec![0u8; 64 * 1024];
        while f.write_all(&chunk).is_ok() {}
        // The last partial chunk: byte by byte is too slow; 4 KiB pages are what SQLite needs.
        let page = [0u8; 512];
        while f.write_all(&page).is_ok() {}
        ballast
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

#[test]
fn a_full_disk_answers_503_naming_it_and_loses_nothing_when_space_returns() {
    // The data directory is a 32 MiB tmpfs of the test's own, filled to the brim once the
    // server runs; creates then fail for lack of space (once the WAL can no longer grow).
    let dir = DataDir::new();
    let disk = SmallDisk::mount(dir.path(), 32);
    let (sim, server, config) = start_in(BIN, dir);
    let key = big_key(&server, &config);
    let auth = format!("Bearer {key}");
    let hook = Hook::start(Mode::Ok);
    let p = price(&server);
    let alert = alert_above(&server, &key, p, &hook.url());
    let ballast = disk.fill();
    // Creates until one is refused: the first writes may still fit in the WAL's free frames.
    let far = json!({"exchange":"binance","symbol":"BTCUSDT","type":"price","direction":"above","price":(p * 5.0).round(),"webhook_url":hook.url()}).to_string();
    let refused = (0..2_000)
        .map(|_| server.request("POST", "/v1/alerts", Some(&auth), Some(&far)))
        .find(|r| r.status != 200)
        .expect("a create refused on a full disk");
    assert_eq!(refused.status, 503, "{}", refused.text);
    assert_eq!(
        refused.body["error"], "storage full: the disk holding the database has no space left; retry later",
        "the 503 names the cause"
    );
    // `/healthz` says so, with where (the probe writes every second).
    let deadline = Instant::now() + Duration::from_secs(10);
    let health = loop {
        let h = server.get("/healthz", None);
        if h.status == 503 && h.body["error"].as_str().is_some_and(|e| e.contains("disk is full")) {
            break h;
        }
        assert!(Instant::now() < deadline, "/healthz never named the full disk: {}", h.text);
        thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(health.body["status"], "degraded");
    let said = health.body["error"].as_str().unwrap_or_default().to_owned();
    assert!(said.contains(&server.data_dir.join("rampart.db").display().to_string()), "{said}");
    // The alert fires while the disk is full: its firing waits in the writer.
    trade_through(&sim, p);
    thread::sleep(Duration::from_secs(2));
    server.assert_serving("a full disk");
    // Space again: the firing is written and delivered once, creates succeed, no restart.
    std::fs::remove_file(&ballast).expect("remove the ballast");
    hook.wait_for(1, Duration::from_secs(30), &server);
    let deadline = Instant::now() + Duration::from_secs(15);
    while server.get("/healthz", None).status != 200 {
        assert!(Instant::now() < deadline, "/healthz not ok after space returned\n{}", server.diagnostics());
        thread::sleep(Duration::from_millis(100));
    }
    let created = server.request("POST", "/v1/alerts", Some(&auth), Some(&far));
    assert_eq!(created.status, 200, "{}", created.text);
    thread::sleep(Duration::from_secs(2));
    assert_eq!(hook.hits().len(), 1, "delivered exactly once");
    let (state, attempts, _) = outbox_row(&open_db(&server.data_dir), alert);
    assert_eq!((state.as_str(), attempts), ("delivered", 1));
    let pid = server.pid;
    server.assert_serving("space returned");
    assert_eq!(server.pid, pid);
}

/// The alert ids of a receiver's hits (each webhook's `alert.id`).
fn hit_alerts(hits: &[Hit]) -> Vec<i64> {
    hits.iter().filter_map(|h| serde_json::from_str::<Value>(&h.body).ok()?["alert"]["id"].as_i64()).collect()
}

/// Polls `sql`'s count in the server's database until it is `n` (30 s at most).
fn wait_count(server: &Server, sql: &str, n: i64) {
    let db = open_db(&server.data_dir);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got: i64 = db.query_row(sql, [], |r| r.get(0)).expect("count");
        if got == n {
            return;
        }
        assert!(Instant::now() < deadline, "{sql}: {got}, not {n}\n{}", server.diagnostics());
        thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_backup_taken_during_a_storm_restores_everything_and_its_pending_deliveries_go_out_once() {
    const N: usize = 100;
    let (sim, server, config) = start(BIN);
    let key = big_key(&server, &config);
    let auth = format!("Bearer {key}");
    let (fast, held) = (Hook::start(Mode::Ok), Hook::start(Mode::Gated));
    let p = price(&server);
    let fast_ids: Vec<i64> = (0..N).map(|_| alert_above(&server, &key, p, &fast.url())).collect();
    let held_ids: Vec<i64> = (0..N).map(|_| alert_above(&server, &key, p, &held.url())).collect();
    trade_through(&sim, p);
    // Every firing committed; the fast receiver's deliveries recorded; the held receiver holds
    // the attempts its slots allow, the rest wait in the outbox.
    wait_count(&server, "SELECT count(*) FROM outbox", 2 * N as i64);
    wait_count(&server, "SELECT count(*) FROM outbox WHERE state = 'delivered'", N as i64);
    held.wait_for(1, Duration::from_secs(30), &server);
    // Creates go on through the backup.
    let stop = Arc::new(AtomicBool::new(false));
    let created = Arc::new(Mutex::new(Vec::new()));
    let creator = {
        let (stop, created, port, auth) = (stop.clone(), created.clone(), server.port, auth.clone());
        let far = json!({"exchange":"binance","symbol":"BTCUSDT","type":"price","direction":"above","price":(p * 5.0).round()}).to_string();
        thread::spawn(move || {
            let url = format!("http://127.0.0.1:{port}/v1/alerts");
            while !stop.load(Ordering::SeqCst) {
                let r = ureq::post(&url).set("Authorization", &auth).send_string(&far);
                let text = r.ok().and_then(|r| r.into_string().ok()).unwrap_or_default();
                let id = serde_json::from_str::<Value>(&text).ok().and_then(|v| v["data"]["id"].as_i64());
                created.lock().expect("created").push(id.expect("a create during the backup succeeds"));
            }
        })
    };
    thread::sleep(Duration::from_millis(300));
    let before_backup = created.lock().expect("created").clone();
    let file = server.data_dir.with_extension("backup.db");
    let out = std::process::Command::new(BIN)
        .arg("backup")
        .arg(&file)
        .arg("--data-dir")
        .arg(&server.data_dir)
        .output()
        .expect("run rampart backup");
    assert!(out.status.success(), "{out:?}");
    thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    creator.join().expect("creator");
    let all_created = created.lock().expect("created").clone();
    assert!(before_backup.len() > 1 && all_created.len() > before_backup.len(), "creates went on during the backup");
    // The machine dies; the backup is restored into a fresh server.
    let held_before = hit_alerts(&held.hits());
    server.kill();
    let dir = DataDir::new();
    std::fs::copy(&file, dir.path().join("rampart.db")).expect("restore the backup");
    let _ = std::fs::remove_file(&file);
    held.gate.store(true, Ordering::SeqCst);
    let args = ["--feed", "live", "--config", &config, "--shards", "1", "--venues", "binance"];
    let restored = Server::start_in_with_key(BIN, dir, &args, &key);
    // Every alert of the backup's moment, nothing created after it ended.
    let listed = restored.get("/v1/alerts?status=all", Some(&key));
    let ids: std::collections::BTreeSet<i64> =
        listed.body["data"].as_array().expect("alerts").iter().filter_map(|a| a["id"].as_i64()).collect();
    for id in fast_ids.iter().chain(&held_ids).chain(&before_backup) {
        assert!(ids.contains(id), "alert {id} is missing from the restored server");
    }
    let known: std::collections::BTreeSet<i64> =
        fast_ids.iter().chain(&held_ids).chain(&all_created).copied().collect();
    assert!(ids.is_subset(&known), "the restored server has alerts nobody created");
    let inbox = restored.get("/v1/inbox?limit=1000", Some(&key));
    let fired = inbox.body["data"].as_array().expect("inbox").len();
    assert_eq!(fired, 2 * N, "every firing's inbox entry: {}", inbox.text);
    // The pending deliveries go out once each; the delivered ones are not sent again.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let after: Vec<i64> = hit_alerts(&held.hits()).split_off(held_before.len());
        let distinct: std::collections::BTreeSet<i64> = after.iter().copied().collect();
        if distinct.len() == N {
            assert_eq!(after.len(), N, "a pending delivery sent twice after the restore");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {N} pending deliveries sent\n{}",
            distinct.len(),
            restored.diagnostics()
        );
        thread::sleep(Duration::from_millis(50));
    }
    thread::sleep(Duration::from_secs(2));
    assert_eq!(fast.hits().len(), N, "a delivery recorded before the backup was sent again");
    assert_eq!(hit_alerts(&held.hits()).len(), held_before.len() + N);
    drop(sim);
}

#[test]
fn a_truncated_answer_is_a_failure_and_is_retried_ten_seconds_later() {
    let (sim, server, config) = start(BIN);
    let key = big_key(&server, &config);
    let hook = Hook::start(Mode::Truncated);
    let p = price(&server);
    let alert = alert_above(&server, &key, p, &hook.url());
    trade_through(&sim, p);
    let first = hook.wait_for(1, Duration::from_secs(30), &server)[0].at_ms;
    let db = open_db(&server.data_dir);
    let deadline = Instant::now() + Duration::from_secs(5);
    let row = loop {
        let row = outbox_row(&db, alert);
        if row.1 == 1 || Instant::now() > deadline {
            break row;
        }
        thread::sleep(Duration::from_millis(20));
    };
    assert_eq!((row.0.as_str(), row.1), ("pending", 1), "a truncated 200 is not a delivery: {row:?}");
    assert!(row.2.as_deref().is_some_and(|e| e.starts_with("incomplete answer")), "{row:?}");
    let second = hook.wait_for(2, Duration::from_secs(20), &server)[1].at_ms;
    let gap = second - first;
    assert!((9_500..14_000).contains(&gap), "attempt 2 came {gap} ms after attempt 1");
    let all = server.get("/v1/alerts?status=all", Some(&key));
    let listed = all.ok("list")["data"].as_array().and_then(|a| a.iter().find(|x| x["id"] == alert).cloned());
    assert_eq!(listed.map(|a| a["triggerCount"].clone()), Some(json!(1)), "one firing, two attempts");
    // Each attempt's log row says when its due row was read (the storm's "pulled" stage): before
    // it started, the retry's at a round after the first attempt ended.
    let logged = |db: &rusqlite::Connection| -> Vec<(Option<i64>, i64, i64)> {
        let sql = "SELECT pulled_ms, at_ms, latency_ms FROM attempts WHERE alert_id = ?1 ORDER BY id";
        let mut st = db.prepare(sql).expect("prepare");
        let rows = st.query_map([alert], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).expect("the log");
        rows.collect::<Result<_, _>>().expect("rows")
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut log = logged(&db);
    while log.len() < 2 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
        log = logged(&db);
    }
    assert_eq!(log.len(), 2, "{log:?}");
    let started = |(_, at, latency): (Option<i64>, i64, i64)| at - latency;
    assert!(log.iter().all(|&a| a.0.is_some_and(|p| p <= started(a))), "pulled before it started: {log:?}");
    assert!(log[1].0.is_some_and(|p| p >= log[0].1), "the retry pulled after the first ended: {log:?}");
}

#[test]
fn other_accounts_dead_receivers_do_not_delay_a_webhook_to_the_same_host() {
    // Issue #36: three accounts' receivers accept connections and never answer (listeners
    // never accepted: the kernel completes the connections, nobody answers), 8 alerts per port
    // by default, all on 127.0.0.1; their firings are seen in flight (each holds its slot until
    // the 10 s cut) before a fourth account's healthy receiver, on the same host name, is fired
    // at, ten times, each delivery within 500 ms of its firing. perf/raw/delivery-fairness.md
    // set the numbers through the environment for its measurement.
    let env = |name: &str, default: usize| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let dead_alerts = env("DEAD_RECEIVER_ALERTS", 300);
    let ports = dead_alerts.div_ceil(env("DEAD_ALERTS_PER_PORT", 8).max(1));
    assert!(ports <= 900, "one listener per port: keep the test's descriptors under the default 1024");
    let dead: Vec<TcpListener> = (0..ports).map(|_| TcpListener::bind("127.0.0.1:0").expect("bind")).collect();
    let (sim, server, config) = start(BIN);
    let hanging: Vec<String> = (0..3).map(|_| big_key(&server, &config)).collect();
    let healthy_key = big_key(&server, &config);
    let p = price(&server);
    for i in 0..dead_alerts {
        let port = dead[i % ports].local_addr().expect("addr").port();
        alert_above(&server, &hanging[i % 3], p, &format!("http://127.0.0.1:{port}/dead/{i}"));
    }
    trade_through(&sim, p);
    // The three accounts hold their shares of the host's slots (96 of 128 between them).
    let held = wait_in_flight(&server, dead_alerts.min(90));
    println!("{held} attempts to dead receivers in flight");
    let latencies = healthy_latencies(&sim, &server, &healthy_key, p, &Hook::start(Mode::Ok));
    println!("healthy receiver latencies with {dead_alerts} dead alerts on {ports} ports: {latencies:?} ms");
    assert!(latencies.iter().all(|&ms| ms < 500), "a healthy webhook waited: {latencies:?} ms");
    assert!(wait_in_flight(&server, 1) >= 90.min(dead_alerts), "the dead attempts still held their slots");
    for key in &hanging {
        let fired = server.get("/v1/alerts?status=triggered", Some(key));
        let fired = fired.ok("list")["data"].as_array().map_or(0, Vec::len);
        assert_eq!(fired, dead_alerts / 3, "every dead receiver's alert fired");
    }
    drop(dead);
}

#[test]
fn other_accounts_dead_receivers_do_not_delay_a_webhook_through_the_clusters_delivery_workers() {
    // Issue #36 through the cluster's delivery role: `serve --postgres --nats` hands firings to
    // the stream and a `rampart deliver` process (two worker threads) sends them. The same
    // scenario as above: three accounts' 300 hanging receivers, then ten firings of a fourth
    // account's healthy receiver on the same host, each delivered within 500 ms.
    let dead_alerts = 300;
    let ports = dead_alerts / 8;
    let dead: Vec<TcpListener> = (0..ports).map(|_| TcpListener::bind("127.0.0.1:0").expect("bind")).collect();
    let cluster = Cluster::start();
    let (sim, server, worker) = (&cluster.sim, &cluster.server, &cluster.worker);
    let key = || cluster.key();
    let hanging: Vec<String> = (0..3).map(|_| key()).collect();
    let healthy_key = key();
    let p = price(server);
    for i in 0..dead_alerts {
        let port = dead[i % ports].local_addr().expect("addr").port();
        alert_above(server, &hanging[i % 3], p, &format!("http://127.0.0.1:{port}/dead/{i}"));
    }
    trade_through(sim, p);
    // The dead firings are in the workers' hands: at least as many as the two threads' 64
    // attempt slots (all of them, once the rest wait in the threads).
    let in_hand = wait_metric(&worker.health, "rampart_deliver_in_hand", 128);
    println!("{in_hand} dead firings in the workers' hands");
    let latencies = healthy_latencies(sim, server, &healthy_key, p, &Hook::start(Mode::Ok));
    println!("healthy receiver latencies through the delivery role with {dead_alerts} dead alerts: {latencies:?} ms");
    assert!(latencies.iter().all(|&ms| ms < 500), "a healthy webhook waited: {latencies:?} ms");
    assert!(
        wait_metric(&worker.health, "rampart_deliver_in_hand", 1) >= dead_alerts,
        "the dead firings were still in hand (their attempts hang for 10 s, then are rescheduled)"
    );
    drop(dead);
}

#[test]
fn five_thousand_hanging_firings_of_one_account_do_not_delay_another_accounts_through_the_delivery_workers() {
    // Issue #50: one account's 5 000 firings to receivers that never answer come first in the
    // stream; the delivery threads read on past those their bounds hold back (each thread's line
    // holds up to `WAITING_MAX`), so another account's firing behind them is read and sent at
    // once: ten times, each within 500 ms of its firing.
    let dead_alerts = 5_000;
    let ports = dead_alerts / 8;
    let dead: Vec<TcpListener> = (0..ports).map(|_| TcpListener::bind("127.0.0.1:0").expect("bind")).collect();
    let cluster = Cluster::start();
    let (sim, server, worker) = (&cluster.sim, &cluster.server, &cluster.worker);
    let (hanging, healthy_key) = (cluster.key(), cluster.key());
    let p = price(server);
    for i in 0..dead_alerts {
        let port = dead[i % ports].local_addr().expect("addr").port();
        alert_above(server, &hanging, p, &format!("http://127.0.0.1:{port}/dead/{i}"));
    }
    trade_through(sim, p);
    let in_hand = wait_metric(&worker.health, "rampart_deliver_in_hand", dead_alerts);
    println!("{in_hand} hanging firings of one account in the workers' hands");
    let latencies = healthy_latencies(sim, server, &healthy_key, p, &Hook::start(Mode::Ok));
    println!("healthy receiver latencies through the delivery role beside one account's {dead_alerts} hanging firings: {latencies:?} ms");
    assert!(latencies.iter().all(|&ms| ms < 500), "a healthy webhook waited: {latencies:?} ms");
    drop(dead);
}

#[test]
fn three_accounts_hanging_at_one_host_and_port_do_not_delay_a_fourth_accounts_webhook_there() {
    // Issue #36's narrowest case: one receiver on one host and port (a chat service's endpoint)
    // shared by four accounts, whose bound is 8 slots. Account 0's hanging attempts came first
    // and took 6, accounts 1's and 2's the other 2: the plain rule leaves a fourth account
    // nothing until the first attempt's 10 s timeout. With shares by demand, account 3's healthy
    // delivery starts in the place of a cut attempt of the account furthest over its part.
    let shared = Hook::start(Mode::Shared);
    let (sim, server, config) = start(BIN);
    let keys: Vec<String> = (0..4).map(|_| big_key(&server, &config)).collect();
    let latencies = same_port_latencies(&sim, &server, &keys, &shared, 6);
    println!("healthy receiver latencies beside three accounts' hanging ones on its port: {latencies:?} ms");
    assert!(latencies.iter().all(|&ms| ms < 500), "a healthy webhook waited: {latencies:?} ms");
    let base = format!("http://127.0.0.1:{}", server.port);
    assert!(wait_metric(&base, "rampart_delivery_cuts_total", 1) >= 1, "attempts beyond their part were cut");
}

#[test]
fn three_accounts_hanging_at_one_host_and_port_do_not_delay_a_fourth_accounts_webhook_through_the_delivery_workers() {
    // The same through the cluster's delivery role (one `rampart deliver`, two worker threads,
    // each keeping the bounds and sharing them by demand among the firings it holds).
    let shared = Hook::start(Mode::Shared);
    let cluster = Cluster::start();
    let keys: Vec<String> = (0..4).map(|_| cluster.key()).collect();
    let latencies = same_port_latencies(&cluster.sim, &cluster.server, &keys, &shared, 6);
    println!(
        "healthy receiver latencies through the delivery role beside three accounts' hanging ones: {latencies:?} ms"
    );
    assert!(latencies.iter().all(|&ms| ms < 500), "a healthy webhook waited: {latencies:?} ms");
    assert!(wait_metric(&cluster.worker.health, "rampart_deliver_cuts_total", 1) >= 1, "attempts were cut");
}

#[test]
fn more_accounts_hanging_at_one_host_and_port_than_a_workers_slots_make_a_newcomer_wait_at_most_one_attempt() {
    // Issue #50's "more accounts than slots", decided: a worker thread keeps one slot each for
    // the accounts holding its 8 at one host and port; an account with none waits there for
    // the first attempt to end (at most the 10 s attempt timeout; cutting a fair share of one
    // would keep slow receivers from ever finishing), and the cluster's reach at the host and
    // port is threads × 8 (`docs/design/limits.md`). Through one worker thread: twelve
    // accounts' firings hang at one receiver (8 held, 4 waiting), then a thirteenth account's
    // healthy firing goes to the same host and port.
    let shared = Hook::start(Mode::Shared);
    let cluster = Cluster::start_with_workers(1);
    let (sim, server) = (&cluster.sim, &cluster.server);
    let hanging = 12;
    let keys: Vec<String> = (0..=hanging).map(|_| cluster.key()).collect();
    let p = price(server);
    for (a, key) in keys.iter().take(hanging).enumerate() {
        alert_above(server, key, p, &format!("http://127.0.0.1:{}/dead/{a}/0", shared.port));
    }
    trade_through(sim, p);
    let dead = shared.wait_dead(|d| d.iter().sum::<usize>() >= 8, server);
    println!("hanging attempts by account: {dead:?}");
    // The four others had a second to start if the bound did not hold them (read before the
    // first attempts time out: then a closing attempt and its successor may overlap here).
    thread::sleep(Duration::from_secs(1));
    let most = shared.dead.max.load(Ordering::SeqCst);
    let p = p * 1.03;
    alert_above(server, &keys[hanging], p, &format!("http://127.0.0.1:{}/hook", shared.port));
    trade_through(sim, p);
    let hit = shared.wait_for(1, Duration::from_secs(30), server)[0].clone();
    let body: Value = serde_json::from_str(&hit.body).expect("JSON body");
    let waited = hit.at_ms - body["trigger"]["time"].as_i64().expect("trigger time");
    println!("the newcomer's delivery {waited} ms after its firing; at most {most} attempts held at the host and port");
    assert!(waited < 12_500, "the newcomer waited {waited} ms: more than one attempt's 10 s timeout");
    assert_eq!(most, 8, "attempts held at once at one host and port by a worker thread of 8 slots");
}

#[test]
fn a_thousand_receivers_waiting_for_their_retry_do_not_stall_the_delivery_workers() {
    // Issue #36 through the cluster's delivery role: 1 100 alerts of one account whose receiver
    // refuses connections (a port nobody listens on) fail at once, and each firing waits in the
    // stream for its next attempt (10 s). JetStream counts those as unanswered; under its default
    // cap of 1 000 the consumer stalled and another account's healthy webhook waited for the
    // retries to come due. Now it is delivered at once, ten times.
    let gone = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let cluster = Cluster::start();
    let (sim, server, worker) = (&cluster.sim, &cluster.server, &cluster.worker);
    let (failing, healthy) = (cluster.key(), cluster.key());
    let p = price(server);
    let alerts = 1_100;
    for i in 0..alerts {
        alert_above(server, &failing, p, &format!("http://127.0.0.1:{gone}/gone/{i}"));
    }
    trade_through(sim, p);
    let waiting = wait_metric(&worker.health, "rampart_deliver_rescheduled_total", alerts);
    println!("{waiting} failed firings waiting in the stream for their next attempt");
    let latencies = healthy_latencies(sim, server, &healthy, p, &Hook::start(Mode::Ok));
    println!("healthy receiver latencies beside {alerts} firings waiting for their retry: {latencies:?} ms");
    assert!(latencies.iter().all(|&ms| ms < 500), "a healthy webhook waited: {latencies:?} ms");
}

/// The same-port scenario on `shared`: account 0's 100 hanging alerts fire first and at least
/// `first` of them hang there; then accounts 1's and 2's 100 each, until each has one hanging;
/// then account 3's ten healthy deliveries to the same host and port, each one's ms.
fn same_port_latencies(sim: &SimVenue, server: &Server, keys: &[String], shared: &Hook, first: usize) -> Vec<i64> {
    let hanging = |account: usize, p: f64| {
        for i in 0..100 {
            alert_above(server, &keys[account], p, &format!("http://127.0.0.1:{}/dead/{account}/{i}", shared.port));
        }
    };
    let p = price(server);
    hanging(0, p);
    trade_through(sim, p);
    let dead = shared.wait_dead(|d| d[0] >= first, server);
    println!("account 0's hanging attempts: {dead:?}");
    let p = p * 1.03;
    hanging(1, p);
    hanging(2, p);
    trade_through(sim, p);
    let dead = shared.wait_dead(|d| d[1] >= 1 && d[2] >= 1, server);
    println!("then accounts 1's and 2's: {dead:?}");
    healthy_latencies(sim, server, &keys[3], p, shared)
}

/// A cluster on one host: PostgreSQL, nats-server, the simulator, `serve --postgres --nats` fed
/// by it and one `rampart deliver` process with two worker threads.
struct Cluster {
    sim: SimVenue,
    server: Server,
    worker: Deliver,
    config: String,
    postgres: String,
    /// A NATS server of its own: the tests here run at once, and on a shared one their delivery
    /// processes would take each other's firings (one stream, one consumer name).
    _nats: rampart_testkit::nats::NatsServer,
}

impl Cluster {
    fn start() -> Cluster {
        Cluster::start_with_workers(2)
    }

    /// [`Cluster::start`] with `workers` delivery threads.
    fn start_with_workers(workers: usize) -> Cluster {
        let postgres = pg_database();
        let owned = rampart_testkit::nats::start_owned(None).expect("a NATS server");
        let nats = owned.url();
        let sim = SimVenue::start(BIN, &["--sim-pairs", "8", "--venues", "binance"]);
        let config = sim.config(&["binance"], 3, EXTRA_CONFIG).display().to_string();
        let args = ["--feed", "live", "--config", &config, "--shards", "1", "--venues", "binance"];
        let server = Server::start(BIN, &[&args[..], &["--postgres", &postgres, "--nats", &nats]].concat());
        let worker = Deliver::start_with_workers(BIN, &postgres, &nats, &config, workers);
        Cluster { sim, server, worker, config, postgres, _nats: owned }
    }

    /// A key of a new account on plan `big`.
    fn key(&self) -> String {
        let out =
            self.server.keys(&["create", "--plan", "big", "--config", &self.config, "--postgres", &self.postgres]);
        assert!(out.status.success(), "{out:?}");
        let key = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").trim().to_owned();
        self.server.await_key(&key);
        key
    }
}

/// Ten times: a new alert of `key` with a healthy receiver, fired by a trade through it; each
/// delivery's ms from the firing (the body's trigger time) to its arrival.
fn healthy_latencies(sim: &SimVenue, server: &Server, key: &str, p: f64, healthy: &Hook) -> Vec<i64> {
    let mut p_next = p * 1.03;
    let mut latencies = Vec::new();
    for run in 0..10 {
        alert_above(server, key, p_next, &healthy.url());
        trade_through(sim, p_next);
        let hit = healthy.wait_for(run + 1, Duration::from_secs(30), server)[run].clone();
        let body: Value = serde_json::from_str(&hit.body).expect("JSON body");
        let fired_ms = body["trigger"]["time"].as_i64().expect("trigger time");
        latencies.push(hit.at_ms - fired_ms);
        p_next *= 1.03;
    }
    latencies
}

/// Waits until the `metric` line of `base`'s `/metrics` reads at least `n`; returns it.
fn wait_metric(base: &str, metric: &str, n: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text =
            ureq::get(&format!("{base}/metrics")).call().ok().and_then(|r| r.into_string().ok()).unwrap_or_default();
        let value = text
            .lines()
            .find_map(|l| l.strip_prefix(metric).and_then(|v| v.strip_prefix(' ')))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0) as usize;
        if value >= n {
            return value;
        }
        assert!(Instant::now() < deadline, "{metric} is {value}, waited for {n}:\n{text}");
        thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until `/metrics` shows at least `n` webhook attempts in flight; returns the count.
fn wait_in_flight(server: &Server, n: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = server.get("/metrics", None);
        let count = r
            .text
            .lines()
            .find_map(|l| l.strip_prefix("rampart_webhooks_in_flight "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0) as usize;
        if count >= n {
            return count;
        }
        assert!(Instant::now() < deadline, "{count} attempts in flight, waited for {n}\n{}", server.diagnostics());
        thread::sleep(Duration::from_millis(50));
    }
}
