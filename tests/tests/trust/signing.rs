//! Signed webhooks (`decisions.md` §13) through the real binary, checked by an independent
//! implementation: the `standardwebhooks` package from PyPI (the Standard Webhooks reference
//! library), installed into a virtual environment in the test's target directory the first
//! time. A delivery before any secret is unsigned, byte for byte as before; after
//! `POST /v1/webhook-secret` it verifies under the secret; after a rotation under both secrets
//! while the old one still signs (here `webhooks.previous_secret_s = 4`), then under the new one
//! only; after `DELETE /v1/webhook-secret` it is unsigned again. `GET /v1/webhook-secret` tells
//! each state and never the secret.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use rampart_tests::{hook_receiver, run_with_timeout, Hit, Server, SimVenue};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");
/// The reference library, pinned.
const STANDARDWEBHOOKS: &str = "standardwebhooks==1.1.0";

/// The venv's python with `standardwebhooks` installed (made once per target directory, by one
/// test at a time: the tests of this binary run at once).
pub(crate) fn python() -> PathBuf {
    static MADE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    MADE.get_or_init(make_venv).clone()
}

fn make_venv() -> PathBuf {
    let venv = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("standardwebhooks-venv");
    let python = venv.join("bin").join("python3");
    let ready = venv.join(".installed");
    if !ready.exists() {
        let mut make = Command::new("python3");
        make.args(["-m", "venv"]).arg(&venv);
        let out = run_with_timeout(make, Duration::from_secs(120));
        assert!(out.status.success(), "python3 -m venv: {}", rampart_tests::describe_output(&out));
        let mut pip = Command::new(venv.join("bin").join("pip"));
        pip.args(["install", "--quiet", "--disable-pip-version-check", STANDARDWEBHOOKS]);
        let out = run_with_timeout(pip, Duration::from_secs(300));
        assert!(out.status.success(), "pip install {STANDARDWEBHOOKS}: {}", rampart_tests::describe_output(&out));
        std::fs::write(&ready, STANDARDWEBHOOKS).expect("mark the venv ready");
    }
    python
}

/// Whether the reference library accepts `hit` under `secret`.
pub(crate) fn verifies(python: &PathBuf, secret: &str, hit: &Hit) -> bool {
    let headers: serde_json::Map<String, Value> =
        hit.headers.iter().map(|(k, v)| (k.to_ascii_lowercase(), Value::String(v.clone()))).collect();
    let script = "import json,sys\nfrom standardwebhooks.webhooks import Webhook\n\
                  secret, headers, body = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]\n\
                  Webhook(secret).verify(body, headers)\nprint('verified')\n";
    let mut cmd = Command::new(python);
    cmd.arg("-c").arg(script).arg(secret).arg(Value::Object(headers).to_string()).arg(&hit.body);
    let out = run_with_timeout(cmd, Duration::from_secs(30));
    out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "verified"
}

struct Rig {
    sim: SimVenue,
    server: Server,
    port: u16,
    hits: Arc<Mutex<Vec<Hit>>>,
}

