//! Which USDT perpetual belongs to which spot pair (decisions §17, "The perpetual of a pair"):
//! each venue's perpetual listing parsed, then matched onto the venue's spot pairs, without I/O.
//!
//! A venue's listing is untrusted input: a contract with a field missing or unusable is skipped
//! and counted, never guessed. What is read, per venue (venues.md §8.2):
//! - Binance `GET /fapi/v1/exchangeInfo`: `contractType: PERPETUAL`, `quoteAsset` and
//!   `marginAsset` `USDT`, `status: TRADING`; base `baseAsset`. No funding interval (the venue
//!   lists only the adjusted ones, in `fundingInfo`): `None`, 8 h unless told otherwise.
//! - Bybit `GET /v5/market/instruments-info?category=linear`: `contractType: LinearPerpetual`,
//!   `quoteCoin` and `settleCoin` `USDT`, `status: Trading`; base `baseCoin`; `fundingInterval`
//!   in minutes.
//! - OKX `GET /api/v5/public/instruments?instType=SWAP`: `ctType: linear`, `settleCcy: USDT`,
//!   `state: live`; base `ctValCcy` (a swap has no `baseCcy`), quote the settlement currency;
//!   `ctVal` the base units of one contract. No funding interval here (the `funding-rate`
//!   channel gives it).
//! - Bitget `GET /api/v2/mix/market/contracts?productType=USDT-FUTURES`: `symbolType:
//!   perpetual`, `quoteCoin: USDT`, `symbolStatus: normal`; base `baseCoin`; `fundInterval` in
//!   hours.
//!
//! Matching ([`match_spot`]): a perpetual belongs to the venue's spot pair `<base>USDT`. Its base
//! is tried as listed first, so a venue that lists the prefixed base on spot as well
//! (`1000SATS`) keeps it; then without a multiplier prefix (`1000`, `10000`, `100000`,
//! `1000000`, `1M`), the prefix becoming the contract's `multiplier`. A perpetual whose pair the
//! venue does not list on spot is left out (counted); of two perpetuals on one pair the one with
//! the smaller multiplier is kept (the unprefixed one, whose quantities need no scaling).

use std::collections::{HashMap, HashSet};

use rampart_engine::Venue;

use super::{int, text, RestError};

/// Multiplier prefixes of a base, longest first so `10000` is not read as `1000` + `0…`
/// (decisions §17).
pub const MULTIPLIER_PREFIXES: [(&str, u32); 5] =
    [("1000000", 1_000_000), ("100000", 100_000), ("10000", 10_000), ("1000", 1_000), ("1M", 1_000_000)];

/// The settlement currency of every perpetual read.
pub const QUOTE: &str = "USDT";

/// One USDT perpetual as its venue lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct PerpListed {
    /// The venue's name of the contract (`BTCUSDT`, OKX `BTC-USDT-SWAP`), used in subscriptions.
    pub contract: String,
    /// The base as listed (`1000PEPE`), uppercase.
    pub base: String,
    /// Base units of one contract in the venue's quantities (OKX `ctVal`; 1 elsewhere).
    pub contract_size: f64,
    /// The funding interval in hours, where the listing gives it.
    pub interval_h: Option<u32>,
}

/// A perpetual matched to its spot pair.
#[derive(Clone, Debug, PartialEq)]
pub struct PerpPair {
    /// The spot pair (`BASEQUOTE`, `PEPEUSDT`).
    pub symbol: String,
    /// The venue's name of the contract.
    pub contract: String,
    /// Units of the spot base in one unit of the contract's base (`1000PEPE` → 1000; 1 without
    /// a prefix).
    pub multiplier: u32,
    /// Base units of one contract in the venue's quantities (OKX `ctVal`; 1 elsewhere).
    pub contract_size: f64,
    /// The funding interval in hours, where the listing gives it.
    pub interval_h: Option<u32>,
}

impl PerpPair {
    /// A quantity as the venue sends it (contracts on OKX, the contract's base elsewhere) in
    /// units of the spot pair's base (§17 "Units").
    pub fn base_qty(&self, venue_qty: f64) -> f64 {
        venue_qty * self.contract_size * f64::from(self.multiplier)
    }

