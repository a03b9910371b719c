//! The site in a real browser: Debian's Chromium, headless, driven by Playwright
//! (`tests/browser/site.mjs`, run with Node.js) against the real binary on the live feed from
//! the venue simulator. The script signs in, creates and deletes alerts on the pages and checks
//! them against `/v1`, sees a density alert fire on the notifications page without a reload when
//! the simulator places a wall, checks the chart's price lines against `/v1/levels`, signs out,
//! and checks that a second account sees none of the first's data, the cookie's flags, CSRF and
//! the Content-Security-Policy; on the settings page it creates, rotates and ends the webhook
//! signing secret, and on the alerts page it reads the delivery log of an alert whose receiver
//! (in the script, on loopback) failed once, and redelivers that firing. Its steps of an alert's
//! lifecycle (`tests/browser/lifecycle.mjs`, decisions.md §16) edit an alert in place, pause and
//! resume it, send a test to a webhook on loopback and see a repeating alert paused by the flood
//! guard, in words on the alerts and notifications pages.
//! `tools/browser-deps.sh` installs what it needs.
//!
//! With `RAMPART_SHOTS=<dir>` the script also saves screenshots of every page at desktop and
//! phone width (how `docs/screenshots/` is made).
//!
//! A second script (`tests/browser/trader.mjs`), on a server of its own, tries the site as a
//! trader would: one stated time zone for the tables and the chart, alert tables and the chart's
//! alert lines that follow a firing without a reload, the action column in view at 1280 and
//! 390 px, confirmations and Undo, a market alert that could not fire refused with the number's
//! value, refusals in the form's words (the field's label, what was typed, beside the field).
//! With `RAMPART_WEIGH=<file>` it then weighs and times every page (`tests/browser/weigh.mjs`, how
//! `perf/site-pages.md` is made).
//!
//! A third script (`tests/browser/perp.mjs`) reads the derivatives flow of decisions.md §17 on
//! the site: the pair page's perpetual, live (an injected liquidation appears without a reload),
//! a pair without one, the board's and the screener's perpetual numbers, the alert form's
//! liquidations, open interest and funding alerts (one pair, a whole venue, refusals beside their
//! fields) and a liquidations alert's firing on the notifications page.

use std::process::Command;

use rampart_tests::{Server, SimVenue};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

#[test]
fn the_site_works_in_chromium() {
    let root = root();
    // The webhook receivers of the delivery-log and Send test steps are on loopback.
    let (sim, server) = live(8, "[webhooks]\nallow_private = true\n");
    let key_b = server.create_key("developer", Some("second account"));
    // A wall far larger than anything the simulated book holds.
    let truth = sim.get("book?venue=binance&symbol=BTCUSDT");
    let biggest = ["bids", "asks"]
        .iter()
        .flat_map(|side| truth[side].as_array().cloned().unwrap_or_default())
        .filter_map(|l| l[1].as_str().and_then(|q| q.parse::<f64>().ok()).or_else(|| l[1].as_f64()))
        .fold(0.0_f64, f64::max);
    let wall_qty = (biggest.max(1.0) * 50.0).ceil();
    let mut cmd = node(&root, "site.mjs", &server, &sim);
    cmd.env("KEY_A", &server.key).env("KEY_B", &key_b).env("WALL_QTY", format!("{wall_qty}"));
    if let Ok(dir) = std::env::var("RAMPART_SHOTS") {
        cmd.env("SHOTS", dir);
    }
    passes(&mut cmd, &server);
}

#[test]
fn the_site_is_a_traders_tool_in_chromium() {
    let root = root();
    // 60 pairs: more than one page of the screener (50).
    let (sim, server) = live(60, "");
    let mut cmd = node(&root, "trader.mjs", &server, &sim);
    cmd.env("KEY", &server.key);
    passes(&mut cmd, &server);
    // With `RAMPART_WEIGH=<file>`, the pages are weighed and timed too (perf/site-pages.md).
    if let Ok(out) = std::env::var("RAMPART_WEIGH") {
        let mut weigh = node(&root, "weigh.mjs", &server, &sim);
        weigh.env("KEY", &server.key).env("WEIGH_OUT", out);
        passes(&mut weigh, &server);
    }
}

#[test]
fn the_site_shows_the_derivatives_flow_in_chromium() {
    let root = root();
    // 8 simulated pairs, one of them without a perpetual (the simulator's listing leaves some out).
    // Binance's open interest polled every 2 s (each contract), not the default 30.
    let (sim, server) = live(8, "[derivatives]\nbinance_oi_poll_s = 2\n");
    server.wait_venue("binance", "perp up", 30, |h| h["perp"] == "up");
    let mut cmd = node(&root, "perp.mjs", &server, &sim);
    cmd.env("KEY", &server.key);
    passes(&mut cmd, &server);
}

/// The venue simulator with `pairs` Binance pairs, and the binary on its live feed (one shard,
/// `config` added to the settings), once Binance is `ok`.
fn live(pairs: usize, config: &str) -> (SimVenue, Server) {
    let sim = SimVenue::start(BIN, &["--sim-pairs", &pairs.to_string(), "--venues", "binance"]);
    let config = sim.config(&["binance"], pairs, config).display().to_string();
    let server = Server::start(BIN, &["--feed", "live", "--config", &config, "--shards", "1", "--venues", "binance"]);
    server.wait_venue("binance", "state ok", 30, |h| h["state"] == "ok");
    (sim, server)
}

/// `node <script>` from the repository's root, given the server's and the simulator's URLs and the
/// pair the scripts read (`SYMBOL`).
fn node(root: &std::path::Path, script: &str, server: &Server, sim: &SimVenue) -> Command {
    let mut cmd = Command::new("node");
    cmd.arg(root.join("tests/browser").join(script))
        .current_dir(root)
        .env("RAMPART_URL", server.url(""))
        .env("SIM_URL", &sim.url)
        .env("SYMBOL", "BTCUSDT");
    cmd
}

/// The repository's root, with the browser test's packages installed.
fn root() -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    assert!(
        root.join("tests/browser/node_modules/playwright-core").is_dir(),
        "playwright-core is not installed: run `bash tools/browser-deps.sh` (tools/check.sh does)"
    );
    root
}

/// Runs a browser script; fails with its output and the server's diagnostics unless it passed.
fn passes(cmd: &mut Command, server: &Server) {
    let out = cmd.output().expect("node runs (tools/browser-deps.sh installs it)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "the browser test failed:\n{stdout}\n{stderr}\n{}", server.diagnostics());
}
