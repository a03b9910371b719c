//! An HTTP/1.1 keep-alive load generator over plain non-blocking TCP sockets, so rampart's front and
//! its baselines can be measured by the same client in the same run; and [`wrk`], which runs the
//! `wrk` tool for a second opinion.
//!
//! [`run`] drives `connections` keep-alive connections from `threads` threads, one request in
//! flight per connection, in one of two modes:
//! - closed loop (`rate_per_s = None`): each connection sends its next request as soon as the
//!   previous answer is complete; latency is measured from the moment the request was queued;
//! - open loop (`rate_per_s = Some(r)`): request `k` of connection `c` is due at
//!   `start + c / r + k × connections / r`, so the whole run offers `r` requests per second evenly
//!   spaced. A request that could not be sent on time because its connection was still waiting
//!   for the previous answer is sent as soon as the connection is free, and its latency is
//!   measured from the time it was due: a server stall shows in full instead of being hidden by
//!   the client waiting (coordinated omission). A request whose connection was free when it fell
//!   due is measured from its actual send: the lateness of the client's own timer (below a
//!   millisecond, more if the machine does not run the client thread) is not the server's.
//!
//! Responses are parsed for real: status line, `Content-Length` or chunked bodies (trailers
//! included), a body delimited by the close of the connection, interim `1xx` answers, `HEAD`,
//! `204` and `304` without bodies, `Connection: close` and HTTP/1.0 keep-alive rules. A
//! connection the server closes is opened again. A request sent on a reused keep-alive
//! connection that the server closed before answering a single byte is sent again once on a new
//! connection (as HTTP clients do for idempotent requests), its latency still counted from the
//! first attempt.
//!
//! Rationale for `mio` rather than blocking sockets: one thread can then serve many connections
//! and see each answer the moment it arrives, without a thread per connection or a busy loop.
//! The sockets are plain TCP sockets; everything HTTP is here.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Registry, Token};

/// Most connections [`run`] opens; more is a caller bug and panics.
pub const LOAD_CONNECTIONS_MAX: usize = 1024;
/// Read buffer per connection, bytes. A response head, chunk-size line or trailer line longer
/// than this is an error (counted, and the connection is closed); bodies stream through it and
/// are never stored.
pub const READ_BUFFER_BYTES: usize = 64 * 1024;
/// Longest request [`run`] accepts, bytes; a longer one is a caller bug and panics.
pub const LOAD_REQUEST_BYTES_MAX: usize = 64 * 1024;
/// Longest run: a longer `duration` is cut to this.
pub const DURATION_MAX: Duration = Duration::from_secs(24 * 60 * 60);
/// After the run's duration, how long requests already due may still complete. At the bound,
/// every request still unanswered (or due and never sent) is counted as an error.
pub const DRAIN_MAX: Duration = Duration::from_secs(2);
/// Largest latency the histogram holds, µs (60 s); longer latencies are recorded as this.
pub const LATENCY_US_MAX: u64 = 60_000_000;
/// Time given to the first connects before the clock starts; connections still not open then
/// are opened during the run.
const SETUP_MAX: Duration = Duration::from_secs(2);
/// Wait before connecting again after a failed connect.
const RECONNECT_DELAY: Duration = Duration::from_millis(10);
/// Readiness events taken per poll.
const LOAD_EVENTS_MAX: usize = 1024;
/// Open loop: closer than this to a due send, the thread polls without sleeping (yielding the
/// core to any other runnable thread between polls).
///
/// Rationale: epoll's timeout has millisecond resolution (mio rounds up), which would send
/// requests in bursts once per millisecond instead of evenly spaced. At more than ~1 000 requests
/// per second per thread the thread therefore polls all the time; it yields between polls so a
/// server sharing its core still runs.
const SPIN_BELOW: Duration = Duration::from_millis(1);

/// What one [`run`] measured.
#[derive(Clone, Debug)]
pub struct LoadResult {
    /// Responses received in full (any status).
    pub requests: u64,
    /// Failed connects, I/O errors, malformed responses, connections closed mid-response, and
    /// requests still unanswered (or due and never sent) when the drain time ran out.
    pub errors: u64,
    /// Responses whose status was not 2xx (included in `requests`).
    pub non_2xx: u64,
    /// Wall time from the start of the measurement until the last thread finished, s (the
    /// requested duration plus the drain of the requests in flight).
    pub duration_s: f64,
    /// `requests / duration_s`.
    pub req_per_s: f64,
    /// Latency of every response, µs, to the last byte of the answer: from the request's queueing
    /// in a closed loop; in an open loop from its due time if it had to wait for its connection,
    /// else from its send (see the module docs).
    pub latency_us: Histogram<u64>,
}

