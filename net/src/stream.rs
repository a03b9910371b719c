//! Streams apart from HTTP (`decisions.md` §12): a client's messages parsed and refused
//! (`ops`), one connection's state turned into the frames it is sent (`session`), what changed
//! in a book (`watch`) and the fan-out that hands each change to every subscriber (`fanout`),
//! and the bounds of all of it ([`Bounds`]). The front's `stream_api` does the upgrade and the
//! socket; nothing here knows of either.

pub mod fanout;
pub mod ops;
pub mod perp_watch;
pub mod session;
pub mod watch;

/// A connection's bounds, from the configuration's `[streams]` section (`decisions.md` §12).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Subscriptions one connection holds at most; a subscribe past it is refused whole.
    pub subscriptions_max: usize,
    /// Bytes waiting to be written to one client at most: a quarter for queued market events
    /// (past it they are conflated, [`fanout::Outbox`]), a quarter for the batch being written
    /// and half for the socket's write buffer.
    pub unsent_bytes_max: usize,
}

/// The smallest `unsent_bytes_max` the configuration accepts (a market batch must fit).
pub const UNSENT_BYTES_MIN: usize = 256 << 10;
/// The largest `unsent_bytes_max` the configuration accepts.
pub const UNSENT_BYTES_LIMIT: usize = 256 << 20;
/// The largest `subscriptions_max` the configuration accepts.
pub const SUBSCRIPTIONS_LIMIT: usize = 10_000;

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds { subscriptions_max: session::SUBSCRIPTIONS_MAX, unsent_bytes_max: 4 << 20 }
    }
}

impl Bounds {
    /// Queued market events' bytes at most, per connection.
    pub fn outbox_bytes_max(&self) -> usize {
        self.unsent_bytes_max / 4
    }

    /// The socket's write buffer at most.
    pub fn socket_bytes_max(&self) -> usize {
        self.unsent_bytes_max / 2
    }
}
