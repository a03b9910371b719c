//! The site's routes beyond sign-in, through the real binary (`decisions.md` §10): the pages
//! and their files with a strict Content-Security-Policy; `/site/v1/...` (the API's routes with
//! the session, on the site's own budget; no webhook URL; no operator routes); the account's
//! keys and Telegram chat; live push of the inbox as server-sent events, resumed after a
//! reconnect. Every refusal, and one account never reaching another's data.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use rampart_tests::{Server, SimVenue, SiteSession};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

#[test]
fn the_pages_are_served_with_a_strict_policy() {
    let server = Server::start(BIN, &["--sim-pairs", "4"]);
    for (path, kind) in [
        ("/", "text/html"),
        ("/assets/app.js", "text/javascript"),
        ("/assets/app.css", "text/css"),
        ("/assets/lightweight-charts.js", "text/javascript"),
    ] {
        let r = server.request_with("GET", path, &[], None);
        assert_eq!(r.status, 200, "{path}");
        assert!(
            r.header("content-type").is_some_and(|t| t.starts_with(kind)),
            "{path}: {:?}",
            r.header("content-type")
        );
        let csp = r.header("content-security-policy").unwrap_or("");
        for part in ["default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"] {
            assert!(csp.contains(part), "{path}: {csp}");
        }
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        let tag = r.header("etag").expect("an ETag").to_owned();
        let again = server.request_with("GET", path, &[("If-None-Match", &tag)], None);
        assert_eq!(again.status, 304, "{path}: unchanged");
    }
    let page = server.request_with("GET", "/", &[], None).text;
    assert!(page.contains("/assets/app.js") && !page.contains("<script>"), "scripts are files, never inline");
    server.request_with("GET", "/assets/nope.js", &[], None).assert_error(404, "not found", "unknown file");
    server.request_with("POST", "/", &[], Some("{}")).assert_error(405, "method not allowed", "POST /");
    let json = server.request_with("GET", "/site/session", &[], None);
    assert!(json.header("content-security-policy").is_some(), "the site's JSON answers too");
}

#[test]
fn site_v1_serves_the_api_with_the_session_and_its_own_budget() {
    let server = Server::start(BIN, &["--sim-pairs", "4"]);
    let free = server.create_key("free", None);
    let a = SiteSession::signin(&server, &free).1.expect("signed in");
    // The API's bodies: the same exchanges as /v1; the free plan still has no API.
    let mine = a.get(&server, "/site/v1/exchanges");
    assert_eq!(mine.ok("exchanges")["data"], server.get_authed("/v1/exchanges").ok("v1")["data"]);
    server.get("/v1/exchanges", Some(&free)).assert_error(403, "API access needs an active Developer plan", "free");
    a.get(&server, "/site/v1/debug/latency").assert_error(404, "not found", "no operator routes");
    a.get(&server, "/site/v1/nope").assert_error(404, "not found", "unknown route");
    server.request_with("GET", "/site/v1/exchanges", &[], None).assert_error(401, "not signed in", "no session");

    let price = a.get(&server, "/site/v1/symbols/BTCUSDT?exchange=binance").ok("price")["data"]["price"]
        .as_f64()
        .expect("a price");
    let level = (price * 1.5 * 100.0).round() / 100.0;
    let body = json!({"exchange":"binance","symbol":"BTCUSDT","type":"price","direction":"above","price":level});
    let plain = [("Cookie", a.cookie.as_str())];
    server.request_with("POST", "/site/v1/alerts", &plain, Some(&body.to_string())).assert_error(
        403,
        "missing or wrong CSRF token",
        "no token",
    );
    let mut hooked = body.clone();
    hooked["webhook_url"] = json!("https://example.com/h");
    a.change(&server, "POST", "/site/v1/alerts", Some(&hooked)).assert_error(
        422,
        "an alert created on the site has no webhook URL; create one with a webhook_url through the API",
        "webhook from the site",
    );
    assert_eq!(a.get(&server, "/site/v1/alerts").ok("none yet")["data"], json!([]));
    let made = a.change(&server, "POST", "/site/v1/alerts", Some(&body));
    let id = made.ok("create")["data"]["id"].as_i64().expect("id");
    assert!(made.body["data"]["webhook_url"].is_null(), "{}", made.text);
    let bad = a.change(&server, "POST", "/site/v1/alerts", Some(&json!({"symbol":"BTCUSDT","type":"price"})));
    assert_eq!(bad.status, 422, "the API's validation: {}", bad.text);

    // Another account sees none of it and cannot delete it.
    let b = SiteSession::signin(&server, &server.create_key("developer", None)).1.expect("b");
    assert_eq!(b.get(&server, "/site/v1/alerts").ok("b's")["data"], json!([]));
    let gone = b.change(&server, "DELETE", &format!("/site/v1/alerts/{id}"), None);
    assert_eq!(gone.status, 404, "{}", gone.text);
    let listed = a.get(&server, "/site/v1/alerts");
    assert_eq!(listed.ok("a's")["data"][0]["id"].as_i64(), Some(id));
    assert_eq!(a.change(&server, "DELETE", &format!("/site/v1/alerts/{id}"), None).status, 200);
}

