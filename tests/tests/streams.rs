//! `GET /v1/stream` through the real binary on the simulated market (`decisions.md` §12): the
//! refusals before the upgrade, every op's answer and every malformed op's error, the price
//! channel's snapshot and changes with `seq` rising by one, heartbeats, an alert's firing pushed
//! on `alerts` with the webhook's body and the inbox id to resume from, a resume with `since`,
//! the bound on a key's open streams, a client that stops reading (conflated within its bound,
//! nobody else delayed, `seq` without a gap when it reads again), and on the live feed against
//! the venue simulator a level broken by a trade and walls placed, pulled and filled. And what
//! admitted a stream, held against it (issue #45): a revoked key's streams and a signed-out
//! session's page streams end within a second with the reason (on a cluster's other api node
//! too), a resume point beyond the newest inbox entry is refused naming it, and the site's pages
//! stream on their own bound.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use rampart_tests::cluster::{create_firing, movers, roomy_config, unlimited_key};
use rampart_tests::{json_receiver, pg_database, Server, SimVenue, SiteSession, FAST};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message, WebSocket};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

type Ws = WebSocket<TcpStream>;

/// Opens a stream with `key`; the handshake's error (an HTTP refusal) otherwise.
fn connect(server: &Server, key: &str) -> Result<Ws, tungstenite::Error> {
    let tcp = TcpStream::connect(("127.0.0.1", server.port)).map_err(tungstenite::Error::Io)?;
    connect_over(server, key, tcp)
}

/// Opens a stream with `key` over `tcp`.
fn connect_over(server: &Server, key: &str, tcp: TcpStream) -> Result<Ws, tungstenite::Error> {
    let mut req = format!("ws://127.0.0.1:{}/v1/stream", server.port).into_client_request()?;
    let auth = format!("Bearer {key}").parse().map_err(|_| tungstenite::Error::Utf8("header".into()))?;
    req.headers_mut().insert("authorization", auth);
    tcp.set_read_timeout(Some(Duration::from_millis(200))).map_err(tungstenite::Error::Io)?;
    // The reads time out after 200 ms (so tests can poll); a handshake whose answer takes longer
    // (a busy machine) is carried on, for up to 10 s, rather than taken for a refusal.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut shaking = tungstenite::client(req, tcp);
    loop {
        match shaking {
            Ok((ws, _)) => return Ok(ws),
            Err(tungstenite::HandshakeError::Failure(e)) => return Err(e),
            Err(tungstenite::HandshakeError::Interrupted(mid)) if Instant::now() < deadline => {
                shaking = mid.handshake();
            }
            Err(tungstenite::HandshakeError::Interrupted(_)) => return Err(tungstenite::Error::ConnectionClosed),
        }
    }
}

fn send(ws: &mut Ws, v: &Value) {
    ws.send(Message::text(v.to_string())).expect("send");
}

/// The next message within `limit` (a read that times out is tried again until then).
fn next(ws: &mut Ws, limit: Duration) -> Option<Result<Value, Option<CloseCode>>> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        match ws.read() {
            Ok(Message::Text(t)) => return Some(Ok(serde_json::from_str(t.as_str()).expect("a JSON message"))),
            Ok(Message::Close(frame)) => return Some(Err(frame.map(|f| f.code))),
            Ok(_) => {}
            Err(tungstenite::Error::Io(e))
                if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => return Some(Err(None)),
            Err(e) => panic!("reading the stream: {e}"),
        }
    }
    None
}

/// Messages until one satisfies `want` (heartbeats and other channels skipped), within `limit`.
fn wait_for(ws: &mut Ws, limit: Duration, want: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match next(ws, left) {
            Some(Ok(m)) if want(&m) => return m,
            Some(Ok(_)) => {}
            Some(Err(code)) => panic!("closed ({code:?}) while waiting"),
            None => panic!("nothing wanted within {limit:?}"),
        }
    }
}

