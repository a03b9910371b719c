//! Fuzzes the `POST /v1/alerts` body parser and validator: any bytes give a value or a
//! 400/422, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rampart_net::alerts::request::parse_create;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = parse_create(data) {
        assert!(e.status == 400 || e.status == 422);
        assert!(!e.message.is_empty());
    }
});