    /// A price per unit of the contract's base as a price per unit of the spot base.
    pub fn base_price(&self, venue_price: f64) -> f64 {
        venue_price / f64::from(self.multiplier)
    }
}

/// A venue's perpetual listing parsed: the contracts read, and how many were skipped for an
/// unusable field.
#[derive(Debug, Default)]
pub struct PerpListing {
    /// The USDT perpetuals that trade now.
    pub contracts: Vec<PerpListed>,
    /// Entries that were USDT perpetuals by their type but had a field missing or unusable.
    pub skipped: usize,
}

/// The URL of `venue`'s perpetual listing under its perpetual REST base (the module doc's
/// endpoints; Bybit's page of up to 1 000, which holds every linear contract listed in 2026).
pub fn listing_url(venue: Venue, perp_rest: &str) -> String {
    match venue {
        Venue::Binance => format!("{perp_rest}/fapi/v1/exchangeInfo"),
        Venue::Bybit => format!("{perp_rest}/v5/market/instruments-info?category=linear&limit=1000"),
        Venue::Okx => format!("{perp_rest}/api/v5/public/instruments?instType=SWAP"),
        Venue::Bitget => format!("{perp_rest}/api/v2/mix/market/contracts?productType=USDT-FUTURES"),
    }
}

/// Binance's `GET /fapi/v1/fundingInfo`: the contracts whose funding interval is not the
/// default 8 h, with theirs.
pub fn binance_funding_info_url(perp_rest: &str) -> String {
    format!("{perp_rest}/fapi/v1/fundingInfo")
}

/// Sets the funding interval of each Binance contract that `fundingInfo`'s `body` names; the
/// others keep `None` (8 h). Entries without a usable interval are skipped.
pub fn apply_binance_funding_info(listing: &mut PerpListing, body: &[u8]) -> Result<(), RestError> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| RestError::json("funding info", e))?;
    let rows = v.as_array().ok_or(RestError::shape("funding info", "not an array"))?;
    for row in rows {
        let symbol = row.get("symbol").and_then(text).unwrap_or_default();
        let hours = row.get("fundingIntervalHours").and_then(int).and_then(|h| u32::try_from(h).ok());
        if let (Some(c), Some(h)) = (listing.contracts.iter_mut().find(|c| c.contract == symbol), hours) {
            c.interval_h = Some(h).filter(|h| (1..=24).contains(h));
        }
    }
    Ok(())
}

/// Parses `venue`'s perpetual listing body (the endpoints in the module doc).
pub fn parse(venue: Venue, body: &[u8]) -> Result<PerpListing, RestError> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| RestError::json("perpetual listing", e))?;
    let rows = rows(venue, &v)?;
    let mut out = PerpListing { contracts: Vec::with_capacity(rows.len()), skipped: 0 };
    for row in rows {
        let f = |k: &str| row.get(k).and_then(text).unwrap_or_default();
        if !is_usdt_perp(venue, &f) {
            continue;
        }
        match contract(venue, row, &f) {
            Some(c) => out.contracts.push(c),
            None => out.skipped += 1,
        }
    }
    Ok(out)
}

/// The array of contracts in the venue's envelope, or the venue's error.
fn rows(venue: Venue, v: &serde_json::Value) -> Result<&Vec<serde_json::Value>, RestError> {
    const WHAT: &str = "perpetual listing";
    let code = |k: &str| v.get(k).and_then(text).unwrap_or_default();
    let (ok, list) = match venue {
        Venue::Binance => (true, v.get("symbols")),
        Venue::Bybit => (code("retCode") == "0", v.get("result").and_then(|r| r.get("list"))),
        Venue::Okx => (code("code") == "0", v.get("data")),
        Venue::Bitget => (code("code") == "00000", v.get("data")),
    };
    if !ok {
        let message = ["retMsg", "msg"].iter().find_map(|k| v.get(*k).and_then(text)).unwrap_or_default();
        let code = ["retCode", "code"].iter().find_map(|k| v.get(*k).and_then(text)).unwrap_or_default();
        return Err(RestError::Venue { what: WHAT, code, message });
    }
    list.and_then(|l| l.as_array()).ok_or(RestError::shape(WHAT, "no array of contracts"))
}

