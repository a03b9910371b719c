//! Webhook delivery against real HTTP receivers on loopback: the exact body and headers, the
//! retry schedule driven by an injectable clock, the 10 s cut, restarts between attempts, the
//! SSRF re-check at delivery, 3xx as failure, per-host isolation of slow receivers, truncated
//! answers as failures, outcomes the database refuses (kept, not re-sent), fairness across
//! accounts, and kept connections: deliveries to one receiver reuse them (no more than the
//! per-host bound), and one the receiver closed is replaced within the same attempt.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rampart_delivery::{Delivery, DeliveryConfig};
use rampart_engine::alert::{Condition, Cross};
use rampart_engine::{Price, Venue};
use rampart_outbound::USER_AGENT_VALUE;
use rampart_state::clock::{Clock, ManualClock};
use rampart_store::store::{FiringRecord, NewAlert, OutboxRow, Store};
use rampart_store::text::alert::event_body;
use rampart_store::text::Texts;

const T0: i64 = 1_795_183_387_000;

/// How the receiver answers each successive request.
#[derive(Clone, Copy, Debug)]
enum Answer {
    Status(u16),
    Hang,
    /// `200` declaring 100 bytes, then 7 bytes and a close.
    Truncated,
    /// `200` chunked, then a chunk that never completes and a close.
    BrokenChunked,
    /// `200` declaring 1 MB, then 100 KiB (more than the read bound), then silence.
    Long,
}

/// One request as received.
#[derive(Clone, Debug)]
struct Received {
    request_line: String,
    headers: Vec<(String, String)>,
    body: String,
    clock_ms: i64,
}

