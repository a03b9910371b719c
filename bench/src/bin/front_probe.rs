//! Robustness probe for an HTTP front: sends malformed and hostile requests, each on its own raw
//! TCP connection, and checks after each that a normal request still succeeds promptly.
//!
//! `front_probe --target 127.0.0.1:PORT --key rk_... [--pid PID] [--only 3,13] [--slow-secs 15]
//! [--idle-secs 30]` prints a Markdown table, one row per case: what the server answered on the
//! probing connection (status lines in order, then whether it closed/reset or kept the connection
//! open), whether a follow-up authenticated `GET /v1/symbols/BTCUSDT` on a fresh connection got a
//! 200 within 2 s and how fast, how a concurrent watcher fared during the case (a fresh-connection
//! GET every 250 ms, 2 s timeout each: a stall of other clients shows here), and, with `--pid`,
//! whether the process is alive and its resident memory after the case. Works against any server;
//! only loopback targets are meant.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

const PROBE_PATH: &str = "/v1/symbols/BTCUSDT";
const FOLLOW_UP_TIMEOUT: Duration = Duration::from_secs(2);
const WATCH_EVERY: Duration = Duration::from_millis(250);

struct Ctx {
    addr: SocketAddr,
    host: String,
    key: String,
    pid: Option<u32>,
    slow_secs: u64,
    idle_secs: u64,
}

impl Ctx {
    /// A normal authenticated GET, with optional extra header lines (each ending in CRLF).
    fn get(&self, extra: &str) -> String {
        format!("GET {PROBE_PATH} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n{extra}\r\n", self.host, self.key)
    }

