//! The Telegram channel through the real binary (`decisions.md` §10): a Bot API stand-in on
//! loopback receives `sendMessage` for an API alert's firing and for a density alert's firing,
//! exactly once each and only for accounts with a chat id; a failed attempt is retried 10 s
//! later on the webhook schedule; the bot token is never written to the database.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{now_ms, Server, SimVenue, SiteSession};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");
const TOKEN: &str = "123456:TEST_token-x";
const SYMBOL: &str = "BTCUSDT";
/// The chat whose first message the stand-in refuses (502), as Telegram does when it is down.
const FLAKY_CHAT: &str = "@flaky_chat";

/// One request the stand-in received.
#[derive(Clone, Debug)]
struct Call {
    at_ms: i64,
    method: String,
    path: String,
    headers: HashMap<String, String>,
    body: Value,
    /// The status it was answered with.
    status: u16,
}

/// A Bot API stand-in: answers `sendMessage` like Telegram (`{"ok":true,...}`), on kept-alive
/// connections, except the first message to [`FLAKY_CHAT`] (502).
struct Bot {
    port: u16,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl Bot {
    fn start() -> Bot {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let calls = Arc::new(Mutex::new(Vec::new()));
        let c = calls.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let c = c.clone();
                thread::spawn(move || serve(stream, &c));
            }
        });
        Bot { port, calls }
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// The calls whose body's `chat_id` is `chat`.
    fn to(&self, chat: &Value) -> Vec<Call> {
        self.calls().into_iter().filter(|c| c.body["chat_id"] == *chat).collect()
    }

    /// Waits up to `secs` for `n` calls to `chat`.
    fn wait_for(&self, chat: &Value, n: usize, secs: u64, server: &Server) -> Vec<Call> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let calls = self.to(chat);
            if calls.len() >= n {
                return calls;
            }
            assert!(
                Instant::now() < deadline,
                "{} of {n} messages to {chat} in {secs} s: {calls:?}\n{}",
                calls.len(),
                server.diagnostics()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Serves requests on one connection until the client closes it.
fn serve(stream: TcpStream, calls: &Mutex<Vec<Call>>) {
    let Ok(mut out) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (parts.next().unwrap_or("").to_owned(), parts.next().unwrap_or("").to_owned());
        let mut headers = HashMap::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" {
                break;
            }
            if let Some((k, v)) = h.trim_end().split_once(": ") {
                headers.insert(k.to_ascii_lowercase(), v.to_owned());
            }
        }
        let len = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0usize);
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let answer = {
            let Ok(mut calls) = calls.lock() else { return };
            let first_to_flaky =
                body["chat_id"] == FLAKY_CHAT && !calls.iter().any(|c| c.body["chat_id"] == FLAKY_CHAT);
            let (status, text) = if first_to_flaky {
                (502, r#"{"ok":false,"error_code":502,"description":"Bad Gateway"}"#.to_owned())
            } else {
                (200, format!(r#"{{"ok":true,"result":{{"message_id":{}}}}}"#, calls.len() + 1))
            };
            calls.push(Call { at_ms: now_ms(), method, path, headers, body, status });
            let reason = if status == 200 { "OK" } else { "Bad Gateway" };
            format!(
                "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
                text.len()
            )
        };
        if out.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// A key of a new account on plan `big`, signed in on the site with its chat id set (`None`:
/// no chat).
fn account(server: &Server, config: &str, chat: Option<&str>) -> String {
    let out = server.keys(&["create", "--plan", "big", "--config", config]);
    assert!(out.status.success(), "{out:?}");
    let key = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").trim().to_owned();
    server.await_key(&key);
    if let Some(chat) = chat {
        let (_, session) = SiteSession::signin(server, &key);
        let session = session.expect("signed in");
        let set = session.change(server, "PUT", "/site/channels", Some(&json!({ "telegramChatId": chat })));
        assert_eq!(set.ok("set chat")["data"], json!({"telegramChatId": chat, "telegramEnabled": true}));
    }
    key
}

fn price(server: &Server) -> f64 {
    let r = server.get_authed(&format!("/v1/symbols/{SYMBOL}?exchange=binance"));
    r.ok("symbol")["data"]["price"].as_f64().expect("a price")
}

/// A price alert 2 % above `p` (the simulated market does not get there by itself), no webhook.
fn alert_above(server: &Server, key: &str, p: f64) -> i64 {
    let level = (p * 1.02 * 100.0).round() / 100.0;
    let body = json!({"exchange":"binance","symbol":SYMBOL,"type":"price","direction":"above","price":level});
    let reply = server.request("POST", "/v1/alerts", Some(&format!("Bearer {key}")), Some(&body.to_string()));
    reply.ok("create alert")["data"]["id"].as_i64().expect("id")
}

/// The size of a bid wall worth far more than anything the simulated book holds.
fn wall_qty(sim: &SimVenue) -> f64 {
    let truth = sim.get(&format!("book?venue=binance&symbol={SYMBOL}"));
    let level_qty: f64 = truth["bids"][3][1].as_str().and_then(|s| s.parse().ok()).expect("a true bid size");
    (level_qty * 300.0).ceil().max(1.0)
}

#[test]
fn firings_reach_the_accounts_telegram_chats_and_a_failure_is_retried_ten_seconds_later() {
    let bot = Bot::start();
    let sim = SimVenue::start(BIN, &["--sim-pairs", "8", "--venues", "binance"]);
    let extra = format!(
        "[plans.big]\napi = true\nprice_alert_cap = 50\npct_alerts = true\nrepeat = true\nburst_per_min = 10000\n\
         daily_quota = 1000000\n[channels.telegram]\nbase_url = \"http://127.0.0.1:{}\"\ntoken = \"{TOKEN}\"\n",
        bot.port
    );
    let config = sim.config(&["binance"], 8, &extra).display().to_string();
    let server = Server::start(BIN, &["--feed", "live", "--config", &config, "--shards", "1", "--venues", "binance"]);
    server.wait_venue("binance", "state ok", 30, |h| h["state"] == "ok");
    let a = account(&server, &config, Some("4242"));
    let b = account(&server, &config, Some(FLAKY_CHAT));
    let c = account(&server, &config, None);

    // API alerts of all three fire on one trade; the two with a chat get a message.
    let p = price(&server);
    let ids: Vec<i64> = [&a, &b, &c].iter().map(|k| alert_above(&server, k, p)).collect();
    sim.control("trade", &json!({"venue":"binance","symbol":SYMBOL,"price":format!("{:.2}", p * 1.03)}));
    let to_a = bot.wait_for(&json!(4242), 1, 30, &server);
    let first = &to_a[0];
    assert_eq!((first.method.as_str(), first.path.as_str()), ("POST", format!("/bot{TOKEN}/sendMessage").as_str()));
    assert_eq!(first.headers.get("content-type").map(String::as_str), Some("application/json"));
    assert!(!first.headers.contains_key("x-service-event"), "a webhook header on a Telegram call: {first:?}");
    let text = first.body["text"].as_str().unwrap_or_default();
    assert!(text.starts_with(&format!("{SYMBOL} · binance\nprice alert #{}: above ", ids[0])), "{text}");

    // A density alert made on the site fires into the same chat when a wall is placed.
    let (_, session) = SiteSession::signin(&server, &a);
    let session = session.expect("signed in");
    let qty = wall_qty(&sim);
    let min_usd = (qty * p * 0.5).floor();
    let density = json!({"type":"density","exchange":"binance","symbol":SYMBOL,"side":"bid","min_usd":min_usd});
    let made = session.change(&server, "POST", "/site/site-alerts", Some(&density));
    let density_id = made.ok("density alert")["data"]["id"].as_i64().expect("id");
    sim.control("level", &json!({"venue":"binance","symbol":SYMBOL,"side":"bid","depth":5,"qty":format!("{qty}")}));
    let to_a = bot.wait_for(&json!(4242), 2, 30, &server);
    let text = to_a[1].body["text"].as_str().unwrap_or_default();
    // A density alert is a wall alert with event `appeared` (decisions.md §15): said in words.
    assert!(
        text.starts_with(&format!("{SYMBOL} · binance\nwall alert #{density_id}: ")) && text.contains(" bid wall at "),
        "{text}"
    );

    // B's first attempt was refused: retried at first failure + 10 s, then delivered.
    let to_b = bot.wait_for(&json!(FLAKY_CHAT), 2, 30, &server);
    assert_eq!((to_b[0].status, to_b[1].status), (502, 200));
    assert_eq!(to_b[0].body, to_b[1].body, "the same message again");
    let gap = to_b[1].at_ms - to_b[0].at_ms;
    assert!((9_500..14_000).contains(&gap), "attempt 2 came {gap} ms after attempt 1");

    // Exactly once each, nothing for the account without a chat, nothing else at all.
    thread::sleep(Duration::from_secs(1));
    assert_eq!(bot.calls().len(), 4, "{:?}", bot.calls());
    let metrics = server.get("/metrics", None).text;
    for (outcome, n) in [("delivered", 3), ("rejected", 1)] {
        let line = format!("rampart_telegram_attempts_total{{outcome=\"{outcome}\"}} {n}");
        assert!(metrics.lines().any(|l| l == line), "no '{line}' in:\n{metrics}");
    }
    let db = rusqlite::Connection::open(server.data_dir.join("rampart.db")).expect("open the database");
    db.busy_timeout(Duration::from_secs(10)).expect("busy timeout");
    let rows: Vec<(String, String, String, i64, Option<String>)> = db
        .prepare("SELECT url, body, state, attempts, last_error FROM outbox WHERE channel = 'telegram' ORDER BY id")
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?.collect())
        .expect("telegram rows");
    let mut summary: Vec<(&str, &str, i64)> = rows.iter().map(|r| (r.0.as_str(), r.2.as_str(), r.3)).collect();
    summary.sort();
    assert_eq!(summary, [("4242", "delivered", 1), ("4242", "delivered", 1), (FLAKY_CHAT, "delivered", 2)]);
    let secret = TOKEN.split_once(':').map_or(TOKEN, |t| t.1);
    let leaked: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM outbox WHERE instr(url || body || COALESCE(last_error, ''), ?1) > 0",
            [secret],
            |r| r.get(0),
        )
        .expect("count");
    assert_eq!(leaked, 0, "the token was stored");
    assert!(!server.stderr_tail().iter().any(|l| l.contains(secret)), "the token was logged");
}
