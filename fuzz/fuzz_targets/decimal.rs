//! Fuzzes the fixed-point decimal parser venues' prices and sizes go through: never panics, and
//! whatever it accepts formats back to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rampart_engine::fixed::{format_decimal, parse_decimal};

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = parse_decimal(data) {
        let mut buf = [0u8; 24];
        let text = format_decimal(v, &mut buf).to_owned();
        assert_eq!(parse_decimal(text.as_bytes()), Ok(v));
    }
});