/// A tiny HTTP/1.1 receiver that follows a script of answers (the last one repeats).
struct Receiver {
    port: u16,
    got: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    fn start(script: Vec<Answer>, clock: Arc<ManualClock>) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let Ok(stream) = stream else { continue };
                let answer = script.get(n).or(script.last()).copied().unwrap_or(Answer::Status(200));
                let (g, clock) = (g.clone(), clock.clone());
                thread::spawn(move || serve(stream, answer, &g, &clock));
            }
        });
        Receiver { port, got }
    }

    fn requests(&self) -> Vec<Received> {
        self.got.lock().map(|g| g.clone()).unwrap_or_default()
    }

    fn wait_for(&self, n: usize, within: Duration) -> Vec<Received> {
        let deadline = Instant::now() + within;
        loop {
            let r = self.requests();
            if r.len() >= n || Instant::now() > deadline {
                return r;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

fn serve(mut stream: TcpStream, answer: Answer, got: &Mutex<Vec<Received>>, clock: &ManualClock) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.trim_end().split_once(": ") {
            headers.push((k.to_owned(), v.to_owned()));
        }
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    let _ = reader.read_exact(&mut body);
    let received = Received {
        request_line: request_line.trim_end().to_owned(),
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
        clock_ms: clock.now_ms(),
    };
    if let Ok(mut g) = got.lock() {
        g.push(received);
    }
    match answer {
        Answer::Status(code) => {
            let extra = if (300..400).contains(&code) { "Location: /elsewhere\r\n" } else { "" };
            let _ = write!(stream, "HTTP/1.1 {code} X\r\n{extra}Content-Length: 2\r\nConnection: close\r\n\r\nok");
        }
        Answer::Hang => thread::sleep(Duration::from_secs(30)),
        Answer::Truncated => {
            let _ = write!(stream, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort!!");
        }
        Answer::BrokenChunked => {
            let _ = write!(stream, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc");
        }
        Answer::Long => {
            let _ = write!(stream, "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n");
            let _ = stream.write_all(&vec![b'x'; 100 * 1024]);
            thread::sleep(Duration::from_secs(30));
        }
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rampart-delivery-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A store with one alert whose webhook is `url`, fired once at `T0`; returns the alert id.
fn fired_alert(dir: &Path, url: &str) -> (Store, i64) {
    let mut store = Store::open(dir).expect("store");
    let key = store.create_account_with_key("developer", None, T0).expect("account");
    let row = store
        .insert_alert(&NewAlert {
            account_id: key.account_id,
            exchange: Venue::Binance,
            symbol: "BTCUSDT".into(),
            condition: Condition::Price { cross: Cross::Above, level: Price(10_000_000_000_000) },
            repeat: false,
            note: "n \"quoted\"".into(),
            webhook_url: Some(url.to_owned()),
            created_price: 9_500_000_000_000,
            created_ms: T0 - 1_000,
            expires_ms: None,
            cooldown_s: 0,
            max_fires: None,
            message: None,
            webhook_format: rampart_store::store::WebhookFormat::Json,
        })
        .expect("alert");
    let firing = FiringRecord::at_price(row.id, 10_000_012_000_000, T0, true);
    let done = store.record_firings(&[firing], &Texts).expect("record");
    assert_eq!(done.fired.len(), 1);
    (store, row.id)
}

fn outbox(store: &Store, alert: i64) -> Vec<OutboxRow> {
    store.deliveries_of(alert).expect("outbox")
}

fn wait_row(store: &Store, alert: i64, pred: impl Fn(&OutboxRow) -> bool, within: Duration) -> OutboxRow {
    let deadline = Instant::now() + within;
    loop {
        let rows = outbox(store, alert);
        if let Some(r) = rows.iter().find(|r| pred(r)) {
            return r.clone();
        }
        assert!(Instant::now() < deadline, "outbox never reached the expected state: {rows:?}");
        thread::sleep(Duration::from_millis(10));
    }
}

fn start(dir: &Path, clock: &Arc<ManualClock>, config: DeliveryConfig) -> Delivery {
    let stores = (Store::open(dir).expect("store"), Store::open(dir).expect("reader"));
    Delivery::start(stores, config, clock.clone()).expect("delivery")
}

fn local() -> DeliveryConfig {
    DeliveryConfig { allow_private: true, poll_interval: Duration::from_millis(5), ..DeliveryConfig::default() }
}

#[test]
fn body_and_headers_are_exactly_as_specified() {
    let clock = Arc::new(ManualClock::new(T0));
    let rx = Receiver::start(vec![Answer::Status(204)], clock.clone());
    let dir = temp_dir("exact");
    let url = format!("http://127.0.0.1:{}/hooks/abc?secret=s3cr3t", rx.port);
    let (store, alert) = fired_alert(&dir, &url);
    let d = start(&dir, &clock, local());
    let got = rx.wait_for(1, Duration::from_secs(5));
    assert_eq!(got.len(), 1);
    let r = &got[0];
    assert_eq!(r.request_line, "POST /hooks/abc?secret=s3cr3t HTTP/1.1");
    let header = |name: &str| r.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    assert_eq!(header("Content-Type"), Some("application/json"));
    assert_eq!(header("X-Service-Event"), Some("alert.triggered"));
    assert_eq!(header("User-Agent"), Some(USER_AGENT_VALUE));
    assert_eq!(header("Host"), Some(format!("127.0.0.1:{}", rx.port).as_str()));
    let body: serde_json::Value = serde_json::from_str(&r.body).expect("JSON body");
    let expected = serde_json::json!({
        "event": "alert.triggered",
        "alert": {"id": alert, "exchange": "binance", "symbol": "BTCUSDT", "type": "price", "direction": "above",
                  "price": 100000, "pct": null, "window": null, "repeat": false, "note": "n \"quoted\""},
        "trigger": {"price": 100000.12, "move": null, "time": T0}
    });
    assert_eq!(body, expected);
    let row = wait_row(&store, alert, |r| r.state == "delivered", Duration::from_secs(5));
    assert_eq!((row.attempts, row.last_status), (1, Some(204)));
    let stored = store.alert(alert).expect("read").expect("alert");
    let firing = FiringRecord::at_price(alert, 10_000_012_000_000, T0, true);
    assert_eq!(r.body, event_body(&stored, &firing), "the stored body is sent byte for byte");
    d.stop();
}

#[test]
fn failures_retry_at_ten_and_sixty_seconds_with_the_same_body() {
    let clock = Arc::new(ManualClock::new(T0));
    let rx = Receiver::start(vec![Answer::Status(500), Answer::Status(500), Answer::Status(200)], clock.clone());
    let dir = temp_dir("schedule");
    let (store, alert) = fired_alert(&dir, &format!("http://127.0.0.1:{}/h", rx.port));
    let d = start(&dir, &clock, local());
    assert_eq!(rx.wait_for(1, Duration::from_secs(5)).len(), 1);
    let row = wait_row(&store, alert, |r| r.attempts == 1, Duration::from_secs(5));
    assert_eq!((row.first_failure_ms, row.next_attempt_ms, row.last_status), (Some(T0), T0 + 10_000, Some(500)));
    clock.set(T0 + 9_999);
    thread::sleep(Duration::from_millis(200));
    assert_eq!(rx.requests().len(), 1, "not before first failure + 10 s");
    clock.set(T0 + 10_000);
    assert_eq!(rx.wait_for(2, Duration::from_secs(5)).len(), 2);
    let row = wait_row(&store, alert, |r| r.attempts == 2, Duration::from_secs(5));
    assert_eq!(row.next_attempt_ms, T0 + 60_000, "attempt 3 is at first failure + 60 s");
    clock.set(T0 + 59_999);
    thread::sleep(Duration::from_millis(200));
    assert_eq!(rx.requests().len(), 2);
    clock.set(T0 + 60_000);
    let got = rx.wait_for(3, Duration::from_secs(5));
    let at: Vec<i64> = got.iter().map(|r| r.clock_ms - T0).collect();
    assert_eq!(at, [0, 10_000, 60_000]);
    assert!(got.iter().all(|r| r.body == got[0].body), "every attempt carries the same body");
    let row = wait_row(&store, alert, |r| r.state == "delivered", Duration::from_secs(5));
    assert_eq!(row.attempts, 3);
    d.stop();
}

#[test]
fn three_failures_and_the_firing_is_failed_for_good() {
    let clock = Arc::new(ManualClock::new(T0));
    let rx = Receiver::start(vec![Answer::Status(503)], clock.clone());
    let dir = temp_dir("failed");
    let (store, alert) = fired_alert(&dir, &format!("http://127.0.0.1:{}/", rx.port));
    let d = start(&dir, &clock, local());
    wait_row(&store, alert, |r| r.attempts == 1, Duration::from_secs(5));
    clock.set(T0 + 10_000);
    wait_row(&store, alert, |r| r.attempts == 2, Duration::from_secs(5));
    clock.set(T0 + 60_000);
    let row = wait_row(&store, alert, |r| r.state == "failed", Duration::from_secs(5));
    assert_eq!((row.attempts, row.last_status), (3, Some(503)));
    clock.set(T0 + 3_600_000);
    thread::sleep(Duration::from_millis(200));
    assert_eq!(rx.requests().len(), 3, "never a fourth attempt");
    d.stop();
}

#[test]
fn a_hanging_receiver_is_cut_at_ten_seconds() {
    let clock = Arc::new(ManualClock::new(T0));
    let rx = Receiver::start(vec![Answer::Hang], clock.clone());
    let dir = temp_dir("hang");
    let (store, alert) = fired_alert(&dir, &format!("http://127.0.0.1:{}/", rx.port));
    let started = Instant::now();
    let d = start(&dir, &clock, local());
    let row = wait_row(&store, alert, |r| r.attempts == 1, Duration::from_secs(20));
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(9_900) && took < Duration::from_secs(13), "cut after {took:?}");
    assert_eq!(row.last_error.as_deref(), Some("no full answer within 10 s"));
    assert_eq!(row.state, "pending", "a timeout is a failure like any other: retried");
    d.stop();
}

#[test]
fn a_restart_between_attempts_keeps_the_schedule() {
    let clock = Arc::new(ManualClock::new(T0));
    let rx = Receiver::start(vec![Answer::Status(500), Answer::Status(200)], clock.clone());
    let dir = temp_dir("restart");
    let (store, alert) = fired_alert(&dir, &format!("http://127.0.0.1:{}/", rx.port));
    let d = start(&dir, &clock, local());
    wait_row(&store, alert, |r| r.attempts == 1, Duration::from_secs(5));
    d.stop();
    clock.set(T0 + 5_000);
    let d = start(&dir, &clock, local());
    thread::sleep(Duration::from_millis(300));
    assert_eq!(rx.requests().len(), 1, "the restarted sender keeps the +10 s schedule");
    // Down past the due time: sent promptly once running.
    clock.set(T0 + 30_000);
    assert_eq!(rx.wait_for(2, Duration::from_secs(5)).len(), 2);
    wait_row(&store, alert, |r| r.state == "delivered", Duration::from_secs(5));
    d.stop();
}

#[test]
fn a_name_resolving_to_a_private_address_is_refused_at_delivery() {
    let clock = Arc::new(ManualClock::new(T0));
    let rx = Receiver::start(vec![Answer::Status(200)], clock.clone());
    let dir = temp_dir("ssrf");
    // Stored directly (as if the name had resolved publicly at creation, then been rebound).
    let (store, alert) = fired_alert(&dir, &format!("http://localhost:{}/", rx.port));
    let d = start(&dir, &clock, DeliveryConfig { allow_private: false, ..local() });
    let row = wait_row(&store, alert, |r| r.attempts == 1, Duration::from_secs(5));
    assert!(row.last_error.as_deref().is_some_and(|e| e.contains("public")), "{row:?}");
    thread::sleep(Duration::from_millis(200));
    assert!(rx.requests().is_empty(), "nothing reached the private address");
    d.stop();
}

#[test]
fn a_redirect_is_a_failure_and_is_not_followed() {
    let clock = Arc::new(ManualClock::new(T0));
    let rx = Receiver::start(vec![Answer::Status(302)], clock.clone());
    let dir = temp_dir("redirect");
    let (store, alert) = fired_alert(&dir, &format!("http://127.0.0.1:{}/", rx.port));
    let d = start(&dir, &clock, local());
    let row = wait_row(&store, alert, |r| r.attempts == 1, Duration::from_secs(5));
    assert_eq!((row.state.as_str(), row.last_status), ("pending", Some(302)));
    thread::sleep(Duration::from_millis(200));
    assert_eq!(rx.requests().len(), 1);
    d.stop();
}

#[test]
fn slow_receivers_do_not_delay_healthy_ones() {
    slow_receivers_do_not_delay_healthy_ones_on(DeliveryConfig::default().threads);
}

/// The bounds are the sender's, whatever the lanes that make the attempts: with one lane per
/// attempt in flight, the slow host and port still gets exactly the account's share of its slots.
#[test]
fn a_host_and_ports_slots_are_exact_across_delivery_threads() {
    slow_receivers_do_not_delay_healthy_ones_on(8);
}

fn slow_receivers_do_not_delay_healthy_ones_on(threads: usize) {
    let clock = Arc::new(ManualClock::new(T0));
    let slow = Receiver::start(vec![Answer::Hang], clock.clone());
    let fast = Receiver::start(vec![Answer::Status(200)], clock.clone());
    let dir = temp_dir(&format!("isolation-{threads}"));
    let mut store = Store::open(&dir).expect("store");
    let key = store.create_account_with_key("developer", None, T0).expect("account");
    let mut ids = Vec::new();
    for (i, port) in [slow.port, slow.port, slow.port, slow.port, slow.port, fast.port].into_iter().enumerate() {
        let row = store
            .insert_alert(&NewAlert {
                account_id: key.account_id,
                exchange: Venue::Binance,
                symbol: "BTCUSDT".into(),
                condition: Condition::Price { cross: Cross::Below, level: Price(1_000) },
                repeat: false,
                note: String::new(),
                webhook_url: Some(format!("http://127.0.0.1:{port}/{i}")),
                created_price: 2_000,
                created_ms: T0,
                expires_ms: None,
                cooldown_s: 0,
                max_fires: None,
                message: None,
                webhook_format: rampart_store::store::WebhookFormat::Json,
            })
            .expect("alert");
        ids.push(row.id);
    }
    let firings: Vec<FiringRecord> = ids.iter().map(|&id| FiringRecord::at_price(id, 900, T0, true)).collect();
    store.record_firings(&firings, &Texts).expect("record");
    let started = Instant::now();
    let d = start(&dir, &clock, DeliveryConfig { per_host_max: 4, threads, ..local() });
    let fast_id = ids[5];
    wait_row(&store, fast_id, |r| r.state == "delivered", Duration::from_secs(3));
    assert!(started.elapsed() < Duration::from_secs(2), "healthy receiver waited {:?}", started.elapsed());
    thread::sleep(Duration::from_millis(200));
    // One account at the slow host and port: all but the quarter kept free for other accounts
    // (`rampart_delivery::fair`), never more.
    assert_eq!(slow.requests().len(), 3, "the slow host holds only the account's share of its four slots");
    assert_eq!(d.stats.in_flight.load(std::sync::atomic::Ordering::Relaxed), 3);
    d.stop();
}

#[test]
fn real_time_retry_after_ten_seconds() {
    // The schedule on the wall clock, end to end: a 500, then the second attempt ~10 s later.
    let clock = Arc::new(ManualClock::new(0));
    let rx = Receiver::start(vec![Answer::Status(500), Answer::Status(200)], clock.clone());
    let dir = temp_dir("realtime");
    let (store, alert) = fired_alert(&dir, &format!("http://127.0.0.1:{}/", rx.port));
    let started = Instant::now();
    let config = DeliveryConfig { allow_private: true, ..DeliveryConfig::default() };
    let stores = (Store::open(&dir).expect("store"), Store::open(&dir).expect("reader"));
    let d = Delivery::start(stores, config, Arc::new(rampart_state::clock::SystemClock)).expect("delivery");
    assert_eq!(rx.wait_for(1, Duration::from_secs(5)).len(), 1);
    let first = started.elapsed();
    assert_eq!(rx.wait_for(2, Duration::from_secs(15)).len(), 2);
    let gap = started.elapsed() - first;
    assert!(gap >= Duration::from_millis(9_800) && gap < Duration::from_millis(11_500), "second attempt after {gap:?}");
    wait_row(&store, alert, |r| r.state == "delivered", Duration::from_secs(5));
    d.stop();
}

/// A TLS receiver on loopback with the test certificate (CN localhost, SAN 127.0.0.1): answers
/// 200 to each request; counts requests and failed handshakes.
fn tls_receiver() -> (u16, Arc<Mutex<Vec<String>>>, Arc<std::sync::atomic::AtomicU64>) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let cert = CertificateDer::from_pem_slice(rampart_testkit::tls::CERT_PEM).expect("cert");
    let key = PrivateKeyDer::from_pem_slice(rampart_testkit::tls::KEY_PEM).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let std_listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    std_listener.set_nonblocking(true).expect("nonblocking");
    let port = std_listener.local_addr().expect("addr").port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let refused = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (g, r) = (got.clone(), refused.clone());
    thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).expect("listener");
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let (acceptor, g, r) = (acceptor.clone(), g.clone(), r.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(stream).await else {
                        r.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        return;
                    };
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while let Ok(n) = tls.read(&mut chunk).await {
                        if n == 0 {
                            break;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        let text = String::from_utf8_lossy(&buf);
                        if let Some(head_end) = text.find("\r\n\r\n") {
                            let len = text[..head_end]
                                .lines()
                                .find_map(|l| l.strip_prefix("Content-Length: "))
                                .and_then(|v| v.trim().parse::<usize>().ok())
                                .unwrap_or(0);
                            if buf.len() >= head_end + 4 + len {
                                break;
                            }
                        }
                    }
                    if let Ok(mut g) = g.lock() {
                        g.push(String::from_utf8_lossy(&buf).lines().next().unwrap_or("").to_owned());
                    }
                    let _ = tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
                    let _ = tls.shutdown().await;
                });
            }
        });
    });
    (port, got, refused)
}

