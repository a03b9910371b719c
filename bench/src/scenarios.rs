//! The latency benchmark scenarios (`quiet`, `burst`, `storm`, `http`, `ingest`): each starts
//! `rampart sim-venue` and `rampart serve --feed live` pointed at it (four venues, one shard),
//! webhook receivers and a load of alerts, measures, checks correctness, and writes
//! `<out>/<date>-<scenario>.{json,md}`. The `rampart-harness` binary runs one; a test in
//! `tests/` runs them at a small scale so they cannot rot.
//!
//! What is measured (all times from the wall clock, which every process on the machine shares):
//! - tick → alert decision: the simulator stamps each Binance trade with its send time in
//!   microseconds (`timeUnit=MICROSECOND`); the shard records now − stamp after the trade's alert
//!   check, for every trade (`GET /v1/debug/latency`), and separately the part from the socket
//!   read to the decision.
//! - tick → webhook: the harness stamps the moment it asks the simulator for a trade through an
//!   alert's level and each webhook's arrival; the difference includes the simulator's HTTP
//!   handling of that request, so it is an upper bound.
//! - ingest: messages applied per second by the service (its counters) against messages the
//!   simulator sent; and the per-core ceiling in process (`ingest`).
//!
//! The load is open-loop: the simulator never waits for rampart (a connection whose queue fills
//! is closed as a slow consumer and counted), so a stall in rampart shows up as latency of the
//! trades sent during it, not as a lower send rate.

use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{json, Value};

use crate::env::{hist, pct, sig, Env, Res};
pub use crate::env::{Opts, BACKENDS};
use crate::harness::{self, now_us, Http, Receivers};

/// The scenarios, by name.
pub const SCENARIOS: [&str; 9] =
    ["quiet", "burst", "storm", "http", "writes", "ingest", "streams", "soak", "liquidations"];

/// One probe: an alert just above a pair's price and a trade through it.
struct Probe {
    alert_id: i64,
    level: f64,
    t0_us: i64,
    /// When the simulator published the trade (the venue's side of "tick → webhook").
    published_us: i64,
    /// The price of the trade asked for: the firing must be on that trade.
    trade_price: f64,
}