/// Latency percentiles of a [`LoadResult`], µs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LatencySummary {
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest.
    pub max_us: u64,
}

impl std::fmt::Display for LatencySummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {} µs, p90 {} µs, p99 {} µs, p99.9 {} µs, max {} µs",
            self.p50_us, self.p90_us, self.p99_us, self.p999_us, self.max_us
        )
    }
}

impl LoadResult {
    /// The latency percentiles, µs (all zero when nothing was answered).
    pub fn summary(&self) -> LatencySummary {
        let h = &self.latency_us;
        LatencySummary {
            p50_us: h.value_at_quantile(0.5),
            p90_us: h.value_at_quantile(0.9),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

fn latency_histogram() -> Histogram<u64> {
    // Constant, valid bounds: construction cannot fail.
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).expect("valid histogram bounds")
}

/// Runs load against `addr` for `duration` and returns what was measured.
///
/// `requests` are complete request heads (with a body after the head if the method takes one),
/// each sent as is; connection `c` starts at request `c % requests.len()` and goes round-robin.
/// `connections` (1 ..= [`LOAD_CONNECTIONS_MAX`]) are spread over `threads` threads (at least one, at
/// most one per connection). `rate_per_s`: `None` for a closed loop, `Some(r)` for an open loop
/// offering `r` requests per second in all (see the module docs).
///
/// Panics when `requests` is empty or holds an empty request or one longer than
/// [`LOAD_REQUEST_BYTES_MAX`], when `connections` is out of range, or when the rate is not a positive
/// finite number. Failures of the server or the network are counted, never panics.
pub fn run(
    addr: SocketAddr,
    requests: &[String],
    connections: usize,
    threads: usize,
    duration: Duration,
    rate_per_s: Option<f64>,
) -> LoadResult {
    assert!(!requests.is_empty(), "http_load::run needs at least one request");
    assert!(
        requests.iter().all(|r| !r.is_empty() && r.len() <= LOAD_REQUEST_BYTES_MAX),
        "every request must hold 1 ..= {LOAD_REQUEST_BYTES_MAX} bytes"
    );
    assert!((1..=LOAD_CONNECTIONS_MAX).contains(&connections), "connections must be in 1..={LOAD_CONNECTIONS_MAX}");
    if let Some(r) = rate_per_s {
        assert!(r.is_finite() && r > 0.0, "rate_per_s must be a positive finite number, not {r}");
    }
    let duration = duration.min(DURATION_MAX);
    let threads = threads.clamp(1, connections);
    // A connection sends at most one request more than fits in the duration; capping the
    // schedule's steps there keeps every `Instant` sum in range.
    let cap = duration + Duration::from_secs(1);
    let plan = Plan {
        addr,
        requests,
        head_only: requests.iter().map(|r| r.starts_with("HEAD ")).collect(),
        duration,
        open: rate_per_s.map(|r| OpenLoop { interval: capped_secs(connections as f64 / r, cap), rate_per_s: r }),
        cap,
    };
    let barrier = Barrier::new(threads);
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let ids: Vec<usize> = (t..connections).step_by(threads).collect();
                let (plan, barrier) = (&plan, &barrier);
                s.spawn(move || worker(plan, &ids, barrier))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    let mut latency_us = latency_histogram();
    let (mut requests_done, mut errors, mut non_2xx, mut elapsed) = (0, 0, 0, Duration::ZERO);
    for t in &tallies {
        requests_done += t.requests;
        errors += t.errors;
        non_2xx += t.non_2xx;
        elapsed = elapsed.max(t.elapsed);
        // Same bounds on both sides: adding cannot fail.
        let _ = latency_us.add(&t.latency_us);
    }
    let duration_s = elapsed.as_secs_f64();
    LoadResult {
        requests: requests_done,
        errors,
        non_2xx,
        duration_s,
        req_per_s: if duration_s > 0.0 { requests_done as f64 / duration_s } else { 0.0 },
        latency_us,
    }
}

/// The open-loop schedule.
struct OpenLoop {
    /// Time between two requests of one connection.
    interval: Duration,
    rate_per_s: f64,
}

/// What every thread reads.
struct Plan<'a> {
    addr: SocketAddr,
    requests: &'a [String],
    /// Per request: it is a `HEAD` (its answer has no body).
    head_only: Vec<bool>,
    duration: Duration,
    open: Option<OpenLoop>,
    /// Longest step of a schedule: the duration plus a second.
    cap: Duration,
}

/// `s` seconds, at most `cap` (also for infinite or out-of-range `s`).
fn capped_secs(s: f64, cap: Duration) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or(cap).min(cap)
}