#[test]
fn https_deliveries_verify_the_receiver_certificate() {
    use rustls::pki_types::pem::PemObject;
    let clock = Arc::new(ManualClock::new(T0));
    let (port, got, refused) = tls_receiver();
    // Unknown issuer: the bundled web roots do not trust the test certificate.
    let dir = temp_dir("tls-untrusted");
    let (store, alert) = fired_alert(&dir, &format!("https://127.0.0.1:{port}/secure?s=1"));
    let d = start(&dir, &clock, local());
    let row = wait_row(&store, alert, |r| r.attempts == 1, Duration::from_secs(5));
    assert!(row.last_error.as_deref().is_some_and(|e| e.starts_with("TLS:")), "{row:?}");
    d.stop();
    assert_eq!(refused.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(got.lock().map(|g| g.is_empty()).unwrap_or(false), "no request sent over an untrusted connection");
    // Trusted through an extra root: delivered over TLS.
    let dir = temp_dir("tls-trusted");
    let (store, alert) = fired_alert(&dir, &format!("https://127.0.0.1:{port}/secure?s=1"));
    let der = rustls::pki_types::CertificateDer::from_pem_slice(rampart_testkit::tls::CA_PEM).expect("ca");
    let d = start(&dir, &clock, DeliveryConfig { extra_roots_der: vec![der.to_vec()], ..local() });
    let row = wait_row(&store, alert, |r| r.state == "delivered", Duration::from_secs(5));
    assert_eq!(row.last_status, Some(200));
    assert_eq!(got.lock().map(|g| g.clone()).unwrap_or_default(), ["POST /secure?s=1 HTTP/1.1"]);
    d.stop();
}

#[test]
fn an_answer_that_ends_early_is_a_failure() {
    for (name, answer) in [("truncated", Answer::Truncated), ("chunked", Answer::BrokenChunked)] {
        let clock = Arc::new(ManualClock::new(T0));
        let rx = Receiver::start(vec![answer, Answer::Status(200)], clock.clone());
        let dir = temp_dir(name);
        let (store, alert) = fired_alert(&dir, &format!("http://127.0.0.1:{}/", rx.port));
        let d = start(&dir, &clock, local());
        let row = wait_row(&store, alert, |r| r.attempts == 1, Duration::from_secs(5));
        assert_eq!((row.state.as_str(), row.next_attempt_ms), ("pending", T0 + 10_000), "{name}: {row:?}");
        assert!(row.last_error.as_deref().is_some_and(|e| e.starts_with("incomplete answer")), "{name}: {row:?}");
        clock.set(T0 + 10_000);
        let row = wait_row(&store, alert, |r| r.state == "delivered", Duration::from_secs(5));
        assert_eq!(row.attempts, 2, "{name}: the second, complete answer counts");
        d.stop();
    }
}

#[test]
fn an_answer_longer_than_the_read_bound_is_judged_by_its_status() {
    let clock = Arc::new(ManualClock::new(T0));
    let rx = Receiver::start(vec![Answer::Long], clock.clone());
    let dir = temp_dir("long");
    let (store, alert) = fired_alert(&dir, &format!("http://127.0.0.1:{}/", rx.port));
    let d = start(&dir, &clock, local());
    let row = wait_row(&store, alert, |r| r.state == "delivered", Duration::from_secs(5));
    assert_eq!((row.attempts, row.last_status), (1, Some(200)));
    d.stop();
}

/// Makes every outbox update fail, as a full disk would, until [`heal`] (a trigger, so reads
/// still work and the failure is immediate).
fn break_outbox_writes(dir: &Path) {
    let conn = rusqlite::Connection::open(dir.join("rampart.db")).expect("open");
    conn.execute_batch(
        "CREATE TRIGGER full_disk BEFORE UPDATE ON outbox BEGIN SELECT RAISE(FAIL, 'simulated full disk'); END;",
    )
    .expect("trigger");
}

fn heal(dir: &Path) {
    let conn = rusqlite::Connection::open(dir.join("rampart.db")).expect("open");
    conn.execute_batch("DROP TRIGGER full_disk;").expect("drop trigger");
}

#[test]
fn a_delivered_webhook_whose_outcome_cannot_be_recorded_is_not_sent_again() {
    let clock = Arc::new(ManualClock::new(T0));
    let rx = Receiver::start(vec![Answer::Status(200)], clock.clone());
    let dir = temp_dir("unrecorded");
    let (store, alert) = fired_alert(&dir, &format!("http://127.0.0.1:{}/", rx.port));
    break_outbox_writes(&dir);
    let health = Arc::new(rampart_store::storage::StorageHealth::default());
    let d = start(&dir, &clock, DeliveryConfig { health: Some(health.clone()), ..local() });
    assert_eq!(rx.wait_for(1, Duration::from_secs(5)).len(), 1);
    // Many poll rounds (5 ms each) while the outcome cannot be written.
    thread::sleep(Duration::from_millis(500));
    let failing = health.report(clock.now_ms()).map(|r| r.0);
    assert_eq!(failing, Some(vec![rampart_store::storage::Writer::Delivery]), "reported for /healthz");
    assert_eq!(rx.requests().len(), 1, "re-sent while its outcome could not be recorded");
    assert_eq!(outbox(&store, alert)[0].attempts, 0, "nothing recorded yet");
    use std::sync::atomic::Ordering::Relaxed;
    assert_eq!(d.stats.unrecorded.load(Relaxed), 1, "the outcome is kept in memory");
    assert!(d.stats.record_failures.load(Relaxed) >= 2, "and its recording retried");
    heal(&dir);
    let row = wait_row(&store, alert, |r| r.state == "delivered", Duration::from_secs(5));
    assert_eq!((row.attempts, row.last_status), (1, Some(200)));
    let deadline = Instant::now() + Duration::from_secs(5);
    while d.stats.unrecorded.load(Relaxed) != 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(d.stats.unrecorded.load(Relaxed), 0, "nothing left in memory once recorded");
    thread::sleep(Duration::from_millis(100));
    assert_eq!(rx.requests().len(), 1, "sent exactly once");
    assert!(health.report(clock.now_ms()).is_none(), "healthy once recorded");
    d.stop();
}

#[test]
fn an_unrecorded_failure_keeps_the_schedule_from_when_it_happened() {
    let clock = Arc::new(ManualClock::new(T0));
    let rx = Receiver::start(vec![Answer::Status(500), Answer::Status(200)], clock.clone());
    let dir = temp_dir("unrecorded-failure");
    let (store, alert) = fired_alert(&dir, &format!("http://127.0.0.1:{}/", rx.port));
    break_outbox_writes(&dir);
    let d = start(&dir, &clock, local());
    assert_eq!(rx.wait_for(1, Duration::from_secs(5)).len(), 1);
    // The failure happens when the sender takes the answer, on its own thread: wait for that
    // before the clock moves (on a loaded machine it can take the answer after the test's next
    // step, and then the failure truly happened at the later time).
    use std::sync::atomic::Ordering::Relaxed;
    let deadline = Instant::now() + Duration::from_secs(5);
    while d.stats.failed_attempts.load(Relaxed) == 0 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(d.stats.failed_attempts.load(Relaxed), 1, "the sender took the failed attempt");
    // Past the retry time, but the failure is still unrecorded: no second attempt yet.
    clock.set(T0 + 20_000);
    thread::sleep(Duration::from_millis(500));
    assert_eq!(rx.requests().len(), 1, "attempted again while the failure was unrecorded");
    heal(&dir);
    let row = wait_row(&store, alert, |r| r.attempts >= 1, Duration::from_secs(5));
    assert_eq!(row.first_failure_ms, Some(T0), "the schedule counts from the failure, not from its recording");
    let got = rx.wait_for(2, Duration::from_secs(5));
    assert_eq!(got.iter().map(|r| r.clock_ms - T0).collect::<Vec<_>>(), [0, 20_000]);
    let row = wait_row(&store, alert, |r| r.state == "delivered", Duration::from_secs(5));
    assert_eq!(row.attempts, 2);
    d.stop();
}

/// `n` alerts of a new account whose webhooks are `urls` (cycled), fired at `T0`; returns the
/// account and the alert ids.
fn fire_many(store: &mut Store, urls: &[String], n: usize) -> (i64, Vec<i64>) {
    let key = store.create_account_with_key("developer", None, T0).expect("account");
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let row = store
            .insert_alert(&NewAlert {
                account_id: key.account_id,
                exchange: Venue::Binance,
                symbol: "BTCUSDT".into(),
                condition: Condition::Price { cross: Cross::Below, level: Price(1_000) },
                repeat: false,
                note: String::new(),
                webhook_url: Some(urls[i % urls.len()].clone()),
                created_price: 2_000,
                created_ms: T0,
                expires_ms: None,
                cooldown_s: 0,
                max_fires: None,
                message: None,
                webhook_format: rampart_store::store::WebhookFormat::Json,
            })
            .expect("alert");
        ids.push(row.id);
    }
    let firings: Vec<FiringRecord> = ids.iter().map(|&id| FiringRecord::at_price(id, 900, T0, true)).collect();
    store.record_firings(&firings, &Texts).expect("record");
    (key.account_id, ids)
}