#[test]
fn refusals_come_before_the_upgrade() {
    let server = Server::start(BIN, FAST);
    server.get("/v1/stream", None).assert_error(401, "missing API key", "no key");
    server.get("/v1/stream", Some("rk_live_not_a_key_at_all_0000000000")).assert_some_error(401, "a wrong key");
    let plain = server.get("/v1/stream", Some(&server.key));
    plain.assert_some_error(426, "not a WebSocket");
    assert_eq!(plain.header("upgrade"), Some("websocket"));
    server.request("POST", "/v1/stream", Some(&format!("Bearer {}", server.key)), None).assert_some_error(405, "POST");
    let bad = server.get("/v1/stream?since=-1", Some(&server.key));
    bad.assert_error(422, "'since' must be a non-negative integer (an inbox id)", "a bad since, whatever the form");
    server.get("/v1/stream?minUsd=0", Some(&server.key)).assert_some_error(422, "a bad minUsd");
    // The site's form takes its session, not a key.
    server.get("/site/v1/stream?channels=alerts", Some(&server.key)).assert_error(401, "not signed in", "no session");
    server.request("POST", "/site/v1/stream", None, None).assert_some_error(405, "POST on the site's stream");
    let free = server.create_key("free", None);
    match connect(&server, &free) {
        Err(tungstenite::Error::Http(r)) => assert_eq!(r.status(), 403),
        other => panic!("a free key streamed: {:?}", other.map(|_| ())),
    }
    // A developer key holds five streams; the sixth is refused with a wait.
    let open: Vec<Ws> = (0..5).map(|_| connect(&server, &server.key).expect("within the bound")).collect();
    match connect(&server, &server.key) {
        Err(tungstenite::Error::Http(r)) => {
            assert_eq!(r.status(), 429);
            assert!(r.headers().get("retry-after").is_some(), "{r:?}");
        }
        other => panic!("a sixth stream: {:?}", other.map(|_| ())),
    }
    drop(open);
    let deadline = Instant::now() + Duration::from_secs(10);
    while connect(&server, &server.key).is_err() {
        assert!(Instant::now() < deadline, "closed streams give their places back");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn every_op_is_answered_and_malformed_ones_refused() {
    let server = Server::start(BIN, FAST);
    let mut ws = connect(&server, &server.key).expect("connect");
    send(&mut ws, &json!({"op":"ping","id":1}));
    assert_eq!(next(&mut ws, Duration::from_secs(5)), Some(Ok(json!({"type":"ack","id":1}))));
    let refused: &[(&str, Value)] = &[
        ("{not json", Value::Null),
        (r#"{"op":"jump","id":2}"#, json!(2)),
        (r#"{"op":"subscribe","id":3,"channels":["price:binance:NOPEUSDT"]}"#, json!(3)),
        (r#"{"op":"subscribe","id":4,"channels":["news:binance"]}"#, json!(4)),
        (r#"{"op":"subscribe","id":5,"channels":["price:kraken:BTCUSD"]}"#, json!(5)),
    ];
    for (frame, id) in refused {
        ws.send(Message::text(*frame)).expect("send");
        let m = wait_for(&mut ws, Duration::from_secs(5), |m| m["type"] != "heartbeat");
        assert_eq!((&m["type"], &m["id"]), (&json!("error"), id), "{frame}: {m}");
        assert!(m["error"].as_str().is_some_and(|e| !e.is_empty()), "{m}");
    }
    let unknown = r#"{"op":"subscribe","id":3,"channels":["price:binance:NOPEUSDT"]}"#;
    ws.send(Message::text(unknown)).expect("send");
    let m = wait_for(&mut ws, Duration::from_secs(5), |m| m["type"] == "error");
    assert_eq!(m["error"], "unknown symbol 'NOPEUSDT' on binance");
    send(&mut ws, &json!({"op":"unsubscribe","id":6,"channels":["alerts"]}));
    assert_eq!(wait_for(&mut ws, Duration::from_secs(5), |m| m["type"] != "heartbeat"), json!({"type":"ack","id":6}));
    // Six errors so far; the eleventh in a minute closes the connection (1008).
    for i in 0..5 {
        ws.send(Message::text(format!("bad {i}"))).expect("send");
    }
    let closed = loop {
        match next(&mut ws, Duration::from_secs(5)) {
            Some(Ok(m)) => assert!(m["type"] == "error" || m["type"] == "heartbeat", "{m}"),
            Some(Err(code)) => break code,
            None => panic!("still open after eleven errors"),
        }
    };
    assert_eq!(closed, Some(CloseCode::Policy));
}

#[test]
fn a_price_channel_sends_its_snapshot_then_every_change_in_order() {
    let server = Server::start(BIN, FAST);
    let mut ws = connect(&server, &server.key).expect("connect");
    send(&mut ws, &json!({"op":"subscribe","id":1,"channels":["price:BINANCE:btcusdt"]}));
    assert_eq!(next(&mut ws, Duration::from_secs(5)), Some(Ok(json!({"type":"ack","id":1}))));
    let snap = wait_for(&mut ws, Duration::from_secs(5), |m| m["type"] != "heartbeat");
    assert_eq!(
        (&snap["channel"], &snap["type"], &snap["seq"]),
        (&json!("price:binance:BTCUSDT"), &json!("snapshot"), &json!(1))
    );
    assert!(snap["data"]["price"].as_f64().is_some_and(|p| p > 0.0), "{snap}");
    let rest = server.get_authed("/v1/symbols/BTCUSDT?exchange=binance");
    assert!(rest.ok("price")["data"]["price"].as_f64().is_some_and(|p| p > 0.0));
    // The simulated market moves within seconds; each change is one message, seq without gaps,
    // at most one per 100 ms.
    let mut last = (1, snap["ts"].as_i64().expect("ts"));
    for _ in 0..5 {
        let m = wait_for(&mut ws, Duration::from_secs(20), |m| m["channel"] == "price:binance:BTCUSDT");
        assert_eq!(m["type"], "price", "{m}");
        let (seq, ts) = (m["seq"].as_i64().expect("seq"), m["ts"].as_i64().expect("ts"));
        assert_eq!(seq, last.0 + 1, "{m}");
        assert!(ts - last.1 >= 90, "conflated to one per 100 ms: {} ms apart", ts - last.1);
        last = (seq, ts);
    }
    send(&mut ws, &json!({"op":"unsubscribe","id":2,"channels":["price:binance:BTCUSDT"]}));
    wait_for(&mut ws, Duration::from_secs(5), |m| m == &json!({"type":"ack","id":2}));
    // Nothing but heartbeats now, one after each quiet second.
    let started = Instant::now();
    let mut beats = 0;
    while started.elapsed() < Duration::from_millis(2_600) {
        if let Some(Ok(m)) = next(&mut ws, Duration::from_millis(300)) {
            assert_eq!(m["type"], "heartbeat", "after unsubscribing: {m}");
            beats += 1;
        }
    }
    assert!((2..=3).contains(&beats), "{beats} heartbeats in 2.6 quiet seconds");
}

#[test]
fn a_firing_arrives_on_alerts_with_its_body_and_a_resume_misses_nothing() {
    let server = Server::start(BIN, FAST);
    let key = server.key.clone();
    let mut ws = connect(&server, &key).expect("connect");
    send(&mut ws, &json!({"op":"subscribe","id":1,"channels":["alerts"]}));
    assert_eq!(next(&mut ws, Duration::from_secs(5)), Some(Ok(json!({"type":"ack","id":1}))));
    let names = server.volatile_pairs();
    for s in &names {
        let body = json!({"symbol":s,"type":"pct","direction":"any","pct":0.1,"window":"5m"}).to_string();
        server.request("POST", "/v1/alerts", Some(&format!("Bearer {key}")), Some(&body)).ok("create pct");
    }
    let fired = wait_for(&mut ws, Duration::from_secs(120), |m| m["channel"] == "alerts");
    assert_eq!((&fired["type"], &fired["seq"]), (&json!("alert.triggered"), &json!(1)), "{fired}");
    let inbox = server.get("/v1/inbox", Some(&key));
    let entries = inbox.ok("inbox")["data"].as_array().cloned().expect("data");
    let entry = entries.iter().find(|e| e["id"] == fired["id"]).expect("the pushed entry is in the inbox");
    assert_eq!(fired["data"], entry["event"], "the webhook's body, as the inbox keeps it");
    assert_eq!(fired["data"]["event"], "alert.triggered");
    // Resume from before it on a new connection: everything after `since`, oldest first, seq 1..
    drop(ws);
    let mut again = connect(&server, &key).expect("reconnect");
    send(&mut again, &json!({"op":"subscribe","id":7,"channels":["alerts"],"since":0}));
    assert_eq!(next(&mut again, Duration::from_secs(5)), Some(Ok(json!({"type":"ack","id":7}))));
    let first = wait_for(&mut again, Duration::from_secs(5), |m| m["channel"] == "alerts");
    assert_eq!(first["seq"], 1);
    let oldest = server.get("/v1/inbox", Some(&key)).ok("inbox")["data"]
        .as_array()
        .and_then(|a| a.iter().filter_map(|e| e["id"].as_i64()).min())
        .expect("an entry");
    assert_eq!(first["id"].as_i64(), Some(oldest), "oldest first");
    let mut seq = 1;
    let mut ids = vec![oldest];
    while !ids.contains(&fired["id"].as_i64().unwrap_or(-1)) {
        let m = wait_for(&mut again, Duration::from_secs(5), |m| m["channel"] == "alerts");
        seq += 1;
        assert_eq!(m["seq"], seq, "{m}");
        assert!(m["id"].as_i64() > ids.last().copied(), "ids rise: {m}");
        ids.push(m["id"].as_i64().expect("id"));
    }
}

/// A `/metrics` sample's value (the first line that starts with `name` and a space).
fn metric(server: &Server, name: &str) -> f64 {
    let text = server.get("/metrics", None).text;
    let line = text.lines().find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '));
    line.and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{name} in {text}"))
}

/// The server's resident memory, KiB (`VmRSS`).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("a VmRSS line");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("VmRSS in kB")
}

/// The outbox's share of `[streams] unsent_bytes_max` in the slow-client test.
const SLOW_UNSENT_BYTES: usize = 256 << 10;

#[test]
fn a_client_that_stops_reading_is_conflated_within_its_bound_and_delays_nobody() {
    let cfg = std::env::temp_dir().join(format!("rampart-streams-slow-{}.toml", std::process::id()));
    let streams = format!("[streams]\nsubscriptions_max = 1000\nunsent_bytes_max = {SLOW_UNSENT_BYTES}\n");
    std::fs::write(&cfg, streams).expect("write the config");
    let cfg = cfg.display().to_string();
    let server = Server::start(BIN, &["--sim-pairs", "100", "--shards", "1", "--sim-step-ms", "20", "--config", &cfg]);
    // The slow client: a small receive buffer, every pair's price on every venue and every
    // venue's levels and walls, then it reads nothing.
    let tcp = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    tcp.set_recv_buffer_size(4 << 10).expect("SO_RCVBUF");
    tcp.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], server.port)).into()).expect("connect");
    let tcp: TcpStream = tcp.into();
    tcp.set_read_timeout(Some(Duration::from_millis(200))).expect("timeout");
    let mut slow = connect_over(&server, &server.key, tcp).expect("upgrade");
    let mut channels: Vec<String> = Vec::new();
    for venue in ["binance", "bybit", "okx", "bitget"] {
        let listed = server.get_authed(&format!("/v1/exchanges/{venue}/symbols"));
        let data = listed.ok("symbols")["data"].as_array().cloned().unwrap_or_default();
        channels.extend(data.iter().filter_map(|p| p["symbol"].as_str()).map(|s| format!("price:{venue}:{s}")));
        channels.push(format!("levels:{venue}:*"));
        channels.push(format!("walls:{venue}:*"));
    }
    assert!(channels.len() > 300, "{} channels", channels.len());
    for (i, chunk) in channels.chunks(400).enumerate() {
        send(&mut slow, &json!({"op":"subscribe","id":i,"channels":chunk}));
        wait_for(&mut slow, Duration::from_secs(10), |m| m == &json!({"type":"ack","id":i}));
    }
    // A healthy client on the same server.
    let mut healthy = subscribed(&server, "price:binance:BTCUSDT");
    let stall = Instant::now();
    let (mut arrivals, mut rss) = (Vec::new(), Vec::new());
    let mut queued_max = 0.0f64;
    while stall.elapsed() < Duration::from_secs(10) {
        if let Some(Ok(m)) = next(&mut healthy, Duration::from_millis(100)) {
            arrivals.push((stall.elapsed(), m["type"].as_str().unwrap_or("").to_owned()));
        }
        if stall.elapsed() > Duration::from_secs(4) && rss.len() < 60 {
            rss.push(rss_kib(server.pid));
            queued_max = queued_max.max(metric(&server, "rampart_stream_queued_bytes"));
        }
    }
    // Market events queued for both connections stay within their shares of the bound.
    assert!(queued_max <= (2 * SLOW_UNSENT_BYTES / 4) as f64, "{queued_max} bytes queued");
    assert!(metric(&server, "rampart_stream_conflations_total") >= 1.0, "the slow client was conflated");
    // A coarse guard besides the figure: the resident size stays flat. (An unbounded queue at
    // this feed's rate grows by about 120 KiB/s, measured with the bound removed: the
    // bytes-queued figure catches that, this guard alone would not.)
    let (low, high) = (rss.iter().min().copied().unwrap_or(0), rss.iter().max().copied().unwrap_or(0));
    assert!(high - low < 8 << 10, "the server grew {} KiB while the client did not read", high - low);
    // Nobody else waited: the healthy client's prices kept coming, never a second apart.
    let prices = arrivals.iter().filter(|(_, t)| t == "price").count();
    assert!(prices >= 40, "{prices} prices in 10 s");
    let gap = arrivals.windows(2).map(|w| w[1].0 - w[0].0).max().unwrap_or_default();
    assert!(gap < Duration::from_secs(1), "{gap:?} without a message");
    // The slow client reads again: every channel's seq rises by one, snapshots bridging what
    // was conflated, and the prices are the newest.
    let mut seqs: std::collections::HashMap<String, (i64, u32)> = std::collections::HashMap::new();
    let resumed = Instant::now();
    let mut bridged = 0;
    while resumed.elapsed() < Duration::from_secs(4) {
        match next(&mut slow, Duration::from_millis(300)) {
            Some(Ok(m)) if m["channel"].is_string() => {
                let channel = m["channel"].as_str().unwrap_or_default().to_owned();
                let seq = m["seq"].as_i64().expect("seq");
                let entry = seqs.entry(channel.clone()).or_insert((0, 0));
                assert_eq!(seq, entry.0 + 1, "{channel}: {m}");
                if m["type"] == "snapshot" && seq > 1 {
                    entry.1 += 1;
                    bridged += 1;
                }
                entry.0 = seq;
            }
            Some(Ok(_)) => {}
            Some(Err(code)) => panic!("the slow client was closed: {code:?}"),
            None => {}
        }
    }
    assert!(bridged > 0, "no snapshot bridged a conflation");
}

/// The live feed from the simulator, one venue.
fn live() -> (SimVenue, Server) {
    rampart_tests::live_binance(BIN)
}

fn subscribed(server: &Server, channel: &str) -> Ws {
    let mut ws = connect(server, &server.key).expect("connect");
    send(&mut ws, &json!({"op":"subscribe","id":1,"channels":[channel]}));
    assert_eq!(next(&mut ws, Duration::from_secs(5)), Some(Ok(json!({"type":"ack","id":1}))));
    ws
}

#[test]
fn a_level_broken_by_a_trade_is_pushed_before_rest_shows_it_gone() {
    let (sim, server) = live();
    let mut ws = subscribed(&server, "levels:binance:BTCUSDT");
    let snap = wait_for(&mut ws, Duration::from_secs(5), |m| m["channel"] == "levels:binance:BTCUSDT");
    assert_eq!(
        (&snap["type"], &snap["seq"], &snap["data"]["symbol"]),
        (&json!("snapshot"), &json!(1), &json!("BTCUSDT"))
    );
    let rest = server.get_authed("/v1/levels/BTCUSDT?exchange=binance");
    assert_eq!(snap["data"]["levels"], rest.ok("levels")["data"], "the Level list of GET /v1/levels");
    let levels = snap["data"]["levels"].as_array().cloned().unwrap_or_default();
    let resistance = levels
        .iter()
        .filter(|l| l["type"] == "resistance" && l["side"] == "high")
        .min_by(|a, b| a["price"].as_f64().partial_cmp(&b["price"].as_f64()).unwrap_or(std::cmp::Ordering::Equal))
        .cloned()
        .expect("a resistance above the price");
    let through = resistance["price"].as_f64().expect("price") * 1.001;
    sim.control("trade", &json!({"venue":"binance","symbol":"BTCUSDT","price":format!("{through:.2}")}));
    let broken = wait_for(&mut ws, Duration::from_secs(10), |m| m["type"] == "level.broken");
    assert_eq!(broken["data"]["level"]["price"], resistance["price"], "{broken}");
    assert_eq!(broken["seq"], 2, "{broken}");
    assert!(broken["data"]["price"].as_f64().is_some_and(|p| p > resistance["price"].as_f64().unwrap_or(f64::MAX)));
    let now = server.get_authed("/v1/levels/BTCUSDT?exchange=binance");
    let still = now.ok("levels")["data"].as_array().cloned().unwrap_or_default();
    assert!(still.iter().all(|l| l["price"] != resistance["price"]), "REST shows it gone too");
}

/// Creates a wall alert on BTCUSDT for `event` on `direction`'s walls (any distance up to 50 %).
fn wall_alert(server: &Server, event: &str, direction: &str) -> Value {
    let body = json!({"type":"wall","symbol":"BTCUSDT","exchange":"binance","event":event,"direction":direction,"max_dist_pct":50});
    let reply = server.request("POST", "/v1/alerts", Some(&format!("Bearer {}", server.key)), Some(&body.to_string()));
    reply.ok("a wall alert")["data"]["id"].clone()
}

/// The wall history's entry of the wall at `price` on `side` once it reads `outcome` (20 s at most).
fn history_entry(server: &Server, side: &str, price: &str, outcome: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let data = server.get_authed("/v1/walls/BTCUSDT/history").ok("history")["data"].clone();
        let entries = data.as_array().cloned().unwrap_or_default();
        let at = |w: &&Value| w["side"] == side && w["price"].as_f64() == price.parse::<f64>().ok();
        if let Some(w) = entries.iter().find(at).filter(|w| w["outcome"] != "open") {
            assert_eq!(w["outcome"], outcome, "{w}");
            return w.clone();
        }
        assert!(Instant::now() < deadline, "no ended {side} at {price} in the history after 20 s: {data}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The wall of alert `id`'s one firing, from the inbox (10 s at most).
fn fired_wall(server: &Server, id: &Value) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let inbox = server.get_authed("/v1/inbox").ok("inbox")["data"].clone();
        let mine: Vec<Value> =
            inbox.as_array().into_iter().flatten().filter(|e| e["alertId"] == *id).cloned().collect();
        if let Some(e) = mine.first() {
            assert_eq!(mine.len(), 1, "fired once: {mine:?}");
            return e["event"]["trigger"]["wall"].clone();
        }
        assert!(Instant::now() < deadline, "alert {id}: no firing in 10 s: {inbox}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The stream's `wall.gone`, the history's entry and the alert's firing say the same of the wall
/// at `price` on `side`: `outcome`, and the same lifetime.
fn the_same_everywhere(server: &Server, gone: &Value, alert: &Value, side: &str, price: &str, outcome: &str) {
    assert_eq!(gone["data"]["reason"], outcome, "the stream: {gone}");
    let entry = history_entry(server, side, price, outcome);
    let fired = fired_wall(server, alert);
    assert_eq!((&fired["reason"], &fired["price"]), (&json!(outcome), &entry["price"]), "the alert: {fired}");
    let stood_ms = entry["lastSeen"].as_i64().unwrap_or(0) - entry["firstSeen"].as_i64().unwrap_or(0);
    assert_eq!(gone["data"]["lifetimeS"], json!(stood_ms / 1000), "the stream's lifetime: {gone} {entry}");
    // The alert's lifetime is the wall's age at the last scan that saw it, in whole seconds.
    let alert_s = fired["lifetimeS"].as_i64().expect("lifetimeS");
    assert!((alert_s - stood_ms / 1000).abs() <= 1, "the alert's lifetime: {fired} {entry}");
}

#[test]
fn a_wall_goes_the_same_way_on_the_stream_in_the_history_and_in_its_alerts() {
    let (sim, server) = live();
    let (pulled, filled) = (wall_alert(&server, "pulled", "bid"), wall_alert(&server, "filled", "ask"));
    let mut ws = subscribed(&server, "walls:binance:BTCUSDT");
    let snap = wait_for(&mut ws, Duration::from_secs(5), |m| m["channel"] == "walls:binance:BTCUSDT");
    assert_eq!((&snap["type"], &snap["data"]["symbol"]), (&json!("snapshot"), &json!("BTCUSDT")));
    assert!(snap["data"]["snapshot"]["walls"].is_array(), "{snap}");
    let truth = sim.get("book?venue=binance&symbol=BTCUSDT");
    let level =
        |side: &str, i: usize| -> f64 { truth[side][i][1].as_str().and_then(|s| s.parse().ok()).expect("a true size") };
    let best = |side: &str| -> f64 { truth[side][0][0].as_str().and_then(|s| s.parse().ok()).expect("a true price") };
    let mid = format!("{:.2}", (best("bids") + best("asks")) / 2.0);
    let mut seq = snap["seq"].as_i64().expect("seq");
    let mut next_event = |ws: &mut Ws, kind: &str, price: &str| -> Value {
        let m = wait_for(ws, Duration::from_secs(20), |m| {
            m["channel"] == "walls:binance:BTCUSDT" && m["data"]["wall"]["price"].as_f64() == price.parse::<f64>().ok()
        });
        assert_eq!(m["type"], kind, "{m}");
        seq += 1;
        assert!(m["seq"].as_i64() >= Some(seq), "seq rises: {m}");
        seq = m["seq"].as_i64().unwrap_or(seq);
        m
    };
    let trade = |price: &str| sim.control("trade", &json!({"venue":"binance","symbol":"BTCUSDT","price":price}));
    // A bid far below the price, placed and removed with no trade near it: pulled.
    let qty = format!("{}", (level("bids", 3) * 300.0).ceil());
    let placed = sim.control("level", &json!({"venue":"binance","symbol":"BTCUSDT","side":"bid","depth":5,"qty":qty}));
    let bid = placed["price"].as_str().expect("placed price").to_owned();
    next_event(&mut ws, "wall.appeared", &bid);
    sim.control("level", &json!({"venue":"binance","symbol":"BTCUSDT","side":"bid","price":bid,"qty":"0"}));
    let gone = next_event(&mut ws, "wall.gone", &bid);
    the_same_everywhere(&server, &gone, &pulled, "bid", &bid, "pulled");
    // An ask traded at while it stood, then removed: filled. A trade above where it will stand
    // comes first (so the one at the ask moves no trade watermark) and the price is back at the
    // mid at once each time, so only the book's own trades say it was reached: the stream's
    // reading of the watermarks between its looks, before, could call such a wall `pulled`.
    let beyond = truth["asks"][8][0].as_str().and_then(|s| s.parse::<f64>().ok()).expect("a true price");
    trade(&format!("{beyond:.2}"));
    trade(&mid);
    let qty = format!("{}", (level("asks", 3) * 300.0).ceil());
    let placed = sim.control("level", &json!({"venue":"binance","symbol":"BTCUSDT","side":"ask","depth":5,"qty":qty}));
    let ask = placed["price"].as_str().expect("placed price").to_owned();
    assert!(ask.parse::<f64>().is_ok_and(|a| a < beyond), "{ask} below {beyond}");
    next_event(&mut ws, "wall.appeared", &ask);
    trade(&ask);
    trade(&mid);
    std::thread::sleep(Duration::from_millis(300));
    sim.control("level", &json!({"venue":"binance","symbol":"BTCUSDT","side":"ask","price":ask,"qty":"0"}));
    let gone = next_event(&mut ws, "wall.gone", &ask);
    the_same_everywhere(&server, &gone, &filled, "ask", &ask, "filled");
}

/// Opens `GET /v1/stream?<query>` as server-sent events; the status line and headers, and the
/// reader of the events that follow.
fn events(server: &Server, query: &str, extra: &str) -> (String, BufReader<TcpStream>) {
    events_at(server, &format!("/v1/stream?{query}"), &format!("Authorization: Bearer {}\r\n{extra}", server.key))
}

/// The next event's `id` and parsed `data` (chunked framing lines skipped), within `limit`.
fn next_event(reader: &mut BufReader<TcpStream>, limit: Duration) -> Option<(Option<i64>, Value)> {
    let (deadline, mut id, mut line) = (Instant::now() + limit, None, String::new());
    while Instant::now() < deadline {
        // A read that times out keeps what it read of the line in `line`.
        match reader.read_line(&mut line) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(_) => continue,
        }
        if let Some(v) = line.trim_end().strip_prefix("id: ") {
            id = v.parse().ok();
        } else if let Some(v) = line.trim_end().strip_prefix("data: ") {
            return Some((id, serde_json::from_str(v).expect("JSON data")));
        }
        line.clear();
    }
    None
}

#[test]
fn the_same_messages_come_as_server_sent_events_and_resume_from_the_last_id() {
    let server = Server::start(BIN, FAST);
    let (head, _) = events(&server, "channels=price:binance:NOPEUSDT", "");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    let (head, _) = events(&server, "channels=price:binance:BTCUSDT&since=3", "");
    assert!(head.starts_with("HTTP/1.1 422"), "since without alerts: {head}");
    let (head, _) = events(&server, "x=1", "");
    assert!(head.starts_with("HTTP/1.1 422"), "no channels: {head}");
    let (head, mut reader) = events(&server, "channels=price:binance:BTCUSDT,alerts,board:binance", "");
    assert!(
        head.starts_with("HTTP/1.1 200") && head.to_ascii_lowercase().contains("content-type: text/event-stream"),
        "{head}"
    );
    let mut seen = std::collections::HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while seen.len() < 2 || !seen.contains_key("price:binance:BTCUSDT") {
        assert!(Instant::now() < deadline, "first messages: {seen:?}");
        if let Some((_, m)) = next_event(&mut reader, Duration::from_secs(2)) {
            if let Some(c) = m["channel"].as_str() {
                seen.entry(c.to_owned()).or_insert(m.clone());
            }
        }
    }
    assert_eq!(
        (&seen["price:binance:BTCUSDT"]["type"], &seen["price:binance:BTCUSDT"]["seq"]),
        (&json!("snapshot"), &json!(1))
    );
    assert_eq!(seen["board:binance"]["type"], "snapshot");
    let board = server.get_authed("/v1/market?exchange=binance&interval=1h");
    assert_eq!(
        seen["board:binance"]["data"]["intervals"]["1h"].as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()),
        board.ok("market")["data"].as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()),
        "each interval as GET /v1/market has it"
    );
    drop(reader);
    // A firing, then a reconnect with Last-Event-ID before it: it comes with its inbox id.
    let key = server.key.clone();
    for s in server.volatile_pairs() {
        let body = json!({"symbol":s,"type":"pct","direction":"any","pct":0.1,"window":"5m"}).to_string();
        server.request("POST", "/v1/alerts", Some(&format!("Bearer {key}")), Some(&body)).ok("create pct");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let entry = loop {
        let inbox = server.get("/v1/inbox", Some(&key));
        if let Some(e) = inbox.ok("inbox")["data"].as_array().and_then(|a| a.last().cloned()) {
            break e;
        }
        assert!(Instant::now() < deadline, "no firing in 120 s");
        std::thread::sleep(Duration::from_millis(500));
    };
    let before = entry["id"].as_i64().expect("id") - 1;
    let (_, mut reader) = events(&server, "channels=alerts", &format!("Last-Event-ID: {before}\r\n"));
    let (id, m) = next_event(&mut reader, Duration::from_secs(5)).expect("the entry after Last-Event-ID");
    assert_eq!(
        (id, m["id"].as_i64(), &m["channel"], &m["seq"]),
        (entry["id"].as_i64(), entry["id"].as_i64(), &json!("alerts"), &json!(1))
    );
    assert_eq!(m["data"], entry["event"]);
}

/// In a cluster a firing recorded by a market node reaches a stream on any api node at once:
/// the market node announces its inbox commits on NATS and each api node's streams read the
/// inbox when they hear it, not at their one-second look. Then a sign-out on one api node ends
/// the session's page stream on the other, and a revocation ends the key's streams on both,
/// each within a second.
#[test]
fn a_cluster_pushes_firings_to_streams_on_every_api_node() {
    let postgres = pg_database();
    let nats = rampart_testkit::nats::server().url();
    let (hook, _hits) = json_receiver();
    let cfg = roomy_config("cluster-streams");
    let common = [FAST, &["--config", &cfg, "--postgres", &postgres, "--nats", &nats]].concat();
    let _market =
        Server::start_with_key(BIN, &[common.as_slice(), &["--role", "market", "--partition", "0/1"]].concat(), "");
    let api_args = [common.as_slice(), &["--role", "api", "--partitions", "1"]].concat();
    let api_a = Server::start(BIN, &api_args);
    let api_b = Server::start_with_key(BIN, &api_args, &api_a.key);
    let key = unlimited_key(BIN, &cfg, &postgres);
    let mut ws = connect(&api_b, &key).expect("a stream on api node b");
    let (head, mut sse) = events_at(&api_a, "/v1/stream?channels=alerts", &format!("Authorization: Bearer {key}\r\n"));
    assert!(head.starts_with("HTTP/1.1 200"), "an event stream on api node a: {head}");
    send(&mut ws, &json!({"op":"subscribe","id":1,"channels":["alerts"]}));
    assert_eq!(next(&mut ws, Duration::from_secs(5)), Some(Ok(json!({"type":"ack","id":1}))));
    let symbols = movers(&api_a, &key);
    assert!(symbols.len() >= 5, "moving pairs: {symbols:?}");
    let ids: Vec<i64> = symbols.iter().take(5).map(|s| create_firing(&api_a, &key, s, hook)).collect();
    let mut lags = Vec::new();
    while lags.len() < ids.len() {
        let m = wait_for(&mut ws, Duration::from_secs(60), |m| m["channel"] == "alerts");
        assert_eq!(m["type"], "alert.triggered", "{m}");
        assert!(ids.contains(&m["data"]["alert"]["id"].as_i64().unwrap_or(-1)), "{m}");
        let lag = m["ts"].as_i64().unwrap_or(0) - m["data"]["trigger"]["time"].as_i64().unwrap_or(0);
        lags.push(lag);
    }
    lags.sort_unstable();
    eprintln!("trade -> the alerts message on another api node, ms: {lags:?}");
    // Each firing's own round: the trade, the market node's commit, NATS, the inbox read. The
    // one-second look alone would put the median near 500 ms.
    assert!(lags[lags.len() / 2] < 400, "median {} ms: {lags:?}", lags[lags.len() / 2]);
    // A site session signed out on node a: its page's stream on node b ends within a second
    // (node b trusts its copy of the session for 0.5 s).
    let site = SiteSession::signin(&api_a, &key).1.expect("signed in on node a");
    let (head, mut page) =
        events_at(&api_b, "/site/v1/stream?channels=alerts", &format!("Cookie: {}\r\n", site.cookie));
    assert!(head.starts_with("HTTP/1.1 200"), "the session's page on node b: {head}");
    assert_eq!(site.change(&api_a, "POST", "/site/signout", None).status, 200);
    let signed_out = Instant::now();
    let (events, ended) = events_until_end(&mut page, Duration::from_secs(5));
    let took = signed_out.elapsed();
    eprintln!("signed out on node a: node b's page stream ended after {took:?}");
    assert!(ended && took < Duration::from_secs(1), "node b's page stream ended: {ended}, after {took:?}");
    assert_eq!(events.last().map(|m| m["reason"].clone()), Some(json!("session ended")), "{events:?}");
    // The key revoked (on the database both api nodes share): its streams end on both nodes
    // within a second of `keys revoke` returning, which waits until every node's key table has
    // the revocation.
    let (events, _) = events_until_end(&mut sse, Duration::from_millis(500));
    assert!(events.iter().any(|m| m["channel"] == "alerts"), "the firings reached node a's event stream: {events:?}");
    let listed = std::process::Command::new(BIN)
        .args(["keys", "list", "--config", &cfg, "--postgres", &postgres])
        .output()
        .expect("keys list");
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    let id = listed.lines().last().and_then(|l| l.split('\t').next()).expect("the newest key's id").to_owned();
    let revoke = std::process::Command::new(BIN)
        .args(["keys", "revoke", &id, "--config", &cfg, "--postgres", &postgres])
        .output()
        .expect("keys revoke");
    assert!(revoke.status.success(), "{}", String::from_utf8_lossy(&revoke.stderr));
    let revoked = Instant::now();
    let (_, close) = until_close(&mut ws, Duration::from_secs(5));
    let ws_took = revoked.elapsed();
    let (events, ended) = events_until_end(&mut sse, Duration::from_secs(5));
    let sse_took = revoked.elapsed();
    eprintln!("revoked: node b's WebSocket closed after {ws_took:?}, node a's event stream ended after {sse_took:?}");
    assert_eq!(close, Some((4401, "API key revoked".to_owned())));
    assert!(ws_took < Duration::from_secs(1), "node b closed {ws_took:?} after the revocation");
    assert!(ended && sse_took < Duration::from_secs(1), "node a ended: {ended}, after {sse_took:?}");
    assert_eq!(events.last().map(|m| m["reason"].clone()), Some(json!("API key revoked")), "{events:?}");
}

// ---- What admitted a stream, held against it (issue #45) ----

/// A config with the `roomy` plan (no burst limit to speak of, pct alerts, 5 streams per key)
/// and webhooks to loopback allowed.
fn admission_config(name: &str) -> String {
    let cfg = std::env::temp_dir().join(format!("rampart-streams-{name}-{}.toml", std::process::id()));
    let plan = "[plans.roomy]\napi = true\nprice_alert_cap = 1000\npct_alerts = true\nrepeat = true\nburst_per_min = 1000000\ndaily_quota = 100000000\nstream_connections = 5\n";
    std::fs::write(&cfg, format!("[webhooks]\nallow_private = true\n\n{plan}")).expect("write the config");
    cfg.display().to_string()
}

/// Opens `GET <path>` as server-sent events with `headers` (each line ending `\r\n`); the
/// status line and headers, and the reader of the events that follow.
fn events_at(server: &Server, path: &str, headers: &str) -> (String, BufReader<TcpStream>) {
    let mut tcp = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_millis(100))).expect("timeout");
    let head = format!("GET {path} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n{headers}\r\n");
    tcp.write_all(head.as_bytes()).expect("send");
    let mut reader = BufReader::new(tcp);
    let mut head = String::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !head.ends_with("\r\n\r\n") {
        assert!(Instant::now() < deadline, "no head: {head}");
        let _ = reader.read_line(&mut head);
    }
    (head, reader)
}

