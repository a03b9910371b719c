//! The delivery log and redelivery (`decisions.md` §13) through the real binary: an alert whose
//! receiver failed twice and then answered has three rows with the right outcomes and statuses;
//! a firing whose delivery failed for good is redelivered with the same body and pair; a pending
//! delivery cannot be redelivered; unknown alerts and firings are 404. (The §6 schedule puts
//! the third attempt a minute after the first: the test waits for it.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{Reply, Server, SimVenue};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

/// What the receiver got per path, and whether `/always` still fails.
#[derive(Default)]
struct Seen {
    bodies: Vec<(String, String)>,
    twice: usize,
    always_fails: bool,
}

/// A receiver: `/twice` answers 500 twice then 200; `/always` 500 while `always_fails`.
fn receiver() -> (u16, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen = Arc::new(Mutex::new(Seen { always_fails: true, ..Seen::default() }));
    let s = seen.clone();
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let s = s.clone();
            thread::spawn(move || {
                let mut stream = stream;
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                let mut len = 0;
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                    if let Some((k, v)) = h.trim_end().split_once(": ") {
                        if k.eq_ignore_ascii_case("content-length") {
                            len = v.parse().unwrap_or(0);
                        }
                    }
                }
                let mut body = vec![0u8; len];
                let _ = reader.read_exact(&mut body);
                let status = {
                    let Ok(mut g) = s.lock() else { return };
                    g.bodies.push((path.clone(), String::from_utf8_lossy(&body).into_owned()));
                    match path.as_str() {
                        "/twice" => {
                            g.twice += 1;
                            if g.twice <= 2 {
                                500
                            } else {
                                200
                            }
                        }
                        _ if g.always_fails => 500,
                        _ => 200,
                    }
                };
                let _ = write!(stream, "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            });
        }
    });
    (port, seen)
}

fn log(server: &Server, id: i64) -> Vec<Value> {
    let r = server.get_authed(&format!("/v1/alerts/{id}/deliveries"));
    r.ok("deliveries")["data"].as_array().cloned().expect("rows")
}

fn wait_log(server: &Server, id: i64, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let rows = log(server, id);
        if done(&rows) {
            return rows;
        }
        assert!(Instant::now() < deadline, "{what} not seen in 120 s: {rows:?}");
        thread::sleep(Duration::from_secs(2));
    }
}

fn post(server: &Server, path: &str, body: Option<&Value>) -> Reply {
    let body = body.map(Value::to_string);
    server.request("POST", path, Some(&format!("Bearer {}", server.key)), body.as_deref())
}

