//! The three serde backends as [`FrameParser`]s: serde_json, sonic-rs and simd-json's serde front,
//! each deserializing into the same borrowed structs through [`serde_parse`].

use rampart_engine::Venue;
use serde::Deserialize;

use super::frame::{Decoded, Fail, FrameKind, FrameParser};
use super::serde_front::{serde_parse, SerdeFront};

/// serde_json (`from_slice`) into borrowed structs (`&str` fields, `Vec` level arrays): the
/// reference.
#[derive(Default)]
pub struct SerdeJson;

impl SerdeFront for SerdeJson {
    fn deserialize<'a, T: Deserialize<'a>>(&'a mut self, frame: &'a [u8]) -> Result<T, Fail> {
        serde_json::from_slice(frame).map_err(|_| Fail("serde_json refused the frame"))
    }
}

impl FrameParser for SerdeJson {
    fn name(&self) -> &'static str {
        "serde_json (borrowed structs)"
    }

    fn parse(&mut self, venue: Venue, kind: FrameKind, frame: &[u8], out: &mut Decoded) -> Result<(), Fail> {
        serde_parse(self, venue, kind, frame, out)
    }
}

/// sonic-rs (`from_slice`) into the same borrowed structs.
#[derive(Default)]
pub struct SonicSerde;

impl SerdeFront for SonicSerde {
    fn deserialize<'a, T: Deserialize<'a>>(&'a mut self, frame: &'a [u8]) -> Result<T, Fail> {
        sonic_rs::from_slice(frame).map_err(|_| Fail("sonic-rs refused the frame"))
    }
}

impl FrameParser for SonicSerde {
    fn name(&self) -> &'static str {
        "sonic-rs (borrowed structs)"
    }

    fn parse(&mut self, venue: Venue, kind: FrameKind, frame: &[u8], out: &mut Decoded) -> Result<(), Fail> {
        serde_parse(self, venue, kind, frame, out)
    }
}

/// simd-json's serde front (`from_slice_with_buffers`) into the same borrowed structs, the frame
/// copied into a reused buffer and simd-json's `Buffers` reused.
pub struct SimdSerde {
    input: Vec<u8>,
    buffers: simd_json::Buffers,
}

impl SimdSerde {
    /// Buffers for frames up to `frame_len_max` bytes (they grow if a frame is longer).
    pub fn new(frame_len_max: usize) -> SimdSerde {
        SimdSerde { input: Vec::with_capacity(frame_len_max), buffers: simd_json::Buffers::new(frame_len_max) }
    }
}

impl SerdeFront for SimdSerde {
    fn deserialize<'a, T: Deserialize<'a>>(&'a mut self, frame: &'a [u8]) -> Result<T, Fail> {
        self.input.clear();
        self.input.extend_from_slice(frame);
        simd_json::serde::from_slice_with_buffers(&mut self.input, &mut self.buffers)
            .map_err(|_| Fail("simd-json refused the frame"))
    }
}

impl FrameParser for SimdSerde {
    fn name(&self) -> &'static str {
        "simd-json (borrowed structs)"
    }

    fn parse(&mut self, venue: Venue, kind: FrameKind, frame: &[u8], out: &mut Decoded) -> Result<(), Fail> {
        serde_parse(self, venue, kind, frame, out)
    }
}