#[test]
fn one_accounts_dead_receivers_do_not_delay_another_accounts_delivery() {
    let clock = Arc::new(ManualClock::new(T0));
    // Dead receivers: listeners never accepted; the kernel completes the connections, nobody
    // ever answers. 40 ports on 8 loopback addresses, 8 rows each: neither the host-and-port
    // bound (8) nor the address bound (64) holds the account back; only the account's own.
    let dead: Vec<TcpListener> =
        (0..40).map(|i| TcpListener::bind(format!("127.0.0.{}:0", 1 + i % 8)).expect("bind")).collect();
    let urls: Vec<String> = dead.iter().map(|l| format!("http://{}/dead", l.local_addr().expect("addr"))).collect();
    let healthy = Receiver::start(vec![Answer::Status(200)], clock.clone());
    let dir = temp_dir("fairness");
    let mut store = Store::open(&dir).expect("store").for_background().expect("background");
    fire_many(&mut store, &urls, 320);
    let (_, ids) = fire_many(&mut store, &[format!("http://127.0.0.1:{}/ok", healthy.port)], 1);
    let d = start(&dir, &clock, local());
    wait_row(&store, ids[0], |r| r.state == "delivered", Duration::from_secs(30));
    use std::sync::atomic::Ordering::Relaxed;
    assert_eq!(d.stats.failed_attempts.load(Relaxed), 0, "the healthy delivery waited for dead ones to time out");
    let deadline = Instant::now() + Duration::from_secs(5);
    // Alone, the account borrows the slots nobody else uses, all but the reserve kept for
    // other accounts: 256 - 256 / 4.
    while d.stats.in_flight.load(Relaxed) < 192 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    thread::sleep(Duration::from_millis(100));
    assert_eq!(d.stats.in_flight.load(Relaxed), 192, "an account alone uses every slot but the reserve");
    // Another account's delivery, due now, still finds a slot at once (the reserve).
    let late = Receiver::start(vec![Answer::Status(200)], clock.clone());
    let (_, late_ids) = fire_many(&mut store, &[format!("http://127.0.0.1:{}/late", late.port)], 1);
    d.waker().notify_one();
    wait_row(&store, late_ids[0], |r| r.state == "delivered", Duration::from_secs(5));
    assert_eq!(d.stats.failed_attempts.load(Relaxed), 0, "delivered before any dead attempt timed out");
    d.stop();
    drop(dead);
}

