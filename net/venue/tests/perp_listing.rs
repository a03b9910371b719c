//! The venues' perpetual listings parsed from their documented shapes (venues.md §8.2) and
//! matched onto spot pairs (decisions §17, "The perpetual of a pair"), with the refusals of
//! malformed bodies.

use std::collections::HashSet;

use rampart_engine::Venue;
use rampart_venue::perp_listing::{self, PerpListed, PerpListing};
use rampart_venue::RestError;

const BINANCE: &str = r#"{"timezone":"UTC","symbols":[
 {"symbol":"BTCUSDT","pair":"BTCUSDT","contractType":"PERPETUAL","status":"TRADING","baseAsset":"BTC","quoteAsset":"USDT","marginAsset":"USDT"},
 {"symbol":"BTCUSDT_251226","pair":"BTCUSDT","contractType":"CURRENT_QUARTER","status":"TRADING","baseAsset":"BTC","quoteAsset":"USDT","marginAsset":"USDT"},
 {"symbol":"ETHUSDC","pair":"ETHUSDC","contractType":"PERPETUAL","status":"TRADING","baseAsset":"ETH","quoteAsset":"USDC","marginAsset":"USDC"},
 {"symbol":"1000PEPEUSDT","pair":"1000PEPEUSDT","contractType":"PERPETUAL","status":"TRADING","baseAsset":"1000PEPE","quoteAsset":"USDT","marginAsset":"USDT"},
 {"symbol":"1MBABYDOGEUSDT","pair":"1MBABYDOGEUSDT","contractType":"PERPETUAL","status":"TRADING","baseAsset":"1MBABYDOGE","quoteAsset":"USDT","marginAsset":"USDT"},
 {"symbol":"1000SATSUSDT","pair":"1000SATSUSDT","contractType":"PERPETUAL","status":"TRADING","baseAsset":"1000SATS","quoteAsset":"USDT","marginAsset":"USDT"},
 {"symbol":"LUNAUSDT","pair":"LUNAUSDT","contractType":"PERPETUAL","status":"SETTLING","baseAsset":"LUNA","quoteAsset":"USDT","marginAsset":"USDT"},
 {"symbol":"ONLYPERPUSDT","pair":"ONLYPERPUSDT","contractType":"PERPETUAL","status":"TRADING","baseAsset":"ONLYPERP","quoteAsset":"USDT","marginAsset":"USDT"},
 {"symbol":"","contractType":"PERPETUAL","status":"TRADING","baseAsset":"X","quoteAsset":"USDT","marginAsset":"USDT"}
]}"#;

const BYBIT: &str = r#"{"retCode":0,"retMsg":"OK","result":{"category":"linear","list":[
 {"symbol":"BTCUSDT","contractType":"LinearPerpetual","status":"Trading","baseCoin":"BTC","quoteCoin":"USDT","settleCoin":"USDT","fundingInterval":480},
 {"symbol":"SOLUSDT","contractType":"LinearPerpetual","status":"Trading","baseCoin":"SOL","quoteCoin":"USDT","settleCoin":"USDT","fundingInterval":240},
 {"symbol":"BTC-26DEC25","contractType":"LinearFutures","status":"Trading","baseCoin":"BTC","quoteCoin":"USDT","settleCoin":"USDT","fundingInterval":0},
 {"symbol":"BTCPERP","contractType":"LinearPerpetual","status":"Trading","baseCoin":"BTC","quoteCoin":"USDC","settleCoin":"USDC","fundingInterval":480},
 {"symbol":"ODDUSDT","contractType":"LinearPerpetual","status":"Trading","baseCoin":"ODD","quoteCoin":"USDT","settleCoin":"USDT","fundingInterval":45}
],"nextPageCursor":""},"time":1700000000000}"#;

const OKX: &str = r#"{"code":"0","msg":"","data":[
 {"instId":"BTC-USDT-SWAP","instType":"SWAP","ctType":"linear","settleCcy":"USDT","ctVal":"0.01","ctValCcy":"BTC","ctMult":"1","state":"live","uly":"BTC-USDT","instFamily":"BTC-USDT","baseCcy":""},
 {"instId":"BTC-USD-SWAP","instType":"SWAP","ctType":"inverse","settleCcy":"BTC","ctVal":"100","ctValCcy":"USD","state":"live"},
 {"instId":"PEPE-USDT-SWAP","instType":"SWAP","ctType":"linear","settleCcy":"USDT","ctVal":"10000000","ctValCcy":"PEPE","state":"live"},
 {"instId":"ETH-USDT-SWAP","instType":"SWAP","ctType":"linear","settleCcy":"USDT","ctVal":"abc","ctValCcy":"ETH","state":"live"},
 {"instId":"XRP-USDT-SWAP","instType":"SWAP","ctType":"linear","settleCcy":"USDT","ctVal":"100","ctValCcy":"XRP","state":"suspend"}
]}"#;