/// One thread's counts.
struct Tally {
    requests: u64,
    errors: u64,
    non_2xx: u64,
    latency_us: Histogram<u64>,
    elapsed: Duration,
}

impl Tally {
    fn record(&mut self, latency: Duration, status: u16) {
        self.requests += 1;
        if !(200..300).contains(&status) {
            self.non_2xx += 1;
        }
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX).clamp(1, LATENCY_US_MAX);
        self.latency_us.saturating_record(us);
    }
}

/// One thread: its connections, one poll, until the duration and the drain are over.
fn worker(plan: &Plan<'_>, ids: &[usize], barrier: &Barrier) -> Tally {
    let mut tally =
        Tally { requests: 0, errors: 0, non_2xx: 0, latency_us: latency_histogram(), elapsed: Duration::ZERO };
    let mut poll = match Poll::new() {
        Ok(p) => p,
        Err(_) => {
            barrier.wait();
            tally.errors += ids.len() as u64;
            return tally;
        }
    };
    let mut events = Events::with_capacity(ids.len().clamp(1, LOAD_EVENTS_MAX));
    let mut conns: Vec<Conn> = ids.iter().map(|&id| Conn::new(id, plan.requests.len())).collect();

    // Open every connection before the clock starts.
    let setup_until = Instant::now() + SETUP_MAX;
    for (k, c) in conns.iter_mut().enumerate() {
        c.connect(plan, poll.registry(), Token(k), Instant::now(), &mut tally);
    }
    loop {
        let now = Instant::now();
        if now >= setup_until || !conns.iter().any(|c| c.stream.is_some() && !c.connected) {
            break;
        }
        if poll.poll(&mut events, Some(setup_until - now)).is_err() {
            break;
        }
        for ev in events.iter() {
            if let Some(c) = conns.get_mut(ev.token().0) {
                c.on_ready(plan, poll.registry(), &mut tally);
            }
        }
    }

    barrier.wait();
    let start = Instant::now();
    let deadline = start + plan.duration;
    let hard_stop = deadline + DRAIN_MAX;
    if let Some(o) = &plan.open {
        for c in &mut conns {
            c.next_due = start + capped_secs(c.id as f64 / o.rate_per_s, plan.cap);
        }
    }
    loop {
        let now = Instant::now();
        // Queue what is due, open what must be opened, and find the next time to wake.
        let mut wake = hard_stop;
        let mut send_wake: Option<Instant> = None;
        let mut busy = false;
        for (k, c) in conns.iter_mut().enumerate() {
            if !c.in_flight {
                match &plan.open {
                    None if now < deadline => c.queue(now, plan.requests.len()),
                    Some(o) if c.next_due < deadline => {
                        if c.next_due <= now {
                            let due = c.next_due;
                            c.next_due += o.interval;
                            // Waited for the server (its connection was busy when it fell due):
                            // from the due time; else only the client was late: from now.
                            let origin = if c.free_since > due { due } else { now };
                            c.queue(origin, plan.requests.len());
                        } else {
                            send_wake = Some(send_wake.map_or(c.next_due, |w| w.min(c.next_due)));
                        }
                    }
                    _ => {}
                }
            }
            if c.in_flight {
                busy = true;
                if c.stream.is_none() {
                    match c.retry_at {
                        Some(t) if t > now => wake = wake.min(t),
                        _ => c.connect(plan, poll.registry(), Token(k), now, &mut tally),
                    }
                }
                if c.connected {
                    c.pump_write(plan, poll.registry(), &mut tally);
                }
            }
        }
        let sending_done = match &plan.open {
            None => now >= deadline,
            Some(_) => send_wake.is_none(),
        };
        if sending_done && !busy {
            break;
        }
        if now >= hard_stop {
            for c in &conns {
                tally.errors += u64::from(c.in_flight);
                if let (Some(o), true) = (&plan.open, c.next_due < deadline) {
                    let missed = (deadline - c.next_due).as_nanos().div_ceil(o.interval.as_nanos().max(1));
                    tally.errors += u64::try_from(missed).unwrap_or(u64::MAX);
                }
            }
            break;
        }
        let mut timeout = wake.saturating_duration_since(now);
        if let Some(t) = send_wake {
            timeout = timeout.min(t.saturating_duration_since(now).saturating_sub(SPIN_BELOW));
        }
        if poll.poll(&mut events, Some(timeout)).is_err() {
            // EINTR and the like: go round again.
            continue;
        }
        if timeout.is_zero() && events.is_empty() {
            std::thread::yield_now();
        }
        for ev in events.iter() {
            if let Some(c) = conns.get_mut(ev.token().0) {
                c.on_ready(plan, poll.registry(), &mut tally);
            }
        }
    }
    tally.elapsed = start.elapsed();
    for c in &mut conns {
        c.close(poll.registry());
    }
    tally
}

