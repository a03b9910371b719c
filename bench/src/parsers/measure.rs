//! Verification and measurement: every parser ([`all_parsers`]) must agree on every frame
//! ([`verify`]) before each frame is timed and its allocations counted ([`parsers`]).

use std::time::Instant;

use rampart_engine::Venue;
use rampart_testkit::alloc;

use super::engine::Engine;
use super::fixtures::cases;
use super::frame::{Decoded, FrameKind, FrameParser};
use super::serde_backends::{SerdeJson, SimdSerde, SonicSerde};
use super::simd_tape::SimdTape;
use super::sonic_lazy::SonicLazy;
use crate::{histogram, Summary};

/// Every parser measured, in table order.
pub fn all_parsers() -> Vec<Box<dyn FrameParser>> {
    let frame_len_max = 64 * 1024;
    vec![
        Box::new(Engine::new()),
        Box::new(SimdTape::new(frame_len_max)),
        Box::new(SimdSerde::new(frame_len_max)),
        Box::new(SonicLazy),
        Box::new(SonicSerde),
        Box::new(SerdeJson),
    ]
}

/// Decodes every case with every parser that reads its venue and checks that all results are
/// equal (the first parser's, the engine's where it reads the venue, is the reference and must not
/// be empty). Returns the number of (case, parser) pairs checked, or what differed.
pub fn verify() -> Result<usize, String> {
    let mut parsers = all_parsers();
    let mut reference = Decoded::new();
    let mut got = Decoded::new();
    let mut checked = 0;
    for case in cases() {
        let label = format!("{} {} ({})", case.venue.as_str(), case.kind.as_str(), case.source);
        let mut have_reference = false;
        for p in parsers.iter_mut().filter(|p| p.supports(case.venue, case.kind)) {
            p.parse(case.venue, case.kind, &case.bytes, &mut got)
                .map_err(|e| format!("{label}: {}: {e:?}", p.name()))?;
            if !have_reference {
                let empty = match case.kind {
                    FrameKind::Trade => got.trades.is_empty(),
                    _ => got.bids.is_empty() && got.asks.is_empty(),
                };
                if empty || got.ts_ms == 0 && got.ids[0].is_none() && got.symbol_hash == 0 {
                    return Err(format!("{label}: {} decoded nothing: {got:?}", p.name()));
                }
                std::mem::swap(&mut reference, &mut got);
                have_reference = true;
            } else if got != reference {
                return Err(format!("{label}: {} differs:\n  got       {got:?}\n  reference {reference:?}", p.name()));
            }
            checked += 1;
        }
    }
    Ok(checked)
}

/// One (frame, parser) measurement.
#[derive(Clone, Debug)]
pub struct ParserRow {
    /// Venue.
    pub venue: Venue,
    /// Frame kind.
    pub kind: FrameKind,
    /// Where the frame comes from.
    pub source: &'static str,
    /// Frame size, bytes.
    pub bytes: usize,
    /// Parser name.
    pub parser: &'static str,
    /// Per-frame latency.
    pub summary: Summary,
    /// Allocations per frame in the steady state, when the counting allocator is installed.
    pub allocs_per_frame: Option<f64>,
}

/// How many times a frame of `len` bytes is decoded when small frames are decoded `frames`
/// times: fewer for frames above 512 bytes (in proportion), but at least `frames / 40` (and at
/// least 10).
pub fn frames_for(frames: usize, len: usize) -> usize {
    let frames = frames.max(1);
    let scaled = frames.saturating_mul(512) / len.max(512);
    scaled.clamp((frames / 40).max(frames.min(10)), frames)
}

/// Verifies the parsers ([`verify`]), then decodes each frame [`frames_for`]`(frames, len)` times
/// with each parser, timing every decode (including ~20 ns of clock reads) and counting
/// allocations over up to 1 000 decodes after a warm-up. Also times an empty operation (parser
/// "clock only") `frames` times.
pub fn parsers(frames: usize) -> Result<Vec<ParserRow>, String> {
    verify()?;
    let frames = frames.max(1);
    let mut parsers = all_parsers();
    let mut out = Decoded::new();
    let mut rows = Vec::new();
    let mut clock = histogram();
    for _ in 0..frames {
        let t0 = Instant::now();
        std::hint::black_box(&mut out);
        let _ = clock.record(t0.elapsed().as_nanos() as u64);
    }
    for case in cases() {
        let frames = frames_for(frames, case.bytes.len());
        for p in parsers.iter_mut().filter(|p| p.supports(case.venue, case.kind)) {
            let (venue, kind, bytes) = (case.venue, case.kind, case.bytes.as_slice());
            let mut failed = 0u64;
            for _ in 0..(frames / 10).clamp(10, 10_000) {
                failed += u64::from(p.parse(venue, kind, bytes, &mut out).is_err());
            }
            let counted = frames.min(1_000);
            let ((), allocs) = alloc::count(|| {
                for _ in 0..counted {
                    failed += u64::from(p.parse(venue, kind, std::hint::black_box(bytes), &mut out).is_err());
                }
            });
            let mut h = histogram();
            let started = Instant::now();
            for _ in 0..frames {
                let t0 = Instant::now();
                let r = p.parse(venue, kind, std::hint::black_box(bytes), &mut out);
                std::hint::black_box(&out);
                let _ = h.record(t0.elapsed().as_nanos() as u64);
                failed += u64::from(r.is_err());
            }
            let rate = frames as f64 / started.elapsed().as_secs_f64().max(1e-9);
            if failed > 0 {
                return Err(format!("{} failed {failed} times on {} {}", p.name(), venue.as_str(), case.source));
            }
            let name =
                format!("{} {} ({}, {} B) [{}]", venue.as_str(), kind.as_str(), case.source, bytes.len(), p.name());
            rows.push(ParserRow {
                venue,
                kind,
                source: case.source,
                bytes: bytes.len(),
                parser: p.name(),
                summary: Summary::from_hist(&name, &h, Some(rate)),
                allocs_per_frame: allocs.map(|n| n as f64 / counted as f64),
            });
        }
    }
    rows.push(ParserRow {
        venue: Venue::Binance,
        kind: FrameKind::Trade,
        source: "-",
        bytes: 0,
        parser: "clock only",
        summary: Summary::from_hist("clock only (two Instant reads, no work)", &clock, None),
        allocs_per_frame: None,
    });
    Ok(rows)
}

/// Which SIMD code the two SIMD parsers run in this build on this machine: simd-json picks its
/// stage-1 implementation at run time; sonic-rs picks its code at compile time (AVX2 only when the
/// build targets it, e.g. `-C target-cpu=native`).
pub fn simd_notes() -> String {
    format!(
        "simd-json implementation: {:?}; sonic-rs built for AVX2 and PCLMULQDQ: {}",
        simd_json::Deserializer::algorithm(),
        cfg!(all(target_arch = "x86_64", target_feature = "avx2", target_feature = "pclmulqdq"))
    )
}