#[test]
fn keys_and_channels_are_the_accounts_own() {
    let server = Server::start(BIN, &["--sim-pairs", "4"]);
    let key_a = server.create_key("free", Some("first"));
    let a = SiteSession::signin(&server, &key_a).1.expect("a");
    let b = SiteSession::signin(&server, &server.create_key("free", None)).1.expect("b");
    let keys = a.get(&server, "/site/keys");
    let list = keys.ok("keys")["data"].as_array().cloned().unwrap_or_default();
    assert_eq!(list.len(), 1, "{}", keys.text);
    assert_eq!((list[0]["label"].as_str(), list[0]["current"].as_bool()), (Some("first"), Some(true)));
    assert!(!keys.text.contains(&key_a), "a key is never shown again");

    let plain = [("Cookie", a.cookie.as_str())];
    server.request_with("POST", "/site/keys", &plain, Some("{}")).assert_error(403, "missing or wrong CSRF token", "");
    let made = a.change(&server, "POST", "/site/keys", Some(&json!({"label":"bot"})));
    let new_key = made.ok("new key")["data"]["key"].as_str().expect("the key, once").to_owned();
    let new_id = made.body["data"]["id"].as_i64().expect("id");
    assert_eq!(made.body["data"]["label"], "bot", "the new key's notice names it: {}", made.text);
    server.await_key(&new_key);
    let c = SiteSession::signin(&server, &new_key).1.expect("the new key signs in");
    assert_eq!(
        c.get(&server, "/site/session").ok("c")["data"]["accountId"],
        a.get(&server, "/site/session").body["data"]["accountId"]
    );
    a.change(&server, "POST", "/site/keys", Some(&json!({"label":"x".repeat(101)}))).assert_error(
        422,
        "label is longer than 100 characters",
        "long label",
    );
    a.change(&server, "POST", "/site/keys", Some(&json!({"plan":"developer"}))).assert_error(
        422,
        "unknown field 'plan'. Allowed: label",
        "no plan from the site",
    );
    b.change(&server, "DELETE", &format!("/site/keys/{new_id}"), None).assert_error(
        404,
        "unknown key",
        "b revokes a's",
    );
    b.change(&server, "DELETE", "/site/keys/abc", None).assert_error(404, "unknown key", "not an id");
    assert_eq!(a.change(&server, "DELETE", &format!("/site/keys/{new_id}"), None).status, 200);
    await_signed_out(&server, &c);
    SiteSession::signin(&server, &new_key).0.assert_error(401, "revoked API key", "revoked");
    for _ in 0..19 {
        let r = a.change(&server, "POST", "/site/keys", Some(&json!({})));
        assert_eq!(r.status, 200, "{}", r.text);
    }
    a.change(&server, "POST", "/site/keys", Some(&json!({}))).assert_error(
        422,
        "active key limit reached (20 per account); revoke one first",
        "cap",
    );

    assert_eq!(
        a.get(&server, "/site/channels").ok("none")["data"],
        json!({"telegramChatId": null, "telegramEnabled": false})
    );
    let set = a.change(&server, "PUT", "/site/channels", Some(&json!({"telegramChatId":"-1001234"})));
    assert_eq!(set.ok("set")["data"]["telegramChatId"], "-1001234");
    assert_eq!(b.get(&server, "/site/channels").ok("b's")["data"]["telegramChatId"], Value::Null);
    for bad in [json!({"telegramChatId":"12ab"}), json!({"telegramChatId":true}), json!({"telegramChatId":"@ab"})] {
        a.change(&server, "PUT", "/site/channels", Some(&bad)).assert_error(
            422,
            "telegramChatId must be a chat id (digits, optionally after '-') or @channelname",
            "bad chat",
        );
    }
    a.change(&server, "PUT", "/site/channels", Some(&json!({}))).assert_error(422, "telegramChatId is required", "");
    a.change(&server, "POST", "/site/channels", Some(&json!({}))).assert_error(405, "method not allowed", "POST");
    let cleared = a.change(&server, "PUT", "/site/channels", Some(&json!({"telegramChatId":null})));
    assert_eq!(cleared.ok("cleared")["data"]["telegramChatId"], Value::Null);
}