const BITGET: &str = r#"{"code":"00000","msg":"success","requestTime":1700000000000,"data":[
 {"symbol":"BTCUSDT","baseCoin":"BTC","quoteCoin":"USDT","symbolType":"perpetual","symbolStatus":"normal","fundInterval":"8"},
 {"symbol":"ETHUSDT","baseCoin":"ETH","quoteCoin":"USDT","symbolType":"delivery","symbolStatus":"normal","fundInterval":"8"},
 {"symbol":"DOGEUSDT","baseCoin":"DOGE","quoteCoin":"USDT","symbolType":"perpetual","symbolStatus":"normal","fundInterval":"1"},
 {"symbol":"BADUSDT","baseCoin":"BAD","quoteCoin":"USDT","symbolType":"perpetual","symbolStatus":"normal","fundInterval":"99"}
]}"#;

fn parse(venue: Venue, body: &str) -> PerpListing {
    perp_listing::parse(venue, body.as_bytes()).expect("a documented listing parses")
}

fn names(l: &PerpListing) -> Vec<&str> {
    l.contracts.iter().map(|c| c.contract.as_str()).collect()
}

#[test]
fn binance_reads_usdt_perpetuals_that_trade() {
    let l = parse(Venue::Binance, BINANCE);
    assert_eq!(names(&l), ["BTCUSDT", "1000PEPEUSDT", "1MBABYDOGEUSDT", "1000SATSUSDT", "ONLYPERPUSDT"]);
    assert_eq!(l.skipped, 1, "the perpetual without a symbol");
    assert!(l.contracts.iter().all(|c| c.contract_size == 1.0 && c.interval_h.is_none()));
}

#[test]
fn bybit_reads_the_funding_interval_in_minutes() {
    let l = parse(Venue::Bybit, BYBIT);
    assert_eq!(names(&l), ["BTCUSDT", "SOLUSDT"]);
    assert_eq!(l.contracts[0].interval_h, Some(8));
    assert_eq!(l.contracts[1].interval_h, Some(4));
    assert_eq!(l.skipped, 1, "45 minutes is not a whole hour");
}

#[test]
fn okx_reads_the_contract_value_and_the_base_from_its_currency() {
    let l = parse(Venue::Okx, OKX);
    assert_eq!(names(&l), ["BTC-USDT-SWAP", "PEPE-USDT-SWAP"]);
    assert_eq!(
        l.contracts[0],
        PerpListed { contract: "BTC-USDT-SWAP".into(), base: "BTC".into(), contract_size: 0.01, interval_h: None }
    );
    assert_eq!(l.contracts[1].contract_size, 10_000_000.0);
    assert_eq!(l.skipped, 1, "a ctVal that is not a number");
}

#[test]
fn bitget_reads_the_funding_interval_in_hours() {
    let l = parse(Venue::Bitget, BITGET);
    assert_eq!(names(&l), ["BTCUSDT", "DOGEUSDT"]);
    assert_eq!(l.contracts[1].interval_h, Some(1));
    assert_eq!(l.skipped, 1, "a 99 h interval");
}

#[test]
fn perpetuals_match_their_spot_pair_with_multipliers() {
    let l = parse(Venue::Binance, BINANCE);
    let spot: HashSet<&str> = ["BTCUSDT", "PEPEUSDT", "BABYDOGEUSDT", "1000SATSUSDT", "ETHUSDT"].into();
    let (pairs, unmatched) = perp_listing::match_spot(&l, &spot);
    let got: Vec<(&str, &str, u32)> =
        pairs.iter().map(|p| (p.symbol.as_str(), p.contract.as_str(), p.multiplier)).collect();
    assert_eq!(
        got,
        [
            ("1000SATSUSDT", "1000SATSUSDT", 1),
            ("BABYDOGEUSDT", "1MBABYDOGEUSDT", 1_000_000),
            ("BTCUSDT", "BTCUSDT", 1),
            ("PEPEUSDT", "1000PEPEUSDT", 1_000),
        ]
    );
    assert_eq!(unmatched, 1, "ONLYPERPUSDT has no spot pair");
    // ETHUSDT has no USDT perpetual on this listing: it has no derivatives data.
    assert!(pairs.iter().all(|p| p.symbol != "ETHUSDT"));
}