impl Rig {
    /// Fires one alert with a webhook to the receiver by a trade through it; its delivery.
    fn fire(&self, n: usize) -> Hit {
        let r = self.server.get_authed("/v1/symbols/BTCUSDT?exchange=binance");
        let p = r.ok("price")["data"]["price"].as_f64().expect("price");
        let level = (p * 1.02 * 100.0).round() / 100.0;
        let body = json!({"exchange":"binance","symbol":"BTCUSDT","type":"price","direction":"above","price":level,
                          "webhook_url": format!("http://127.0.0.1:{}/hook/{n}", self.port)});
        let created = self.server.request(
            "POST",
            "/v1/alerts",
            Some(&format!("Bearer {}", self.server.key)),
            Some(&body.to_string()),
        );
        let id = created.ok("create")["data"]["id"].as_i64().expect("id");
        self.sim.control("trade", &json!({"venue":"binance","symbol":"BTCUSDT","price":format!("{:.2}", p * 1.03)}));
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let path = format!("POST /hook/{n} ");
            let found =
                self.hits.lock().ok().and_then(|h| h.iter().find(|x| x.request_line.starts_with(&path)).cloned());
            if let Some(hit) = found {
                let v: Value = serde_json::from_str(&hit.body).expect("a JSON body");
                assert_eq!(v["alert"]["id"], id, "delivery {n} is its alert's");
                return hit;
            }
            assert!(Instant::now() < deadline, "delivery {n} did not arrive in 20 s");
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn secret(&self, method: &str) -> Value {
        let r = self.server.request(method, "/v1/webhook-secret", Some(&format!("Bearer {}", self.server.key)), None);
        if method == "POST" {
            assert_eq!(r.header("cache-control"), Some("no-store"), "a secret is not cached");
        }
        r.ok(method)["data"].clone()
    }
}

fn unsigned(hit: &Hit) {
    let mut names: Vec<String> = hit.headers.iter().map(|(k, _)| k.to_ascii_lowercase()).collect();
    names.sort();
    assert_eq!(names, ["content-length", "content-type", "host", "user-agent", "x-service-event"], "{:?}", hit.headers);
}

#[test]
fn signed_webhooks_verify_with_the_reference_library_across_a_rotation() {
    let python = python();
    let (port, hits) = hook_receiver();
    let sim = SimVenue::start(BIN, &["--sim-pairs", "4", "--venues", "binance"]);
    let config = sim.config(&["binance"], 4, "[webhooks]\nallow_private = true\nprevious_secret_s = 4\n");
    let config = config.display().to_string();
    let server = Server::start(BIN, &["--feed", "live", "--config", &config, "--shards", "1", "--venues", "binance"]);
    server.wait_venue("binance", "state ok", 40, |h| h["state"] == "ok");
    let rig = Rig { sim, server, port, hits };

    // No secret: byte for byte as before.
    let plain = rig.fire(0);
    unsigned(&plain);
    assert_eq!(rig.secret("GET"), json!({"signing": false, "createdAt": null, "previousUntil": null}));

    let a = rig.secret("POST")["secret"].as_str().expect("a secret").to_owned();
    assert!(a.starts_with("whsec_"), "{a}");
    let state = rig.secret("GET");
    assert_eq!((&state["signing"], &state["previousUntil"]), (&json!(true), &Value::Null), "{state}");
    assert!(rampart_tests::is_iso8601(state["createdAt"].as_str().unwrap_or("")), "{state}");
    assert!(!state.to_string().contains(&a), "GET never shows the secret");
    let first = rig.fire(1);
    let v: Value = serde_json::from_str(&first.body).expect("body");
    assert_eq!(first.header("webhook-id"), Some(format!("{}:{}", v["alert"]["id"], v["trigger"]["time"]).as_str()));
    assert!(verifies(&python, &a, &first), "signed under the secret: {:?}", first.headers);
    assert!(!verifies(&python, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", &first), "and under no other");

    let b = rig.secret("POST")["secret"].as_str().expect("a new secret").to_owned();
    assert_ne!(a, b);
    let rotated = rig.secret("GET");
    assert!(rampart_tests::is_iso8601(rotated["previousUntil"].as_str().unwrap_or("")), "{rotated}");
    let both = rig.fire(2);
    assert!(verifies(&python, &b, &both), "the new secret signs");
    assert!(verifies(&python, &a, &both), "the old one too, while it still signs");
    thread::sleep(Duration::from_secs(5));
    assert_eq!(rig.secret("GET")["previousUntil"], Value::Null, "the old secret's time is over");
    let later = rig.fire(3);
    assert!(verifies(&python, &b, &later), "the new secret signs");
    assert!(!verifies(&python, &a, &later), "the old one no longer does");

    assert_eq!(rig.secret("DELETE"), json!({"signing": false}));
    assert_eq!(rig.secret("GET"), json!({"signing": false, "createdAt": null, "previousUntil": null}));
    unsigned(&rig.fire(4));
}
