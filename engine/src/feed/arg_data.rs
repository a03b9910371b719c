//! The `{"arg": {...}, "data": [...]}` push shape OKX and Bitget share, read once for both.
//!
//! One pass over a message validates all of it, notes where the known keys of the message and of
//! `arg` lie, and reads `data` as it meets it when `arg` came first and names a book or trade
//! channel (both venues send `arg` first): a book's levels go straight into the level buffers, a
//! trade push into the trade buffer. What is wrong inside `arg` or `data` is held (see
//! [`Deferred`]) until the decoder reaches it. When `data` came first, the decoder reads it from
//! its span on the general path ([`Walked::book`], [`Walked::trades`], [`side`]), which reports
//! the same errors.
//!
//! A venue plugs in through [`ArgData`]: its key table, the five keys the shape needs, which
//! channels carry books and trades, and how it reads a level row and a trade.

use core::marker::PhantomData;

use super::{object_start, plain_str, push_bounded};
use super::{
    read_levels, read_nested, read_objects, read_single, walk_keyed, walk_levels, Cursor, DecodeError, Deferred,
    Fields, JsonError, JsonErrorKind, KeyHints, KeySet, Nested, Row, Single, Span,
};

/// What a channel carries, for the channels whose `data` the pass reads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ChannelKind {
    /// A book push: `data` holds one object with `bids` and `asks`.
    Book,
    /// A trade push: `data` holds one object per trade.
    Trades,
}

/// A venue whose pushes have the `{arg, data}` shape, with a key table of `N` keys.
pub(crate) trait ArgData<const N: usize> {
    /// A level as the venue's decoder hands it out.
    type Level;
    /// A trade as the venue's decoder hands it out.
    type Trade;
    /// Index of `arg` in the key table.
    const ARG: usize;
    /// Index of `data`.
    const DATA: usize;
    /// Index of `arg.channel`.
    const CHANNEL: usize;
    /// Index of a book object's `bids`.
    const BIDS: usize;
    /// Index of a book object's `asks`.
    const ASKS: usize;
    /// The venue's key table.
    fn keys() -> &'static KeySet<N>;
    /// What channel `channel` carries, when the pass reads its `data`.
    fn channel_kind(channel: &[u8]) -> Option<ChannelKind>;
    /// Reads one level row of array `field`.
    fn level(bytes: &[u8], row: &Row, field: &'static str) -> Result<Self::Level, DecodeError>;
    /// Reads one trade object of a trade push's `data`.
    fn trade(f: &Fields<'_, N>) -> Result<Self::Trade, DecodeError>;
}

/// The level and trade buffers a pass fills, with their bounds.
pub(crate) struct Buffers<'b, L, T> {
    pub(crate) levels_max: usize,
    pub(crate) trades_max: usize,
    pub(crate) bids: &'b mut Vec<L>,
    pub(crate) asks: &'b mut Vec<L>,
    pub(crate) trades: &'b mut Vec<T>,
}

/// What the pass read of `data`.
enum DataRead {
    /// Nothing: `data` came before `arg`, or is not an array, or the channel is not a book or
    /// trade channel.
    Unread,
    /// A book push's `data`, and the outcome of reading its `bids` and `asks` arrays into the
    /// level buffers, when they are arrays.
    Book { bids: Option<Deferred>, asks: Option<Deferred> },
    /// A trade push's `data`, read into the trade buffer.
    Trades(Deferred),
}

/// The kinds of object the pass reads (for [`KeyHints`]): the message, its `arg`, a book push's
/// `data[0]`, a trade of a trade push's `data`.
const OBJ_OUTER: usize = 0;
const OBJ_ARG: usize = 1;
const OBJ_BOOK: usize = 2;
const OBJ_TRADE: usize = 3;

/// What one pass over a message found.
pub(crate) struct Walked<'a, V, const N: usize> {
    /// Where the message's own known keys lie.
    pub(crate) outer: Fields<'a, N>,
    arg: Nested<'a, N>,
    single: Single<'a, N>,
    data: DataRead,
    venue: PhantomData<fn() -> V>,
}

