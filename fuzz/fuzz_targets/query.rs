//! Fuzzes the query-string reader of the HTTP front (percent-decoding included): never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rampart_net::api::front::query_param;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        for name in ["exchange", "symbols", "status", "limit"] {
            let _ = query_param(Some(text), name);
        }
    }
});