/// Whether a row is a USDT-margined linear perpetual trading now (§17 "Which contracts").
fn is_usdt_perp(venue: Venue, f: &dyn Fn(&str) -> String) -> bool {
    match venue {
        Venue::Binance => {
            f("contractType") == "PERPETUAL"
                && f("quoteAsset") == QUOTE
                && f("marginAsset") == QUOTE
                && f("status") == "TRADING"
        }
        Venue::Bybit => {
            f("contractType") == "LinearPerpetual"
                && f("quoteCoin") == QUOTE
                && f("settleCoin") == QUOTE
                && f("status") == "Trading"
        }
        Venue::Okx => {
            f("instType") == "SWAP" && f("ctType") == "linear" && f("settleCcy") == QUOTE && f("state") == "live"
        }
        Venue::Bitget => f("symbolType") == "perpetual" && f("quoteCoin") == QUOTE && f("symbolStatus") == "normal",
    }
}

/// One contract's fields; `None` when one is missing or unusable.
fn contract(venue: Venue, row: &serde_json::Value, f: &dyn Fn(&str) -> String) -> Option<PerpListed> {
    let (name, base) = match venue {
        Venue::Binance => (f("symbol"), f("baseAsset")),
        Venue::Bybit | Venue::Bitget => (f("symbol"), f("baseCoin")),
        Venue::Okx => (f("instId"), f("ctValCcy")),
    };
    let base = base.trim().to_uppercase();
    if name.is_empty() || base.is_empty() || !base.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    let contract_size = match venue {
        Venue::Okx => f("ctVal").parse::<f64>().ok().filter(|v| v.is_finite() && *v > 0.0)?,
        _ => 1.0,
    };
    let interval_h = match venue {
        Venue::Bybit => Some(hours(row.get("fundingInterval").and_then(int)?, 60)?),
        Venue::Bitget => Some(hours(row.get("fundInterval").and_then(int)?, 1)?),
        Venue::Binance | Venue::Okx => None,
    };
    Some(PerpListed { contract: name, base, contract_size, interval_h })
}

/// A funding interval given in `unit`s per hour as whole hours from 1 to 24; `None` otherwise.
fn hours(value: i64, per_hour: i64) -> Option<u32> {
    let h = (value % per_hour == 0).then_some(value / per_hour)?;
    u32::try_from(h).ok().filter(|h| (1..=24).contains(h))
}

/// The perpetuals of a listing matched to the venue's spot pairs (`spot`: their `BASEQUOTE`
/// symbols), as the module doc says; the second value counts the perpetuals left out because
/// the venue lists no spot pair for them.
pub fn match_spot(listing: &PerpListing, spot: &HashSet<&str>) -> (Vec<PerpPair>, usize) {
    let mut pairs: HashMap<String, PerpPair> = HashMap::with_capacity(listing.contracts.len());
    let mut unmatched = 0;
    for c in &listing.contracts {
        let Some((symbol, multiplier)) = spot_of(&c.base, spot) else {
            unmatched += 1;
            continue;
        };
        let pair = PerpPair {
            symbol: symbol.clone(),
            contract: c.contract.clone(),
            multiplier,
            contract_size: c.contract_size,
            interval_h: c.interval_h,
        };
        // The unprefixed base wins a pair two contracts map onto.
        match pairs.get(&symbol) {
            Some(held) if held.multiplier <= multiplier => {}
            _ => {
                pairs.insert(symbol, pair);
            }
        }
    }
    let mut out: Vec<PerpPair> = pairs.into_values().collect();
    out.sort_by(|a, b| a.symbol.cmp(&b.symbol));
    (out, unmatched)
}

/// The spot pair a perpetual's base belongs to, and its multiplier.
fn spot_of(base: &str, spot: &HashSet<&str>) -> Option<(String, u32)> {
    let exact = format!("{base}{QUOTE}");
    if spot.contains(exact.as_str()) {
        return Some((exact, 1));
    }
    MULTIPLIER_PREFIXES.iter().find_map(|(prefix, multiplier)| {
        let rest = base.strip_prefix(prefix).filter(|r| !r.is_empty())?;
        let symbol = format!("{rest}{QUOTE}");
        spot.contains(symbol.as_str()).then_some((symbol, *multiplier))
    })
}
