//! One keep-alive connection of the load generator ([`Conn`]) and its one request in flight:
//! the non-blocking connect, writing the request, reading and parsing the answer, and what
//! happens when the server closes it (reconnect, send once again, or count an error).

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

use super::plan::{Plan, Tally};
use super::response::ResponseParser;

/// Read buffer per connection, bytes. A response head, chunk-size line or trailer line longer
/// than this is an error (counted, and the connection is closed); bodies stream through it and
/// are never stored.
pub const READ_BUFFER_BYTES: usize = 64 * 1024;
/// Wait before connecting again after a failed connect.
const RECONNECT_DELAY: Duration = Duration::from_millis(10);

/// One connection and its one request in flight.
pub(super) struct Conn {
    /// Global connection number (the open-loop offset and the first request).
    pub(super) id: usize,
    pub(super) stream: Option<TcpStream>,
    /// The connect has completed.
    pub(super) connected: bool,
    /// The connection has answered at least one request (a keep-alive reuse).
    reused: bool,
    /// When to try connecting again after a failed connect.
    pub(super) retry_at: Option<Instant>,
    buf: Box<[u8]>,
    /// Unparsed bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    parser: ResponseParser,
    /// A request is queued or sent and not yet answered.
    pub(super) in_flight: bool,
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
    pub(super) next_due: Instant,
    /// When the connection last finished a request (answered or failed): a request due before
    /// then had to wait for the server.
    pub(super) free_since: Instant,
}

impl Conn {
    pub(super) fn new(id: usize, requests: usize) -> Conn {
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
    pub(super) fn connect(
        &mut self,
        plan: &Plan<'_>,
        registry: &Registry,
        token: Token,
        now: Instant,
        tally: &mut Tally,
    ) {
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
    pub(super) fn close(&mut self, registry: &Registry) {
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
    pub(super) fn queue(&mut self, origin: Instant, requests: usize) {
        debug_assert!(!self.in_flight);
        self.in_flight = true;
        self.current = self.next;
        self.next = (self.next + 1) % requests;
        self.written = 0;
        self.origin = origin;
        self.retried = false;
    }

    /// The socket is ready for something: finish the connect, write, read.
    pub(super) fn on_ready(&mut self, plan: &Plan<'_>, registry: &Registry, tally: &mut Tally) {
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
    pub(super) fn pump_write(&mut self, plan: &Plan<'_>, registry: &Registry, tally: &mut Tally) {
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