/// Fires a probe every `every` for `secs`: alert above the price, then a trade through it.
fn probes(env: &Env, rx: &Receivers, secs: u64, every: Duration) -> Res<Vec<Probe>> {
    let symbols: Vec<String> = env.binance_symbols()?.into_iter().take(60).collect();
    let mut out = Vec::new();
    let end = Instant::now() + Duration::from_secs(secs);
    let mut k = 0usize;
    while Instant::now() < end {
        let next = Instant::now() + every;
        let s = &symbols[k % symbols.len()];
        let p = env.price(s)?;
        let level = sig(p * 1.004);
        let body = json!({"exchange":"binance","symbol":s,"type":"price","direction":"above","price":level,"webhook_url":rx.url(k)});
        let a = env.api.post("/v1/alerts", &body)?;
        let alert_id = a["data"]["id"].as_i64().ok_or("alert without id")?;
        let asked = sig(p * 1.01);
        let t0_us = now_us();
        let traded = env.sim.post("/trade", &json!({"venue":"binance","symbol":s,"price":format!("{asked}")}))?;
        let trade_price = traded["price"].as_str().and_then(|t| t.parse::<f64>().ok()).unwrap_or(asked);
        let published_us = traded["publishedUs"].as_i64().ok_or("the simulator's trade answer has no publishedUs")?;
        out.push(Probe { alert_id, level, t0_us, published_us, trade_price });
        k += 1;
        thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    Ok(out)
}

/// Checks the probes' webhooks: exactly one per firing, none before its trade, at or above its
/// level. Returns the latency histograms (µs) from the trade's publication by the simulator and
/// from the harness's request for it, and the check results.
fn check_probes(rx: &Receivers, probes: &[Probe], wait: Duration) -> (Histogram<u64>, Histogram<u64>, Value) {
    let deadline = Instant::now() + wait;
    let ids: std::collections::HashSet<i64> = probes.iter().map(|p| p.alert_id).collect();
    loop {
        let got = rx.received();
        let arrived = ids.iter().filter(|id| got.iter().any(|r| r.alert_id == **id)).count();
        if arrived == ids.len() || Instant::now() > deadline {
            break;
        }
        thread::sleep(Duration::from_millis(100));
    }
    let got = rx.received();
    let (mut h, mut from_request) = (hist(), hist());
    let (mut missing, mut early, mut below, mut other_trade) = (0, 0, 0, 0);
    for p in probes {
        let mine: Vec<_> = got.iter().filter(|r| r.alert_id == p.alert_id).collect();
        let Some(first) = mine.iter().min_by_key(|r| r.at_us) else {
            missing += 1;
            continue;
        };
        if first.at_us < p.published_us {
            early += 1;
        }
        if first.trigger_price + 1e-9 < p.level {
            below += 1;
        }
        // Fired by the trade asked for, not by a later one (the alert saw the trade that
        // followed its creation).
        if (first.trigger_price - p.trade_price).abs() > p.trade_price * 1e-6 {
            other_trade += 1;
        }
        let _ = h.record((first.at_us - p.published_us).max(1) as u64);
        let _ = from_request.record((first.at_us - p.t0_us).max(1) as u64);
    }
    let (distinct, dups) =
        harness::duplicates(got.iter().filter(|r| ids.contains(&r.alert_id)).map(|r| (r.alert_id, r.trigger_ms)));
    let ok = missing == 0 && early == 0 && below == 0 && other_trade == 0 && dups.is_empty();
    (
        h,
        from_request,
        json!({"expected": probes.len(), "firings": distinct, "missing": missing, "early": early, "belowLevel": below, "notOnItsTrade": other_trade, "duplicates": dups.len(), "ok": ok}),
    )
}

/// Runs one scenario, writes its result files and returns the result.
pub fn run(o: &Opts) -> Res<Value> {
    let (cores, cpu) = harness::machine();
    let started_ms = rampart_state::clock::wall_ms();
    let mut result = json!({
        "scenario": o.scenario, "command": o.command, "commit": harness::commit(),
        "machine": {"cores": cores, "cpu": cpu}, "date": rampart_state::clock::iso8601(started_ms),
        "pairs": o.pairs, "shards": 1,
    });
    let mut notes: Vec<String> = Vec::new();
    match o.scenario.as_str() {
        "ingest" => {
            let mut runs = Vec::new();
            for _ in 0..5 {
                let s = crate::ingest::live_ingest(o.pairs, o.ingest_messages, o.alerts);
                runs.push(json!({"msgsPerS": s.rate_per_s, "p50Ns": s.p50_ns, "p99Ns": s.p99_ns, "p999Ns": s.p999_ns}));
            }
            let mut rates: Vec<f64> = runs.iter().filter_map(|r| r["msgsPerS"].as_f64()).collect();
            rates.sort_by(f64::total_cmp);
            result["ingestPerCore"] = json!({"runs": runs, "medianMsgsPerS": rates[rates.len() / 2]});
            // The same decode + book work done the plain way, in the same run, as a ratio.
            let c = crate::book_baseline::compare((o.ingest_messages / 5).max(1_000), 3);
            result["bookBaseline"] = json!({
                "engineP50Ns": c.engine_p50_ns, "engineP99Ns": c.engine_p99_ns,
                "baselineP50Ns": c.baseline_p50_ns, "baselineP99Ns": c.baseline_p99_ns,
                "ratioP50": c.ratio_p50,
                "engineAllocsPerMsg": c.engine_allocs_per_msg, "baselineAllocsPerMsg": c.baseline_allocs_per_msg,
            });
            notes.push("bookBaseline: the engine's decode + book path against serde_json into owned structs and a BTreeMap book on the same Binance frames (bench/src/book_baseline.rs); ratio = baseline p50 / engine p50.".into());
            notes.push("In-process: frames through the WebSocket codec, the Binance session (decode, sync) and Market::apply with alerts held, on one core, no socket.".into());
        }
        "quiet" | "burst" => {
            let env = Env::start(o)?;
            let rx = Receivers::start(8, 0).map_err(|e| e.to_string())?;
            let rate = env.load_alerts(o.alerts)?;
            result["alerts"] = json!({"loaded": o.alerts, "createdPerS": rate});
            if o.perp_alerts > 0 {
                let rate = crate::perp_load::load_perp_alerts(&env, o.perp_alerts)?;
                result["perpAlerts"] = json!({"loaded": o.perp_alerts, "createdPerS": rate});
            }
            let secs = if o.scenario == "burst" { 10 } else { o.secs };
            if o.scenario == "burst" {
                // Ten times the pairs' step rate: 500 ms → 50 ms.
                env.sim.post("/speed", &json!({"step_ms": 50}))?;
                thread::sleep(Duration::from_millis(500));
            }
            env.reset_latency()?;
            let (a0, s0, t0) = (env.applied()?, env.sent()?, Instant::now());
            let probes = probes(&env, &rx, secs, o.probe_every)?;
            let (a1, s1, dt) = (env.applied()?, env.sent()?, t0.elapsed().as_secs_f64());
            let (decision, inside) = env.latency()?;
            if o.scenario == "burst" {
                env.sim.post("/speed", &json!({"step_ms": 500}))?;
            }
            let (h, from_request, check) = check_probes(&rx, &probes, Duration::from_secs(20));
            result["tickToDecisionUs"] = decision;
            result["readToDecisionUs"] = inside;
            result["tickToWebhookUs"] = pct(&h);
            result["requestToWebhookUs"] = pct(&from_request);
            result["correctness"] = check;
            result["ingest"] =
                json!({"sentPerS": (s1 - s0) as f64 / dt, "appliedPerS": (a1 - a0) as f64 / dt, "seconds": dt});
            env.describe(&mut result)?;
            notes.push("tick → webhook is measured from the simulator's publication of the probe's trade (queued for its connections; the connection task's write follows) to the webhook's arrival; request → webhook from the harness's request for that trade, so it also includes the simulator's handling of the request (restarting the pair's walk at the new price).".into());
        }
        "storm" => {
            let env = Env::start(o)?;
            let receivers = o.storm_receivers.max(2);
            let rx = Receivers::start(receivers, 1).map_err(|e| e.to_string())?;
            let rate = env.load_alerts(o.alerts)?;
            let secret = if o.signed {
                let made = env.api.post("/v1/webhook-secret", &json!({}))?;
                Some(made["data"]["secret"].as_str().ok_or("no secret in the answer")?.to_owned())
            } else {
                None
            };
            let symbol = "BTCUSDT";
            let p = env.price(symbol)?;
            let n = o.storm_alerts;
            let t_create = Instant::now();
            let mut ids = Vec::with_capacity(n);
            // Levels 3.0–3.6 % above the price and one trade 4 % above it: the simulated market's
            // own walk while the alerts are made (several seconds through a cluster) stays short
            // of them (0.3 % was crossed once: firings before the storm's trade, `early`).
            for i in 0..n {
                let level = sig(p * (1.03 + 0.006 * i as f64 / n as f64));
                let body = json!({"exchange":"binance","symbol":symbol,"type":"price","direction":"above","price":level,"webhook_url":rx.url(i)});
                let a = env.api.post("/v1/alerts", &body)?;
                ids.push((a["data"]["id"].as_i64().ok_or("no id")?, level, i % receivers));
            }
            let create_s = t_create.elapsed().as_secs_f64();
            env.reset_latency()?;
            let t_request_us = now_us();
            let traded = env
                .sim
                .post("/trade", &json!({"venue":"binance","symbol":symbol,"price":format!("{}", sig(p * 1.04))}))?;
            let t0_us = traded["publishedUs"].as_i64().ok_or("the simulator's trade answer has no publishedUs")?;
            let healthy: Vec<i64> = ids.iter().filter(|(_, _, r)| *r != 0).map(|(id, _, _)| *id).collect();
            let deadline = Instant::now() + Duration::from_secs(90);
            loop {
                let got = rx.received();
                let set: std::collections::HashSet<i64> =
                    got.iter().filter(|r| r.receiver != 0).map(|r| r.alert_id).collect();
                if healthy.iter().all(|id| set.contains(id)) || Instant::now() > deadline {
                    break;
                }
                thread::sleep(Duration::from_millis(100));
            }
            let got = rx.received();
            let (mut h, mut from_request) = (hist(), hist());
            let mut first: std::collections::HashMap<i64, i64> = std::collections::HashMap::new();
            for r in got.iter().filter(|r| r.receiver != 0) {
                let e = first.entry(r.alert_id).or_insert(r.at_us);
                *e = (*e).min(r.at_us);
            }
            let mut early = 0;
            for at in first.values() {
                if *at < t0_us {
                    early += 1;
                }
                let _ = h.record((at - t0_us).max(1) as u64);
                let _ = from_request.record((at - t_request_us).max(1) as u64);
            }
            let missing = healthy.iter().filter(|id| !first.contains_key(id)).count();
            let (distinct, dups) =
                harness::duplicates(got.iter().filter(|r| r.receiver != 0).map(|r| (r.alert_id, r.trigger_ms)));
            let level_of: std::collections::HashMap<i64, f64> = ids.iter().map(|(id, l, _)| (*id, *l)).collect();
            let below =
                got.iter().filter(|r| level_of.get(&r.alert_id).is_some_and(|l| r.trigger_price + 1e-9 < *l)).count();
            let hanging = got.iter().filter(|r| r.receiver == 0).count();
            let signing = signing_check(&got, secret.as_deref());
            let last_us = first.values().max().map_or(0, |at| at - t0_us);
            result["deliveriesPerS"] = json!(first.len() as f64 / (last_us.max(1) as f64 / 1e6));
            if let Some(trigger_ms) = got.iter().find(|r| r.receiver != 0).map(|r| r.trigger_ms) {
                result["stages"] = env.stages(trigger_ms)?;
            }
            result["signed"] = json!(o.signed);
            result["alerts"] = json!({"loaded": o.alerts, "createdPerS": rate, "storm": n, "stormCreateS": create_s});
            let (decision, inside) = env.latency()?;
            result["tickToDecisionUs"] = decision;
            result["readToDecisionUs"] = inside;
            result["tickToWebhookUs"] = pct(&h);
            result["requestToWebhookUs"] = pct(&from_request);
            let signing_ok = signing["wrong"] == 0;
            result["correctness"] = json!({"expectedHealthy": healthy.len(), "firings": distinct, "missing": missing, "early": early, "belowLevel": below, "duplicates": dups.len(), "hangingReceiverRequests": hanging, "signatures": signing, "ok": missing == 0 && early == 0 && below == 0 && dups.is_empty() && signing_ok});
            env.describe(&mut result)?;
            notes.push(format!(
                "{receivers} receivers on their own ports; receiver 0 ({:.0}% of the alerts) reads each request and never answers.",
                100.0 / receivers as f64
            ));
        }
        "streams" => crate::streams::run(o, &mut result, &mut notes)?,
        "liquidations" => crate::liq_storm::run(o, &mut result, &mut notes)?,
        "soak" => crate::soak::run(o, &mut result, &mut notes)?,
        "http" => http(o, &mut result, &mut notes)?,
        "writes" => reads_under_creates(o, &mut result, &mut notes)?,
        _ => return Err("unknown scenario".into()),
    }
    result["notes"] = json!(notes);
    write(o, started_ms, &result)?;
    Ok(result)
}

/// The storm's signatures: with a secret every healthy delivery must carry one that verifies
/// under it, without one none may carry any. `{"verified","unsigned","wrong"}`.
fn signing_check(got: &[harness::Received], secret: Option<&str>) -> Value {
    let (mut verified, mut unsigned, mut wrong) = (0, 0, 0);
    for r in got.iter().filter(|r| r.receiver != 0) {
        match (&r.signed, secret) {
            (Some(s), Some(k)) if s.verifies(k) => verified += 1,
            (None, None) => unsigned += 1,
            _ => wrong += 1,
        }
    }
    json!({"verified": verified, "unsigned": unsigned, "wrong": wrong})
}

/// Keep-alive connections of the HTTP scenario's load (the figure issue #15's read targets name).
const HTTP_CONNECTIONS: usize = 64;

fn http(o: &Opts, result: &mut Value, notes: &mut Vec<String>) -> Res<()> {
    let env = Env::start(o)?;
    // A wall on BTCUSDT (off the simulated grid, so it stays), so its densities answer 200.
    let truth = env.sim.get("/book?venue=binance&symbol=BTCUSDT")?;
    let size = truth["bids"][3][1].as_str().and_then(|s| s.parse::<f64>().ok()).unwrap_or(1.0);
    env.sim.post("/level", &json!({"venue":"binance","symbol":"BTCUSDT","side":"bid","depth":5,"qty":format!("{:.0}", (size * 300.0).ceil())}))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while env.api.get("/v1/densities/BTCUSDT?exchange=binance").is_err() {
        if Instant::now() > deadline {
            return Err("no wall on BTCUSDT after 10 s".into());
        }
        thread::sleep(Duration::from_millis(200));
    }
    let paths = [
        "/v1/levels/BTCUSDT?exchange=binance",
        "/v1/densities/BTCUSDT?exchange=binance",
        "/v1/levels?exchange=binance",
        "/v1/densities?exchange=binance",
        "/v1/metrics/BTCUSDT?exchange=binance",
        "/v1/rankings/all?exchange=binance&metric=change",
    ];
    let addr: std::net::SocketAddr =
        env.base.trim_start_matches("http://").parse().map_err(|e| format!("address: {e}"))?;
    // The same bytes for the baseline server, fetched once while ticks flow.
    let mut routes = Vec::new();
    for p in paths {
        let body = ureq::get(&format!("{}{p}", env.base))
            .set("Authorization", &format!("Bearer {}", env.key))
            .call()
            .map_err(|e| e.to_string())?
            .into_string()
            .map_err(|e| e.to_string())?;
        routes.push((p.to_owned(), body.into_bytes()));
    }
    // The baseline given as many threads as rampart's fronts (at least two).
    let threads = o.fronts.unwrap_or(1).max(2);
    let cpus = o.rampart_cpus.as_deref().and_then(rampart_shard::cpus::parse_list);
    let baseline2 =
        crate::baseline_http::start_threads_on(routes.clone(), threads, cpus.clone()).map_err(|e| e.to_string())?;
    let baseline = crate::baseline_http::start_threads_on(routes, 1, cpus).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for p in paths {
        let head = format!("GET {p} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\r\n", env.key);
        let secs = Duration::from_secs(o.secs.min(10));
        let load = o.load_threads;
        let r = crate::http_load::run(addr, std::slice::from_ref(&head), HTTP_CONNECTIONS, load, secs, None);
        let b = crate::http_load::run(baseline.addr(), std::slice::from_ref(&head), HTTP_CONNECTIONS, load, secs, None);
        let b2 =
            crate::http_load::run(baseline2.addr(), std::slice::from_ref(&head), HTTP_CONNECTIONS, load, secs, None);
        let wrk = crate::http_load::wrk(
            &format!("{}{p}", env.base),
            Some(&format!("Authorization: Bearer {}", env.key)),
            HTTP_CONNECTIONS,
            load,
            secs.as_secs(),
        );
        // rampart against the baseline of as many threads as it has fronts.
        let same = if o.fronts.unwrap_or(1) > 1 { b2.req_per_s } else { b.req_per_s };
        rows.push(json!({
            "path": p,
            "rampart": {"reqPerS": r.req_per_s, "errors": r.errors, "non2xx": r.non_2xx, "latencyUs": pct(&r.latency_us)},
            "baseline": {"reqPerS": b.req_per_s, "errors": b.errors, "non2xx": b.non_2xx, "latencyUs": pct(&b.latency_us)},
            "ratio": r.req_per_s / b.req_per_s.max(1e-9),
            "baseline2": {"reqPerS": b2.req_per_s, "errors": b2.errors, "non2xx": b2.non_2xx, "latencyUs": pct(&b2.latency_us)},
            "ratio2": b2.req_per_s / b.req_per_s.max(1e-9),
            "ratioSameThreads": r.req_per_s / same.max(1e-9),
            "wrk": wrk.map(|w| json!({"reqPerS": w.req_per_s, "p50Us": w.p50_us, "p99Us": w.p99_us})),
        }));
    }
    result["http"] = json!(rows);
    result["httpBaselineThreads"] = json!(threads);
    if let Some(api2) = &env.api2 {
        result["httpBothApiNodes"] = both_api_nodes(&env, api2, &paths, Duration::from_secs(o.secs.min(10)))?;
        notes.push("httpBothApiNodes: the same load split over the cluster's two api nodes at once (32 connections on one thread each); reqPerS is their sum.".into());
    }
    env.describe(result)?;
    notes.push(format!("Closed-loop load, 64 keep-alive connections on {} load threads, while the four venues' ticks flow; rampart with --shards {} and {}; the baseline is an axum server on one worker thread serving the same bytes; ratio = rampart / baseline requests per second; then the same axum server on {threads} worker threads, its requests per second over the one-thread baseline's, and rampart's over that of the axum server with as many threads as rampart has fronts (ratio again when it has one). The load generator, the simulator, rampart and the baseline share the machine's cores.", o.load_threads, o.shards, o.fronts.map_or_else(|| "its default --fronts".to_owned(), |f| format!("--fronts {f}"))));
    Ok(())
}

/// Alert creates per second beside the read load of `writes` (issue #15: "reads keep their p99
/// while alerts are created at 200/s").
const CREATES_PER_S: u64 = 200;
/// Threads sharing those creates (each create is awaited: one thread alone could not keep the
/// pace if a create took more than 5 ms).
const CREATE_THREADS: u64 = 4;
/// Rounds of `writes`: each loads reads alone, then reads with creates, so every ratio is of
/// neighbouring measurements.
const WRITE_ROUNDS: usize = 3;

/// `writes`: single-pair reads at 64 connections alone and while alerts are created at
/// `CREATES_PER_S`, alternated `WRITE_ROUNDS` times; the reads' latency with creates over
/// without, per round and as a median.
fn reads_under_creates(o: &Opts, result: &mut Value, notes: &mut Vec<String>) -> Res<()> {
    let env = Env::start(o)?;
    let symbols: Vec<String> = env.binance_symbols()?.into_iter().take(50).collect();
    let mut prices = Vec::with_capacity(symbols.len());
    for s in &symbols {
        prices.push((s.clone(), env.price(s)?));
    }
    let addr: std::net::SocketAddr =
        env.base.trim_start_matches("http://").parse().map_err(|e| format!("address: {e}"))?;
    let path = "/v1/levels/BTCUSDT?exchange=binance";
    let head = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\r\n", env.key);
    let secs = Duration::from_secs(o.secs.clamp(1, 10));
    let (mut rounds, mut ratios) = (Vec::new(), Vec::new());
    for _ in 0..WRITE_ROUNDS {
        let alone =
            crate::http_load::run(addr, std::slice::from_ref(&head), HTTP_CONNECTIONS, o.load_threads, secs, None);
        let creator = {
            let (api, prices) = (env.api.clone(), prices.clone());
            thread::spawn(move || create_paced(&api, &prices, secs))
        };
        let with =
            crate::http_load::run(addr, std::slice::from_ref(&head), HTTP_CONNECTIONS, o.load_threads, secs, None);
        let creates = creator.join().map_err(|_| "creator panicked".to_owned())??;
        let ratio =
            with.latency_us.value_at_quantile(0.99) as f64 / alone.latency_us.value_at_quantile(0.99).max(1) as f64;
        ratios.push(ratio);
        rounds.push(json!({
            "alone": {"reqPerS": alone.req_per_s, "errors": alone.errors, "non2xx": alone.non_2xx, "latencyUs": pct(&alone.latency_us)},
            "withCreates": {"reqPerS": with.req_per_s, "errors": with.errors, "non2xx": with.non_2xx, "latencyUs": pct(&with.latency_us)},
            "creates": creates,
            "p99Ratio": ratio,
        }));
    }
    ratios.sort_by(f64::total_cmp);
    result["writes"] = json!({"path": path, "createsPerSAsked": CREATES_PER_S, "rounds": rounds, "medianP99Ratio": ratios[ratios.len() / 2]});
    env.describe(result)?;
    notes.push(format!("Each round: {path} loaded alone, then again while {CREATE_THREADS} threads create alerts at {CREATES_PER_S}/s in all (paced, each create awaited, far from the price so none fires); p99Ratio = the reads' p99 with creates / alone. 64 keep-alive connections on 2 threads; everything shares the machine's 2 cores."));
    Ok(())
}

/// Creates alerts at `CREATES_PER_S` for `secs` on `CREATE_THREADS` threads, each on its own
/// fixed schedule (one create every `CREATE_THREADS / CREATES_PER_S` s; one that ends late is
/// followed at once by the next due, so the asked rate holds while creates take less than that
/// on average); the rate reached, the creates' latency and the failures.
fn create_paced(api: &Http, prices: &[(String, f64)], secs: Duration) -> Res<Value> {
    let started = Instant::now();
    let every = Duration::from_micros(1_000_000 * CREATE_THREADS / CREATES_PER_S);
    let mut handles = Vec::new();
    for t in 0..CREATE_THREADS {
        let (api, prices) = (api.clone(), prices.to_vec());
        handles.push(thread::spawn(move || {
            let (mut h, mut failed) = (hist(), 0u64);
            let mut due = started + every * t as u32 / CREATE_THREADS as u32;
            let mut i = t as usize;
            while due < started + secs {
                thread::sleep(due.saturating_duration_since(Instant::now()));
                let (s, p) = &prices[i % prices.len()];
                let body = json!({"exchange":"binance","symbol":s,"type":"price","direction":"above","price":sig(p * (2.0 + (i % 89) as f64 / 100.0))});
                let t0 = Instant::now();
                match api.post("/v1/alerts", &body) {
                    Ok(_) => {
                        let _ = h.record(t0.elapsed().as_micros().max(1) as u64);
                    }
                    Err(_) => failed += 1,
                }
                due += every;
                i += CREATE_THREADS as usize;
            }
            (h, failed)
        }));
    }
    let (mut h, mut failed) = (hist(), 0u64);
    for handle in handles {
        let (part, f) = handle.join().map_err(|_| "create thread panicked".to_owned())?;
        h.add(&part).map_err(|e| e.to_string())?;
        failed += f;
    }
    let elapsed = started.elapsed().as_secs_f64();
    Ok(json!({"made": h.len(), "failed": failed, "perS": h.len() as f64 / elapsed, "latencyUs": pct(&h)}))
}

/// Each path loaded on both api nodes of a `roles` cluster at once; requests per second summed.
fn both_api_nodes(env: &Env, api2: &str, paths: &[&str], secs: Duration) -> Res<Value> {
    let addr = |base: &str| -> Res<std::net::SocketAddr> {
        base.trim_start_matches("http://").parse().map_err(|e| format!("address: {e}"))
    };
    let (a, b) = (addr(&env.base)?, addr(api2)?);
    let mut rows = Vec::new();
    for p in paths {
        let head = format!("GET {p} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\r\n", env.key);
        let h2 = head.clone();
        let other = thread::spawn(move || {
            crate::http_load::run(b, std::slice::from_ref(&h2), HTTP_CONNECTIONS / 2, 1, secs, None)
        });
        let r = crate::http_load::run(a, std::slice::from_ref(&head), HTTP_CONNECTIONS / 2, 1, secs, None);
        let r2 = other.join().map_err(|_| "load thread panicked".to_owned())?;
        rows.push(json!({
            "path": p,
            "reqPerS": r.req_per_s + r2.req_per_s,
            "nodes": [{"reqPerS": r.req_per_s, "errors": r.errors, "non2xx": r.non_2xx, "latencyUs": pct(&r.latency_us)},
                      {"reqPerS": r2.req_per_s, "errors": r2.errors, "non2xx": r2.non_2xx, "latencyUs": pct(&r2.latency_us)}],
        }));
    }
    Ok(json!(rows))
}

fn write(o: &Opts, started_ms: i64, result: &Value) -> Res<()> {
    std::fs::create_dir_all(&o.out).map_err(|e| e.to_string())?;
    let stamp: String = rampart_state::clock::iso8601(started_ms).chars().take(16).filter(|c| *c != ':').collect();
    // Runs started in the same minute get a letter rather than overwrite each other.
    let mut base = o.out.join(format!("{stamp}-{}", o.scenario));
    for suffix in 'a'..='z' {
        if !base.with_extension("json").exists() {
            break;
        }
        base = o.out.join(format!("{stamp}{suffix}-{}", o.scenario));
    }
    let json_path = base.with_extension("json");
    std::fs::write(&json_path, serde_json::to_string_pretty(result).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let md = markdown(result);
    std::fs::write(base.with_extension("md"), &md).map_err(|e| e.to_string())?;
    eprintln!("{md}");
    eprintln!("written: {}", json_path.display());
    Ok(())
}

fn markdown(r: &Value) -> String {
    let mut s = format!(
        "# rampart-harness {}\n\n- command: `{}`\n- commit: {}\n- rampart measured: {} {}\n- machine: {} cores, {}\n- date: {}\n- pairs: {}, shards: 1\n\n",
        r["scenario"].as_str().unwrap_or(""),
        r["command"].as_str().unwrap_or(""),
        r["commit"].as_str().unwrap_or(""),
        r["rampartVersion"]["version"].as_str().unwrap_or("-"),
        r["rampartVersion"]["revision"].as_str().unwrap_or("(in process)"),
        r["machine"]["cores"],
        r["machine"]["cpu"].as_str().unwrap_or(""),
        r["date"].as_str().unwrap_or(""),
        r["pairs"],
    );
    let lat = |name: &str, v: &Value| {
        format!(
            "| {name} | {} | {} | {} | {} | {} | {} |\n",
            v["count"], v["p50"], v["p90"], v["p99"], v["p999"], v["max"]
        )
    };
    if r.get("tickToDecisionUs").is_some() || r.get("tickToWebhookUs").is_some() {
        s.push_str("| latency (µs) | samples | p50 | p90 | p99 | p99.9 | max |\n|---|---|---|---|---|---|---|\n");
        if let Some(v) = r.get("tickToDecisionUs") {
            s.push_str(&lat("tick → alert decision", v));
        }
        if let Some(v) = r.get("readToDecisionUs") {
            s.push_str(&lat("(socket read → alert decision)", v));
        }
        if let Some(v) = r.get("tickToWebhookUs") {
            s.push_str(&lat("tick → webhook received", v));
        }
        if let Some(v) = r.get("requestToWebhookUs") {
            s.push_str(&lat("(harness's trade request → webhook received)", v));
        }
        s.push('\n');
    }
    if let Some(v) = r.get("ingest") {
        s.push_str(&format!(
            "Ingest: simulator sent {:.0} msgs/s, rampart applied {:.0} msgs/s over {:.1} s.\n\n",
            v["sentPerS"].as_f64().unwrap_or(0.0),
            v["appliedPerS"].as_f64().unwrap_or(0.0),
            v["seconds"].as_f64().unwrap_or(0.0)
        ));
    }
    if let Some(v) = r.get("ingestPerCore") {
        s.push_str(&format!(
            "Ingest per core (in-process, median of 5): {:.0} msgs/s\n\n",
            v["medianMsgsPerS"].as_f64().unwrap_or(0.0)
        ));
        for run in v["runs"].as_array().into_iter().flatten() {
            s.push_str(&format!(
                "- {:.0} msgs/s, p50 {} ns, p99 {} ns, p99.9 {} ns per message\n",
                run["msgsPerS"].as_f64().unwrap_or(0.0),
                run["p50Ns"],
                run["p99Ns"],
                run["p999Ns"]
            ));
        }
        s.push('\n');
    }
    if let Some(v) = r.get("bookBaseline") {
        s.push_str(&format!(
            "Decode + book per message: engine p50 {} ns (p99 {}), serde_json + BTreeMap p50 {} ns (p99 {}): baseline / engine = {:.2}\n\n",
            v["engineP50Ns"], v["engineP99Ns"], v["baselineP50Ns"], v["baselineP99Ns"], v["ratioP50"].as_f64().unwrap_or(0.0)
        ));
    }
    if let Some(v) = r.get("alerts") {
        s.push_str(&format!("Alerts: {v}\n\n"));
    }
    if let Some(v) = r.get("deliveriesPerS").and_then(Value::as_f64) {
        let signed = if r["signed"] == true { "signed" } else { "unsigned" };
        s.push_str(&format!(
            "Deliveries ({signed}): {v:.0}/s (healthy firings over the time from the trade to the last one's arrival)\n\n"
        ));
    }
    if let Some(v) = r.get("correctness") {
        s.push_str(&format!("Correctness: {v}\n\n"));
    }
    if let Some(rows) = r.get("http").and_then(Value::as_array) {
        let n = r["httpBaselineThreads"].as_u64().unwrap_or(2);
        s.push_str(&format!("| path | rampart req/s | p50 µs | p99 µs | baseline req/s | p50 µs | p99 µs | ratio | wrk req/s | wrk p99 µs | baseline on {n} threads req/s | its ratio to 1 thread | rampart / baseline of its fronts' threads |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"));
        for x in rows {
            s.push_str(&format!(
                "| `{}` | {:.0} | {} | {} | {:.0} | {} | {} | {:.2} | {} | {} | {:.0} | {:.2} | {:.2} |\n",
                x["path"].as_str().unwrap_or(""),
                x["rampart"]["reqPerS"].as_f64().unwrap_or(0.0),
                x["rampart"]["latencyUs"]["p50"],
                x["rampart"]["latencyUs"]["p99"],
                x["baseline"]["reqPerS"].as_f64().unwrap_or(0.0),
                x["baseline"]["latencyUs"]["p50"],
                x["baseline"]["latencyUs"]["p99"],
                x["ratio"].as_f64().unwrap_or(0.0),
                x["wrk"]["reqPerS"].as_f64().map_or_else(|| "-".into(), |v| format!("{v:.0}")),
                x["wrk"]["p99Us"].as_f64().map_or_else(|| "-".into(), |v| format!("{v:.0}")),
                x["baseline2"]["reqPerS"].as_f64().unwrap_or(0.0),
                x["ratio2"].as_f64().unwrap_or(0.0),
                x["ratioSameThreads"].as_f64().unwrap_or(0.0),
            ));
        }
        s.push('\n');
    }
    if let Some(w) = r.get("writes") {
        s.push_str(&writes_markdown(w));
    }
    for n in r["notes"].as_array().into_iter().flatten() {
        s.push_str(&format!("- {}\n", n.as_str().unwrap_or("")));
    }
    s
}

/// The `writes` scenario's table: a row per round.
fn writes_markdown(w: &Value) -> String {
    let mut s = format!(
        "Reads of `{}` alone and while alerts are created ({} asked per second):\n\n| round | alone req/s | p50 / p99 / p99.9 / max µs | with creates req/s | p50 / p99 / p99.9 / max µs | creates/s made (failed) | create p50 / p99 µs | p99 ratio |\n|---|---|---|---|---|---|---|---|\n",
        w["path"].as_str().unwrap_or(""),
        w["createsPerSAsked"]
    );
    let lat = |v: &Value| format!("{} / {} / {} / {}", v["p50"], v["p99"], v["p999"], v["max"]);
    for (i, x) in w["rounds"].as_array().into_iter().flatten().enumerate() {
        s.push_str(&format!(
            "| {} | {:.0} | {} | {:.0} | {} | {:.1} ({}) | {} / {} | {:.2} |\n",
            i + 1,
            x["alone"]["reqPerS"].as_f64().unwrap_or(0.0),
            lat(&x["alone"]["latencyUs"]),
            x["withCreates"]["reqPerS"].as_f64().unwrap_or(0.0),
            lat(&x["withCreates"]["latencyUs"]),
            x["creates"]["perS"].as_f64().unwrap_or(0.0),
            x["creates"]["failed"],
            x["creates"]["latencyUs"]["p50"],
            x["creates"]["latencyUs"]["p99"],
            x["p99Ratio"].as_f64().unwrap_or(0.0),
        ));
    }
    s.push_str(&format!("\nMedian p99 ratio: {:.2}\n\n", w["medianP99Ratio"].as_f64().unwrap_or(0.0)));
    s
}
