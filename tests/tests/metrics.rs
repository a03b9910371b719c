//! `GET /metrics` through the real binary (issue #14): the exposition parses (every sample of a
//! declared family, well-formed labels and values, `# EOF` last), and its counters move with
//! traffic: venue messages and gaps on the live feed, HTTP requests by route and status, a
//! firing and its webhook attempt (and the book that lost sync is named in the log); and
//! `--metrics-listen` serves it on its own address only.
//! `GET /version` says what is running.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{Server, SimVenue, FAST};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

/// One sample's identity: metric name and labels.
type Sample = (String, BTreeMap<String, String>);

/// Parses OpenMetrics text strictly enough to catch a malformed exposition: every sample
/// belongs to a family declared by `# TYPE` before it, names and label names are valid, label
/// values are quoted, values are numbers, no sample repeats, and `# EOF` ends it.
fn parse(text: &str) -> HashMap<Sample, f64> {
    let mut families: HashMap<String, String> = HashMap::new();
    let mut samples = HashMap::new();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.last(), Some(&"# EOF"), "the exposition ends with # EOF");
    assert!(text.ends_with("# EOF\n"));
    for line in &lines[..lines.len() - 1] {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kind, name) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            assert!(valid_name(name), "bad family name in {line:?}");
            match kind {
                "TYPE" => {
                    let t = parts.next().unwrap_or("");
                    assert!(["counter", "gauge", "histogram", "info", "unknown"].contains(&t), "{line:?}");
                    assert!(
                        families.insert(name.to_owned(), t.to_owned()).is_none(),
                        "family declared twice: {line:?}"
                    );
                }
                "HELP" | "UNIT" => {}
                _ => panic!("unknown comment line {line:?}"),
            }
            continue;
        }
        let (id, value) = sample(line);
        let family =
            families.iter().filter(|(f, t)| id.0 == **f || suffixed(&id.0, f, t)).map(|(f, _)| f.clone()).next();
        assert!(family.is_some(), "sample of no declared family: {line:?}");
        assert!(samples.insert(id, value).is_none(), "sample repeated: {line:?}");
    }
    samples
}

fn suffixed(name: &str, family: &str, kind: &str) -> bool {
    let Some(suffix) = name.strip_prefix(family) else { return false };
    match kind {
        "counter" => suffix == "_total" || suffix == "_created",
        "histogram" => ["_bucket", "_sum", "_count", "_created"].contains(&suffix),
        _ => false,
    }
}

fn valid_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// `name{a="x",b="y"} value` → its identity and value.
fn sample(line: &str) -> (Sample, f64) {
    let (head, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value in {line:?}"));
    let value: f64 = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().unwrap_or_else(|_| panic!("bad value in {line:?}")),
    };
    let (name, labels) = match head.split_once('{') {
        None => (head, BTreeMap::new()),
        Some((name, rest)) => {
            let body = rest.strip_suffix('}').unwrap_or_else(|| panic!("unclosed labels in {line:?}"));
            (name, labels(body, line))
        }
    };
    assert!(valid_name(name), "bad metric name in {line:?}");
    ((name.to_owned(), labels), value)
}

fn labels(body: &str, line: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = body;
    while !rest.is_empty() {
        let (k, after) = rest.split_once("=\"").unwrap_or_else(|| panic!("bad label in {line:?}"));
        assert!(valid_name(k), "bad label name in {line:?}");
        let end = after.find('"').unwrap_or_else(|| panic!("unquoted label value in {line:?}"));
        assert!(out.insert(k.to_owned(), after[..end].to_owned()).is_none(), "label repeated in {line:?}");
        rest = after[end + 1..].strip_prefix(',').unwrap_or(&after[end + 1..]);
    }
    out
}

fn scrape(server: &Server) -> HashMap<Sample, f64> {
    let r = server.get("/metrics", None);
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.header("content-type").is_some_and(|t| t.starts_with("application/openmetrics-text")), "content type");
    parse(&r.text)
}

