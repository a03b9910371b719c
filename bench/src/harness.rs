//! The latency benchmark harness's moving parts: the processes it drives (`rampart sim-venue`
//! and `rampart serve --feed live` pointed at it), webhook receivers that timestamp every POST,
//! and a small blocking HTTP client for the control and API calls.
//!
//! Timestamps are Unix microseconds from the wall clock, shared by every process on the machine:
//! the simulator stamps Binance trades (`timeUnit=MICROSECOND`) when it emits them, the shard
//! records the time to its alert decision, the harness stamps the moment it asks for a trade and
//! the moment each webhook arrives.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// Wall clock, Unix microseconds.
pub fn now_us() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

/// A child process killed on drop.
pub struct Proc {
    child: Child,
    /// Its stdout lines after the ones read at start.
    pub lines: Arc<Mutex<Vec<String>>>,
}

impl Proc {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `bin args`, waits (up to `timeout`) until stdout has shown a line starting with each
/// of `wanted`, and returns the process with those lines' remainders, in order.
pub fn spawn(bin: &Path, args: &[&str], wanted: &[&str], timeout: Duration) -> Result<(Proc, Vec<String>), String> {
    let mut command = Command::new(bin);
    // The figures are measured without the access log (a line per request on a shared
    // terminal would measure the terminal); RUST_LOG set by the caller wins.
    if std::env::var_os("RUST_LOG").is_none() {
        command.env("RUST_LOG", "info,rampart::access=off");
    }
    let mut child = command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
    let out = child.stdout.take().ok_or("no stdout")?;
    let lines = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    let store = lines.clone();
    thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line.clone());
            if let Ok(mut l) = store.lock() {
                l.push(line);
            }
        }
    });
    let proc = Proc { child, lines };
    let deadline = Instant::now() + timeout;
    let mut found = Vec::with_capacity(wanted.len());
    for w in wanted {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx.recv_timeout(left).map_err(|_| format!("{} printed no '{w}' line", bin.display()))?;
            if let Some(rest) = line.strip_prefix(w) {
                found.push(rest.trim().to_owned());
                break;
            }
        }
    }
    Ok((proc, found))
}

/// A blocking JSON-over-HTTP client with one keep-alive agent.
#[derive(Clone)]
pub struct Http {
    agent: ureq::Agent,
    /// `http://host:port`.
    pub base: String,
    /// `Bearer <key>`, when set.
    pub auth: Option<String>,
}

impl Http {
    /// A client for `base`.
    pub fn new(base: &str, key: Option<&str>) -> Http {
        Http {
            agent: ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).max_idle_connections(64).build(),
            base: base.trim_end_matches('/').to_owned(),
            auth: key.map(|k| format!("Bearer {k}")),
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value), String> {
        let mut req = self.agent.request(method, &format!("{}{path}", self.base));
        if let Some(a) = &self.auth {
            req = req.set("Authorization", a);
        }
        let resp = match body {
            Some(b) => req.set("Content-Type", "application/json").send_string(&b.to_string()),
            None => req.call(),
        };
        let resp = match resp {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => return Err(format!("{method} {path}: {e}")),
        };
        let status = resp.status();
        let text = resp.into_string().map_err(|e| format!("{method} {path}: body: {e}"))?;
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::String(text))))
    }

    /// `GET path`, 200 expected.
    pub fn get(&self, path: &str) -> Result<Value, String> {
        match self.call("GET", path, None)? {
            (200, v) => Ok(v),
            (s, v) => Err(format!("GET {path}: {s} {v}")),
        }
    }

    /// `POST path body`, 2xx expected.
    pub fn post(&self, path: &str, body: &Value) -> Result<Value, String> {
        match self.call("POST", path, Some(body))? {
            (200..=299, v) => Ok(v),
            (s, v) => Err(format!("POST {path}: {s} {v}")),
        }
    }

    /// `DELETE path`, 2xx expected.
    pub fn delete(&self, path: &str) -> Result<Value, String> {
        match self.call("DELETE", path, None)? {
            (200..=299, v) => Ok(v),
            (s, v) => Err(format!("DELETE {path}: {s} {v}")),
        }
    }
}

