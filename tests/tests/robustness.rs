//! Malformed and hostile requests on raw TCP: after each one the server must still be alive and
//! answer a normal request from a fresh connection promptly.

use std::io::Write;
use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{connect, raw_exchange, read_until_closed, RawOutcome, RawResponse, Server, FAST};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

/// How long to wait for the server's answer to one raw request.
const WINDOW: Duration = Duration::from_secs(5);

/// A small, quick server.
fn start() -> Server {
    Server::start(BIN, FAST)
}

/// A request head (without the blank line) with Host and the server's key.
fn head(server: &Server, request_line: &str, extra: &[&str]) -> String {
    let mut head =
        format!("{request_line}\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n", server.port, server.key);
    for line in extra {
        head.push_str(line);
        head.push_str("\r\n");
    }
    head
}

/// Sends `head`, a blank line and `body`, and reads the answer.
fn send(server: &Server, head: &str, body: &[u8], half_close: bool) -> RawOutcome {
    let mut bytes = head.as_bytes().to_vec();
    bytes.extend_from_slice(b"\r\n");
    bytes.extend_from_slice(body);
    raw_exchange(server.port, &bytes, half_close, WINDOW)
}

/// Asserts every response status in `outcome` is in `allowed`.
fn assert_statuses_in(outcome: &RawOutcome, allowed: &[u16], what: &str) {
    let statuses = outcome.statuses();
    assert!(
        statuses.iter().all(|s| allowed.contains(s)),
        "{what}: statuses {statuses:?}, allowed {allowed:?}; raw answer: {:?}",
        outcome.text
    );
    assert_error_bodies(outcome, what);
}

/// Asserts every error response in `outcome` is a JSON `{"error": "..."}` labelled
/// `application/json`, hyper-level rejections (400, 431) included.
fn assert_error_bodies(outcome: &RawOutcome, what: &str) {
    for response in outcome.responses() {
        if response.status < 400 {
            continue;
        }
        let body: Value = serde_json::from_str(&response.body).unwrap_or(Value::Null);
        let only_error = body.as_object().is_some_and(|o| o.len() == 1 && o.get("error").is_some_and(Value::is_string));
        assert!(only_error, "{what}: error body is {{\"error\":\"...\"}}: {response:?}");
        let content_type = response.header("content-type").unwrap_or("");
        assert!(content_type.starts_with("application/json"), "{what}: Content-Type {content_type:?}: {response:?}");
    }
}

/// Asserts `response` is the JSON list of exchanges.
fn assert_exchanges_body(response: &RawResponse, what: &str) {
    let body: Value = serde_json::from_str(&response.body).unwrap_or(Value::Null);
    assert!(
        body["data"].as_array().is_some_and(|d| !d.is_empty() && d[0]["exchange"] == "binance"),
        "{what}: the exchanges list: {response:?}"
    );
}

#[test]
fn post_with_bad_json_body() {
    let server = start();
    let body = b"{\"bad json: [";
    let outcome = send(
        &server,
        &head(
            &server,
            "POST /v1/exchanges HTTP/1.1",
            &["Content-Type: application/json", &format!("Content-Length: {}", body.len()), "Connection: close"],
        ),
        body,
        false,
    );
    assert_eq!(outcome.statuses(), vec![405], "POST with bad JSON to a GET endpoint: {outcome:?}");
    assert_error_bodies(&outcome, "bad JSON POST");
    server.assert_serving("a POST with a bad JSON body");
}