/// The JSON body of a refusal answered to [`events_at`] (its `Content-Length` bytes).
fn refusal_body(head: &str, reader: &mut BufReader<TcpStream>) -> Value {
    let len = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0)))
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    std::io::Read::read_exact(reader, &mut body).expect("the body");
    serde_json::from_slice(&body).expect("a JSON body")
}

/// What an event stream sends until it ends or `limit` passes: every event's data, and whether
/// the server ended the stream (the chunked body's last chunk, or the connection closed).
fn events_until_end(reader: &mut BufReader<TcpStream>, limit: Duration) -> (Vec<Value>, bool) {
    let (deadline, mut seen, mut line) = (Instant::now() + limit, Vec::new(), String::new());
    while Instant::now() < deadline {
        // A read that times out keeps what it read of the line in `line`.
        match reader.read_line(&mut line) {
            Ok(0) => return (seen, true),
            Ok(_) if line == "0\r\n" => return (seen, true),
            Ok(_) => {}
            Err(_) => continue,
        }
        if let Some(v) = line.trim_end().strip_prefix("data: ") {
            seen.push(serde_json::from_str(v).expect("JSON data"));
        }
        line.clear();
    }
    (seen, false)
}

/// Messages until the server's close frame, within `limit`: the messages, and the close's code
/// and reason (`None`: no close frame came, or the connection just ended).
fn until_close(ws: &mut Ws, limit: Duration) -> (Vec<Value>, Option<(u16, String)>) {
    let (deadline, mut seen) = (Instant::now() + limit, Vec::new());
    while Instant::now() < deadline {
        match ws.read() {
            Ok(Message::Text(t)) => seen.push(serde_json::from_str(t.as_str()).expect("a JSON message")),
            Ok(Message::Close(frame)) => return (seen, frame.map(|f| (u16::from(f.code), f.reason.to_string()))),
            Ok(_) => {}
            Err(tungstenite::Error::Io(e))
                if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return (seen, None),
        }
    }
    panic!("no close within {limit:?}; messages: {seen:?}");
}

