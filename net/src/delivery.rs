//! Webhook delivery: a thread with its own single-threaded executor that sends the outbox's due
//! deliveries (`decisions.md` §6), off the tick path.
//!
//! The outbox in SQLite is the queue: the writer inserts a delivery in the same transaction that
//! records the firing, so a recorded firing is delivered at least once, across restarts. Each
//! attempt re-checks the URL with the SSRF guard (resolve, check every address, connect only to a
//! checked one), then POSTs the stored body with `Content-Type: application/json`,
//! `X-Service-Event: alert.triggered` and `User-Agent: rampart/<version>`, over http or https
//! (rustls with the bundled web roots), within [`ATTEMPT_TIMEOUT`] for connect, send and the
//! whole answer. 2xx is success; anything else (3xx included: redirects are not followed), a
//! timeout or a connection error is a failure, retried at first failure + 10 s and + 60 s.
//!
//! Bounds: at most `in_flight_max` attempts at once and `per_host_max` per host. At a bound the
//! due deliveries simply stay pending in the outbox and start when a slot frees, so slow or dead
//! receivers hold only their own host's slots and never delay deliveries to healthy ones.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, CONTENT_TYPE, HOST, USER_AGENT};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::ssrf::{self, Host, WebhookUrl};
use crate::store::{AttemptResult, OutboxRow, Store};

/// Time allowed for one attempt: resolve, connect, TLS, send and the full answer.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of a receiver's answer read at most; the rest is not read (the status decides).
pub const RESPONSE_BYTES_MAX: usize = 64 * 1024;
/// Due deliveries looked at per round at most.
const DUE_SCAN_MAX: u32 = 4_096;
/// The `User-Agent` of every delivery.
pub const USER_AGENT_VALUE: &str = concat!("rampart/", env!("CARGO_PKG_VERSION"));

/// A source of "now" for the schedule, so tests can drive it.
pub trait Clock: Send + Sync + 'static {
    /// Unix milliseconds.
    fn now_ms(&self) -> i64;
}

/// The wall clock.
#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        crate::clock::now_ms()
    }
}

/// A clock that moves only when told (tests).
#[derive(Debug, Default)]
pub struct ManualClock {
    ms: AtomicI64,
}

impl ManualClock {
    /// A clock at `ms`.
    pub fn new(ms: i64) -> ManualClock {
        ManualClock { ms: AtomicI64::new(ms) }
    }

    /// Sets the time.
    pub fn set(&self, ms: i64) {
        self.ms.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.ms.load(Ordering::SeqCst)
    }
}

/// Delivery settings.
#[derive(Clone, Debug)]
pub struct DeliveryConfig {
    /// Permit private and loopback targets (`webhooks.allow_private`; local testing only).
    pub allow_private: bool,
    /// Attempts in flight at once, over all hosts.
    pub in_flight_max: usize,
    /// Attempts in flight at once to one host (and port).
    pub per_host_max: usize,
    /// Time allowed per attempt.
    pub attempt_timeout: Duration,
    /// How often the outbox is checked when nothing wakes the sender.
    pub poll_interval: Duration,
    /// Root certificates (DER) trusted in addition to the bundled web roots, for receivers
    /// behind a private CA (and for tests).
    pub extra_roots_der: Vec<Vec<u8>>,
}

impl Default for DeliveryConfig {
    fn default() -> DeliveryConfig {
        DeliveryConfig {
            allow_private: false,
            in_flight_max: 256,
            per_host_max: 8,
            attempt_timeout: ATTEMPT_TIMEOUT,
            poll_interval: Duration::from_millis(20),
            extra_roots_der: Vec::new(),
        }
    }
}

/// Counters of the sender.
#[derive(Debug, Default)]
pub struct DeliveryStats {
    /// Attempts made.
    pub attempts: AtomicU64,
    /// Deliveries that succeeded.
    pub delivered: AtomicU64,
    /// Attempts that failed.
    pub failed_attempts: AtomicU64,
    /// Attempts in flight now.
    pub in_flight: AtomicU64,
}

/// The running sender.
pub struct Delivery {
    stop: Arc<AtomicBool>,
    wake: Arc<Notify>,
    thread: Option<JoinHandle<()>>,
    /// Its counters.
    pub stats: Arc<DeliveryStats>,
}

