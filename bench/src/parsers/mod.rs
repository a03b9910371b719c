//! JSON decoding options measured on each venue's real frames: the engine's hand-rolled decoders
//! against simd-json, sonic-rs and serde_json, every one producing the same [`Decoded`] value
//! (fixed-point levels, sequencing ids, trades) so the comparison is of equal work.
//!
//! The frames are the engine's fixtures (Binance, Bybit, OKX) and the Bitget frames documented in
//! venues.md §4.2–4.3 (the engine reads Bitget's two book frames; its Bitget trade message does
//! not carry the push's outer `ts` that [`Decoded`] holds, so the Bitget trade frame is measured
//! with the generic parsers only). [`verify`] checks that every parser gives the same result for
//! every frame before anything is timed; [`parsers`] then times each frame and counts
//! allocations.
//!
//! Rationale for how each generic parser is driven (each in its usual fast form):
//! - the parsers are told the frame's kind (book or trade), as a venue adapter would know it from
//!   the subscription or topic; the engine decoders find the kind in the frame themselves;
//! - every parser extracts what [`Decoded`] holds and skips the rest; skipped values are still
//!   validated by every parser here (the engine, simd-json's tape, serde_json, and sonic-rs's
//!   checked entry points all validate the whole document);
//! - decimals go through the engine's own [`Price::parse`] and [`Qty::parse`], so only the JSON
//!   work differs.
//!
//! [`Price::parse`]: rampart_engine::Price::parse
//! [`Qty::parse`]: rampart_engine::Qty::parse
//!
//! The modules, lowest first (each imports only from those above it):
//! - `frame`: the frame kinds, the common result [`Decoded`], [`Fail`] and the [`FrameParser`]
//!   trait;
//! - `values`: the value checks the generic parsers share;
//! - `fixtures`: the frames measured ([`cases`]);
//! - `engine`, `simd_tape`, `sonic_lazy`: one parser each;
//! - `serde_front`: the borrowed structs of the serde parsers and their mapping into [`Decoded`];
//! - `serde_backends`: the serde parsers (serde_json, sonic-rs, simd-json's serde front);
//! - `measure`: [`verify`] and [`parsers`]; `table`: [`parsers_table`].

mod engine;
mod fixtures;
mod frame;
mod measure;
mod serde_backends;
mod serde_front;
mod simd_tape;
mod sonic_lazy;
mod table;
mod values;

pub use engine::Engine;
pub use fixtures::{cases, deep_binance_snapshot, Case, DEEP_SNAPSHOT_LEVELS};
pub use frame::{Decoded, Fail, FrameKind, FrameParser, TradeRow};
pub use measure::{all_parsers, frames_for, parsers, simd_notes, verify, ParserRow};
pub use serde_backends::{SerdeJson, SimdSerde, SonicSerde};
pub use simd_tape::SimdTape;
pub use sonic_lazy::SonicLazy;
pub use table::parsers_table;
