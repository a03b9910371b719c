//! Fuzzes the webhook URL parser of the SSRF guard: never panics, and an accepted literal IP
//! host is judged by `is_public` without touching the network.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rampart_outbound::ssrf::{is_public, parse, Host};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(url) = parse(text) {
            assert!(url.port > 0);
            if let Host::Ip(ip) = url.host {
                let _ = is_public(ip);
            }
        }
    }
});