/// One webhook POST as received.
#[derive(Clone, Debug)]
pub struct Received {
    /// Receiver index.
    pub receiver: usize,
    /// Arrival, Unix microseconds (when the whole request had been read).
    pub at_us: i64,
    /// `alert.id`.
    pub alert_id: i64,
    /// `trigger.time`, Unix milliseconds.
    pub trigger_ms: i64,
    /// `trigger.price`.
    pub trigger_price: f64,
    /// The Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`)
    /// and the body, when the request was signed (`None`: no `webhook-signature`).
    pub signed: Option<Signed>,
    /// A `*` liquidations body's `triggers`: each one's `symbol` and `liquidation.usd` (empty for
    /// any other body).
    pub liquidations: Vec<(String, f64)>,
}

/// What a signed delivery carried, to be verified after the run (not while receiving, so a
/// signed storm's receivers do no more work than an unsigned one's).
#[derive(Clone, Debug)]
pub struct Signed {
    /// `webhook-id`.
    pub id: String,
    /// `webhook-timestamp`.
    pub timestamp: String,
    /// `webhook-signature` (space-separated `v1,<base64>` entries).
    pub signature: String,
    /// The body as received.
    pub body: Vec<u8>,
}

impl Signed {
    /// Whether one of the signatures is HMAC-SHA256 under `secret` (`whsec_<base64 key>`) of
    /// `"<id>.<timestamp>.<body>"`, as the Standard Webhooks v1 specification defines it
    /// (computed here with `hmac`/`sha2`, not with rampart's signing code).
    pub fn verifies(&self, secret: &str) -> bool {
        use base64::Engine as _;
        use hmac::Mac as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        let Some(key) = secret.strip_prefix("whsec_").and_then(|k| b64.decode(k).ok()) else { return false };
        let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key) else { return false };
        mac.update(format!("{}.{}.", self.id, self.timestamp).as_bytes());
        mac.update(&self.body);
        let want = b64.encode(mac.finalize().into_bytes());
        self.signature.split(' ').any(|s| s.strip_prefix("v1,") == Some(want.as_str()))
    }
}

/// Webhook receivers on loopback, one port each; the first `hanging` of them read the request
/// and never answer (the delivery side must time them out without delaying the others).
pub struct Receivers {
    /// Their addresses.
    pub addrs: Vec<SocketAddr>,
    /// Everything received, in arrival order.
    pub got: Arc<Mutex<Vec<Received>>>,
    stop: Arc<AtomicBool>,
}

/// Requests a receiver reads per connection at most, and bytes per request head.
const RECEIVER_HEAD_BYTES_MAX: usize = 16 * 1024;
/// Body bytes per request at most.
const RECEIVER_BODY_BYTES_MAX: usize = 64 * 1024;

impl Receivers {
    /// Starts `n` receivers, the first `hanging` of which never answer. Each listens on a
    /// loopback address of its own (`127.0.0.2`, `127.0.0.3`, ...; Linux answers on all of
    /// 127/8), as webhook receivers are different hosts: the sender's per-host-name bound then
    /// applies to each receiver, not to all of them at once.
    pub fn start(n: usize, hanging: usize) -> std::io::Result<Receivers> {
        let got = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut addrs = Vec::with_capacity(n);
        for i in 0..n {
            let host = std::net::Ipv4Addr::new(127, 0, (i / 250) as u8, (2 + i % 250) as u8);
            let listener = TcpListener::bind((host, 0))?;
            addrs.push(listener.local_addr()?);
            let (got, stop) = (got.clone(), stop.clone());
            let hang = i < hanging;
            thread::Builder::new().name(format!("receiver-{i}")).spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let Ok(conn) = conn else { continue };
                    let (got, stop) = (got.clone(), stop.clone());
                    thread::spawn(move || serve(conn, i, hang, &got, &stop));
                }
            })?;
        }
        Ok(Receivers { addrs, got, stop })
    }

    /// The webhook URL of receiver `i`.
    pub fn url(&self, i: usize) -> String {
        format!("http://{}/hook", self.addrs[i % self.addrs.len()])
    }

    /// A copy of what has arrived.
    pub fn received(&self) -> Vec<Received> {
        self.got.lock().map(|g| g.clone()).unwrap_or_default()
    }
}