#[test]
fn the_log_shows_every_attempt_and_a_firing_failed_for_good_is_redelivered() {
    let (port, seen) = receiver();
    let sim = SimVenue::start(BIN, &["--sim-pairs", "4", "--venues", "binance"]);
    let config = sim.config(&["binance"], 4, "[webhooks]\nallow_private = true\n").display().to_string();
    let server = Server::start(BIN, &["--feed", "live", "--config", &config, "--shards", "1", "--venues", "binance"]);
    server.wait_venue("binance", "state ok", 40, |h| h["state"] == "ok");
    let p = server.get_authed("/v1/symbols/BTCUSDT?exchange=binance").ok("price")["data"]["price"].as_f64().expect("p");
    let create = |path: &str| {
        let body = json!({"exchange":"binance","symbol":"BTCUSDT","type":"price","direction":"above",
                          "price": (p * 1.02 * 100.0).round() / 100.0, "webhook_url": format!("http://127.0.0.1:{port}{path}")});
        post(&server, "/v1/alerts", Some(&body)).ok("create")["data"]["id"].as_i64().expect("id")
    };
    let (twice, always) = (create("/twice"), create("/always"));
    sim.control("trade", &json!({"venue":"binance","symbol":"BTCUSDT","price":format!("{:.2}", p * 1.03)}));

    // While the failing delivery waits for its next attempt it cannot be redelivered.
    let rows = wait_log(&server, always, "a first failed attempt", |r| r.iter().any(|x| x["outcome"] == "failed"));
    let trigger = rows[0]["triggerTime"].as_i64().expect("triggerTime");
    let pending = post(&server, &format!("/v1/alerts/{always}/deliveries/{trigger}/redeliver"), None);
    pending.assert_error(422, "the delivery is still pending", "redeliver while pending");

    let rows = wait_log(&server, twice, "three attempts", |r| r.iter().any(|x| x["outcome"] == "delivered"));
    let seen_rows: Vec<(i64, &str, Option<i64>)> = rows
        .iter()
        .map(|r| (r["attempt"].as_i64().unwrap_or(0), r["outcome"].as_str().unwrap_or(""), r["status"].as_i64()))
        .collect();
    assert_eq!(
        seen_rows,
        [(3, "delivered", Some(200)), (2, "failed", Some(500)), (1, "failed", Some(500))],
        "{rows:?}"
    );
    for r in &rows {
        assert_eq!(r["triggerTime"].as_i64(), rows[0]["triggerTime"].as_i64(), "one firing: {r}");
        assert!(
            r["latencyMs"].as_i64().is_some_and(|l| l >= 0)
                && rampart_tests::is_iso8601(r["at"].as_str().unwrap_or("")),
            "{r}"
        );
    }
    assert_eq!((rows[0]["error"].clone(), rows[1]["error"].clone()), (Value::Null, json!("HTTP 500")));

    let rows = wait_log(&server, always, "three failed attempts", |r| {
        r.iter().filter(|x| x["outcome"] == "failed").count() == 3 && !r.iter().any(|x| x["outcome"] == "pending")
    });
    assert_eq!(rows.len(), 3, "failed for good after three: {rows:?}");
    if let Ok(mut g) = seen.lock() {
        g.always_fails = false;
    }
    let queued = post(&server, &format!("/v1/alerts/{always}/deliveries/{trigger}/redeliver"), None);
    assert_eq!(queued.ok("redeliver")["data"], json!({"alertId": always, "triggerTime": trigger, "queued": true}));
    let rows = wait_log(&server, always, "the redelivery", |r| r.iter().any(|x| x["outcome"] == "delivered"));
    assert_eq!((rows[0]["attempt"].as_i64(), rows[0]["triggerTime"].as_i64()), (Some(1), Some(trigger)));
    let bodies: Vec<String> = seen
        .lock()
        .map(|g| g.bodies.iter().filter(|(p, _)| p == "/always").map(|(_, b)| b.clone()).collect())
        .unwrap_or_default();
    assert_eq!(bodies.len(), 4, "three attempts and the redelivery");
    assert!(bodies.iter().all(|b| b == &bodies[0]), "the same body, byte for byte");
    let v: Value = serde_json::from_str(&bodies[3]).expect("a JSON body");
    assert_eq!(
        (v["alert"]["id"].as_i64(), v["trigger"]["time"].as_i64()),
        (Some(always), Some(trigger)),
        "the same pair"
    );

    // Refusals.
    server.get_authed("/v1/alerts/999999/deliveries").assert_error(404, "unknown alert", "unknown alert");
    server.get_authed(&format!("/v1/alerts/{twice}/deliveries?limit=0")).assert_error(
        422,
        "invalid limit '0'. Allowed: 1 to 100",
        "limit 0",
    );
    post(&server, &format!("/v1/alerts/{always}/deliveries/123/redeliver"), None).assert_error(
        404,
        "unknown delivery",
        "unknown firing",
    );
    let deleted =
        server.request("DELETE", &format!("/v1/alerts/{twice}"), Some(&format!("Bearer {}", server.key)), None);
    deleted.ok("delete");
    server.get_authed(&format!("/v1/alerts/{twice}/deliveries")).assert_error(404, "unknown alert", "a deleted alert");
    let other = server.create_key("developer", None);
    let r = server.get(&format!("/v1/alerts/{always}/deliveries"), Some(&other));
    r.assert_error(404, "unknown alert", "another account's alert");
}