/// Price alerts just above and just below the last price of `symbols` (0.03 % away), which the
/// simulated market crosses within seconds; made with `create` (a body in, whether it was
/// created out). Returns how many were created (one whose side the price crossed meanwhile is
/// refused and skipped).
fn near_price_alerts(server: &Server, reader: &str, symbols: &[String], create: impl Fn(&Value) -> bool) -> usize {
    let mut made = 0;
    for s in symbols {
        let bars = server.get(&format!("/v1/candles/{s}?exchange=binance&interval=5m&limit=1"), Some(reader));
        let close = bars.ok("candles")["data"][0]["close"].as_f64().unwrap_or(0.0);
        for (direction, factor) in [("above", 1.0003), ("below", 0.9997)] {
            let price: f64 = format!("{:.8}", close * factor).parse().unwrap_or(0.0);
            let body =
                json!({"symbol": s, "exchange": "binance", "type": "price", "direction": direction, "price": price});
            made += usize::from(create(&body));
        }
    }
    made
}

/// A new account's key on `cfg`'s `roomy` plan, labelled `label`, known to the server.
fn roomy_key(server: &Server, cfg: &str, label: &str) -> String {
    let out = server.keys(&["create", "--plan", "roomy", "--label", label, "--config", cfg]);
    assert!(out.status.success(), "{}", rampart_tests::describe_output(&out));
    let key = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim().to_owned();
    server.await_key(&key);
    key
}

