//! Fuzzes the `GET /v1/stream` client-message parser: any bytes give an op or an error with a
//! text to send back, never a panic; an op always names its channels without repeats.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rampart_net::stream::ops::{parse, Op, CHANNELS_PER_OP_MAX};

fuzz_target!(|data: &[u8]| {
    match parse(data) {
        Err(e) => assert!(!e.message.is_empty()),
        Ok(Op::Subscribe { channels, .. } | Op::Unsubscribe { channels, .. }) => {
            assert!(!channels.is_empty() && channels.len() <= CHANNELS_PER_OP_MAX);
            for (i, c) in channels.iter().enumerate() {
                assert!(!channels[..i].contains(c), "a channel named twice");
            }
        }
        Ok(Op::Ping { .. }) => {}
    }
});