/// One connection and its one request in flight.
struct Conn {
    /// Global connection number (the open-loop offset and the first request).
    id: usize,
    stream: Option<TcpStream>,
    /// The connect has completed.
    connected: bool,
    /// The connection has answered at least one request (a keep-alive reuse).
    reused: bool,
    /// When to try connecting again after a failed connect.
    retry_at: Option<Instant>,
    buf: Box<[u8]>,
    /// Unparsed bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    parser: ResponseParser,
    /// A request is queued or sent and not yet answered.
    in_flight: bool,
    /// The request in flight, and the next one.
    current: usize,
    next: usize,
    /// Bytes of the request in flight written so far.
    written: usize,
    /// Where its latency counts from.
    origin: Instant,
    /// The request in flight has already been sent again once on a new connection.
    retried: bool,
    /// Open loop: when the next request is due.
    next_due: Instant,
    /// When the connection last finished a request (answered or failed): a request due before
    /// then had to wait for the server.
    free_since: Instant,
}

impl Conn {
    fn new(id: usize, requests: usize) -> Conn {
        let now = Instant::now();
        Conn {
            id,
            stream: None,
            connected: false,
            reused: false,
            retry_at: None,
            buf: vec![0u8; READ_BUFFER_BYTES].into_boxed_slice(),
            start: 0,
            end: 0,
            parser: ResponseParser::default(),
            in_flight: false,
            current: 0,
            next: id % requests,
            written: 0,
            origin: now,
            retried: false,
            next_due: now,
            free_since: now,
        }
    }

    /// Starts a non-blocking connect; a failure is counted and retried after a delay.
    fn connect(&mut self, plan: &Plan<'_>, registry: &Registry, token: Token, now: Instant, tally: &mut Tally) {
        self.close(registry);
        let registered = TcpStream::connect(plan.addr).and_then(|mut s| {
            registry.register(&mut s, token, Interest::READABLE | Interest::WRITABLE)?;
            Ok(s)
        });
        match registered {
            Ok(s) => {
                self.stream = Some(s);
                self.retry_at = None;
            }
            Err(_) => self.fail(registry, now, tally, true),
        }
    }

    /// Closes the socket (if any) and forgets the bytes read; the request in flight stays.
    fn close(&mut self, registry: &Registry) {
        if let Some(mut s) = self.stream.take() {
            let _ = registry.deregister(&mut s);
        }
        self.connected = false;
        self.reused = false;
        self.start = 0;
        self.end = 0;
        self.parser = ResponseParser::default();
    }

    /// Counts an error, drops the request in flight and closes the connection.
    fn fail(&mut self, registry: &Registry, now: Instant, tally: &mut Tally, connect_failed: bool) {
        tally.errors += 1;
        self.in_flight = false;
        self.free_since = now;
        self.close(registry);
        self.retry_at = connect_failed.then(|| now + RECONNECT_DELAY);
    }

    /// The connection was lost with the request in flight: on a reused connection that had not
    /// started answering it, send it again once on a new connection; otherwise an error.
    fn lost(&mut self, registry: &Registry, tally: &mut Tally) {
        if self.in_flight && self.reused && !self.retried && !self.parser.seen {
            self.retried = true;
            self.written = 0;
            self.close(registry);
        } else if self.in_flight {
            self.fail(registry, Instant::now(), tally, false);
        } else {
            self.close(registry);
        }
    }

    /// Queues the next of `requests` requests, with latency counted from `origin`.
    fn queue(&mut self, origin: Instant, requests: usize) {
        debug_assert!(!self.in_flight);
        self.in_flight = true;
        self.current = self.next;
        self.next = (self.next + 1) % requests;
        self.written = 0;
        self.origin = origin;
        self.retried = false;
    }

