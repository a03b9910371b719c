//! The buffers a decoder fills, allocated once (crate-private).

use super::KeyHints;

/// A decoder's level and trade buffers and key hints, allocated once at their bounds: what the
/// Bybit, OKX and Bitget decoders hold alike (a message is refused at a bound, never grows one).
#[derive(Clone, Debug)]
pub(crate) struct DecodeBuffers<L, T> {
    pub(crate) levels_max: usize,
    pub(crate) trades_max: usize,
    pub(crate) bids: Vec<L>,
    pub(crate) asks: Vec<L>,
    pub(crate) trades: Vec<T>,
    pub(crate) hints: KeyHints,
}

impl<L, T> DecodeBuffers<L, T> {
    /// Room for `levels_max` levels per side and `trades_max` trades.
    pub(crate) fn new(levels_max: usize, trades_max: usize) -> DecodeBuffers<L, T> {
        assert!(levels_max > 0 && trades_max > 0, "a decoder must hold at least one level and one trade");
        DecodeBuffers {
            levels_max,
            trades_max,
            bids: Vec::with_capacity(levels_max),
            asks: Vec::with_capacity(levels_max),
            trades: Vec::with_capacity(trades_max),
            hints: KeyHints::default(),
        }
    }
}
