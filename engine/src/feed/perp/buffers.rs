//! A perpetual decoder's buffers: one of liquidations and one of updates, each sized at
//! construction to hold the first `max` items of one message and count the rest
//! ([`Batch::dropped`]). They never grow, so decoding allocates nothing; the message a decoder
//! returns borrows them ([`PerpBuffers::liquidations`], [`PerpBuffers::updates`]).

use super::{Batch, Liquidation, PerpMessage, Row, Update};
use crate::feed::Span;

/// Items of one kind, bounded: the first `max` of a message kept, the rest counted.
#[derive(Clone, Debug)]
pub(crate) struct Rows<T> {
    max: usize,
    rows: Vec<Row<T>>,
    dropped: usize,
}

impl<T: Copy> Rows<T> {
    /// Room for `max` items, allocated now.
    fn new(max: usize) -> Rows<T> {
        assert!(max > 0, "a perpetual decoder must hold at least one item of each kind");
        Rows { max, rows: Vec::with_capacity(max), dropped: 0 }
    }

    fn clear(&mut self) {
        self.rows.clear();
        self.dropped = 0;
    }

    /// Keeps the item when there is room, else counts it. Never grows the buffer.
    pub(crate) fn push(&mut self, symbol: Span, value: T) {
        if self.rows.len() < self.max {
            self.rows.push(Row { symbol, value });
        } else {
            self.dropped += 1;
        }
    }

    fn batch<'a>(&'a self, frame: &'a [u8]) -> Batch<'a, T> {
        Batch { frame, rows: &self.rows, dropped: self.dropped }
    }
}

/// A decoder's two buffers.
#[derive(Clone, Debug)]
pub(crate) struct PerpBuffers {
    pub(crate) liquidations: Rows<Liquidation>,
    pub(crate) updates: Rows<Update>,
}

impl PerpBuffers {
    /// Room for `liquidations_max` liquidations and `updates_max` updates per message.
    pub(crate) fn new(liquidations_max: usize, updates_max: usize) -> PerpBuffers {
        PerpBuffers { liquidations: Rows::new(liquidations_max), updates: Rows::new(updates_max) }
    }

    /// Empties both, for the next message.
    pub(crate) fn clear(&mut self) {
        self.liquidations.clear();
        self.updates.clear();
    }

    /// The liquidations read, as a message.
    pub(crate) fn liquidations<'a>(&'a self, frame: &'a [u8]) -> PerpMessage<'a> {
        PerpMessage::Liquidations(self.liquidations.batch(frame))
    }

    /// The updates read, as a message.
    pub(crate) fn updates<'a>(&'a self, frame: &'a [u8]) -> PerpMessage<'a> {
        PerpMessage::Updates(self.updates.batch(frame))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_the_first_and_count_the_rest() {
        let mut rows = Rows::<u8>::new(2);
        for v in 0..5 {
            rows.push(Span::default(), v);
        }
        let b = rows.batch(b"");
        assert_eq!((b.len(), b.dropped()), (2, 3));
        assert_eq!(b.iter().map(|e| e.value).collect::<Vec<_>>(), [0, 1]);
        rows.clear();
        assert_eq!((rows.batch(b"").len(), rows.batch(b"").dropped()), (0, 0));
        assert_eq!(rows.rows.capacity(), 2, "never grown");
    }
}