    /// The socket is ready for something: finish the connect, write, read.
    fn on_ready(&mut self, plan: &Plan<'_>, registry: &Registry, tally: &mut Tally) {
        let Some(stream) = &self.stream else { return };
        if !self.connected {
            let connected = match stream.take_error() {
                Ok(None) => match stream.peer_addr() {
                    Ok(_) => Ok(true),
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
                    Err(e) => Err(e),
                },
                Ok(Some(e)) | Err(e) => Err(e),
            };
            match connected {
                Ok(true) => {
                    self.connected = true;
                    let _ = stream.set_nodelay(true);
                }
                // Still connecting: a spurious wake-up.
                Ok(false) => return,
                Err(_) => return self.fail(registry, Instant::now(), tally, true),
            }
        }
        self.pump_write(plan, registry, tally);
        self.pump_read(plan, registry, tally);
    }

    /// Writes what remains of the request in flight until done or the socket is full.
    fn pump_write(&mut self, plan: &Plan<'_>, registry: &Registry, tally: &mut Tally) {
        if !self.in_flight || !self.connected {
            return;
        }
        let request = plan.requests[self.current].as_bytes();
        while self.written < request.len() {
            let Some(stream) = &mut self.stream else { return };
            match stream.write(&request[self.written..]) {
                Ok(0) => return self.lost(registry, tally),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.lost(registry, tally),
            }
        }
    }