    /// A POST head with the given framing header lines; the body is appended by the caller.
    fn post(&self, path: &str, framing: &str) -> String {
        format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\n{framing}\r\n",
            self.host, self.key
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Responses

/// Status lines of the complete responses at the start of `buf`, and whether bytes follow that
/// do not (yet) form a complete response.
fn parse_responses(buf: &[u8]) -> (Vec<String>, bool) {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let rest = &buf[pos..];
        let Some(head_len) = rest.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4) else {
            return (out, true);
        };
        let head = String::from_utf8_lossy(&rest[..head_len]);
        let status = head.lines().next().unwrap_or("").to_owned();
        if !status.starts_with("HTTP/") {
            out.push(format!("non-HTTP bytes {:?}", truncate(&status, 40)));
            return (out, false);
        }
        let length = head
            .lines()
            .find_map(|l| l.split_once(':').filter(|(n, _)| n.trim().eq_ignore_ascii_case("content-length")))
            .and_then(|(_, v)| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        if rest.len() < head_len + length {
            return (out, true);
        }
        out.push(status);
        pos += head_len + length;
    }
    (out, false)
}

fn truncate(s: &str, n: usize) -> String {
    if s.len() <= n {
        s.to_owned()
    } else {
        format!("{}…", &s[..s.char_indices().take_while(|(i, _)| *i < n).last().map_or(0, |(i, c)| i + c.len_utf8())])
    }
}

/// `HTTP/1.1 431 Request Header Fields Too Large` -> `431 Request Header Fields Too Large`.
fn short_status(line: &str) -> String {
    line.split_once(' ').map_or(line, |(_, rest)| rest).trim().to_owned()
}

/// How the server side of a connection ended, relative to the connection's opening.
#[derive(Clone, Debug)]
enum End {
    Open,
    Eof(Duration),
    Reset(Duration),
    Error(String),
}

struct Collected {
    bytes: Vec<u8>,
    end: End,
}

/// A raw connection whose incoming bytes a reader thread collects while the case writes.
struct Conn {
    stream: TcpStream,
    state: Arc<Mutex<Collected>>,
    reader: JoinHandle<()>,
    start: Instant,
    sent: usize,
}

fn lock(state: &Mutex<Collected>) -> std::sync::MutexGuard<'_, Collected> {
    state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Conn {
    fn open(ctx: &Ctx) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&ctx.addr, Duration::from_secs(2))?;
        stream.set_nodelay(true)?;
        stream.set_write_timeout(Some(Duration::from_secs(5)))?;
        let mut rd = stream.try_clone()?;
        let start = Instant::now();
        let state = Arc::new(Mutex::new(Collected { bytes: Vec::new(), end: End::Open }));
        let st = state.clone();
        let reader = thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match rd.read(&mut buf) {
                    Ok(0) => {
                        lock(&st).end = End::Eof(start.elapsed());
                        return;
                    }
                    Ok(n) => lock(&st).bytes.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                        lock(&st).end = End::Reset(start.elapsed());
                        return;
                    }
                    Err(e) => {
                        lock(&st).end = End::Error(e.to_string());
                        return;
                    }
                }
            }
        });
        Ok(Conn { stream, state, reader, start, sent: 0 })
    }

    /// Writes everything; `Err` describes how the write failed (the server closed, stopped
    /// reading, ...).
    fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        let mut off = 0;
        while off < bytes.len() {
            match self.stream.write(&bytes[off..]) {
                Ok(0) => return Err(format!("write returned 0 after {} bytes", self.sent)),
                Ok(n) => {
                    off += n;
                    self.sent += n;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    return Err(format!("server stopped reading after {} sent", human_bytes(self.sent)));
                }
                Err(e) => return Err(format!("write failed after {} sent ({})", human_bytes(self.sent), e.kind())),
            }
        }
        Ok(())
    }

    fn end(&self) -> End {
        lock(&self.state).end.clone()
    }

    /// Waits until the server ends the connection, or `expected` complete responses have arrived
    /// and `grace` has passed since (to see whether it closes after them), or `wait` is over.
    fn finish(self, expected: usize, wait: Duration, grace: Duration) -> Outcome {
        let t0 = Instant::now();
        let mut complete_at: Option<Instant> = None;
        loop {
            {
                let st = lock(&self.state);
                if !matches!(st.end, End::Open) {
                    break;
                }
                let (responses, _) = parse_responses(&st.bytes);
                if responses.len() >= expected && complete_at.is_none() {
                    complete_at = Some(Instant::now());
                }
            }
            if complete_at.is_some_and(|c| c.elapsed() >= grace) || t0.elapsed() >= wait {
                break;
            }
            thread::sleep(Duration::from_millis(10));
        }
        let observed_for = self.start.elapsed();
        // Snapshot before our own shutdown, which the reader would see as an end of stream.
        let (responses, partial, end) = {
            let st = lock(&self.state);
            let (responses, partial) = parse_responses(&st.bytes);
            (responses, partial, st.end.clone())
        };
        let _ = self.stream.shutdown(Shutdown::Both);
        let _ = self.reader.join();
        Outcome { responses, partial, end, observed_for }
    }
}

struct Outcome {
    responses: Vec<String>,
    partial: bool,
    end: End,
    observed_for: Duration,
}

impl Outcome {
    fn describe(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if !self.responses.is_empty() {
            let mut shown: Vec<String> = Vec::new();
            let mut i = 0;
            while i < self.responses.len() {
                let s = short_status(&self.responses[i]);
                let run = self.responses[i..].iter().take_while(|r| short_status(r) == s).count();
                shown.push(if run > 1 { format!("{s} ×{run}") } else { s });
                i += run;
            }
            parts.push(shown.join(", "));
        }
        if self.partial {
            parts.push("an incomplete response".to_owned());
        }
        let none = self.responses.is_empty() && !self.partial;
        parts.push(match &self.end {
            End::Open if none => format!("no answer within {:.0} s (connection open)", self.observed_for.as_secs_f64()),
            End::Open => "connection kept open".to_owned(),
            End::Eof(t) if none => format!("closed without an answer at {:.1} s", t.as_secs_f64()),
            End::Eof(t) => format!("then closed at {:.1} s", t.as_secs_f64()),
            End::Reset(t) if none => format!("reset without an answer at {:.1} s", t.as_secs_f64()),
            End::Reset(t) => format!("then reset at {:.1} s", t.as_secs_f64()),
            End::Error(e) => format!("read error: {e}"),
        });
        parts.join("; ")
    }
}

