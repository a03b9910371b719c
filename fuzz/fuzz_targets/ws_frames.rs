//! Fuzzes the WebSocket client codec (server bytes off the socket, in arbitrary read sizes):
//! never panics, never reads out of bounds, and always either yields events, asks for more
//! bytes, or reports a protocol error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rampart_venue::ws::{Handshake, WsCodec};

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else { return };
    let _ = Handshake::new([7; 16]).check_response(rest);
    let mut codec = WsCodec::new(4096, 1);
    let chunk = usize::from(split).max(1);
    for piece in rest.chunks(chunk) {
        let space = codec.read_space();
        let n = piece.len().min(space.len());
        space[..n].copy_from_slice(&piece[..n]);
        codec.filled(n);
        loop {
            match codec.next_event() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
});
