//! The events a shard (or the board thread) sends to the persistence side, numbered, and the
//! bounded queue they travel on.

use std::collections::VecDeque;
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use rampart_engine::alert::Firing;
use rampart_engine::BookId;

/// Events a shard emits to the persistence side (capacity [`EVENTS_MAX`]).
#[derive(Clone, Debug, PartialEq)]
pub enum ShardEvent {
    /// An alert fired.
    Fired {
        /// The book.
        book: BookId,
        /// The firing.
        firing: Firing,
        /// It is a `*` alert's (`decisions.md` §15): collected with the alert's other firings of
        /// the second into one body.
        universe: bool,
    },
    /// A delisted book's alerts were dropped.
    Delisted {
        /// The book.
        book: BookId,
        /// The alerts removed.
        ids: Vec<u64>,
    },
    /// A book's perpetual was delisted while the spot pair stays (`decisions.md` §17): its
    /// one-pair derivatives alerts were dropped (the writer removes them from storage and tells
    /// their owners, `"reason":"perp"`).
    PerpDelisted {
        /// The book.
        book: BookId,
        /// The alerts removed.
        ids: Vec<u64>,
    },
    /// The shard has its books and history.
    Ready {
        /// Shard index.
        shard: usize,
    },
    /// A site market alert fired at a board build (queued by the board thread).
    MarketFired {
        /// Alert id.
        id: u64,
        /// The number's value.
        value: f64,
        /// Board time, Unix milliseconds.
        ts_ms: i64,
        /// It does not repeat: this was its only firing.
        last: bool,
    },
    /// A book was found crossed (corrupt) and is not served until rebuilt.
    BookCrossed {
        /// The book.
        book: BookId,
        /// Tick time.
        ts_ms: i64,
    },
}

/// A [`ShardEvent`] as it travels on a shard's event queue: numbered by the shard from 0, one
/// more per event, so the reader checks (in debug builds) that every event arrives once and in
/// order, whatever the backlog did in between.
#[derive(Debug)]
pub struct QueuedEvent {
    /// The shard's number for this event.
    pub seq: u64,
    /// The event.
    pub event: ShardEvent,
}

/// A shard's event queue to the persistence side, and the reader to wake when events arrive.
///
/// The writer parks between rounds instead of polling, so a firing's wait for its commit is a
/// wake-up, not the rest of a sleep. A wake is one atomic swap on the producer, plus a futex
/// wake only while the reader is parked: no lock, no allocation, nothing a tick could wait on.
#[derive(Debug)]
pub struct EventQueue {
    events: ArrayQueue<QueuedEvent>,
    reader: std::sync::OnceLock<std::thread::Thread>,
}

impl EventQueue {
    /// An empty queue of `capacity` events (at least one) with no reader yet.
    pub fn new(capacity: usize) -> EventQueue {
        EventQueue { events: ArrayQueue::new(capacity.max(1)), reader: std::sync::OnceLock::new() }
    }

    /// Queues `event`; at the bound it is handed back.
    // The event comes back by value so that the caller keeps it (to its backlog) without an
    // allocation: boxing it, as the lint suggests, would allocate on the tick path. An event is
    // ~140 bytes since a firing may carry its level or wall (docs/design/limits.md).
    #[allow(clippy::result_large_err)]
    pub fn push(&self, event: QueuedEvent) -> Result<(), QueuedEvent> {
        self.events.push(event)
    }

    /// The oldest event, if any.
    pub fn pop(&self) -> Option<QueuedEvent> {
        self.events.pop()
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// No event waiting.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Names the thread that reads the queue: [`EventQueue::wake`] unparks it from then on. The
    /// first reader stays (a queue has one reader for its whole life).
    pub fn set_reader(&self, reader: std::thread::Thread) {
        let _ = self.reader.set(reader);
    }

    /// Wakes the reader, if one is named; producers call it after pushing.
    pub fn wake(&self) {
        if let Some(r) = self.reader.get() {
            r.unpark();
        }
    }
}

/// Capacity of each shard's event queue to the persistence side.
///
/// At the bound nothing is dropped: the shard keeps the events in a local backlog, in order,
/// and while the backlog is not empty it takes no new ticks (backpressure on the feed; the
/// simulator simply waits, a live socket's buffer fills). One tick fires each alert at most
/// once, so the backlog never holds more than one tick's firings plus a few other events; its
/// room is reserved as alerts are added.
pub const EVENTS_MAX: usize = 65_536;

/// The one sending end of an [`EventQueue`]: numbers every event from 0, keeps what the queue
/// cannot take in a backlog in order (nothing is ever dropped), and wakes the reader. The
/// shards and the board thread each own one; the writer checks the numbers at the other end.
///
/// No allocation while the backlog stays within the room [`EventSender::reserve`] kept.
#[derive(Debug)]
pub struct EventSender {
    queue: Arc<EventQueue>,
    backlog: VecDeque<QueuedEvent>,
    /// The number the next event gets.
    next: u64,
    /// The number the next event put on the queue must have (the order this end promises).
    pushed: u64,
}

impl EventSender {
    /// The sending end of `queue`, with room for `room` events in its backlog.
    pub fn new(queue: Arc<EventQueue>, room: usize) -> EventSender {
        EventSender { queue, backlog: VecDeque::with_capacity(room), next: 0, pushed: 0 }
    }