/// Reads the message `frame` in one pass into `walked` (fresh from [`Walked::new`] over the same
/// frame), clearing and then filling `buffers` as it goes. The caller owns `walked`, so the
/// pass writes where the decoder reads, with no copy of its key tables.
///
/// A message that is not a JSON object is [`DecodeError::NotAnObject`] when it is valid JSON and
/// the JSON error otherwise; bytes after the object are [`JsonErrorKind::TrailingBytes`]; a
/// repeated key of the message is refused.
#[inline(always)]
pub(crate) fn walk<'a, V: ArgData<N>, const N: usize>(
    walked: &mut Walked<'a, V, N>,
    buffers: Buffers<'_, V::Level, V::Trade>,
    hints: &mut KeyHints,
) -> Result<(), DecodeError> {
    buffers.bids.clear();
    buffers.asks.clear();
    buffers.trades.clear();
    let mut cur = object_start(walked.outer.bytes())?;
    let mut pass = Pass::<V, N> { bytes: walked.outer.bytes(), buffers, data: DataRead::Unread };
    pass.outer(&mut cur, hints, walked)?;
    if !cur.at_end() {
        return Err(cur.error(JsonErrorKind::TrailingBytes).into());
    }
    walked.data = pass.data;
    Ok(())
}

impl<'a, V: ArgData<N>, const N: usize> Walked<'a, V, N> {
    /// Nothing read yet of message `frame`.
    #[inline(always)]
    pub(crate) fn new(frame: &'a [u8]) -> Walked<'a, V, N> {
        let names = V::keys().names;
        Walked {
            outer: Fields::new(frame, names),
            arg: Nested::new(frame, names),
            single: Single::new(frame, names),
            data: DataRead::Unread,
            venue: PhantomData,
        }
    }

    /// The name of key `k`.
    #[inline(always)]
    fn name(k: usize) -> &'static str {
        V::keys().names.get(k).copied().unwrap_or("?")
    }

    /// `arg`'s fields; `None` when the message has no `arg`, an error when it is not an object or
    /// repeats a key.
    #[inline(always)]
    pub(crate) fn arg(&self) -> Result<Option<&Fields<'a, N>>, DecodeError> {
        match self.outer.span(V::ARG) {
            // `arg` was read as an object during the pass exactly when it is one.
            Some(_) if !self.arg.read => Err(DecodeError::WrongType(Self::name(V::ARG))),
            Some(_) => Ok(Some(self.arg.fields()?)),
            None => Ok(None),
        }
    }

    /// The one object of a book push's `data` (at `data`), with the outcome of reading its
    /// `bids` and `asks` when the pass read them; read now into `lazy` when it did not.
    #[inline(always)]
    pub(crate) fn book<'s>(
        &'s self,
        data: Span,
        lazy: &'s mut Option<Fields<'a, N>>,
    ) -> Result<(&'s Fields<'a, N>, Option<Deferred>, Option<Deferred>), DecodeError> {
        match self.data {
            DataRead::Book { bids, asks } => Ok((self.single.fields(Self::name(V::DATA))?, bids, asks)),
            _ => {
                let keys = V::keys();
                let (bytes, field) = (self.outer.bytes(), Self::name(V::DATA));
                let f = lazy.insert(Fields::single_in_array(bytes, data, keys.names, keys.index, field)?);
                Ok((f, None, None))
            }
        }
    }

    /// A trade push's trades in `out` (bounded by `max`): as the pass read them, or read now
    /// from `data`.
    #[inline(always)]
    pub(crate) fn trades(&self, data: Span, max: usize, out: &mut Vec<V::Trade>) -> Result<(), DecodeError> {
        if let DataRead::Trades(result) = self.data {
            return result;
        }
        out.clear();
        let keys = V::keys();
        let field = Self::name(V::DATA);
        Fields::each_in_array(self.outer.bytes(), data, keys.names, keys.index, field, |f| {
            push_bounded(out, max, V::trade(&f)?, field)
        })
    }
}

/// The level array of key `key` of the book object `d` into `out`: from the buffer when the pass
/// read it there (`read`), else read now on the general path (which reports what is wrong with
/// it).
pub(crate) fn side<V: ArgData<N>, const N: usize>(
    d: &Fields<'_, N>,
    key: usize,
    read: Option<Deferred>,
    max: usize,
    out: &mut Vec<V::Level>,
) -> Result<(), DecodeError> {
    let span = d.req_span(key)?;
    match read {
        Some(result) => result,
        None => {
            out.clear();
            let (bytes, field) = (d.bytes(), Walked::<V, N>::name(key));
            walk_levels(bytes, span, field, max, out, |row| V::level(bytes, row, field))
        }
    }
}