#[test]
fn the_due_scan_reaches_every_account() {
    let dir = temp_dir("scan");
    let mut store = Store::open(&dir).expect("store").for_background().expect("background");
    let urls = ["http://127.0.0.1:9/a".to_owned()];
    let (_, a_ids) = fire_many(&mut store, &urls, 4_200);
    let (_, b_ids) = fire_many(&mut store, &urls, 2);
    let due = store.due_deliveries(T0, 4_096).expect("due");
    let owner = |r: &OutboxRow| if b_ids.contains(&r.alert_id) { 'b' } else { 'a' };
    let first: String = due.iter().take(4).map(owner).collect();
    assert_eq!(first, "abab", "round-robin across accounts");
    assert!(b_ids.iter().all(|id| due.iter().any(|r| r.alert_id == *id)), "every account's rows are found");
    assert!(a_ids.len() > 4_096);
    assert!(due.iter().filter(|r| owner(r) == 'a').count() <= 256, "one account's share of a scan is bounded");
}

/// What a receiver's connection does with its requests after the first.
#[derive(Clone, Copy)]
enum Mode {
    /// Answers every request, keeping the connection open.
    KeepAlive,
    /// Answers the first request; reads the second and closes without answering (the race of
    /// a receiver closing an idle connection as a request goes out).
    CloseOnSecond,
}