fn value(m: &HashMap<Sample, f64>, name: &str, labels: &[(&str, &str)]) -> f64 {
    let want: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    m.get(&(name.to_owned(), want)).copied().unwrap_or(0.0)
}

fn wait_for(what: &str, secs: u64, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within {secs} s");
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn metrics_parse_and_move_with_traffic_on_the_live_feed() {
    let sim = SimVenue::start(BIN, &["--sim-pairs", "8", "--venues", "binance"]);
    let config = sim.config(&["binance"], 4, "[webhooks]\nallow_private = true\n").display().to_string();
    let server = Server::start(BIN, &["--feed", "live", "--config", &config, "--shards", "1", "--venues", "binance"]);
    server.wait_venue("binance", "state ok", 40, |h| h["state"] == "ok");
    let before = scrape(&server);
    let venue = [("venue", "binance")];
    assert!(value(&before, "rampart_venue_messages_total", &venue) > 0.0, "venue messages counted");
    assert_eq!(value(&before, "rampart_venue_down", &venue), 0.0);
    assert_eq!(value(&before, "rampart_shard_ready", &[("shard", "0")]), 1.0);
    assert_eq!(value(&before, "rampart_storage_writable", &[]), 1.0);
    // Rows per table and the database's size, counted by the checkpoint thread (issue #62).
    wait_for("storage rows", 10, || value(&scrape(&server), "rampart_storage_bytes", &[]) > 0.0);
    let sized = scrape(&server);
    assert_eq!(value(&sized, "rampart_storage_rows", &[("table", "accounts")]), 1.0, "the first key's account");
    assert_eq!(value(&sized, "rampart_storage_rows", &[("table", "api_keys")]), 1.0);
    assert!(sized.keys().any(|(n, l)| n == "rampart_storage_rows" && l.get("table").is_some_and(|t| t == "inbox")));

    // HTTP requests by route and status.
    for _ in 0..5 {
        server.get_authed("/v1/levels/BTCUSDT?exchange=binance").ok("levels");
    }
    assert_eq!(server.get_authed("/v1/nothing-here").status, 404);
    assert_eq!(server.get("/v1/exchanges", None).status, 401);
    // A gap on the venue, and a firing delivered to a receiver.
    sim.control("fault", &json!({"venue":"binance","symbol":"BTCUSDT","kind":"gap"}));
    let (port, hits) = rampart_tests::json_receiver();
    let r = server.get_authed("/v1/symbols/ETHUSDT?exchange=binance");
    let price = r.ok("symbol")["data"]["price"].as_f64().expect("price");
    let level = (price * 1.02 * 100.0).round() / 100.0;
    let body = json!({"exchange":"binance","symbol":"ETHUSDT","type":"price","direction":"above","price":level,
                      "webhook_url": format!("http://127.0.0.1:{port}/hook")});
    server.request("POST", "/v1/alerts", Some(&format!("Bearer {}", server.key)), Some(&body.to_string())).ok("create");
    sim.control("trade", &json!({"venue":"binance","symbol":"ETHUSDT","price":format!("{:.2}", price * 1.03)}));
    wait_for("webhook delivered", 20, || hits.lock().map(|h| h.len()).unwrap_or(0) >= 1);
    let mut after = scrape(&server);
    wait_for("the delivered attempt and the gap counted", 20, || {
        after = scrape(&server);
        value(&after, "rampart_webhook_attempts_total", &[("outcome", "delivered")]) >= 1.0
            && value(&after, "rampart_venue_gaps_total", &venue) >= 1.0
    });

    // The book that lost sync is named in the log (a line per venue per 10 s at most).
    wait_for("the desync logged", 10, || {
        server
            .stderr_tail()
            .iter()
            .any(|l| l.contains("WARN") && l.contains("binance: BTCUSDT book out of sync, rebuilding"))
    });
    let levels = [("route", "/v1/levels/{symbol}"), ("method", "GET"), ("status", "200")];
    assert_eq!(
        value(&after, "rampart_http_requests_total", &levels) - value(&before, "rampart_http_requests_total", &levels),
        5.0,
        "five level reads counted under their route template"
    );
    let other = [("route", "other"), ("method", "GET"), ("status", "404")];
    assert!(value(&after, "rampart_http_requests_total", &other) >= 1.0, "the 404 counted");
    let unauth = [("route", "/v1/exchanges"), ("method", "GET"), ("status", "401")];
    assert!(value(&after, "rampart_http_requests_total", &unauth) >= 1.0, "the 401 counted");
    assert!(value(&after, "rampart_http_request_duration_seconds_count", &[("route", "/v1/levels/{symbol}")]) >= 5.0);
    assert!(
        value(&after, "rampart_venue_messages_total", &venue) > value(&before, "rampart_venue_messages_total", &venue)
    );
    assert!(value(&after, "rampart_venue_gaps_total", &venue) >= 1.0, "the gap counted");
    assert!(value(&after, "rampart_shard_firings_total", &[("shard", "0")]) >= 1.0, "the firing counted");
    assert!(value(&after, "rampart_webhook_attempt_duration_seconds_count", &[]) >= 1.0);
    let inf = value(&after, "rampart_webhook_attempt_duration_seconds_bucket", &[("le", "+Inf")]);
    assert_eq!(inf, value(&after, "rampart_webhook_attempt_duration_seconds_count", &[]), "+Inf bucket is the count");
    assert!(value(&after, "rampart_venue_last_message_age_seconds", &venue) < 30.0, "lag is small");
}

#[test]
fn metrics_listen_serves_metrics_apart_from_the_api() {
    let server = Server::start(BIN, &[FAST, &["--metrics-listen", "127.0.0.1:0"]].concat());
    let line = server
        .stdout_lines()
        .into_iter()
        .find_map(|l| l.strip_prefix("metrics on ").map(str::to_owned))
        .expect("the metrics address is printed");
    assert_eq!(server.get("/metrics", None).status, 404, "not on the API's address");
    // What is running, without a key.
    let v = server.get("/version", None);
    let body = v.ok("version");
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    let rev = body["revision"].as_str().expect("revision");
    assert!(rev == "unknown" || (rev.len() == 12 && rev.chars().all(|c| c.is_ascii_hexdigit())), "revision {rev}");
    let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(10)).build();
    let text = agent.get(&format!("http://{line}/metrics")).call().expect("metrics").into_string().expect("text");
    let m = parse(&text);
    let names: HashSet<&str> = m.keys().map(|(n, _)| n.as_str()).collect();
    for want in ["rampart_shard_ticks_total", "rampart_shard_event_queue_depth", "rampart_uptime_seconds"] {
        assert!(names.contains(want), "{want} missing");
    }
    assert!(!names.iter().any(|n| n.starts_with("rampart_venue_")), "no venue metrics on the simulated feed");
    match agent.get(&format!("http://{line}/v1/exchanges")).call() {
        Err(ureq::Error::Status(404, _)) => {}
        other => panic!("the API is not served on the metrics address: {other:?}"),
    }
}

#[test]
fn the_parser_refuses_malformed_expositions() {
    let ok = "# TYPE a counter\na_total{x=\"1\"} 2\n# EOF\n";
    assert_eq!(parse(ok).len(), 1);
    for bad in [
        "# TYPE a counter\na_total{x=\"1\"} 2\n",
        "b 1\n# EOF\n",
        "# TYPE a counter\na_total{x=1} 2\n# EOF\n",
        "# TYPE a gauge\na x\n# EOF\n",
        "# TYPE a gauge\na 1\na 1\n# EOF\n",
    ] {
        assert!(std::panic::catch_unwind(|| parse(bad)).is_err(), "accepted {bad:?}");
    }
}