/// The id `keys create` printed for the key labelled `label`.
fn key_id(server: &Server, label: &str) -> String {
    server.key_rows().into_iter().find(|k| k.label == label).map(|k| k.id).expect("the key's row")
}

/// A stream of a key stands on that key: revoked, its WebSocket and server-sent-events streams
/// end within a second with the reason, and carry no firing made after the revocation; another
/// key's stream goes on. A positive control first: both carried the account's firings.
#[test]
fn a_revoked_keys_streams_end_within_a_second_with_the_reason() {
    let cfg = admission_config("revoked");
    let server = Server::start(BIN, &[FAST, &["--config", &cfg]].concat());
    let leaked = roomy_key(&server, &cfg, "leaked");
    let other = roomy_key(&server, &cfg, "other");
    let mut ws = connect(&server, &leaked).expect("a stream of the leaked key");
    send(&mut ws, &json!({"op":"subscribe","id":1,"channels":["alerts"]}));
    assert_eq!(next(&mut ws, Duration::from_secs(5)), Some(Ok(json!({"type":"ack","id":1}))));
    let auth = format!("Authorization: Bearer {leaked}\r\n");
    let (head, mut sse) = events_at(&server, "/v1/stream?channels=alerts", &auth);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut bystander = connect(&server, &other).expect("another key's stream");
    let (hook, _hits) = json_receiver();
    let symbols = movers(&server, &leaked);
    assert!(symbols.len() >= 3, "moving pairs: {symbols:?}");
    for s in symbols.iter().take(8) {
        create_firing(&server, &leaked, s, hook);
    }
    // The positive control: a firing of the account on both streams.
    let fired = wait_for(&mut ws, Duration::from_secs(60), |m| m["channel"] == "alerts");
    assert_eq!(fired["type"], "alert.triggered", "{fired}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !events_until_end(&mut sse, Duration::from_millis(200)).0.iter().any(|m| m["channel"] == "alerts") {
        assert!(Instant::now() < deadline, "no firing on the event stream");
    }
    let asked = Instant::now();
    let out = server.keys(&["revoke", &key_id(&server, "leaked")]);
    assert!(out.status.success(), "{}", rampart_tests::describe_output(&out));
    let (revoked, revoked_ms) = (Instant::now(), rampart_tests::now_ms());
    let (seen, close) = until_close(&mut ws, Duration::from_secs(5));
    let ws_took = revoked.elapsed();
    let (events, ended) = events_until_end(&mut sse, Duration::from_secs(5));
    let sse_took = revoked.elapsed();
    eprintln!(
        "revoke took {:?}; WebSocket closed {ws_took:?} and event stream ended {sse_took:?} after it returned",
        revoked - asked
    );
    assert_eq!(close, Some((4401, "API key revoked".to_owned())), "messages before: {seen:?}");
    assert!(ws_took < Duration::from_secs(1), "the WebSocket closed {ws_took:?} after the revocation");
    assert!(ended && sse_took < Duration::from_secs(1), "the event stream ended: {ended}, after {sse_took:?}");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(
        (&last["type"], &last["code"], &last["reason"]),
        (&json!("close"), &json!(4401), &json!("API key revoked"))
    );
    // Nothing the account fired after the revocation reached either stream.
    for m in seen.iter().chain(&events).filter(|m| m["channel"] == "alerts") {
        let at = m["data"]["trigger"]["time"].as_i64().unwrap_or(i64::MAX);
        assert!(at < revoked_ms, "a firing of {at} after the revocation at {revoked_ms} was sent: {m}");
    }
    server.get("/v1/exchanges", Some(&leaked)).assert_error(401, "revoked API key", "REST");
    assert!(connect(&server, &leaked).is_err(), "a new stream of the revoked key is refused");
    send(&mut bystander, &json!({"op":"ping","id":9}));
    assert_eq!(
        wait_for(&mut bystander, Duration::from_secs(5), |m| m["type"] == "ack"),
        json!({"type":"ack","id":9}),
        "another key's stream goes on"
    );
}

