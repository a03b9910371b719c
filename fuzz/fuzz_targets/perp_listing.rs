//! Fuzzes the venues' perpetual listing parsers, Binance's `fundingInfo` and the match onto spot
//! pairs (venue REST bodies): never panics, every matched pair is a spot pair with a positive
//! multiplier and contract size, and an interval taken is 1 to 24 hours.
#![no_main]

use std::collections::HashSet;

use libfuzzer_sys::fuzz_target;
use rampart_engine::Venue;
use rampart_venue::perp_listing;

fuzz_target!(|data: &[u8]| {
    let spot: HashSet<&str> = ["BTCUSDT", "PEPEUSDT", "ETHUSDT"].into();
    for venue in Venue::ALL {
        if let Ok(mut listing) = perp_listing::parse(venue, data) {
            let _ = perp_listing::apply_binance_funding_info(&mut listing, data);
            assert!(listing.contracts.iter().all(|c| c.interval_h.is_none_or(|h| (1..=24).contains(&h))));
            let (pairs, _) = perp_listing::match_spot(&listing, &spot);
            for p in pairs {
                assert!(spot.contains(p.symbol.as_str()));
                assert!(p.multiplier >= 1 && p.contract_size > 0.0);
            }
        }
    }
});