/// Waits until `s` is no longer signed in (a revocation reaches the key table within ms).
fn await_signed_out(server: &Server, s: &SiteSession) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while s.get(server, "/site/session").status != 401 {
        assert!(Instant::now() < deadline, "the session outlived its key's revocation");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An open event stream on a raw connection, read as text.
struct Stream {
    conn: TcpStream,
    text: String,
}

impl Stream {
    fn open(server: &Server, s: &SiteSession, last_id: Option<i64>) -> Stream {
        let mut conn = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        conn.set_read_timeout(Some(Duration::from_millis(200))).expect("timeout");
        let resume = last_id.map_or_else(String::new, |id| format!("Last-Event-ID: {id}\r\n"));
        let head = format!("GET /site/events HTTP/1.1\r\nHost: x\r\nCookie: {}\r\n{resume}\r\n", s.cookie);
        conn.write_all(head.as_bytes()).expect("send");
        let mut stream = Stream { conn, text: String::new() };
        stream.wait_for("\r\n\r\n", 10);
        assert!(stream.text.starts_with("HTTP/1.1 200"), "{}", stream.text);
        assert!(stream.text.to_ascii_lowercase().contains("content-type: text/event-stream"), "{}", stream.text);
        stream
    }

    /// Reads until the text holds `needle` (panics after `secs`); false if the server closed.
    fn wait_for(&mut self, needle: &str, secs: u64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let mut buf = [0u8; 4096];
        while !self.text.contains(needle) {
            assert!(Instant::now() < deadline, "'{needle}' not seen in {secs} s: {}", self.text);
            match self.conn.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => self.text.push_str(&String::from_utf8_lossy(&buf[..n])),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) => panic!("reading the stream: {e}"),
            }
        }
        true
    }

    /// Reads whatever arrives for `d`; false once the server has ended the stream (the last
    /// chunk of the chunked body, or a closed connection).
    fn pump(&mut self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            if self.text.ends_with("\r\n0\r\n\r\n") {
                return false;
            }
            match self.conn.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => self.text.push_str(&String::from_utf8_lossy(&buf[..n])),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => return false,
            }
        }
        true
    }
}

#[test]
fn the_inbox_is_pushed_live_and_resumed_after_a_reconnect() {
    let sim = SimVenue::start(BIN, &["--sim-pairs", "4", "--venues", "binance"]);
    let config = sim.config(&["binance"], 4, "").display().to_string();
    let server = Server::start(BIN, &["--feed", "live", "--config", &config, "--shards", "1", "--venues", "binance"]);
    server.wait_venue("binance", "state ok", 30, |h| h["state"] == "ok");
    let a = SiteSession::signin(&server, &server.key).1.expect("a");
    let b = SiteSession::signin(&server, &server.create_key("developer", None)).1.expect("b");
    let mut mine = Stream::open(&server, &a, None);
    let mut theirs = Stream::open(&server, &b, None);
    server.request_with("GET", "/site/events", &[], None).assert_error(401, "not signed in", "no session");

    let price = a.get(&server, "/site/v1/symbols/BTCUSDT?exchange=binance").ok("price")["data"]["price"]
        .as_f64()
        .expect("a price");
    let level = (price * 1.02 * 100.0).round() / 100.0;
    let body = json!({"exchange":"binance","symbol":"BTCUSDT","type":"price","direction":"above","price":level});
    let id = a.change(&server, "POST", "/site/v1/alerts", Some(&body)).ok("create")["data"]["id"].as_i64().expect("id");
    sim.control("trade", &json!({"venue":"binance","symbol":"BTCUSDT","price":format!("{:.2}", price * 1.03)}));
    // `/site/events` is `/site/v1/stream?channels=alerts`: each entry is the `alerts` channel's
    // message, `data` the body the inbox holds, `id` the entry's id (also the event's `id:`).
    let needle = format!("\"event\":\"alert.triggered\",\"alert\":{{\"id\":{id}");
    assert!(mine.wait_for(&needle, 20), "the stream stayed open");
    let event_line = mine.text.lines().find(|l| l.contains(&needle)).expect("the data line").to_owned();
    let message: Value =
        serde_json::from_str(event_line.trim_start_matches("data: ")).expect("one JSON message per line");
    let inbox = server.get_authed("/v1/inbox");
    let listed = &inbox.ok("inbox")["data"][0];
    assert_eq!((message["channel"].as_str(), message["type"].as_str()), (Some("alerts"), Some("alert.triggered")));
    assert_eq!(message["data"], listed["event"], "the entry's body as /v1/inbox lists it");
    assert_eq!(message["id"], listed["id"], "the entry's id");
    let entry_id = message["id"].as_i64().expect("entry id");
    assert!(mine.text.contains(&format!("id: {entry_id}\ndata: ")), "{}", mine.text);
    assert!(theirs.pump(Duration::from_millis(500)), "b's stream stays open");
    assert!(!theirs.text.contains("alert.triggered"), "another account's stream: {}", theirs.text);

    // A reconnect that saw up to the entry before gets it again.
    let mut resumed = Stream::open(&server, &a, Some(entry_id - 1));
    assert!(resumed.wait_for(&needle, 10));
    // Sign-out ends the streams of that session.
    assert_eq!(a.change(&server, "POST", "/site/signout", None).status, 200);
    assert!(!mine.pump(Duration::from_secs(3)), "the stream outlived its session: {}", mine.text);
    assert!(!resumed.pump(Duration::from_secs(1)), "every stream of the session ends");
}