    /// Numbers `event` and puts it on the queue, or behind the backlog when there is one (or the
    /// queue is full), so events leave in the order they were made. Does not wake the reader:
    /// a producer that sends several events wakes it once, with [`EventSender::wake`].
    pub fn enqueue(&mut self, event: ShardEvent) {
        let ev = QueuedEvent { seq: self.next, event };
        self.next += 1;
        if !self.backlog.is_empty() {
            self.backlog.push_back(ev);
        } else if let Err(ev) = self.push(ev) {
            self.backlog.push_back(ev);
        }
    }

    /// Queues `event` ([`EventSender::enqueue`]) and wakes the reader.
    pub fn send(&mut self, event: ShardEvent) {
        self.enqueue(event);
        self.wake();
    }

    /// Wakes the queue's reader.
    pub fn wake(&self) {
        self.queue.wake();
    }

    /// Moves what the backlog holds onto the queue, as far as it takes it, and wakes the reader
    /// when anything was waiting.
    pub fn flush(&mut self) {
        if self.backlog.is_empty() {
            return;
        }
        while let Some(ev) = self.backlog.pop_front() {
            if let Err(ev) = self.push(ev) {
                self.backlog.push_front(ev);
                break;
            }
        }
        self.wake();
    }

    /// True while events wait for room on the queue (a shard takes no new tick meanwhile).
    pub fn has_backlog(&self) -> bool {
        !self.backlog.is_empty()
    }

    /// Keeps room for `room` events in the backlog, so sending that many does not allocate.
    pub fn reserve(&mut self, room: usize) {
        if self.backlog.capacity() < room {
            self.backlog.reserve(room - self.backlog.len());
        }
    }

    /// The queue this end sends on.
    pub fn queue(&self) -> &Arc<EventQueue> {
        &self.queue
    }

    // By value for the same reason as `EventQueue::push`: no allocation on the tick path.
    #[allow(clippy::result_large_err)]
    fn push(&mut self, ev: QueuedEvent) -> Result<(), QueuedEvent> {
        let seq = ev.seq;
        debug_assert_eq!(seq, self.pushed, "events leave numbered, each once and in order");
        self.queue.push(ev)?;
        self.pushed = seq + 1;
        Ok(())
    }
}

#[cfg(test)]
mod event_queue_tests {
    use super::{EventQueue, QueuedEvent, ShardEvent};
    use std::time::{Duration, Instant};

    #[test]
    fn a_sender_keeps_order_through_its_backlog() {
        let q = std::sync::Arc::new(EventQueue::new(2));
        let mut tx = super::EventSender::new(q.clone(), 4);
        for shard in 0..5 {
            tx.enqueue(ShardEvent::Ready { shard });
        }
        assert!(tx.has_backlog(), "two fit the queue, three wait");
        let mut seen = Vec::new();
        while seen.len() < 5 {
            while let Some(e) = q.pop() {
                seen.push(e.seq);
            }
            tx.flush();
        }
        assert_eq!(seen, vec![0, 1, 2, 3, 4]);
        assert!(!tx.has_backlog());
    }

    #[test]
    fn a_wake_unparks_the_named_reader_and_nothing_before_one_is_named() {
        let q = EventQueue::new(2);
        q.wake();
        q.set_reader(std::thread::current());
        let ev = |seq| QueuedEvent { seq, event: ShardEvent::Ready { shard: 0 } };
        assert!(q.push(ev(0)).is_ok() && q.push(ev(1)).is_ok());
        assert!(q.push(ev(2)).is_err(), "the bound hands the event back");
        q.wake();
        // The wake left this thread's token: the park returns at once instead of after 60 s.
        let parked = Instant::now();
        std::thread::park_timeout(Duration::from_secs(60));
        assert!(parked.elapsed() < Duration::from_secs(60), "the wake reached the reader");
        assert_eq!(
            (q.len(), q.pop().map(|e| e.seq), q.pop().map(|e| e.seq), q.is_empty()),
            (2, Some(0), Some(1), true)
        );
    }
}