fn human_bytes(n: usize) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.0} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

// ---------------------------------------------------------------------------------------------
// Normal requests: the follow-up and the concurrent watcher

/// One normal GET on a fresh connection: the status line and the time to the full response.
fn normal_get(ctx: &Ctx, timeout: Duration) -> Result<(String, Duration), String> {
    let t0 = Instant::now();
    let mut s = TcpStream::connect_timeout(&ctx.addr, timeout).map_err(|e| format!("connect: {}", e.kind()))?;
    let _ = s.set_nodelay(true);
    s.set_write_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    s.write_all(ctx.get("").as_bytes()).map_err(|e| format!("write: {}", e.kind()))?;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let left = timeout.checked_sub(t0.elapsed()).filter(|d| !d.is_zero());
        let Some(left) = left else {
            return Err(format!("no answer within {} s", timeout.as_secs()));
        };
        s.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
        match s.read(&mut chunk) {
            Ok(0) => return Err("closed without an answer".to_owned()),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if let Some(first) = parse_responses(&buf).0.into_iter().next() {
                    return Ok((short_status(&first), t0.elapsed()));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(format!("no answer within {} s", timeout.as_secs()))
            }
            Err(e) => return Err(format!("read: {}", e.kind())),
        }
    }
}

fn ms(d: Duration) -> String {
    let m = d.as_secs_f64() * 1e3;
    if m < 10.0 {
        format!("{m:.1} ms")
    } else {
        format!("{m:.0} ms")
    }
}

fn follow_up(ctx: &Ctx) -> (bool, String) {
    match normal_get(ctx, FOLLOW_UP_TIMEOUT) {
        Ok((status, t)) if status.starts_with("200") => (true, format!("200 in {}", ms(t))),
        Ok((status, t)) => (false, format!("**{status}** in {}", ms(t))),
        Err(e) => (false, format!("**FAILED: {e}**")),
    }
}

#[derive(Default)]
struct WatchStats {
    sent: usize,
    ok: usize,
    max: Duration,
    failures: Vec<String>,
}