#[test]
fn units_are_the_spot_base() {
    let l = parse(Venue::Okx, OKX);
    let spot: HashSet<&str> = ["BTCUSDT", "PEPEUSDT"].into();
    let (pairs, _) = perp_listing::match_spot(&l, &spot);
    let btc = pairs.iter().find(|p| p.symbol == "BTCUSDT").expect("btc");
    assert!((btc.base_qty(250.0) - 2.5).abs() < 1e-12, "250 contracts of 0.01 BTC");
    assert_eq!(btc.base_price(94_000.0), 94_000.0);
    let bn = parse(Venue::Binance, BINANCE);
    let (pairs, _) = perp_listing::match_spot(&bn, &spot);
    let pepe = pairs.iter().find(|p| p.symbol == "PEPEUSDT").expect("pepe");
    assert_eq!(pepe.base_qty(3.0), 3_000.0, "3 × 1000PEPE");
    assert!((pepe.base_price(0.012) - 0.000_012).abs() < 1e-15);
}

#[test]
fn the_unprefixed_contract_wins_a_pair_two_map_onto() {
    let body = r#"{"symbols":[
 {"symbol":"1000PEPEUSDT","contractType":"PERPETUAL","status":"TRADING","baseAsset":"1000PEPE","quoteAsset":"USDT","marginAsset":"USDT"},
 {"symbol":"PEPEUSDT","contractType":"PERPETUAL","status":"TRADING","baseAsset":"PEPE","quoteAsset":"USDT","marginAsset":"USDT"}]}"#;
    let spot: HashSet<&str> = ["PEPEUSDT"].into();
    let (pairs, _) = perp_listing::match_spot(&parse(Venue::Binance, body), &spot);
    assert_eq!(pairs.len(), 1);
    assert_eq!((pairs[0].contract.as_str(), pairs[0].multiplier), ("PEPEUSDT", 1));
}

#[test]
fn malformed_bodies_are_errors_not_panics() {
    for venue in Venue::ALL {
        for body in
            ["", "{", "[]", "null", "{\"symbols\":5}", "{\"data\":{}}", "\u{0}\u{1}", "{\"result\":{\"list\":\"x\"}}"]
        {
            assert!(perp_listing::parse(venue, body.as_bytes()).is_err(), "{venue:?} {body:?}");
        }
    }
    let refused = perp_listing::parse(Venue::Okx, br#"{"code":"50011","msg":"Too Many Requests","data":[]}"#);
    assert!(matches!(refused, Err(RestError::Venue { ref code, .. }) if code == "50011"), "{refused:?}");
    let refused = perp_listing::parse(Venue::Bybit, br#"{"retCode":10006,"retMsg":"Too many visits"}"#);
    assert!(matches!(refused, Err(RestError::Venue { ref code, .. }) if code == "10006"), "{refused:?}");
}

#[test]
fn rows_of_the_wrong_shape_are_skipped_or_left_out() {
    let body = r#"{"symbols":[5, null, "x", {"contractType":"PERPETUAL"},
 {"symbol":"X-Y","contractType":"PERPETUAL","status":"TRADING","baseAsset":"A B","quoteAsset":"USDT","marginAsset":"USDT"}]}"#;
    let l = parse(Venue::Binance, body);
    assert!(l.contracts.is_empty());
    assert_eq!(l.skipped, 1, "a base that is not alphanumeric");
}

/// Binance's `GET /fapi/v1/fundingInfo` sets the intervals it lists (the others stay 8 h);
/// entries it cannot use are skipped, and a body that is not its array is refused.
#[test]
fn binance_funding_info_sets_the_adjusted_intervals() {
    let mut l = parse(Venue::Binance, BINANCE);
    let body = br#"[{"symbol":"1000PEPEUSDT","adjustedFundingRateCap":"0.02","adjustedFundingRateFloor":"-0.02","fundingIntervalHours":4,"disclaimer":false},
        {"symbol":"BTCUSDT","fundingIntervalHours":"x"},{"symbol":"ONLYPERPUSDT","fundingIntervalHours":99},{"symbol":"NOTLISTEDUSDT","fundingIntervalHours":1},5,null]"#;
    perp_listing::apply_binance_funding_info(&mut l, body).expect("a documented body");
    let interval = |c: &str| l.contracts.iter().find(|x| x.contract == c).and_then(|x| x.interval_h);
    assert_eq!(interval("1000PEPEUSDT"), Some(4));
    assert_eq!(interval("BTCUSDT"), None, "an unusable interval is skipped");
    assert_eq!(interval("ONLYPERPUSDT"), None, "99 h is out of range");
    for bad in [&b"{\"code\":-1003,\"msg\":\"Too many requests\"}"[..], b"[", b"", b"nope"] {
        let mut l = parse(Venue::Binance, BINANCE);
        assert!(perp_listing::apply_binance_funding_info(&mut l, bad).is_err(), "{}", String::from_utf8_lossy(bad));
    }
}
