//! The fault test's steady load and its webhook receiver, both in the client's host: alerts
//! created through the api nodes in turn (the next one when one fails), each a one-shot that
//! fires at its pair's next trade, and a receiver that keeps every delivery's body.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout_connect(Duration::from_secs(2))
        .timeout(Duration::from_secs(5))
        .max_idle_connections(0)
        .build()
}

fn answer(result: Result<ureq::Response, ureq::Error>) -> Result<(u16, Value), String> {
    match result {
        Ok(r) | Err(ureq::Error::Status(_, r)) => {
            let status = r.status();
            Ok((status, serde_json::from_str(&r.into_string().unwrap_or_default()).unwrap_or(Value::Null)))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// `GET url`: the status and JSON body, or the transport error.
pub fn get(url: &str) -> Result<(u16, Value), String> {
    answer(agent().get(url).call())
}

/// `GET url` with a key.
pub fn get_keyed(url: &str, key: &str) -> Result<(u16, Value), String> {
    answer(agent().get(url).set("Authorization", &format!("Bearer {key}")).call())
}

/// `POST url` with a key and a JSON body.
pub fn post(url: &str, key: &str, body: &Value) -> Result<(u16, Value), String> {
    let request = agent().post(url).set("Authorization", &format!("Bearer {key}"));
    answer(request.set("Content-Type", "application/json").send_string(&body.to_string()))
}

/// The Binance pairs 0.3 % or more from the day's open (a 0.1 % alert over the day fires at
/// their next trade), as `rampart_tests::cluster::movers` picks them.
pub fn movers(base: &str, key: &str) -> Vec<String> {
    let Ok((_, list)) = get_keyed(&format!("{base}/v1/exchanges/binance/symbols"), key) else { return Vec::new() };
    let symbols = list["data"].as_array().cloned().unwrap_or_default();
    let mut out = Vec::new();
    for s in symbols.iter().filter_map(|s| s["symbol"].as_str()) {
        let url = format!("{base}/v1/candles/{s}?exchange=binance&interval=1d&limit=1");
        let Ok((200, bars)) = get_keyed(&url, key) else { continue };
        let bar = &bars["data"][0];
        let (open, close) = (bar["open"].as_f64().unwrap_or(0.0), bar["close"].as_f64().unwrap_or(0.0));
        if open > 0.0 && (close / open - 1.0).abs() >= 0.003 {
            out.push(s.to_owned());
        }
    }
    out
}

/// What the load saw: acknowledged alerts (id → creation's second since the start) and the
/// creates that were not acknowledged, by reason.
#[derive(Default)]
pub struct Tally {
    pub acked: BTreeMap<i64, f64>,
    pub refused: BTreeMap<String, usize>,
    /// Reads (`GET /v1/levels/<pair>` from each api node in turn) by answer.
    pub reads: BTreeMap<String, usize>,
}

/// A read's answer, as the tally counts it.
fn read_answer(api: &str, key: &str, symbol: &str) -> String {
    match get_keyed(&format!("{api}/v1/levels/{symbol}?exchange=binance"), key) {
        Ok((status, v)) if status != 200 => format!("{status} {}", v["error"].as_str().unwrap_or_default()),
        Ok(_) => "200".into(),
        Err(_) => "no answer".into(),
    }
}

/// The load: creates alerts every `period` until `stop`, through the api nodes in turn.
pub fn run(
    apis: Vec<String>,
    key: String,
    symbols: Vec<String>,
    hook: String,
    period: Duration,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<Tally> {
    thread::spawn(move || {
        let started = std::time::Instant::now();
        let mut tally = Tally::default();
        let mut n = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let symbol = &symbols[n % symbols.len()];
            let body = json!({"symbol": symbol, "type": "pct", "direction": "any", "pct": 0.1, "window": "1d",
                              "webhook_url": hook});
            for attempt in 0..apis.len() {
                let api = &apis[(n + attempt) % apis.len()];
                match post(&format!("{api}/v1/alerts"), &key, &body) {
                    Ok((200 | 201, v)) => {
                        let id = v["data"]["id"].as_i64().expect("an acknowledged alert has an id");
                        tally.acked.insert(id, started.elapsed().as_secs_f64());
                        break;
                    }
                    Ok((status, v)) => {
                        let why = format!("{status} {}", v["error"].as_str().unwrap_or_default());
                        *tally.refused.entry(why).or_default() += 1;
                    }
                    Err(_) => *tally.refused.entry("no answer".into()).or_default() += 1,
                }
            }
            *tally.reads.entry(read_answer(&apis[n % apis.len()], &key, symbol)).or_default() += 1;
            n += 1;
            thread::sleep(period);
        }
        tally
    })
}

/// A webhook receiver on `ip` (in the calling thread's host) that answers 200 and keeps each
/// body: its URL and the bodies.
pub fn receiver(ip: std::net::Ipv4Addr) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = std::net::TcpListener::bind((ip, 9000)).expect("bind the receiver");
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let kept = bodies.clone();
    thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let kept = kept.clone();
            thread::spawn(move || {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                rampart_tests::receive_json(stream, &kept);
            });
        }
    });
    (format!("http://{ip}:9000/hook"), bodies)
}