/// The pass itself: the buffers it fills and what it read of `data`.
struct Pass<'a, 'b, V: ArgData<N>, const N: usize> {
    bytes: &'a [u8],
    buffers: Buffers<'b, V::Level, V::Trade>,
    data: DataRead,
}

impl<'a, V: ArgData<N>, const N: usize> Pass<'a, '_, V, N> {
    /// Reads the message's object at the cursor. A repeated key of the message is refused here,
    /// as the two-pass reading refused it while scanning.
    #[inline(always)]
    fn outer(
        &mut self,
        cur: &mut Cursor<'a>,
        hints: &mut KeyHints,
        w: &mut Walked<'a, V, N>,
    ) -> Result<(), DecodeError> {
        let keys = V::keys();
        walk_keyed(cur, keys, hints, OBJ_OUTER, |cur, k, hints| {
            let Some(k) = k else {
                cur.skip_value()?;
                return Ok(());
            };
            cur.skip_ws();
            let start = cur.pos();
            match cur.peek() {
                // A second `arg` or `data` is refused just below; what it read is then never
                // looked at.
                Some(b'{') if k == V::ARG => {
                    read_nested(cur, 0, &mut w.arg, keys, hints, OBJ_ARG, |cur, _| cur.skip_value_at(1).map(drop))?;
                }
                Some(b'[') if k == V::DATA => self.data(cur, hints, &w.arg, &mut w.single)?,
                _ => {
                    cur.skip_value()?;
                }
            }
            w.outer.record(k, Span { start, end: cur.pos() })
        })
    }

    /// The kind of the channel `arg` names, when `arg` has been read and names one the pass
    /// reads.
    #[inline(always)]
    fn channel_kind(arg: &Nested<'a, N>) -> Option<ChannelKind> {
        if !arg.read {
            return None;
        }
        let arg = arg.fields().ok()?;
        V::channel_kind(plain_str(arg.get(V::CHANNEL)?, Walked::<V, N>::name(V::CHANNEL)).ok()?)
    }

    /// Reads `data` (an array, at the cursor) as the channel's kind says.
    #[inline(always)]
    fn data(
        &mut self,
        cur: &mut Cursor<'a>,
        hints: &mut KeyHints,
        arg: &Nested<'a, N>,
        single: &mut Single<'a, N>,
    ) -> Result<(), JsonError> {
        let (bytes, keys) = (self.bytes, V::keys());
        let b = &mut self.buffers;
        match Self::channel_kind(arg) {
            Some(ChannelKind::Book) => {
                let (mut bids_read, mut asks_read) = (None, None);
                read_single(cur, 0, single, keys, hints, OBJ_BOOK, |cur, k| {
                    let side = match k {
                        k if k == V::BIDS && bids_read.is_none() => Some((&mut *b.bids, &mut bids_read)),
                        k if k == V::ASKS && asks_read.is_none() => Some((&mut *b.asks, &mut asks_read)),
                        _ => None,
                    };
                    match side {
                        Some((out, read)) if cur.peek() == Some(b'[') => {
                            let field = Walked::<V, N>::name(k);
                            let read = read.insert(Ok(()));
                            read_levels(cur, 2, field, b.levels_max, out, read, |row| V::level(bytes, row, field))?;
                        }
                        _ => {
                            cur.skip_value_at(2)?;
                        }
                    }
                    Ok(())
                })?;
                self.data = DataRead::Book { bids: bids_read, asks: asks_read };
            }
            Some(ChannelKind::Trades) => {
                let (trades, max) = (&mut *b.trades, b.trades_max);
                let field = Walked::<V, N>::name(V::DATA);
                let mut read = Ok(());
                read_objects(cur, 0, keys, hints, OBJ_TRADE, field, &mut read, |f| {
                    push_bounded(trades, max, V::trade(f)?, field)
                })?;
                self.data = DataRead::Trades(read);
            }
            None => {
                cur.skip_value()?;
            }
        }
        Ok(())
    }
}
