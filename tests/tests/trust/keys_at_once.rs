//! A key change takes effect at once (`decisions.md` §1): `rampart keys create` then an
//! immediate request succeeds, and `rampart keys revoke` then an immediate request is refused,
//! every time, while the server is under read load; and the `X-RateLimit-*` headers
//! (`decisions.md` §13) count down to the 429 they predict.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use rampart_tests::{Server, FAST};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

/// Reads from two threads until stopped (a light read load beside the key changes): the
/// health check and a bulk answer, with the first key (whose 429s are load too).
fn read_load(server: &Arc<Server>, stop: &Arc<AtomicBool>, answered: &Arc<AtomicU64>) -> Vec<thread::JoinHandle<()>> {
    (0..2)
        .map(|i| {
            let (server, stop, answered) = (server.clone(), stop.clone(), answered.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let path = if i == 0 { "/healthz" } else { "/v1/levels?exchange=binance" };
                    let _ = server.get(path, Some(&server.key));
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect()
}

/// `keys create --plan developer`: (id, key).
fn create(server: &Server) -> (String, String) {
    let output = server.keys(&["create", "--plan", "developer"]);
    assert!(output.status.success(), "keys create: {}", rampart_tests::describe_output(&output));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let lines: Vec<&str> = stdout.lines().collect();
    let id = lines
        .first()
        .and_then(|l| l.strip_prefix("created key "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("keys create names the key's id first: {stdout:?}"));
    (id.to_owned(), lines.last().unwrap_or(&"").trim().to_owned())
}

#[test]
fn a_new_key_works_and_a_revoked_key_is_refused_on_the_very_next_request() {
    let server = Arc::new(Server::start(BIN, FAST));
    let (stop, answered) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
    let load = read_load(&server, &stop, &answered);

    let mut made = Vec::new();
    for round in 0..100 {
        let (id, key) = create(&server);
        let r = server.get("/v1/exchanges", Some(&key));
        assert_eq!(r.status, 200, "round {round}: a key just made answers 200 at once: {}", r.text);
        made.push((id, key));
    }
    for (round, (id, key)) in made.iter().take(50).enumerate() {
        let output = server.keys(&["revoke", id]);
        assert!(output.status.success(), "revoke {id}: {}", rampart_tests::describe_output(&output));
        let r = server.get("/v1/exchanges", Some(key));
        r.assert_error(401, "revoked API key", &format!("round {round}: a key just revoked"));
    }
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.join().expect("load thread");
    }
    let reads = answered.load(Ordering::Relaxed);
    assert!(reads > 100, "the server was under read load meanwhile ({reads} reads)");
    // The keys not revoked still work.
    server.get("/v1/exchanges", Some(&made[99].1)).ok("a key made and left alone");
}

#[test]
fn rate_limit_headers_count_down_to_the_429_they_predict() {
    let server = Server::start(BIN, FAST);
    let (_, key) = create(&server);
    for i in 1..=120u64 {
        let r = server.get("/v1/exchanges", Some(&key));
        assert_eq!(r.status, 200, "request {i}: {}", r.text);
        assert_eq!(r.header("x-ratelimit-limit"), Some("120"), "request {i}");
        assert_eq!(r.header("x-ratelimit-remaining"), Some((120 - i).to_string().as_str()), "request {i}");
        let reset: i64 = r.header("x-ratelimit-reset").and_then(|v| v.parse().ok()).expect("a reset");
        if i < 120 {
            assert_eq!(reset, 0, "request {i}: one more is admitted now");
        } else {
            assert!((1..=60).contains(&reset), "request 120: the next is admitted in {reset} s");
        }
    }
    let refused = server.get("/v1/exchanges", Some(&key));
    refused.assert_some_error(429, "request 121");
    assert_eq!(refused.header("x-ratelimit-remaining"), Some("0"));
    let reset: u64 = refused.header("x-ratelimit-reset").and_then(|v| v.parse().ok()).expect("a reset");
    assert_eq!(reset, refused.retry_after_s("request 121"), "Reset and Retry-After agree");
    // A request without a valid key carries none: no key's budget was counted.
    let anonymous = server.get("/v1/exchanges", None);
    assert_eq!(anonymous.status, 401);
    assert_eq!(anonymous.header("x-ratelimit-limit"), None);
    // Neither does an answer outside /v1.
    assert_eq!(server.get("/healthz", None).header("x-ratelimit-limit"), None);
}
