//! §17's derivatives alert load (issue #61, "spot ingest with the perpetual feeds on and 100 000
//! derivatives alerts loaded (1 000 of them `*`)"): `--perp-alerts N` in the `quiet` and `burst`
//! scenarios makes N derivatives alerts through the API before the measurement, 1 % of them `*`
//! (Binance, Bybit and OKX in turn; `order`, `sum`, `oi` and a `funding` level past the
//! simulator's ±0.75 % clamp), the rest one-pair `order`, `sum` and `oi` alerts spread over the
//! three venues' perpetuals. Their thresholds are out of the simulated market's reach (a $1B
//! liquidation, $10B liquidated in an hour, OI +500 % in an hour): they are the load every
//! perpetual update is checked against, and none fires.

use std::thread;
use std::time::Instant;

use serde_json::{json, Value};

use crate::env::{Env, Res};

/// The venues loaded (Bitget publishes no liquidations).
const LOADED: [&str; 3] = ["binance", "bybit", "okx"];
/// One alert in this many is a `*` alert.
const UNIVERSE_EVERY: usize = 100;

/// Makes `n` derivatives alerts; returns the creation rate per second.
pub(crate) fn load_perp_alerts(env: &Env, n: usize) -> Res<f64> {
    let mut perps: Vec<(&str, String)> = Vec::new();
    for v in LOADED {
        let list = env.api.get(&format!("/v1/perp?exchange={v}"))?;
        let names = list["data"].as_array().cloned().unwrap_or_default();
        perps.extend(names.iter().filter_map(|p| p["symbol"].as_str().map(|s| (v, s.to_owned()))));
    }
    if perps.is_empty() {
        return Err("no perpetual served: the derivatives alerts have no pair".into());
    }
    let started = Instant::now();
    let threads = 4;
    thread::scope(|s| -> Res<()> {
        let made: Vec<_> = (0..threads)
            .map(|t| {
                let (api, perps) = (env.api.clone(), &perps);
                s.spawn(move || -> Res<()> {
                    for i in (t..n).step_by(threads) {
                        api.post("/v1/alerts", &alert(i, perps))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in made {
            h.join().map_err(|_| "alert loader panicked".to_owned())??;
        }
        Ok(())
    })?;
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

/// The `i`-th alert of the load.
fn alert(i: usize, perps: &[(&str, String)]) -> Value {
    let kind = i % 4;
    if i.is_multiple_of(UNIVERSE_EVERY) {
        let venue = LOADED[(i / UNIVERSE_EVERY) % LOADED.len()];
        return condition(kind, venue, "*");
    }
    let (venue, symbol) = &perps[i % perps.len()];
    // One-pair: `order`, `sum` and `oi` (a one-pair funding level must be on its far side now).
    condition(kind % 3, venue, symbol)
}

fn condition(kind: usize, venue: &str, symbol: &str) -> Value {
    match kind {
        0 => json!({"type":"liquidations","exchange":venue,"symbol":symbol,"event":"order","min_usd":1_000_000_000u64}),
        1 => {
            json!({"type":"liquidations","exchange":venue,"symbol":symbol,"event":"sum","window":"1h","min_usd":10_000_000_000u64})
        }
        2 => json!({"type":"oi","exchange":venue,"symbol":symbol,"direction":"up","pct":500,"window":"1h"}),
        _ => json!({"type":"funding","exchange":venue,"symbol":symbol,"direction":"above","funding_pct":0.9}),
    }
}
