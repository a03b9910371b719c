//! `GET /v1/stream` through the real binary on the simulated market (`decisions.md` §12): the
//! refusals before the upgrade, every op's answer and every malformed op's error, the price
//! channel's snapshot and changes with `seq` rising by one, heartbeats, an alert's firing pushed
//! on `alerts` with the webhook's body and the inbox id to resume from, a resume with `since`,
//! the bound on a key's open streams, a client that stops reading (conflated within its bound,
//! nobody else delayed, `seq` without a gap when it reads again), and on the live feed against
//! the venue simulator a level broken by a trade and walls placed, pulled and filled.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use rampart_tests::cluster::{create_firing, movers, roomy_config, unlimited_key};
use rampart_tests::{json_receiver, pg_database, Server, SimVenue, FAST};
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
    let sim = SimVenue::start(BIN, &["--sim-pairs", "8", "--venues", "binance"]);
    let config = sim.config(&["binance"], 8, "").display().to_string();
    let server = Server::start(BIN, &["--feed", "live", "--config", &config, "--shards", "1", "--venues", "binance"]);
    server.wait_venue("binance", "state ok", 30, |h| h["state"] == "ok");
    (sim, server)
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

#[test]
fn walls_appear_then_go_pulled_or_filled() {
    let (sim, server) = live();
    let mut ws = subscribed(&server, "walls:binance:BTCUSDT");
    let snap = wait_for(&mut ws, Duration::from_secs(5), |m| m["channel"] == "walls:binance:BTCUSDT");
    assert_eq!((&snap["type"], &snap["data"]["symbol"]), (&json!("snapshot"), &json!("BTCUSDT")));
    assert!(snap["data"]["snapshot"]["walls"].is_array(), "{snap}");
    let truth = sim.get("book?venue=binance&symbol=BTCUSDT");
    let size = |side: &str| -> f64 { truth[side][3][1].as_str().and_then(|s| s.parse().ok()).expect("a true size") };
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
    // A bid far below the price, placed and removed with no trade near it: pulled.
    let placed = sim.control("level", &json!({"venue":"binance","symbol":"BTCUSDT","side":"bid","depth":5,"qty":format!("{}", (size("bids") * 300.0).ceil())}));
    let bid = placed["price"].as_str().expect("placed price").to_owned();
    next_event(&mut ws, "wall.appeared", &bid);
    sim.control("level", &json!({"venue":"binance","symbol":"BTCUSDT","side":"bid","price":bid,"qty":"0"}));
    let gone = next_event(&mut ws, "wall.gone", &bid);
    assert_eq!(gone["data"]["reason"], "pulled", "{gone}");
    // An ask that a trade reaches before it goes: filled.
    let placed = sim.control("level", &json!({"venue":"binance","symbol":"BTCUSDT","side":"ask","depth":5,"qty":format!("{}", (size("asks") * 300.0).ceil())}));
    let ask = placed["price"].as_str().expect("placed price").to_owned();
    next_event(&mut ws, "wall.appeared", &ask);
    sim.control("trade", &json!({"venue":"binance","symbol":"BTCUSDT","price":ask}));
    std::thread::sleep(Duration::from_millis(300));
    sim.control("level", &json!({"venue":"binance","symbol":"BTCUSDT","side":"ask","price":ask,"qty":"0"}));
    let gone = next_event(&mut ws, "wall.gone", &ask);
    assert_eq!(gone["data"]["reason"], "filled", "{gone}");
}

/// Opens `GET /v1/stream?<query>` as server-sent events; the status line and headers, and the
/// reader of the events that follow.
fn events(server: &Server, query: &str, extra: &str) -> (String, BufReader<TcpStream>) {
    let mut tcp = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_millis(200))).expect("timeout");
    let head = format!(
        "GET /v1/stream?{query} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nAccept: text/event-stream\r\n{extra}\r\n",
        server.key
    );
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

/// The next event's `id` and parsed `data` (chunked framing lines skipped), within `limit`.
fn next_event(reader: &mut BufReader<TcpStream>, limit: Duration) -> Option<(Option<i64>, Value)> {
    let deadline = Instant::now() + limit;
    let mut id = None;
    while Instant::now() < deadline {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(_) => continue,
        }
        let line = line.trim_end();
        if let Some(v) = line.strip_prefix("id: ") {
            id = v.parse().ok();
        } else if let Some(v) = line.strip_prefix("data: ") {
            return Some((id, serde_json::from_str(v).expect("JSON data")));
        }
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
/// inbox when they hear it, not at their one-second look.
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
}
