//! Keep-alive webhook connections against real receivers on loopback: deliveries to one
//! receiver reuse kept connections (no more connections than the per-host bound), and a kept
//! connection the receiver has closed costs a retry on a new one within the same attempt, not a
//! failed attempt.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rampart_engine::alert::{Condition, Cross};
use rampart_engine::{Price, Venue};
use rampart_net::delivery::{Delivery, DeliveryConfig, ManualClock};
use rampart_net::store::{FiringRecord, NewAlert, OutboxRow, Store};

const T0: i64 = 1_795_183_387_000;

/// What a receiver's connection does with its requests after the first.
#[derive(Clone, Copy)]
enum Mode {
    /// Answers every request, keeping the connection open.
    KeepAlive,
    /// Answers the first request; reads the second and closes without answering (the race of
    /// a receiver closing an idle connection as a request goes out).
    CloseOnSecond,
}

/// A receiver counting connections accepted and requests read.
struct Receiver {
    port: u16,
    connections: Arc<AtomicU64>,
    requests: Arc<AtomicU64>,
}

impl Receiver {
    fn start(mode: Mode) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (connections, requests) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (c, r) = (connections.clone(), requests.clone());
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                c.fetch_add(1, Ordering::SeqCst);
                let r = r.clone();
                thread::spawn(move || serve(stream, mode, &r));
            }
        });
        Receiver { port, connections, requests }
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

fn serve(mut stream: TcpStream, mode: Mode, requests: &AtomicU64) {
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

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rampart-keepalive-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// One more alert whose webhook is `url`, fired once; its id.
fn fire(dir: &Path, url: &str) -> i64 {
    let mut store = Store::open(dir).expect("store");
    let key = store.create_account_with_key("developer", None, T0).expect("account");
    let row = store
        .insert_alert(&NewAlert {
            account_id: key.account_id,
            exchange: Venue::Binance,
            symbol: "BTCUSDT".into(),
            condition: Condition::Price { cross: Cross::Above, level: Price(10_000_000_000_000) },
            repeat: false,
            note: String::new(),
            webhook_url: Some(url.to_owned()),
            created_price: 9_500_000_000_000,
            created_ms: T0 - 1_000,
        })
        .expect("alert");
    let firing =
        FiringRecord { alert_id: row.id, price: 10_000_012_000_000, move_hundredths: None, ts_ms: T0, last: true };
    assert_eq!(store.record_firings(&[firing]).expect("record").len(), 1);
    row.id
}

fn delivered(store: &Store, alert: i64, within: Duration) -> OutboxRow {
    let deadline = Instant::now() + within;
    loop {
        let rows = store.deliveries_of(alert).expect("outbox");
        if let Some(r) = rows.iter().find(|r| r.state == "delivered") {
            return r.clone();
        }
        assert!(Instant::now() < deadline, "alert {alert} not delivered: {rows:?}");
        thread::sleep(Duration::from_millis(10));
    }
}

fn start(dir: &Path) -> Delivery {
    let config =
        DeliveryConfig { allow_private: true, poll_interval: Duration::from_millis(5), ..DeliveryConfig::default() };
    Delivery::start(Store::open(dir).expect("store"), config, Arc::new(ManualClock::new(T0))).expect("delivery")
}

#[test]
fn deliveries_to_one_receiver_reuse_kept_connections() {
    let rx = Receiver::start(Mode::KeepAlive);
    let dir = temp_dir("reuse");
    let url = format!("http://127.0.0.1:{}/hook", rx.port);
    let alerts: Vec<i64> = (0..40).map(|_| fire(&dir, &url)).collect();
    let d = start(&dir);
    let store = Store::open(&dir).expect("store");
    for a in &alerts {
        assert_eq!(delivered(&store, *a, Duration::from_secs(10)).attempts, 1);
    }
    let opened = rx.connections.load(Ordering::SeqCst);
    let per_host = DeliveryConfig::default().per_host_max as u64;
    assert!(opened <= per_host, "40 deliveries opened {opened} connections (per-host bound {per_host})");
    assert_eq!(rx.requests.load(Ordering::SeqCst), 40, "each delivery sent once");
    d.stop();
}

#[test]
fn a_kept_connection_closed_by_the_receiver_is_replaced_within_the_attempt() {
    let rx = Receiver::start(Mode::CloseOnSecond);
    let dir = temp_dir("closed");
    let url = format!("http://127.0.0.1:{}/hook", rx.port);
    let first = fire(&dir, &url);
    let d = start(&dir);
    let store = Store::open(&dir).expect("store");
    delivered(&store, first, Duration::from_secs(10));
    // The connection is kept; the next delivery goes out on it, and the receiver closes it.
    let second = fire(&dir, &url);
    let row = delivered(&store, second, Duration::from_secs(10));
    assert_eq!(row.attempts, 1, "the closed connection did not cost an attempt: {row:?}");
    assert_eq!(rx.connections.load(Ordering::SeqCst), 2, "one kept connection, one new after it closed");
    d.stop();
}