/// A site page's stream stands on its session: signed out, or its key revoked, it ends within a
/// second with the reason; signed out or revoked through this process's site, at once, carrying
/// nothing fired after the answer (issue #58). The account is on `free` (no API streams at all):
/// its pages are live.
#[test]
fn a_site_stream_ends_at_sign_out_and_at_its_keys_revocation() {
    let cfg = admission_config("site-ends");
    let server = Server::start(BIN, &[FAST, &["--config", &cfg]].concat());
    let reader = roomy_key(&server, &cfg, "reader");
    let free = server.create_key("free", Some("site"));
    let open = |s: &SiteSession| {
        let (head, r) = events_at(&server, "/site/v1/stream?channels=alerts", &format!("Cookie: {}\r\n", s.cookie));
        assert!(head.starts_with("HTTP/1.1 200"), "a free account's page streams: {head}");
        r
    };
    let first = SiteSession::signin(&server, &free).1.expect("signed in");
    let mut page = open(&first);
    let symbols = movers(&server, &reader);
    let made = near_price_alerts(&server, &reader, &symbols[..symbols.len().min(5)], |body| {
        first.change(&server, "POST", "/site/v1/alerts", Some(body)).status == 200
    });
    assert!(made >= 4, "{made} alerts made");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !events_until_end(&mut page, Duration::from_millis(200)).0.iter().any(|m| m["channel"] == "alerts") {
        assert!(Instant::now() < deadline, "no firing reached the free account's page live");
    }
    // A second key of the account, and a session on it, for the revocation through the site.
    let added = first.change(&server, "POST", "/site/keys", Some(&json!({"label":"second"})));
    let second_key = added.ok("a second key")["data"]["key"].as_str().expect("its text").to_owned();
    let second_id = added.body["data"]["id"].clone();
    let second = SiteSession::signin(&server, &second_key).1.expect("signed in with the second key");
    let mut second_page = open(&second);
    // Signed out in this process: the page's stream ends at once with the reason (issue #58),
    // carrying nothing fired after the sign-out was answered.
    assert_eq!(first.change(&server, "POST", "/site/signout", None).status, 200);
    let signed_out = Instant::now();
    let signed_out_ms = rampart_tests::now_ms();
    let (events, ended) = events_until_end(&mut page, Duration::from_secs(5));
    let took = signed_out.elapsed();
    assert!(ended && took < Duration::from_secs(1), "ended: {ended}, after {took:?}");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(
        (&last["type"], &last["code"], &last["reason"]),
        (&json!("close"), &json!(4401), &json!("session ended"))
    );
    nothing_fired_after(&events, signed_out_ms, "the sign-out");
    // The second key revoked through the site, in this process: its page ends at once too.
    let revoking = second.change(&server, "DELETE", &format!("/site/keys/{second_id}"), None);
    assert_eq!(revoking.status, 200, "{}", revoking.text);
    let revoked_ms = rampart_tests::now_ms();
    let (events, ended) = events_until_end(&mut second_page, Duration::from_secs(5));
    assert!(ended, "the revoked key's page ended");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!((&last["code"], &last["reason"]), (&json!(4401), &json!("API key revoked")), "{events:?}");
    nothing_fired_after(&events, revoked_ms, "the revocation through the site");
    let (head, _) = events_at(&server, "/site/v1/stream?channels=alerts", &format!("Cookie: {}\r\n", first.cookie));
    assert!(head.starts_with("HTTP/1.1 401"), "the ended session opens nothing: {head}");
    // Its key revoked: a new session's stream ends likewise.
    let second = SiteSession::signin(&server, &free).1.expect("signed in again");
    let mut page = open(&second);
    let out = server.keys(&["revoke", &key_id(&server, "site")]);
    assert!(out.status.success(), "{}", rampart_tests::describe_output(&out));
    let revoked = Instant::now();
    let (events, ended) = events_until_end(&mut page, Duration::from_secs(5));
    let took = revoked.elapsed();
    assert!(ended && took < Duration::from_secs(1), "ended: {ended}, after {took:?}");
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!((&last["code"], &last["reason"]), (&json!(4401), &json!("API key revoked")), "{events:?}");
}