impl Delivery {
    /// Starts the sender thread over `store`'s outbox.
    pub fn start(store: Store, config: DeliveryConfig, clock: Arc<dyn Clock>) -> std::io::Result<Delivery> {
        let stop = Arc::new(AtomicBool::new(false));
        let wake = Arc::new(Notify::new());
        let stats = Arc::new(DeliveryStats::default());
        let (s, w, st) = (stop.clone(), wake.clone(), stats.clone());
        let thread = std::thread::Builder::new().name("delivery".into()).spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("rampart: delivery: no runtime: {e}");
                    return;
                }
            };
            let local = tokio::task::LocalSet::new();
            local.block_on(&runtime, run(store, config, clock, s, w, st));
        })?;
        Ok(Delivery { stop, wake, thread: Some(thread), stats })
    }

    /// A handle that wakes the sender at once (the writer calls it after queueing deliveries).
    pub fn waker(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Stops the sender. Attempts in flight are abandoned; their deliveries are still pending
    /// in the outbox and are sent again after the next start (at least once).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        self.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Host and port: the unit of the per-host bound.
fn host_key(url: &str) -> String {
    match ssrf::parse(url) {
        Ok(u) => u.authority.to_ascii_lowercase(),
        Err(_) => String::new(),
    }
}

async fn run(
    store: Store,
    config: DeliveryConfig,
    clock: Arc<dyn Clock>,
    stop: Arc<AtomicBool>,
    wake: Arc<Notify>,
    stats: Arc<DeliveryStats>,
) {
    let mut store = store;
    let tls = tls_config(&config.extra_roots_der);
    if tls.is_none() {
        eprintln!("rampart: delivery: TLS configuration failed; https webhooks will fail");
    }
    let mut in_flight: HashSet<i64> = HashSet::new();
    let mut per_host: HashMap<String, usize> = HashMap::new();
    // One result per attempt in flight: bounded by `in_flight_max`.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(i64, String, AttemptResult)>();
    let mut done: Vec<(i64, AttemptResult)> = Vec::with_capacity(config.in_flight_max);
    while !stop.load(Ordering::Acquire) {
        // Results that have arrived are recorded together, in one transaction.
        while let Ok((id, host, result)) = rx.try_recv() {
            settle(id, host, result, &mut in_flight, &mut per_host, &stats, &mut done);
        }
        if !done.is_empty() {
            // A failed write leaves the rows pending: they are attempted again (at least once).
            if let Err(e) = store.record_attempts(&done, clock.now_ms()) {
                eprintln!("rampart: delivery: recording {} attempts: {e}", done.len());
            }
            done.clear();
        }
        stats.in_flight.store(in_flight.len() as u64, Ordering::Relaxed);
        if in_flight.len() < config.in_flight_max {
            let due = match store.due_deliveries(clock.now_ms(), DUE_SCAN_MAX) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("rampart: delivery: reading the outbox: {e}");
                    Vec::new()
                }
            };
            for row in due {
                if in_flight.len() >= config.in_flight_max {
                    break;
                }
                if in_flight.contains(&row.id) {
                    continue;
                }
                let host = host_key(&row.url);
                let busy = per_host.get(&host).copied().unwrap_or(0);
                if busy >= config.per_host_max {
                    continue;
                }
                per_host.insert(host.clone(), busy + 1);
                in_flight.insert(row.id);
                stats.attempts.fetch_add(1, Ordering::Relaxed);
                let tx = tx.clone();
                let target =
                    Target { allow_private: config.allow_private, timeout: config.attempt_timeout, tls: tls.clone() };
                tokio::task::spawn_local(async move {
                    let result = attempt(&row, &target).await;
                    let _ = tx.send((row.id, host, result));
                });
            }
            stats.in_flight.store(in_flight.len() as u64, Ordering::Relaxed);
        }
        // Wait for a result, a wake-up (new deliveries) or the poll interval; a result that
        // wakes us is recorded in the next round with any others.
        tokio::select! {
            Some((id, host, result)) = rx.recv() => {
                settle(id, host, result, &mut in_flight, &mut per_host, &stats, &mut done);
            }
            _ = wake.notified() => {}
            _ = tokio::time::sleep(config.poll_interval) => {}
        }
    }
}

/// Frees an attempt's slots and keeps its result for the next batch write.
fn settle(
    id: i64,
    host: String,
    result: AttemptResult,
    in_flight: &mut HashSet<i64>,
    per_host: &mut HashMap<String, usize>,
    stats: &DeliveryStats,
    done: &mut Vec<(i64, AttemptResult)>,
) {
    match &result {
        AttemptResult::Delivered { .. } => stats.delivered.fetch_add(1, Ordering::Relaxed),
        AttemptResult::Failed { .. } => stats.failed_attempts.fetch_add(1, Ordering::Relaxed),
    };
    in_flight.remove(&id);
    if let Some(n) = per_host.get_mut(&host) {
        *n -= 1;
        if *n == 0 {
            per_host.remove(&host);
        }
    }
    done.push((id, result));
}

