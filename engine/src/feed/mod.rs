//! Venue feeds, sans-I/O: decoders that turn one WebSocket text message (or one REST body) into
//! typed values, and the state machines that keep a local book in sync with a venue.
//!
//! Nothing here opens a socket or reads a clock: the `net` side hands in bytes and gets values
//! back, and decides on its own when to fetch a snapshot or reconnect. Decoding and syncing
//! allocate nothing per message: buffers are sized at construction (`*_max`) and never grow; the
//! doc of each bound says what happens there (a decoder refuses the message, a sync buffer drops
//! its oldest diffs).
//!
//! The venues speak JSON. The engine has no dependencies, so this module carries a small
//! hand-rolled scanner (`Cursor`, crate-private) shared by the venue decoders. It validates full
//! JSON syntax (strings with escapes and UTF-8, numbers, literals, nesting) without building a
//! tree and without recursion: nested values are skipped with a fixed-size bit stack, bounded by
//! [`NESTING_MAX`]. Every byte access is bounds-checked; malformed input is an error value,
//! never a panic.
//!
//! Each decoder reads a message in one pass. It walks the objects key by key, recognising a key
//! either by comparing the bytes at the cursor with the key that followed the previous one last
//! time (`KeyHints`) or by a `match` on the key's bytes, and reads what it needs as it meets it:
//! the nested objects (`data`, `arg`) key by key too, level arrays straight into the decoder's
//! buffers with prices and sizes parsed while they are scanned (`read_levels`), scalars noted
//! by where they lie and read once the pass is over. It still refuses a message exactly as
//! validating the whole message and then reading its fields would, with the same error: the
//! errors the pass finds inside nested values wait (`Deferred`) until the decoder reaches the
//! check that reads them. Rationale: scanning each byte once, and no second walk over the
//! values it reads, is what made the decoders faster than a general-purpose parser on the
//! venues' frames (perf/README.md).
//!
//! Venue modules:
//! - [`binance`]: Binance spot frames (depth diffs, trades, control replies, REST depth
//!   snapshot) and the diff-plus-snapshot book sync of venues.md §1.2.
//! - [`bybit`]: Bybit v5 spot frames and the snapshot-plus-delta book sync of venues.md §2.2.
//! - [`okx`]: OKX v5 frames and the `seqId`/`prevSeqId` book sync of venues.md §3.2.
//! - [`bitget`]: Bitget v2 spot frames and the `seq`/`pseq` book sync of venues.md §4.2.
//! - [`intervals`]: each venue's names for the candle timeframes (REST and WebSocket).
//! - [`checksum`]: the CRC-32 book checksum OKX and Bitget share (venues.md §3.3) and the store of
//!   the venue's level text it is computed over.
//!
//! What the decoders share, crate-private, one file each: `buffers` (the level and trade buffers
//! and key hints a decoder holds), `error` (the errors, and the
//! `Deferred` ones), `cursor` (the scanner and its walks over members and elements), `fields`
//! (an object's known keys on the general path), `keys` (`key_table!`, the key sets and the
//! hints that predict the next key), `nested` (nested objects and arrays of objects read in the
//! pass), `rows` (level arrays) and `scalar` (strings, decimals, integers and times).

// The key tables' macro first: the venue modules below use it.
#[macro_use]
mod keys;

mod buffers;
mod cursor;
mod error;
mod fields;
mod nested;
mod rows;
mod scalar;

mod arg_data;
pub mod binance;
pub mod bitget;
pub mod bybit;
pub mod checksum;
pub mod intervals;
pub mod okx;
pub mod perp;

pub use cursor::NESTING_MAX;
pub use error::{DecodeError, JsonError, JsonErrorKind};

// What the venue modules read through `super::`.
pub(crate) use buffers::DecodeBuffers;
pub(crate) use cursor::{array_at, object_start, Cursor, Elements, Span};
pub(crate) use error::Deferred;
pub(crate) use fields::Fields;
pub(crate) use keys::{walk_keyed, KeyHints, KeySet};
pub(crate) use nested::{read_nested, read_objects, read_single, Nested, Single};
pub(crate) use rows::{level, parse_levels, push_bounded, read_levels, walk_levels, Claim, Row};
pub(crate) use scalar::{
    int, int_or_string, ms, plain_str, price, qty, str_field, str_raw, string_ms, string_uint, taker_sell, uint,
};
