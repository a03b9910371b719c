//! Fuzzes the venues' perpetual listing parsers and the match onto spot pairs (venue REST
//! bodies): never panics, and every matched pair is a spot pair with a positive multiplier and
//! contract size.
#![no_main]

use std::collections::HashSet;

use libfuzzer_sys::fuzz_target;
use rampart_engine::Venue;
use rampart_venue::perp_listing;

fuzz_target!(|data: &[u8]| {
    let spot: HashSet<&str> = ["BTCUSDT", "PEPEUSDT", "ETHUSDT"].into();
    for venue in Venue::ALL {
        if let Ok(listing) = perp_listing::parse(venue, data) {
            let (pairs, _) = perp_listing::match_spot(&listing, &spot);
            for p in pairs {
                assert!(spot.contains(p.symbol.as_str()));
                assert!(p.multiplier >= 1 && p.contract_size > 0.0);
            }
        }
    }
});