/// A keep-alive receiver counting connections accepted and requests read.
struct KeptReceiver {
    port: u16,
    connections: Arc<AtomicU64>,
    requests: Arc<AtomicU64>,
}

impl KeptReceiver {
    fn start(mode: Mode) -> KeptReceiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (connections, requests) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (c, r) = (connections.clone(), requests.clone());
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                c.fetch_add(1, Ordering::SeqCst);
                let r = r.clone();
                thread::spawn(move || serve_kept(stream, mode, &r));
            }
        });
        KeptReceiver { port, connections, requests }
    }
}

/// Reads one request (head and body); false at the end of the stream.
fn read_request(reader: &mut BufReader<TcpStream>) -> bool {
    let mut len = 0usize;
    let mut first = true;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return false;
        }
        if line == "\r\n" && !first {
            break;
        }
        first = false;
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).is_ok()
}

fn serve_kept(mut stream: TcpStream, mode: Mode, requests: &AtomicU64) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut served = 0;
    while read_request(&mut reader) {
        requests.fetch_add(1, Ordering::SeqCst);
        if served == 1 && matches!(mode, Mode::CloseOnSecond) {
            return;
        }
        if stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").is_err() {
            return;
        }
        served += 1;
    }
}

#[test]
fn deliveries_to_one_receiver_reuse_kept_connections() {
    let rx = KeptReceiver::start(Mode::KeepAlive);
    let dir = temp_dir("keepalive-reuse");
    let url = format!("http://127.0.0.1:{}/hook", rx.port);
    let alerts: Vec<i64> = (0..40).map(|_| fired_alert(&dir, &url).1).collect();
    let clock = Arc::new(ManualClock::new(T0));
    let d = start(&dir, &clock, local());
    let store = Store::open(&dir).expect("store");
    for a in &alerts {
        assert_eq!(wait_row(&store, *a, |r| r.state == "delivered", Duration::from_secs(10)).attempts, 1);
    }
    let opened = rx.connections.load(Ordering::SeqCst);
    let per_host = DeliveryConfig::default().per_host_max as u64;
    assert!(opened <= per_host, "40 deliveries opened {opened} connections (per-host bound {per_host})");
    assert_eq!(rx.requests.load(Ordering::SeqCst), 40, "each delivery sent once");
    d.stop();
}

#[test]
fn a_kept_connection_closed_by_the_receiver_is_replaced_within_the_attempt() {
    let rx = KeptReceiver::start(Mode::CloseOnSecond);
    let dir = temp_dir("keepalive-closed");
    let url = format!("http://127.0.0.1:{}/hook", rx.port);
    let first = fired_alert(&dir, &url).1;
    let clock = Arc::new(ManualClock::new(T0));
    let d = start(&dir, &clock, local());
    let store = Store::open(&dir).expect("store");
    wait_row(&store, first, |r| r.state == "delivered", Duration::from_secs(10));
    // The connection is kept; the next delivery goes out on it, and the receiver closes it.
    let second = fired_alert(&dir, &url).1;
    let row = wait_row(&store, second, |r| r.state == "delivered", Duration::from_secs(10));
    assert_eq!(row.attempts, 1, "the closed connection did not cost an attempt: {row:?}");
    assert_eq!(rx.connections.load(Ordering::SeqCst), 2, "one kept connection, one new after it closed");
    d.stop();
}
