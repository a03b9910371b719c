//! Keep-alive connections to webhook receivers, kept between attempts so a storm of firings to
//! one receiver does not open a connection per delivery.
//!
//! A connection is kept under the key (scheme, authority, the address it was opened to). That
//! address passed the SSRF check when the connection was opened, and an attempt still resolves
//! and checks the URL's host every time: it reuses a connection only to an address that check
//! returned again. Each delivery lane (a thread with its `LocalSet`) has its own pool, so it is a
//! `RefCell`; a receiver may hold a keep-alive connection from each lane.
//!
//! Bounds: at most [`IDLE_PER_KEY_MAX`] idle connections per key and [`IDLE_MAX`] in all (a
//! connection that does not fit is closed); an idle connection older than [`IDLE_TIMEOUT`], or
//! one the receiver has closed, is dropped when met. Connections in use are bounded by the
//! sender's per-host and global attempt bounds.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

pub use rampart_outbound::http::Conn;

/// Idle connections kept per (scheme, authority, address).
pub const IDLE_PER_KEY_MAX: usize = 8;
/// Idle connections kept in all.
pub const IDLE_MAX: usize = 512;
/// An idle connection older than this is closed rather than reused (receivers commonly close
/// idle keep-alive connections after 5 to 60 s; an attempt on a connection closed under it is
/// retried once on a fresh one anyway).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a connection goes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// `https`.
    pub https: bool,
    /// Host and port as the URL gives them, lower case.
    pub authority: String,
    /// The checked address it was opened to.
    pub addr: SocketAddr,
}

/// Whether an idle connection can take a request now: open, ready, and idle for less than
/// [`IDLE_TIMEOUT`].
fn usable(conn: &Conn, now: Instant) -> bool {
    !conn.sender.is_closed() && conn.sender.is_ready() && now.duration_since(conn.idle_since) < IDLE_TIMEOUT
}

/// The idle connections, by key.
#[derive(Clone, Default)]
pub struct Pool(Rc<RefCell<Idle>>);

#[derive(Default)]
struct Idle {
    by_key: HashMap<Key, Vec<Conn>>,
    count: usize,
    reused: u64,
}

impl Pool {
    /// An idle connection to `key` that can take a request now, newest first; closed or stale
    /// ones met on the way are dropped.
    pub fn take(&self, key: &Key) -> Option<Conn> {
        let mut guard = self.0.borrow_mut();
        let idle = &mut *guard;
        let now = Instant::now();
        let conns = idle.by_key.get_mut(key)?;
        let mut found = None;
        let mut dropped = 0;
        while let Some(c) = conns.pop() {
            if usable(&c, now) {
                found = Some(c);
                break;
            }
            dropped += 1;
        }
        let taken = dropped + usize::from(found.is_some());
        if conns.is_empty() {
            idle.by_key.remove(key);
        }
        idle.count -= taken;
        if found.is_some() {
            idle.reused += 1;
        }
        found
    }

    /// Keeps `conn` for the next attempt to `key`, unless it is closed or a bound is reached.
    pub fn put(&self, key: Key, mut conn: Conn) {
        if conn.sender.is_closed() {
            return;
        }
        let mut guard = self.0.borrow_mut();
        let idle = &mut *guard;
        if idle.count >= IDLE_MAX {
            return;
        }
        let conns = idle.by_key.entry(key).or_default();
        if conns.len() >= IDLE_PER_KEY_MAX {
            return;
        }
        conn.idle_since = Instant::now();
        conns.push(conn);
        idle.count += 1;
    }

    /// Idle connections kept now.
    pub fn idle(&self) -> usize {
        self.0.borrow().count
    }

    /// Attempts that went out on a kept connection so far.
    pub fn reused(&self) -> u64 {
        self.0.borrow().reused
    }
}