#[test]
fn one_mib_of_headers_is_refused() {
    let server = start();
    // Many ordinary-sized headers adding up to 1 MiB.
    let filler = "a".repeat(1000);
    let many: Vec<String> = (0..1049).map(|i| format!("X-Filler-{i}: {filler}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    // One header whose value alone is 1 MiB.
    let giant = format!("X-Giant: {}", "b".repeat(1 << 20));
    for (what, extra) in [("1 MiB in 1049 headers", many), ("one 1 MiB header", vec![giant.as_str()])] {
        let request = head(&server, "GET /v1/exchanges HTTP/1.1", &extra);
        let mut bytes = request.into_bytes();
        bytes.extend_from_slice(b"\r\n");
        let outcome = raw_exchange(server.port, &bytes, false, Duration::from_secs(15));
        let statuses = outcome.statuses();
        assert!(
            statuses.is_empty() || statuses == [431],
            "{what}: expected 431 or a closed connection, got {statuses:?}: {:?}",
            outcome.text.chars().take(500).collect::<String>()
        );
        assert!(outcome.closed || statuses == [431], "{what}: the server neither answered nor closed within 15 s");
        assert_error_bodies(&outcome, what);
        server.assert_serving(what);
    }
}

#[test]
fn more_than_100_headers() {
    let server = start();
    let extra: Vec<String> =
        (0..150).map(|i| format!("X-Header-{i}: value-{i}")).chain(["Connection: close".to_owned()]).collect();
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let outcome = send(&server, &head(&server, "GET /v1/exchanges HTTP/1.1", &extra), b"", false);
    assert_statuses_in(&outcome, &[200, 400, 431], "150 headers");
    assert!(outcome.closed, "150 headers with Connection: close: the connection must end: {outcome:?}");
    server.assert_serving("a request with 150 headers");
}

#[test]
fn body_shorter_than_content_length_then_close() {
    let server = start();
    for request_line in ["POST /v1/exchanges HTTP/1.1", "GET /v1/exchanges HTTP/1.1"] {
        let outcome = send(
            &server,
            &head(&server, request_line, &["Content-Type: application/json", "Content-Length: 1000"]),
            b"{\"a\":1}",
            true,
        );
        let allowed: &[u16] = if request_line.starts_with("POST") { &[400, 405, 408] } else { &[200, 400, 408] };
        assert_statuses_in(&outcome, allowed, request_line);
        assert!(outcome.closed, "{request_line} with a short body and half-close: the server must close: {outcome:?}");
        server.assert_serving("a body shorter than its Content-Length");
    }
    // The same, but the client vanishes without a half-close.
    {
        let mut stream = connect(server.port);
        let request = head(&server, "POST /v1/exchanges HTTP/1.1", &["Content-Length: 5000"]);
        let _ = stream.write_all(format!("{request}\r\n{{\"partial\":").as_bytes());
    }
    server.assert_serving("a short body then an abrupt close");
}

#[test]
fn body_longer_than_content_length() {
    let server = start();
    let outcome = send(
        &server,
        &head(&server, "GET /v1/exchanges HTTP/1.1", &["Content-Length: 5"]),
        b"helloTHIS IS NOT HTTP AT ALL\r\n\r\n",
        false,
    );
    let statuses = outcome.statuses();
    assert_eq!(statuses.first(), Some(&200), "the request itself is fine: {outcome:?}");
    assert_exchanges_body(&outcome.responses()[0], "GET with extra bytes");
    assert!(
        statuses[1..].iter().all(|s| *s == 400),
        "the extra bytes are not a valid request: 400 or close, got {statuses:?}"
    );
    assert!(outcome.closed, "after the invalid extra bytes the connection must close: {outcome:?}");

    let outcome = send(
        &server,
        &head(&server, "POST /v1/exchanges HTTP/1.1", &["Content-Length: 2"]),
        b"{}\x00\x01\x02garbage\r\n\r\n",
        false,
    );
    assert_eq!(outcome.statuses().first(), Some(&405), "POST to a GET endpoint: {outcome:?}");
    assert_statuses_in(&outcome, &[405, 400], "POST with extra bytes");
    server.assert_serving("a body longer than its Content-Length");
}

#[test]
fn bad_content_length_headers() {
    let server = start();
    for (what, extra, body) in [
        ("non-numeric", vec!["Content-Length: abc"], &b"abc"[..]),
        ("negative", vec!["Content-Length: -1"], &b""[..]),
        ("plus sign", vec!["Content-Length: +5"], &b"hello"[..]),
        ("overflowing", vec!["Content-Length: 99999999999999999999999999"], &b"x"[..]),
        ("conflicting duplicates", vec!["Content-Length: 5", "Content-Length: 6"], &b"hello!"[..]),
        ("list with conflicting values", vec!["Content-Length: 5, 6"], &b"hello!"[..]),
    ] {
        let mut extra = extra;
        extra.push("Connection: close");
        let outcome = send(&server, &head(&server, "GET /v1/exchanges HTTP/1.1", &extra), body, false);
        // A request with an ambiguous length must never be served (request smuggling).
        assert_statuses_in(&outcome, &[400], what);
        assert!(outcome.closed, "{what}: the connection must close: {outcome:?}");
        server.assert_serving(&format!("a {what} Content-Length"));
    }
}

#[test]
fn chunked_bodies_valid_and_malformed() {
    let server = start();
    // A valid chunked body on a GET is read and ignored.
    let outcome = send(
        &server,
        &head(&server, "GET /v1/exchanges HTTP/1.1", &["Transfer-Encoding: chunked", "Connection: close"]),
        b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        false,
    );
    assert_eq!(outcome.statuses(), vec![200], "valid chunked GET: {outcome:?}");
    assert_exchanges_body(&outcome.responses()[0], "valid chunked GET");

    let outcome = send(
        &server,
        &head(&server, "POST /v1/exchanges HTTP/1.1", &["Transfer-Encoding: chunked", "Connection: close"]),
        b"7\r\n{\"a\":1}\r\n0\r\n\r\n",
        false,
    );
    assert_eq!(outcome.statuses(), vec![405], "valid chunked POST: {outcome:?}");
    assert_error_bodies(&outcome, "valid chunked POST");
    server.assert_serving("valid chunked bodies");

    for (what, body) in [
        ("non-hex chunk size", &b"zz\r\nhello\r\n0\r\n\r\n"[..]),
        ("overflowing chunk size", &b"FFFFFFFFFFFFFFFFFFFF\r\nhello\r\n0\r\n\r\n"[..]),
        ("chunk shorter than its size", &b"10\r\nhello\r\n0\r\n\r\n"[..]),
        ("missing chunk terminator", &b"5\r\nhelloXX0\r\n\r\n"[..]),
        ("negative chunk size", &b"-5\r\nhello\r\n0\r\n\r\n"[..]),
    ] {
        let outcome = send(
            &server,
            &head(
                &server,
                "POST /v1/exchanges HTTP/1.1",
                &["Transfer-Encoding: chunked", "Content-Type: application/json"],
            ),
            body,
            true,
        );
        assert_statuses_in(&outcome, &[400, 405], what);
        assert!(outcome.closed, "{what}: the connection must close: {outcome:?}");
        server.assert_serving(what);
    }
}

/// How the slow connection ended.
#[derive(Debug)]
struct SlowEnd {
    /// Whether the server closed it before the test gave up.
    closed: bool,
    /// Time from connect to the close (or to giving up).
    after: Duration,
    /// Bytes written before the close.
    sent: usize,
    /// What the server sent, if anything.
    received: String,
}

#[test]
fn slow_client_does_not_stall_others_and_is_cut_off() {
    let server = start();
    let request = head(&server, "GET /v1/exchanges HTTP/1.1", &[]) + "\r\n";
    let port = server.port;
    let give_up = Duration::from_secs(25);
    let slow = thread::spawn(move || {
        let mut stream = connect(port);
        let started = Instant::now();
        let mut received = Vec::new();
        for (sent, byte) in request.bytes().enumerate() {
            if stream.write_all(&[byte]).is_err() {
                return SlowEnd {
                    closed: true,
                    after: started.elapsed(),
                    sent,
                    received: String::from_utf8_lossy(&received).into_owned(),
                };
            }
            let (bytes, closed) = read_until_closed(&mut stream, Duration::from_secs(1));
            received.extend_from_slice(&bytes);
            if closed || started.elapsed() > give_up {
                return SlowEnd {
                    closed,
                    after: started.elapsed(),
                    sent: sent + 1,
                    received: String::from_utf8_lossy(&received).into_owned(),
                };
            }
        }
        SlowEnd {
            closed: false,
            after: started.elapsed(),
            sent: request.len(),
            received: String::from_utf8_lossy(&received).into_owned(),
        }
    });

    // While it dribbles, other clients are served promptly.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        server.assert_serving("a slow client started dribbling");
        thread::sleep(Duration::from_millis(250));
    }

    let end = slow.join().expect("the slow client thread");
    assert!(
        end.closed,
        "the server never closed a connection that sent one header byte per second \
         ({} bytes sent): {end:?}",
        end.sent
    );
    assert!(
        end.after <= Duration::from_secs(20),
        "the slow connection was closed only after {:?} (header read timeout is 10 s): {end:?}",
        end.after
    );
    assert!(
        end.after >= Duration::from_secs(5),
        "a slow but live client was cut off after only {:?}: {end:?}",
        end.after
    );
    assert!(!end.received.starts_with("HTTP/1.1 2"), "an incomplete request must not be served: {end:?}");
    server.assert_serving("the slow client was cut off");
}

#[test]
fn a_request_body_that_stalls_gets_408_and_others_are_served() {
    use std::io::Write;
    let server = start();
    let mut stream = rampart_tests::connect(server.port);
    let h = head(&server, "POST /v1/alerts HTTP/1.1", &["Content-Type: application/json", "Content-Length: 100"]);
    stream.write_all(format!("{h}\r\n{{\"symbol\":").as_bytes()).expect("write part of the body");
    // While the body stalls, other clients are served.
    server.assert_serving("a stalled request body");
    let (bytes, _) = rampart_tests::read_until_closed(&mut stream, Duration::from_secs(15));
    let text = String::from_utf8_lossy(&bytes);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("{\"error\":\"request body not received in time\"}"), "{text}");
    server.assert_serving("the 408");
}
