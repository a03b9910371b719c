//! Fuzzes the site alert body parser and validator (`rampart_net::site_alerts::parse_request`): any
//! bytes give a request or a 400/422, never a panic; an accepted request holds only values in
//! their documented ranges.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rampart_store::store::SiteCondition;
use rampart_net::site_alerts::parse_request;

fuzz_target!(|data: &[u8]| {
    match parse_request(data) {
        Err(e) => {
            assert!(e.status == 400 || e.status == 422);
            assert!(!e.message.is_empty());
        }
        Ok(r) => match r.condition {
            SiteCondition::Density { min_usd, max_dist_pct, min_age_s, .. } => {
                assert!(min_usd > 0.0 && max_dist_pct > 0.0 && max_dist_pct <= 100.0 && min_age_s <= 86_400);
            }
            SiteCondition::Market { threshold, .. } => assert!(threshold.is_finite() && threshold >= 0.0),
        },
    }
});