    /// Reads and parses until the socket is empty; completes, closes and reconnects as needed.
    fn pump_read(&mut self, plan: &Plan<'_>, registry: &Registry, tally: &mut Tally) {
        loop {
            if self.end == self.buf.len() {
                if self.start == 0 {
                    // A head or line that does not fit the buffer.
                    return self.fail(registry, Instant::now(), tally, false);
                }
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let Some(stream) = &mut self.stream else { return };
            match stream.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    if !self.in_flight {
                        // The server closed an idle keep-alive connection.
                        return self.close(registry);
                    }
                    return match self.parser.on_eof() {
                        Ok(status) => {
                            self.free_since = Instant::now();
                            tally.record(self.free_since - self.origin, status);
                            self.in_flight = false;
                            self.close(registry);
                        }
                        Err(_) => self.lost(registry, tally),
                    };
                }
                Ok(n) => {
                    self.end += n;
                    if !self.in_flight {
                        // Bytes nobody asked for: the connection is out of step.
                        return self.fail(registry, Instant::now(), tally, false);
                    }
                    if !self.parse(plan, registry, tally) {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.lost(registry, tally),
            }
        }
    }

    /// Parses the bytes read; false when the connection was closed (stop reading it).
    fn parse(&mut self, plan: &Plan<'_>, registry: &Registry, tally: &mut Tally) -> bool {
        let head_only = plan.head_only[self.current];
        match self.parser.advance(&self.buf[self.start..self.end], head_only) {
            Err(_) => {
                self.fail(registry, Instant::now(), tally, false);
                false
            }
            Ok((used, done)) => {
                self.start += used;
                if self.start == self.end {
                    self.start = 0;
                    self.end = 0;
                }
                let Some(answer) = done else { return true };
                self.free_since = Instant::now();
                tally.record(self.free_since - self.origin, answer.status);
                self.in_flight = false;
                self.reused = true;
                if self.end > self.start {
                    // More bytes than the one answer asked for: out of step.
                    self.fail(registry, Instant::now(), tally, false);
                    return false;
                }
                if answer.close {
                    self.close(registry);
                    return false;
                }
                true
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Response parsing, sans-I/O.

/// A complete response.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Answer {
    status: u16,
    /// The server closes the connection after it.
    close: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
enum State {
    /// Reading a status line and headers.
    #[default]
    Head,
    /// `Content-Length` bytes still to come.
    Body(u64),
    /// A chunk-size line.
    ChunkSize,
    /// Chunk data still to come.
    ChunkData(u64),
    /// The CRLF after chunk data.
    ChunkEnd,
    /// Trailer lines up to the empty one.
    Trailers,
    /// The body ends when the server closes the connection.
    UntilClose,
}

/// Parses one response at a time from the bytes given; holds no bytes itself.
#[derive(Clone, Debug, Default)]
struct ResponseParser {
    state: State,
    status: u16,
    close: bool,
    /// Bytes of the unparsed input already searched for the end of the head.
    scanned: usize,
    /// A byte of this response has been seen.
    seen: bool,
}

impl ResponseParser {
    /// Parses as much of `input` as it can: returns the bytes used and the answer once one is
    /// complete (then the parser is ready for the next response; the bytes after it are not
    /// used). An error means the connection cannot be trusted any more.
    fn advance(&mut self, input: &[u8], head_only: bool) -> Result<(usize, Option<Answer>), &'static str> {
        let mut used = 0;
        self.seen |= !input.is_empty();
        loop {
            let rest = &input[used..];
            match self.state {
                State::Head => {
                    let from = self.scanned.saturating_sub(3);
                    let Some(at) = find(&rest[from.min(rest.len())..], b"\r\n\r\n").map(|i| i + from) else {
                        self.scanned = rest.len();
                        return Ok((used, None));
                    };
                    self.scanned = 0;
                    let head = parse_head(&rest[..at])?;
                    used += at + 4;
                    self.status = head.status;
                    self.close = head.close;
                    if (100..200).contains(&head.status) {
                        if head.status == 101 {
                            return Err("101 Switching Protocols is not HTTP/1.1 any more");
                        }
                        // An interim answer: the real one follows.
                        continue;
                    }
                    self.state = if head_only || head.status == 204 || head.status == 304 {
                        return Ok((used, Some(self.done())));
                    } else if head.chunked {
                        State::ChunkSize
                    } else if head.other_coding {
                        self.close = true;
                        State::UntilClose
                    } else {
                        match head.content_length {
                            Some(0) => return Ok((used, Some(self.done()))),
                            Some(n) => State::Body(n),
                            None => {
                                self.close = true;
                                State::UntilClose
                            }
                        }
                    };
                }
                State::Body(left) => {
                    let take = left.min(rest.len() as u64);
                    used += take as usize;
                    if take == left {
                        return Ok((used, Some(self.done())));
                    }
                    self.state = State::Body(left - take);
                    return Ok((used, None));
                }
                State::ChunkSize => {
                    let Some(at) = find(rest, b"\r\n") else { return Ok((used, None)) };
                    let size = chunk_size(&rest[..at])?;
                    used += at + 2;
                    self.state = if size == 0 { State::Trailers } else { State::ChunkData(size) };
                }
                State::ChunkData(left) => {
                    let take = left.min(rest.len() as u64);
                    used += take as usize;
                    if take < left {
                        self.state = State::ChunkData(left - take);
                        return Ok((used, None));
                    }
                    self.state = State::ChunkEnd;
                }
                State::ChunkEnd => {
                    if rest.len() < 2 {
                        return Ok((used, None));
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err("chunk data not followed by CRLF");
                    }
                    used += 2;
                    self.state = State::ChunkSize;
                }
                State::Trailers => {
                    let Some(at) = find(rest, b"\r\n") else { return Ok((used, None)) };
                    used += at + 2;
                    if at == 0 {
                        return Ok((used, Some(self.done())));
                    }
                }
                State::UntilClose => return Ok((input.len(), None)),
            }
        }
    }

    /// The connection was closed: the status of a response that ends there, or an error.
    fn on_eof(&mut self) -> Result<u16, &'static str> {
        match self.state {
            State::UntilClose => Ok(self.done().status),
            State::Head if !self.seen => Err("closed before answering"),
            _ => Err("closed in the middle of a response"),
        }
    }

    fn done(&mut self) -> Answer {
        let answer = Answer { status: self.status, close: self.close };
        *self = ResponseParser::default();
        answer
    }
}

/// What a response head says about framing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Head {
    status: u16,
    close: bool,
    content_length: Option<u64>,
    chunked: bool,
    /// A transfer coding other than a final `chunked`: the body runs to the close.
    other_coding: bool,
}

/// Parses a response head (without its final CRLF CRLF).
fn parse_head(head: &[u8]) -> Result<Head, &'static str> {
    let mut lines = head.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let status_line = lines.next().ok_or("empty head")?;
    let http10 = match status_line.get(..9) {
        Some(b"HTTP/1.1 ") => false,
        Some(b"HTTP/1.0 ") => true,
        _ => return Err("not an HTTP/1.x status line"),
    };
    let code = status_line.get(9..12).ok_or("short status line")?;
    if !code.iter().all(u8::is_ascii_digit) || status_line.get(12).is_some_and(|&b| b != b' ') {
        return Err("malformed status code");
    }
    let status = code.iter().fold(0u16, |n, &d| n * 10 + u16::from(d - b'0'));
    let mut h = Head { status, close: false, content_length: None, chunked: false, other_coding: false };
    let (mut close, mut keep_alive) = (false, false);
    for line in lines {
        if line.first().is_some_and(|&b| b == b' ' || b == b'\t') {
            return Err("folded header line");
        }
        let colon = line.iter().position(|&b| b == b':').ok_or("header line without a colon")?;
        let (name, value) = (&line[..colon], trim(&line[colon + 1..]));
        if name.is_empty() || name.iter().any(|&b| b == b' ' || b == b'\t') {
            return Err("malformed header name");
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            if value.is_empty() || value.len() > 18 || !value.iter().all(u8::is_ascii_digit) {
                return Err("malformed Content-Length");
            }
            let n = value.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
            if h.content_length.is_some_and(|m| m != n) {
                return Err("conflicting Content-Length");
            }
            h.content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            let last = value.rsplit(|&b| b == b',').next().map(trim).unwrap_or_default();
            if last.eq_ignore_ascii_case(b"chunked") {
                h.chunked = true;
                h.other_coding = false;
            } else {
                h.chunked = false;
                h.other_coding = true;
            }
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in value.split(|&b| b == b',').map(trim) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    h.close = close || (http10 && !keep_alive);
    Ok(h)
}

/// A chunk-size line: hex digits, then optional extensions after `;`.
fn chunk_size(line: &[u8]) -> Result<u64, &'static str> {
    let digits = trim(line.split(|&b| b == b';').next().unwrap_or_default());
    if digits.is_empty() || digits.len() > 15 {
        return Err("malformed chunk size");
    }
    digits.iter().try_fold(0u64, |n, &d| {
        let v = (d as char).to_digit(16).ok_or("malformed chunk size")?;
        Ok(n * 16 + u64::from(v))
    })
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

// ---------------------------------------------------------------------------------------------
// wrk.

/// What [`wrk`] read from the tool's report.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct WrkResult {
    /// `Requests/sec`.
    pub req_per_s: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// 75th percentile, µs.
    pub p75_us: f64,
    /// 90th percentile, µs.
    pub p90_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
}

/// Most bytes of wrk's report kept; the rest is read and dropped.
const WRK_OUTPUT_BYTES_MAX: u64 = 1024 * 1024;

/// Runs `wrk -t THREADS -c CONNECTIONS -d SECSs --latency [-H HEADER] URL` and parses its report.
///
/// `connections` is at least 1, `threads` is 1 ..= `connections` (wrk refuses more threads than
/// connections), `secs` at least 1. Returns `None` when `wrk` is not on `PATH`, when it fails, or
/// when its report cannot be read. wrk is closed loop: its latencies are subject to coordinated
/// omission, unlike [`run`]'s open loop.
pub fn wrk(url: &str, header: Option<&str>, connections: usize, threads: usize, secs: u64) -> Option<WrkResult> {
    let connections = connections.max(1);
    let mut cmd = Command::new("wrk");
    cmd.arg("-t")
        .arg(threads.clamp(1, connections).to_string())
        .arg("-c")
        .arg(connections.to_string())
        .arg("-d")
        .arg(format!("{}s", secs.max(1)))
        .arg("--latency");
    if let Some(h) = header {
        cmd.arg("-H").arg(h);
    }
    cmd.arg(url).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
    // Not on PATH (or not runnable): `None`, as documented.
    let mut child = cmd.spawn().ok()?;
    let mut report = String::new();
    if let Some(mut out) = child.stdout.take() {
        let read = out.by_ref().take(WRK_OUTPUT_BYTES_MAX).read_to_string(&mut report);
        // Drain the rest so wrk never blocks on a full pipe.
        let _ = io::copy(&mut out, &mut io::sink());
        if read.is_err() {
            let _ = child.wait();
            return None;
        }
    }
    let status = child.wait().ok()?;
    if !status.success() {
        return None;
    }
    parse_wrk(&report)
}

/// Reads `Requests/sec` and the `Latency Distribution` block of a wrk report.
fn parse_wrk(report: &str) -> Option<WrkResult> {
    let mut req_per_s = None;
    let mut pct = [None; 4];
    let mut in_distribution = false;
    for line in report.lines().map(str::trim) {
        if let Some(v) = line.strip_prefix("Requests/sec:") {
            req_per_s = v.trim().parse::<f64>().ok();
        } else if line.starts_with("Latency Distribution") {
            in_distribution = true;
        } else if in_distribution {
            let mut parts = line.split_whitespace();
            let slot = match parts.next() {
                Some("50%") => 0,
                Some("75%") => 1,
                Some("90%") => 2,
                Some("99%") => 3,
                _ => {
                    in_distribution = false;
                    continue;
                }
            };
            pct[slot] = parts.next().and_then(wrk_time_us);
        }
    }
    Some(WrkResult { req_per_s: req_per_s?, p50_us: pct[0]?, p75_us: pct[1]?, p90_us: pct[2]?, p99_us: pct[3]? })
}

/// A wrk time (`812.00us`, `1.23ms`, `2.00s`, `1.50m`, `1.00h`) in µs.
fn wrk_time_us(s: &str) -> Option<f64> {
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = s.split_at(split);
    let v: f64 = number.parse().ok()?;
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        "h" => 3_600e6,
        _ => return None,
    };
    Some(v * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in pieces of `step` bytes like a socket would, keeping unparsed bytes.
    fn feed(input: &[u8], step: usize, head_only: bool) -> Result<Vec<Answer>, &'static str> {
        let mut p = ResponseParser::default();
        let mut pending: Vec<u8> = Vec::new();
        let mut out = Vec::new();
        for piece in input.chunks(step.max(1)) {
            pending.extend_from_slice(piece);
            loop {
                let (used, done) = p.advance(&pending, head_only)?;
                pending.drain(..used);
                match done {
                    Some(a) => out.push(a),
                    None => break,
                }
            }
        }
        assert!(pending.is_empty(), "bytes left: {:?}", String::from_utf8_lossy(&pending));
        Ok(out)
    }

    #[test]
    fn content_length_chunked_and_interim_answers() {
        let input = concat!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhello",
            "HTTP/1.1 100 Continue\r\n\r\n",
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            "5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: y\r\n\r\n",
            "HTTP/1.1 204 No Content\r\n\r\n",
            "HTTP/1.1 503 Busy\r\nContent-Length: 2\r\nConnection: keep-alive, close\r\n\r\nno",
        );
        for step in [1, 2, 3, 7, 64, 4096] {
            let answers = feed(input.as_bytes(), step, false).expect("parses");
            let statuses: Vec<(u16, bool)> = answers.iter().map(|a| (a.status, a.close)).collect();
            assert_eq!(statuses, [(200, false), (404, false), (200, false), (204, false), (503, true)], "step {step}");
        }
    }