/// No `alerts` entry in `events` fired at or after `at_ms` (when what ended the stream was
/// answered).
fn nothing_fired_after(events: &[Value], at_ms: i64, what: &str) {
    for m in events.iter().filter(|m| m["channel"] == "alerts") {
        let fired = m["data"]["trigger"]["time"].as_i64().unwrap_or(i64::MAX);
        assert!(fired < at_ms, "a firing of {fired} came after {what} at {at_ms}: {m}");
    }
}

/// The site's pages have their own stream bound (per session and per account), apart from the
/// API key's: with the key's five streams open, the account's page still streams, and receives
/// its firings live; a session's ninth page stream is refused 429 with the reason.
#[test]
fn site_pages_stream_on_their_own_bound_while_the_key_holds_all_of_its() {
    let cfg = admission_config("site-bound");
    let server = Server::start(BIN, &[FAST, &["--config", &cfg]].concat());
    let key = roomy_key(&server, &cfg, "bot");
    let bots: Vec<Ws> = (0..5).map(|_| connect(&server, &key).expect("one of the key's five streams")).collect();
    match connect(&server, &key) {
        Err(tungstenite::Error::Http(r)) => assert_eq!(r.status(), 429, "a sixth"),
        other => panic!("a sixth stream of the key: {:?}", other.map(|_| "opened")),
    }
    let site = SiteSession::signin(&server, &key).1.expect("signed in");
    let cookie = format!("Cookie: {}\r\n", site.cookie);
    let (head, mut page) = events_at(&server, "/site/v1/stream?channels=alerts", &cookie);
    assert!(head.starts_with("HTTP/1.1 200"), "the page streams beside the key's full bound: {head}");
    let (hook, _hits) = json_receiver();
    for s in movers(&server, &key).iter().take(6) {
        create_firing(&server, &key, s, hook);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while !events_until_end(&mut page, Duration::from_millis(200)).0.iter().any(|m| m["channel"] == "alerts") {
        assert!(Instant::now() < deadline, "no firing reached the page live");
    }
    // The site's own bound: eight page streams per session.
    let mut more: Vec<BufReader<TcpStream>> = Vec::new();
    for _ in 0..7 {
        let (head, r) = events_at(&server, "/site/v1/stream?channels=board:binance", &cookie);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        more.push(r);
    }
    let (head, mut r) = events_at(&server, "/site/v1/stream?channels=board:binance", &cookie);
    assert!(head.starts_with("HTTP/1.1 429") && head.to_ascii_lowercase().contains("retry-after"), "{head}");
    assert_eq!(refusal_body(&head, &mut r)["error"], "at most 8 live connections per session; close a tab");
    drop(bots);
}

/// With three front threads (`--fronts 3`) a key's streams land on several of them, yet the key's
/// bound is the process's (its sixth refused 429), and a firing reaches the `alerts` connection on
/// every thread.
#[test]
fn streams_on_several_front_threads_share_the_keys_bound_and_each_gets_the_firing() {
    let cfg = admission_config("fronts");
    let server = Server::start(BIN, &[FAST, &["--config", &cfg, "--fronts", "3"]].concat());
    let key = roomy_key(&server, &cfg, "threads");
    let mut streams: Vec<Ws> = Vec::new();
    for i in 0..5 {
        let mut ws = connect(&server, &key).expect("one of the key's five streams");
        send(&mut ws, &json!({"op":"subscribe","id":i,"channels":["alerts"]}));
        assert_eq!(next(&mut ws, Duration::from_secs(5)), Some(Ok(json!({"type":"ack","id":i}))));
        streams.push(ws);
    }
    match connect(&server, &key) {
        Err(tungstenite::Error::Http(r)) => assert_eq!(r.status(), 429, "a sixth"),
        other => panic!("a sixth stream of the key: {:?}", other.map(|_| "opened")),
    }
    // The access lines reach the test through a thread reading the server's stderr, which a busy
    // machine may run late: looked for until two fronts show, for up to 10 s.
    let fronts_seen = || -> std::collections::BTreeSet<String> {
        let tail = server.stderr_tail();
        let requested = tail.iter().filter(|l| l.contains("stream requested"));
        requested
            .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("front=")).map(str::to_owned))
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut fronts = fronts_seen();
    while fronts.len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        fronts = fronts_seen();
    }
    let kept = server.stderr_tail().len();
    assert!(
        fronts.len() >= 2,
        "the key's streams were spread over front threads: {fronts:?} ({kept} stderr lines kept)"
    );
    let (hook, _hits) = json_receiver();
    for s in movers(&server, &key).iter().take(6) {
        create_firing(&server, &key, s, hook);
    }
    let first = wait_for(&mut streams[0], Duration::from_secs(60), |m| m["channel"] == "alerts");
    for (i, ws) in streams.iter_mut().enumerate().skip(1) {
        let same = wait_for(ws, Duration::from_secs(10), |m| m["channel"] == "alerts" && m["id"] == first["id"]);
        assert_eq!(same["data"], first["data"], "stream {i}: the same entry");
    }
}

