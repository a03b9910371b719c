//! Fuzzes the site's `Cookie` header reading (`rampart_net::api::front::session::cookie_id`): any
//! header text gives nothing or a 64-hex-digit session id, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rampart_net::api::front::session::cookie_id;

fuzz_target!(|data: &[u8]| {
    if let Ok(header) = std::str::from_utf8(data) {
        if let Some(id) = cookie_id(header) {
            assert!(id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()));
        }
    }
});