/// What an attempt needs besides the delivery itself.
#[derive(Clone)]
pub struct Target {
    /// Permit private addresses.
    pub allow_private: bool,
    /// Time allowed for the whole attempt.
    pub timeout: Duration,
    /// Client TLS configuration (`None`: https deliveries fail).
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// One attempt of one delivery, bounded by `target.timeout` as a whole.
pub async fn attempt(row: &OutboxRow, target: &Target) -> AttemptResult {
    match tokio::time::timeout(target.timeout, send(&row.url, row.body.clone(), target)).await {
        Ok(r) => r,
        Err(_) => AttemptResult::Failed {
            status: None,
            error: format!("no full answer within {} s", target.timeout.as_secs()),
        },
    }
}

fn failed(error: impl Into<String>) -> AttemptResult {
    AttemptResult::Failed { status: None, error: error.into() }
}

async fn send(url: &str, body: String, target: &Target) -> AttemptResult {
    let parsed = match ssrf::parse(url) {
        Ok(p) => p,
        Err(e) => return failed(e.to_string()),
    };
    // Resolved and checked now, at every attempt: a name that has come to point at a private
    // address since creation (DNS rebinding) is refused, and only a checked address is used.
    let addrs = match ssrf::resolve_checked(&parsed, target.allow_private).await {
        Ok(a) => a,
        Err(e) => return failed(e.to_string()),
    };
    let mut last = String::from("no address");
    let mut stream = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = format!("connect {addr}: {e}"),
        }
    }
    let Some(stream) = stream else { return failed(last) };
    let _ = stream.set_nodelay(true);
    if !parsed.https {
        return exchange(TokioIo::new(stream), &parsed, body).await;
    }
    let name = match &parsed.host {
        Host::Name(n) => rustls::pki_types::ServerName::try_from(n.clone()),
        Host::Ip(ip) => Ok(rustls::pki_types::ServerName::IpAddress((*ip).into())),
    };
    let Ok(name) = name else { return failed("invalid TLS server name") };
    let Some(tls) = target.tls.clone() else { return failed("TLS is not available") };
    match tokio_rustls::TlsConnector::from(tls).connect(name, stream).await {
        Ok(s) => exchange(TokioIo::new(s), &parsed, body).await,
        Err(e) => failed(format!("TLS: {e}")),
    }
}

/// The client TLS configuration: ring, the bundled web roots plus `extra_roots_der`, no client
/// certificate. `None` if it cannot be built (an extra root that does not parse).
pub fn tls_config(extra_roots_der: &[Vec<u8>]) -> Option<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for der in extra_roots_der {
        roots.add(rustls::pki_types::CertificateDer::from(der.clone())).ok()?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Some(Arc::new(config))
}

async fn exchange<I>(io: I, url: &WebhookUrl, body: String) -> AttemptResult
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + 'static,
{
    let handshake = hyper::client::conn::http1::Builder::new().title_case_headers(true).handshake(io).await;
    let (mut sender, conn) = match handshake {
        Ok(x) => x,
        Err(e) => return failed(format!("HTTP: {e}")),
    };
    let driver = tokio::task::spawn_local(async move {
        let _ = conn.await;
    });
    let mut request = Request::new(Full::new(Bytes::from(body)));
    *request.method_mut() = Method::POST;
    match url.path_and_query.parse() {
        Ok(uri) => *request.uri_mut() = uri,
        Err(_) => return failed("invalid path"),
    }
    let headers = request.headers_mut();
    match HeaderValue::from_str(&url.authority) {
        Ok(h) => headers.insert(HOST, h),
        Err(_) => return failed("invalid host"),
    };
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert("x-service-event", HeaderValue::from_static("alert.triggered"));
    headers.insert(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE));
    let result = match sender.send_request(request).await {
        Ok(response) => {
            let status = response.status().as_u16();
            // Read the whole answer (bounded) so the attempt ends only when it has arrived.
            let _ = Limited::new(response.into_body(), RESPONSE_BYTES_MAX).collect().await;
            if (200..300).contains(&status) {
                AttemptResult::Delivered { status }
            } else {
                AttemptResult::Failed { status: Some(status), error: format!("HTTP {status}") }
            }
        }
        Err(e) => failed(format!("HTTP: {e}")),
    };
    driver.abort();
    result
}
