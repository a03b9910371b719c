//! Fuzzes the Binance frame decoder (venue bytes off the socket): never panics, never reads out
//! of bounds, and the same decoder keeps working after any input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rampart_engine::feed::binance::{BinanceDecoder, TimeUnit};

fuzz_target!(|data: &[u8]| {
    let mut decoder = BinanceDecoder::new(TimeUnit::Millisecond, 64);
    let _ = decoder.decode(data);
    let mut micro = BinanceDecoder::new(TimeUnit::Microsecond, 64);
    let _ = micro.decode(data);
});