    #[test]
    fn head_answers_and_http10() {
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n";
        let a = feed(head.as_bytes(), 5, true).expect("parses");
        assert_eq!(a, [Answer { status: 200, close: false }]);
        let old = "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(feed(old.as_bytes(), 3, false).expect("parses"), [Answer { status: 200, close: true }]);
        let kept = "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(feed(kept.as_bytes(), 3, false).expect("parses"), [Answer { status: 200, close: false }]);
    }

    #[test]
    fn body_until_close() {
        let mut p = ResponseParser::default();
        let input = b"HTTP/1.1 200 OK\r\n\r\nsome body";
        let (used, done) = p.advance(input, false).expect("parses");
        assert_eq!((used, done), (input.len(), None));
        assert_eq!(p.on_eof(), Ok(200));
        let mut q = ResponseParser::default();
        assert!(q.on_eof().is_err(), "closed before answering");
        let (_, done) = q.advance(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc", false).expect("parses");
        assert_eq!(done, None);
        assert!(q.on_eof().is_err(), "closed mid-body");
    }

    #[test]
    fn malformed_responses_are_errors() {
        for bad in [
            "HTTP/2 200 OK\r\n\r\n",
            "HTTP/1.1 20 OK\r\n\r\n",
            "HTTP/1.1 2000 OK\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\nNo colon\r\n\r\n",
            "HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY",
            "HTTP/1.1 101 Switching Protocols\r\n\r\n",
        ] {
            assert!(feed(bad.as_bytes(), 4096, false).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn wrk_report_is_read() {
        let report = "Running 1s test @ http://127.0.0.1:1/\n  1 threads and 2 connections\n\
            \x20 Thread Stats   Avg      Stdev     Max   +/- Stdev\n\
            \x20   Latency   180.00us   50.00us   1.20ms   90.00%\n\
            \x20 Latency Distribution\n\
            \x20    50%  162.00us\n     75%  190.00us\n     90%    1.02ms\n     99%    2.50s\n\
            \x20 123456 requests in 1.00s, 12.00MB read\n\
            Requests/sec: 123456.78\nTransfer/sec:     12.00MB\n";
        let r = parse_wrk(report).expect("parses");
        assert_eq!(
            r,
            WrkResult { req_per_s: 123_456.78, p50_us: 162.0, p75_us: 190.0, p90_us: 1_020.0, p99_us: 2_500_000.0 }
        );
        assert_eq!(wrk_time_us("1.50m"), Some(90e6));
        assert!(parse_wrk("Requests/sec: 1\n").is_none(), "no distribution");
    }
}