impl Drop for Receivers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for a in &self.addrs {
            let _ = TcpStream::connect_timeout(a, Duration::from_millis(100));
        }
    }
}

/// Serves one connection: requests one after another (keep-alive, as common receivers do),
/// each answered `200` once read, or never when the receiver hangs.
fn serve(mut conn: TcpStream, receiver: usize, hang: bool, got: &Mutex<Vec<Received>>, stop: &AtomicBool) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buf = Vec::with_capacity(4096);
    while let Some(r) = read_one(&mut conn, &mut buf, receiver) {
        if let Ok(mut g) = got.lock() {
            g.push(r);
        }
        if hang {
            // Never answer: hold the connection until the sender gives up or the run ends.
            let mut chunk = [0u8; 4096];
            while !stop.load(Ordering::Relaxed) {
                match conn.read(&mut chunk) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(_) => thread::sleep(Duration::from_millis(100)),
                }
            }
            return;
        }
        if conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").is_err() {
            return;
        }
    }
}

/// Reads one request (head, then Content-Length bytes) from `conn`, keeping in `buf` whatever
/// came after it; `None` at the end of the connection.
fn read_one(conn: &mut TcpStream, buf: &mut Vec<u8>, receiver: usize) -> Option<Received> {
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > RECEIVER_HEAD_BYTES_MAX {
            return None;
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0)
        .min(RECEIVER_BODY_BYTES_MAX);
    while buf.len() < head_end + len {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let at_us = now_us();
    let raw = &buf[head_end..head_end + len];
    let body: Value = serde_json::from_slice(raw).unwrap_or(Value::Null);
    // Header values as sent (a signature's base64 is case-sensitive; `head` is lowercased).
    let original = String::from_utf8_lossy(&buf[..head_end]);
    let header = |name: &str| {
        original.lines().find_map(|l| {
            l.split_once(':').filter(|(k, _)| k.trim().eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_owned())
        })
    };
    let signed = header("webhook-signature").map(|signature| Signed {
        id: header("webhook-id").unwrap_or_default(),
        timestamp: header("webhook-timestamp").unwrap_or_default(),
        signature,
        body: raw.to_vec(),
    });
    let liquidations = body["triggers"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .filter_map(|t| Some((t["symbol"].as_str()?.to_owned(), t["liquidation"]["usd"].as_f64()?)))
                .collect()
        })
        .unwrap_or_default();
    buf.drain(..head_end + len);
    Some(Received {
        liquidations,
        receiver,
        at_us,
        alert_id: body["alert"]["id"].as_i64().unwrap_or(-1),
        trigger_ms: body["trigger"]["time"].as_i64().unwrap_or(-1),
        trigger_price: body["trigger"]["price"].as_f64().unwrap_or(f64::NAN),
        signed,
    })
}

/// The machine, for result files: core count and CPU model.
pub fn machine() -> (usize, String) {
    let cores = thread::available_parallelism().map_or(1, |c| c.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("model name").map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned()))
        })
        .unwrap_or_else(|| "unknown".to_owned());
    (cores, model)
}

/// The commit the tree is at, with "+changes" when it has uncommitted changes.
pub fn commit() -> String {
    let out = |args: &[&str]| {
        Command::new("git").args(args).output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let head = out(&["rev-parse", "--short", "HEAD"]).unwrap_or_default();
    let dirty = out(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{head}+changes")
    } else {
        head
    }
}

/// Counts per key, for the exactly-once check: keys seen more than once, and how many distinct.
pub fn duplicates<K: std::hash::Hash + Eq + Clone>(keys: impl Iterator<Item = K>) -> (usize, Vec<K>) {
    let mut seen: HashMap<K, usize> = HashMap::new();
    for k in keys {
        *seen.entry(k).or_default() += 1;
    }
    let dups = seen.iter().filter(|(_, n)| **n > 1).map(|(k, _)| k.clone()).collect();
    (seen.len(), dups)
}

/// A fresh temporary directory (removed on drop).
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Creates `rampart-harness-<pid>-<n>` under the system temp dir.
    pub fn new(tag: &str) -> std::io::Result<TempDir> {
        let p = std::env::temp_dir().join(format!("rampart-harness-{}-{tag}-{}", std::process::id(), now_us()));
        std::fs::create_dir_all(&p)?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