/// A fresh-connection GET every 250 ms until stopped.
fn start_watcher(ctx: Arc<Ctx>, stop: Arc<AtomicBool>) -> JoinHandle<WatchStats> {
    thread::spawn(move || {
        let mut w = WatchStats::default();
        // At least one request, however short the case.
        loop {
            let t0 = Instant::now();
            w.sent += 1;
            match normal_get(&ctx, FOLLOW_UP_TIMEOUT) {
                Ok((status, t)) if status.starts_with("200") => {
                    w.ok += 1;
                    w.max = w.max.max(t);
                }
                Ok((status, _)) => w.failures.push(status),
                Err(e) => {
                    w.max = w.max.max(t0.elapsed());
                    w.failures.push(e);
                }
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
            if let Some(rest) = WATCH_EVERY.checked_sub(t0.elapsed()) {
                thread::sleep(rest);
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
        }
        w
    })
}

impl WatchStats {
    fn describe(&self) -> (bool, String) {
        let good = self.ok == self.sent && self.max < FOLLOW_UP_TIMEOUT;
        let mut s = format!("{}/{} ok, max {}", self.ok, self.sent, ms(self.max));
        if let Some(f) = self.failures.first() {
            s.push_str(&format!(" ({f})"));
        }
        (good, if good { s } else { format!("**{s}**") })
    }
}

// ---------------------------------------------------------------------------------------------
// The process

fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // Field 3 (after the parenthesised command name) is the state; Z is a zombie.
        Ok(stat) => stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

/// Resident memory now and at its peak (VmRSS, VmHWM), and the number of open descriptors.
fn resources(pid: u32) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<usize> {
        status.lines().find(|l| l.starts_with(name))?.split_whitespace().nth(1)?.parse().ok()
    };
    let (rss, peak) = (field("VmRSS:")?, field("VmHWM:")?);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    Some(format!("{} (peak {}), {fds} fds", human_bytes(rss * 1024), human_bytes(peak * 1024)))
}

// ---------------------------------------------------------------------------------------------
// The cases

type CaseFn = fn(&Ctx) -> String;

fn send_then(ctx: &Ctx, bytes: &[u8], expected: usize, wait: Duration) -> String {
    let mut c = match Conn::open(ctx) {
        Ok(c) => c,
        Err(e) => return format!("**connect failed: {}**", e.kind()),
    };
    let write = c.send(bytes);
    let out = c.finish(expected, wait, Duration::from_millis(500));
    match write {
        Ok(()) => out.describe(),
        Err(e) => format!("{} ({e})", out.describe()),
    }
}

fn case_bad_json(ctx: &Ctx) -> String {
    let body = "{\"symbol\":\"BTCUSDT\",\"price\": oops";
    let req =
        format!("{}{body}{}", ctx.post("/v1/alerts", &format!("Content-Length: {}\r\n", body.len())), ctx.get(""));
    send_then(ctx, req.as_bytes(), 2, Duration::from_secs(3))
}

fn case_1mib_headers(ctx: &Ctx) -> String {
    let pad = "a".repeat(128 * 1024);
    let extra: String = (0..8).map(|i| format!("X-Pad-{i}: {pad}\r\n")).collect();
    send_then(ctx, ctx.get(&extra).as_bytes(), 1, Duration::from_secs(5))
}

fn case_64mib_header(ctx: &Ctx) -> String {
    let mut c = match Conn::open(ctx) {
        Ok(c) => c,
        Err(e) => return format!("**connect failed: {}**", e.kind()),
    };
    let head =
        format!("GET {PROBE_PATH} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nX-Big: ", ctx.host, ctx.key);
    let chunk = vec![b'a'; 64 * 1024];
    let t0 = Instant::now();
    let mut write = c.send(head.as_bytes());
    let mut value = 0usize;
    while write.is_ok() && value < 64 << 20 {
        if !matches!(c.end(), End::Open) {
            write = Err(format!("server closed after {} of header value", human_bytes(value)));
            break;
        }
        write = c.send(&chunk);
        if write.is_ok() {
            value += chunk.len();
        }
    }
    if write.is_ok() {
        write = c.send(b"\r\n\r\n");
    }
    let streamed = t0.elapsed();
    let out = c.finish(1, Duration::from_secs(15), Duration::from_millis(500));
    let how = match write {
        Ok(()) => format!("all {} sent in {:.1} s", human_bytes(value), streamed.as_secs_f64()),
        Err(e) => e,
    };
    format!("{} ({how})", out.describe())
}

fn case_headers(ctx: &Ctx, total: usize) -> String {
    // Host and Authorization count: `total` header lines in all.
    let extra: String = (0..total - 2).map(|i| format!("X-H-{i}: v\r\n")).collect();
    send_then(ctx, ctx.get(&extra).as_bytes(), 1, Duration::from_secs(3))
}

fn case_17_headers(ctx: &Ctx) -> String {
    case_headers(ctx, 17)
}

fn case_101_headers(ctx: &Ctx) -> String {
    case_headers(ctx, 101)
}

fn case_short_body(ctx: &Ctx) -> String {
    let mut c = match Conn::open(ctx) {
        Ok(c) => c,
        Err(e) => return format!("**connect failed: {}**", e.kind()),
    };
    let req = format!("{}{{\"symbol\":", ctx.post("/v1/alerts", "Content-Length: 100\r\n"));
    let write = c.send(req.as_bytes());
    thread::sleep(Duration::from_millis(200));
    let _ = c.stream.shutdown(Shutdown::Write);
    let out = c.finish(1, Duration::from_secs(3), Duration::from_millis(500));
    match write {
        Ok(()) => out.describe(),
        Err(e) => format!("{} ({e})", out.describe()),
    }
}

fn case_long_body(ctx: &Ctx) -> String {
    let req = format!("{}hello GARBAGE GARBAGE GARBAGE\r\n\r\n", ctx.post("/v1/alerts", "Content-Length: 5\r\n"));
    send_then(ctx, req.as_bytes(), 2, Duration::from_secs(3))
}

fn framing_case(ctx: &Ctx, framing: &str, body: &str) -> String {
    let req = format!("{}{body}{}", ctx.post("/v1/alerts", framing), ctx.get(""));
    send_then(ctx, req.as_bytes(), 2, Duration::from_secs(3))
}

fn case_cl_non_numeric(ctx: &Ctx) -> String {
    framing_case(ctx, "Content-Length: abc\r\n", "hello")
}

fn case_cl_negative(ctx: &Ctx) -> String {
    framing_case(ctx, "Content-Length: -5\r\n", "hello")
}

fn case_cl_conflicting(ctx: &Ctx) -> String {
    framing_case(ctx, "Content-Length: 5\r\nContent-Length: 12\r\n", "hello world!")
}

fn case_chunked(ctx: &Ctx) -> String {
    framing_case(ctx, "Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n\r\n")
}

fn case_bad_chunk(ctx: &Ctx) -> String {
    framing_case(ctx, "Transfer-Encoding: chunked\r\n", "zz\r\nhello\r\n0\r\n\r\n")
}

fn case_garbage(ctx: &Ctx) -> String {
    send_then(ctx, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http at all\r\n\r\n", 1, Duration::from_secs(3))
}

fn case_slow(ctx: &Ctx) -> String {
    let mut c = match Conn::open(ctx) {
        Ok(c) => c,
        Err(e) => return format!("**connect failed: {}**", e.kind()),
    };
    let req = ctx.get("");
    let t0 = Instant::now();
    let mut stopped = None;
    for (i, b) in req.as_bytes().iter().enumerate() {
        if t0.elapsed() >= Duration::from_secs(ctx.slow_secs) {
            break;
        }
        if !matches!(c.end(), End::Open) {
            break;
        }
        if let Err(e) = c.send(std::slice::from_ref(b)) {
            stopped = Some(format!("{e} at {:.1} s", t0.elapsed().as_secs_f64()));
            break;
        }
        // One byte a second, but notice a close at once.
        let next = Duration::from_secs(i as u64 + 1);
        while t0.elapsed() < next && matches!(c.end(), End::Open) {
            thread::sleep(Duration::from_millis(20));
        }
    }
    let sent = c.sent;
    let out = c.finish(usize::MAX, Duration::from_secs(1), Duration::ZERO);
    let mut s = format!("{} ({sent} of {} bytes sent, 1 byte/s)", out.describe(), req.len());
    if let Some(e) = stopped {
        s.push_str(&format!(", {e}"));
    }
    s
}

fn case_slow_body(ctx: &Ctx) -> String {
    let mut c = match Conn::open(ctx) {
        Ok(c) => c,
        Err(e) => return format!("**connect failed: {}**", e.kind()),
    };
    let body = format!("{{\"symbol\":\"BTCUSDT\",\"price\":\"{}\"}}", "1".repeat(60));
    let head = ctx.post("/v1/alerts", &format!("Content-Length: {}\r\n", body.len()));
    let mut stopped = c.send(head.as_bytes()).err();
    let t0 = Instant::now();
    for (i, b) in body.as_bytes().iter().enumerate() {
        if stopped.is_some() || t0.elapsed() >= Duration::from_secs(ctx.slow_secs) || !matches!(c.end(), End::Open) {
            break;
        }
        if let Err(e) = c.send(std::slice::from_ref(b)) {
            stopped = Some(format!("{e} at {:.1} s", t0.elapsed().as_secs_f64()));
            break;
        }
        let next = Duration::from_secs(i as u64 + 1);
        while t0.elapsed() < next && matches!(c.end(), End::Open) {
            thread::sleep(Duration::from_millis(20));
        }
    }
    let body_sent = c.sent.saturating_sub(head.len());
    let out = c.finish(usize::MAX, Duration::from_secs(1), Duration::ZERO);
    let mut s = format!("{} ({body_sent} of {} body bytes sent, 1 byte/s)", out.describe(), body.len());
    if let Some(e) = stopped {
        s.push_str(&format!(", {e}"));
    }
    s
}

fn case_idle_fresh(ctx: &Ctx) -> String {
    match Conn::open(ctx) {
        Ok(c) => c.finish(usize::MAX, Duration::from_secs(ctx.idle_secs), Duration::ZERO).describe(),
        Err(e) => format!("**connect failed: {}**", e.kind()),
    }
}

fn case_idle_keep_alive(ctx: &Ctx) -> String {
    let mut c = match Conn::open(ctx) {
        Ok(c) => c,
        Err(e) => return format!("**connect failed: {}**", e.kind()),
    };
    let write = c.send(ctx.get("").as_bytes());
    let out = c.finish(usize::MAX, Duration::from_secs(ctx.idle_secs + 1), Duration::ZERO);
    match write {
        Ok(()) => out.describe(),
        Err(e) => format!("{} ({e})", out.describe()),
    }
}

fn case_connection_close(ctx: &Ctx) -> String {
    let mut c = match Conn::open(ctx) {
        Ok(c) => c,
        Err(e) => return format!("**connect failed: {}**", e.kind()),
    };
    let write = c.send(ctx.get("Connection: close\r\n").as_bytes());
    let out = c.finish(1, Duration::from_secs(5), Duration::from_secs(2));
    let honoured = matches!(out.end, End::Eof(_) | End::Reset(_)) && !out.responses.is_empty();
    let mut s = format!("{} — {}", out.describe(), if honoured { "honoured" } else { "**not honoured**" });
    if let Err(e) = write {
        s.push_str(&format!(" ({e})"));
    }
    s
}

fn case_pipelined(ctx: &Ctx) -> String {
    let one = ctx.get("");
    let req = format!("{one}{one}{one}");
    send_then(ctx, req.as_bytes(), 3, Duration::from_secs(3))
}

const CASES: &[(&str, CaseFn)] = &[
    ("bad JSON POST body (+ pipelined GET)", case_bad_json),
    ("1 MiB of headers (8 × 128 KiB)", case_1mib_headers),
    ("64 MiB header, streamed", case_64mib_header),
    ("17 headers", case_17_headers),
    ("101 headers", case_101_headers),
    ("body shorter than Content-Length, then half-close", case_short_body),
    ("body longer than Content-Length (extra garbage)", case_long_body),
    ("non-numeric Content-Length (+ pipelined GET)", case_cl_non_numeric),
    ("negative Content-Length (+ pipelined GET)", case_cl_negative),
    ("two conflicting Content-Length (+ pipelined GET)", case_cl_conflicting),
    ("valid chunked body (+ pipelined GET)", case_chunked),
    ("malformed chunk size (+ pipelined GET)", case_bad_chunk),
    ("non-HTTP bytes (TLS-like)", case_garbage),
    ("slow client, 1 byte/s", case_slow),
    ("slow request body, 1 byte/s after a complete head", case_slow_body),
    ("idle fresh connection, nothing sent", case_idle_fresh),
    ("idle keep-alive after one GET", case_idle_keep_alive),
    ("`Connection: close`", case_connection_close),
    ("3 pipelined GETs", case_pipelined),
];

struct Opts {
    target: String,
    key: String,
    pid: Option<u32>,
    only: Option<Vec<usize>>,
    slow_secs: u64,
    idle_secs: u64,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts { target: String::new(), key: String::new(), pid: None, only: None, slow_secs: 15, idle_secs: 30 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--target" => o.target = value()?,
            "--key" => o.key = value()?,
            "--pid" => o.pid = Some(value()?.parse().map_err(|_| "--pid takes a number")?),
            "--slow-secs" => o.slow_secs = value()?.parse().map_err(|_| "--slow-secs takes a number")?,
            "--idle-secs" => o.idle_secs = value()?.parse().map_err(|_| "--idle-secs takes a number")?,
            "--only" => {
                let list: Result<Vec<usize>, _> = value()?.split(',').map(|s| s.trim().parse::<usize>()).collect();
                o.only = Some(list.map_err(|_| "--only takes case numbers, comma separated")?);
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    if o.target.is_empty() || o.key.is_empty() {
        return Err("--target HOST:PORT and --key KEY are required".to_owned());
    }
    Ok(o)
}

fn main() -> std::process::ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("front_probe: {e}\nusage: front_probe --target HOST:PORT --key KEY [--pid PID] [--only 1,2] [--slow-secs 15] [--idle-secs 30]");
            return std::process::ExitCode::from(2);
        }
    };
    let addr = match o.target.to_socket_addrs().ok().and_then(|mut a| a.next()) {
        Some(a) => a,
        None => {
            eprintln!("front_probe: cannot resolve {}", o.target);
            return std::process::ExitCode::from(2);
        }
    };
    let ctx = Arc::new(Ctx {
        addr,
        host: o.target.clone(),
        key: o.key.clone(),
        pid: o.pid,
        slow_secs: o.slow_secs,
        idle_secs: o.idle_secs,
    });
    match normal_get(&ctx, FOLLOW_UP_TIMEOUT) {
        Ok((status, t)) if status.starts_with("200") => println!("baseline GET {PROBE_PATH}: 200 in {}\n", ms(t)),
        Ok((status, _)) => {
            eprintln!("front_probe: baseline GET {PROBE_PATH} answered {status}; check --key");
            return std::process::ExitCode::from(1);
        }
        Err(e) => {
            eprintln!("front_probe: baseline GET {PROBE_PATH}: {e}");
            return std::process::ExitCode::from(1);
        }
    }
    let rss_col = ctx.pid.is_some();
    if let Some(pid) = ctx.pid {
        println!("process {pid} at start: RSS {}\n", resources(pid).unwrap_or_else(|| "?".to_owned()));
    }
    println!(
        "| # | case | server's answer on the probing connection | follow-up GET, fresh connection | concurrent GETs during the case | alive |{}",
        if rss_col { " after: RSS (peak), open fds |" } else { "" }
    );
    println!("|---|---|---|---|---|---|{}", if rss_col { "---|" } else { "" });
    let mut failed = 0;
    for (i, (name, case)) in CASES.iter().enumerate() {
        let n = i + 1;
        if o.only.as_ref().is_some_and(|only| !only.contains(&n)) {
            continue;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let watcher = start_watcher(ctx.clone(), stop.clone());
        let answer = case(&ctx);
        stop.store(true, Ordering::Relaxed);
        let watch = watcher.join().unwrap_or_default();
        let (watch_ok, watch_text) = watch.describe();
        let (follow_ok, follow_text) = follow_up(&ctx);
        let (alive_ok, alive_text) = match ctx.pid {
            None => (true, "n/a".to_owned()),
            Some(pid) if alive(pid) => (true, "yes".to_owned()),
            Some(_) => (false, "**NO**".to_owned()),
        };
        if !(watch_ok && follow_ok && alive_ok) {
            failed += 1;
        }
        let rss_text = match ctx.pid {
            Some(pid) => format!(" {} |", resources(pid).unwrap_or_else(|| "-".to_owned())),
            None => String::new(),
        };
        println!("| {n} | {name} | {answer} | {follow_text} | {watch_text} | {alive_text} |{rss_text}");
    }
    println!("\n{failed} case(s) where the server crashed, stopped accepting or stalled other clients.");
    std::process::ExitCode::SUCCESS
}
