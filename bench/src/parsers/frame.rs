//! What every parser is given and must produce: the frame's [`FrameKind`], the common result
//! [`Decoded`] (with its [`TradeRow`]s), the refusal [`Fail`], and the [`FrameParser`] trait that
//! every measured parser implements.

use rampart_engine::feed::{binance, bybit};
use rampart_engine::{Level, Price, Qty, Venue};

/// One trade of a frame.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TradeRow {
    /// The trade id: the number for Binance (`t`), OKX and Bitget (`tradeId`); for Bybit, whose
    /// `i` is opaque text, the FNV-1a hash of that text.
    pub id: u64,
    /// Trade time, Unix ms.
    pub ts_ms: i64,
    /// Price.
    pub price: Price,
    /// Quantity.
    pub qty: Qty,
    /// The taker sold.
    pub taker_sell: bool,
    /// The trade's sequence number, where the venue sends one (Bybit `seq`, OKX `seqId`).
    pub seq: Option<i64>,
}

/// What every parser must produce from a frame: the routing key, the time, the sequencing ids
/// and every level or trade, in message order. Buffers are reserved once and reused.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Decoded {
    /// FNV-1a hash of the symbol text (Binance `s`, Bybit `data.s`, OKX and Bitget
    /// `arg.instId`); 0 when the frame has none (Binance REST snapshot).
    pub symbol_hash: u64,
    /// The frame's time, Unix ms: Binance `E`, Bybit `ts`, OKX book `data[0].ts`, Bitget outer
    /// `ts`; 0 where there is none (Binance REST snapshot, OKX trades).
    pub ts_ms: i64,
    /// Sequencing ids: Binance diff `[U, u]`, Binance snapshot `[lastUpdateId, -]`, Bybit book
    /// `[u, seq]`, OKX book `[seqId, prevSeqId]`, Bitget book `[seq, pseq]`.
    pub ids: [Option<i64>; 2],
    /// Bid levels.
    pub bids: Vec<Level>,
    /// Ask levels.
    pub asks: Vec<Level>,
    /// Trades.
    pub trades: Vec<TradeRow>,
}

impl Decoded {
    /// Buffers sized for the deepest frame measured.
    pub fn new() -> Decoded {
        Decoded {
            bids: Vec::with_capacity(PARSER_LEVELS_MAX),
            asks: Vec::with_capacity(PARSER_LEVELS_MAX),
            trades: Vec::with_capacity(TRADES_MAX),
            ..Decoded::default()
        }
    }

    pub(super) fn clear(&mut self) {
        self.symbol_hash = 0;
        self.ts_ms = 0;
        self.ids = [None; 2];
        self.bids.clear();
        self.asks.clear();
        self.trades.clear();
    }
}

/// Levels per side the parsers' buffers hold (Binance's deepest REST snapshot).
pub(crate) const PARSER_LEVELS_MAX: usize = binance::SNAPSHOT_LEVELS_PER_SIDE_MAX;
/// Trades per frame the buffers hold (Bybit's documented maximum).
pub(crate) const TRADES_MAX: usize = bybit::TRADES_PER_MESSAGE_MAX;

/// Why a parser refused a frame (a static message: the error path allocates nothing).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Fail(pub &'static str);

/// What a frame carries.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FrameKind {
    /// A book diff or update.
    BookDiff,
    /// A full book snapshot.
    BookSnapshot,
    /// A trade push.
    Trade,
}

impl FrameKind {
    /// Short name for tables.
    pub fn as_str(self) -> &'static str {
        match self {
            FrameKind::BookDiff => "book diff",
            FrameKind::BookSnapshot => "book snapshot",
            FrameKind::Trade => "trade",
        }
    }
}

/// A way of decoding a venue frame into [`Decoded`].
pub trait FrameParser {
    /// Name for tables.
    fn name(&self) -> &'static str;
    /// Whether this parser reads `venue`'s frames of kind `kind`.
    fn supports(&self, venue: Venue, kind: FrameKind) -> bool {
        let _ = (venue, kind);
        true
    }
    /// Decodes `frame`, a `kind` frame of `venue`, into `out` (cleared first).
    fn parse(&mut self, venue: Venue, kind: FrameKind, frame: &[u8], out: &mut Decoded) -> Result<(), Fail>;
}