/// An `alerts` resume point beyond the account's newest inbox entry (a restored database,
/// another server) is refused on every form, naming the newest id; the newest itself is taken.
#[test]
fn a_cursor_beyond_the_newest_inbox_entry_is_refused_naming_it() {
    let cfg = admission_config("cursor");
    let server = Server::start(BIN, &[FAST, &["--config", &cfg]].concat());
    let key = roomy_key(&server, &cfg, "cursor");
    let (hook, _hits) = json_receiver();
    let ids: Vec<i64> = movers(&server, &key).iter().take(4).map(|s| create_firing(&server, &key, s, hook)).collect();
    let inbox_newest = || {
        let inbox = server.get("/v1/inbox?limit=1", Some(&key));
        inbox.ok("inbox")["data"].as_array().and_then(|a| a.first()).and_then(|e| e["id"].as_i64())
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while inbox_newest().is_none() {
        assert!(Instant::now() < deadline, "no firing in 60 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    // No more firings: the newest id stays put for the checks.
    for id in ids {
        let gone = server.request("DELETE", &format!("/v1/alerts/{id}"), Some(&format!("Bearer {key}")), None);
        assert!(gone.status == 200 || gone.status == 404, "{}", gone.text);
    }
    std::thread::sleep(Duration::from_millis(500));
    let newest = inbox_newest().expect("an entry");
    let beyond = format!(
        "is beyond the newest inbox entry of this account ({newest}); resume with since at most {newest}, or without it to start after the newest"
    );
    let mut ws = connect(&server, &key).expect("connect");
    send(&mut ws, &json!({"op":"subscribe","id":1,"channels":["alerts"],"since":9_000_000_000_000i64}));
    let refused = next(&mut ws, Duration::from_secs(5)).and_then(Result::ok).expect("an answer");
    assert_eq!(refused, json!({"type":"error","id":1,"error":format!("since 9000000000000 {beyond}")}));
    send(&mut ws, &json!({"op":"subscribe","id":2,"channels":["alerts"],"since":newest + 1}));
    let refused = next(&mut ws, Duration::from_secs(5)).and_then(Result::ok).expect("an answer");
    assert_eq!(refused["error"], format!("since {} {beyond}", newest + 1));
    send(&mut ws, &json!({"op":"subscribe","id":3,"channels":["alerts"],"since":newest - 1}));
    assert_eq!(next(&mut ws, Duration::from_secs(5)), Some(Ok(json!({"type":"ack","id":3}))));
    let resumed = wait_for(&mut ws, Duration::from_secs(5), |m| m["channel"] == "alerts");
    assert_eq!(resumed["id"].as_i64(), Some(newest), "the entry after the cursor: {resumed}");
    // Server-sent events: `since` in the query and a browser's `Last-Event-ID`.
    let auth = format!("Authorization: Bearer {key}\r\n");
    let (head, mut r) = events_at(&server, "/v1/stream?channels=alerts&since=9000000000000", &auth);
    assert!(head.starts_with("HTTP/1.1 422"), "{head}");
    assert_eq!(refusal_body(&head, &mut r)["error"], format!("since 9000000000000 {beyond}"));
    let (head, mut r) =
        events_at(&server, "/v1/stream?channels=alerts", &format!("{auth}Last-Event-ID: 9000000000000\r\n"));
    assert!(head.starts_with("HTTP/1.1 422"), "{head}");
    let named = beyond.replace("since at most", "Last-Event-ID at most");
    assert_eq!(refusal_body(&head, &mut r)["error"], format!("Last-Event-ID 9000000000000 {named}"));
    let (head, _) = events_at(&server, &format!("/v1/stream?channels=alerts&since={newest}"), &auth);
    assert!(head.starts_with("HTTP/1.1 200"), "the newest itself: {head}");
    // The site's pages: its market stream and its live inbox.
    let site = SiteSession::signin(&server, &key).1.expect("signed in");
    let resume = format!("Cookie: {}\r\nLast-Event-ID: 9000000000000\r\n", site.cookie);
    for path in ["/site/v1/stream?channels=alerts", "/site/events"] {
        let (head, mut r) = events_at(&server, path, &resume);
        assert!(head.starts_with("HTTP/1.1 422"), "{path}: {head}");
        assert_eq!(refusal_body(&head, &mut r)["error"], format!("Last-Event-ID 9000000000000 {named}"), "{path}");
    }
}

// ---- Retention (issue #62) ----

/// With every kind of row kept one second, a firing's inbox entry and its fired one-shot alert
/// are pruned within a prune round (its delivery settled first), and an `alerts` resume from
/// before what was pruned is refused, naming the bound: the channel never skips entries
/// silently.
#[test]
fn what_retention_no_longer_keeps_is_pruned_and_a_resume_before_it_is_refused() {
    let cfg = std::env::temp_dir().join(format!("rampart-streams-retention-{}.toml", std::process::id()));
    let text = "[webhooks]\nallow_private = true\n[retention]\ninbox = \"1s\"\noutbox = \"1s\"\nalerts = \"1s\"\n";
    std::fs::write(&cfg, text).expect("write the config");
    let server = Server::start(BIN, &[FAST, &["--config", &cfg.display().to_string()]].concat());
    let key = server.key.clone();
    let (port, hits) = json_receiver();
    for s in server.volatile_pairs() {
        let body = json!({"symbol":s,"type":"pct","direction":"any","pct":0.1,"window":"5m","webhook_url":format!("http://127.0.0.1:{port}/")});
        server.request("POST", "/v1/alerts", Some(&format!("Bearer {key}")), Some(&body.to_string())).ok("create pct");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let fired = loop {
        if let Some(h) = hits.lock().expect("hits").first().cloned() {
            break h["alert"]["id"].as_i64().expect("the webhook's alert id");
        }
        assert!(Instant::now() < deadline, "no firing in 120 s");
        std::thread::sleep(Duration::from_millis(200));
    };
    // Gone within a prune round (every 10 s) past its second: the entry and the alert.
    let deadline = Instant::now() + Duration::from_secs(30);
    let pruned_through = loop {
        let inbox = server.get("/v1/inbox", Some(&key)).ok("inbox")["data"].clone();
        let listed = server.get("/v1/alerts?status=all", Some(&key)).ok("alerts")["data"].clone();
        // An entry's `event` is the webhook's body.
        let entry_kept = inbox.as_array().is_some_and(|a| a.iter().any(|e| e["event"]["alert"]["id"] == fired));
        let alert_kept = listed.as_array().is_some_and(|a| a.iter().any(|a| a["id"] == fired));
        if !entry_kept && !alert_kept {
            break inbox.as_array().and_then(|a| a.iter().filter_map(|e| e["id"].as_i64()).min());
        }
        assert!(Instant::now() < deadline, "still kept after 30 s: entry {entry_kept}, alert {alert_kept}");
        // Within the key's plan's requests a minute.
        std::thread::sleep(Duration::from_millis(1_500));
    };
    // A resume from the start: entries after it were removed, so it is refused.
    let (head, mut reader) = events(&server, "channels=alerts&since=0", "");
    assert!(head.starts_with("HTTP/1.1 422"), "{head} (oldest kept: {pruned_through:?})");
    let refusal = refusal_body(&head, &mut reader);
    let says = refusal["error"].as_str().unwrap_or_default();
    assert!(says.starts_with("since 0 is older than the inbox this server keeps (entries up to "), "{says}");
    let _ = std::fs::remove_file(&cfg);
}
