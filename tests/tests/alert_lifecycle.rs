//! An alert's lifecycle and destinations through the real binary and the venue simulator
//! (`decisions.md` §16). `PATCH /v1/alerts/{id}`: the note, the webhook (set, then used by the
//! next firing; `null` removes it), the end (`expires_at`, `null` removes it) and the cooldown
//! (which the shard then applies without re-arming the alert) change; the condition cannot (422
//! naming the field); every refusal of a bad value, another account's alert and an unknown one
//! (404), and the site's rule that its alerts have no webhook. A paused alert crosses without
//! firing and, resumed while price is past its level, fires only at a crossing after that;
//! `max_fires: 2` ends after two; the flood guard pauses a repeating alert at its 16th firing in 3
//! minutes and tells the account; Discord and Slack receive their services' bodies byte for byte;
//! every refusal of the new fields. Issue #58: concurrent changes on two front threads leave each
//! alert firing as it is shown; no change but a resume clears the flood guard's count; a value
//! filled into a chat message mentions no one. (The test send is in `trust/test_send.rs`, beside the
//! signature checks.)

use std::time::{Duration, Instant};

use rampart_state::clock::iso8601;
use rampart_tests::{hook_receiver, Hit, Server, SimVenue, SiteSession};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");
const PAIR: &str = "BTCUSDT";

fn live() -> (SimVenue, Server) {
    rampart_tests::live_binance_with(BIN, "[webhooks]\nallow_private = true\n")
}

fn bearer(server: &Server) -> String {
    format!("Bearer {}", server.key)
}

fn create(server: &Server, body: &Value) -> Value {
    let reply = server.request("POST", "/v1/alerts", Some(&bearer(server)), Some(&body.to_string()));
    reply.ok(&format!("create {body}"))["data"].clone()
}

fn patch(server: &Server, id: &Value, body: &Value) -> rampart_tests::Reply {
    server.request("PATCH", &format!("/v1/alerts/{id}"), Some(&bearer(server)), Some(&body.to_string()))
}

fn price_now(server: &Server) -> f64 {
    let s = server.get_authed(&format!("/v1/symbols/{PAIR}?exchange=binance"));
    s.ok("symbol")["data"]["price"].as_f64().expect("a price")
}

fn trade(sim: &SimVenue, at: f64) {
    sim.control("trade", &json!({"venue":"binance","symbol":PAIR,"price":format!("{at:.2}")}));
}

fn alert(server: &Server, id: &Value) -> Value {
    let all = server.get_authed("/v1/alerts?status=all");
    let list = all.ok("alerts")["data"].as_array().cloned().unwrap_or_default();
    list.into_iter().find(|a| a["id"] == *id).unwrap_or_else(|| panic!("alert {id} listed"))
}

/// `base` with `extra`'s fields.
fn merged(base: &Value, extra: Value) -> Value {
    let mut b = base.clone();
    b.as_object_mut().expect("object").extend(extra.as_object().cloned().unwrap_or_default());
    b
}

/// Waits until `check` holds of alert `id`.
fn until(server: &Server, id: &Value, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let a = alert(server, id);
        if check(&a) {
            return a;
        }
        assert!(Instant::now() < deadline, "{what}: {a}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn fired(server: &Server, id: &Value, n: i64, what: &str) -> Value {
    until(server, id, what, |a| a["triggerCount"] == json!(n))
}

/// The receiver's hits on `path`, waiting until there are `n`.
fn hits_on(hits: &std::sync::Mutex<Vec<Hit>>, path: &str, n: usize) -> Vec<Hit> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let got: Vec<Hit> = hits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|h| h.request_line.starts_with(&format!("POST {path} ")))
            .cloned()
            .collect();
        if got.len() >= n {
            return got;
        }
        assert!(Instant::now() < deadline, "{path}: {} of {n} deliveries", got.len());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn paused_alerts_fire_nothing_resume_without_a_spurious_firing_and_max_fires_ends_them() {
    let (sim, server) = live();
    let p = price_now(&server);
    let level = (p * 1.01).round();
    let base =
        json!({"symbol":PAIR,"exchange":"binance","type":"price","direction":"above","price":level,"repeat":true});
    let body = |extra: Value| merged(&base, extra);
    let paused = create(&server, &body(json!({})));
    let two = create(&server, &body(json!({"max_fires":2})));
    assert_eq!(
        (&paused["paused"], &paused["pausedBy"], &paused["maxFires"]),
        (&json!(false), &Value::Null, &Value::Null)
    );
    assert_eq!((&two["maxFires"], &two["webhookFormat"], &two["message"]), (&json!(2), &json!("json"), &Value::Null));
    let id = paused["id"].clone();
    let a = patch(&server, &id, &json!({"paused":true})).ok("pause")["data"].clone();
    assert_eq!((&a["paused"], &a["pausedBy"]), (&json!(true), &json!("user")));

    // A crossing: the other fires, the paused one does not.
    trade(&sim, level + 5.0);
    fired(&server, &two["id"], 1, "the first crossing");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(alert(&server, &id)["triggerCount"], 0, "paused");

    // Resumed while price is past its level: nothing, even at a trade still past it.
    let a = patch(&server, &id, &json!({"paused":false})).ok("resume")["data"].clone();
    assert_eq!((&a["paused"], &a["pausedBy"]), (&json!(false), &Value::Null));
    trade(&sim, level + 6.0);
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(alert(&server, &id)["triggerCount"], 0, "no firing at resume");

    // The far side, then a crossing: both fire; the limited one has ended.
    trade(&sim, level * 0.99);
    trade(&sim, level + 5.0);
    fired(&server, &id, 1, "the crossing after the resume");
    let ended = fired(&server, &two["id"], 2, "the limit's second");
    assert_eq!(ended["status"], "triggered", "max_fires 2 ends it: {ended}");
    trade(&sim, level * 0.99);
    trade(&sim, level + 5.0);
    fired(&server, &id, 2, "the next crossing");
    assert_eq!(alert(&server, &two["id"])["triggerCount"], 2, "no third");

    // The refusals of the new fields.
    patch(&server, &two["id"], &json!({"paused":true})).assert_error(
        422,
        "the alert has ended (status triggered): it cannot be paused or resumed",
        "an ended alert",
    );
    patch(&server, &id, &json!({"max_fires":2})).assert_error(
        422,
        "max_fires 2 is not above the 2 firings the alert has made",
        "a limit already reached",
    );
    let one_shot = create(
        &server,
        &json!({"symbol":PAIR,"exchange":"binance","type":"price","direction":"above","price":level * 2.0}),
    );
    assert_eq!(one_shot["maxFires"], 1, "repeat false is max_fires 1");
    patch(&server, &one_shot["id"], &json!({"max_fires":3})).assert_error(
        422,
        "max_fires above 1 needs repeat: true (an alert with repeat: false fires once)",
        "a one-shot's limit",
    );
    let refused = [
        (json!({"max_fires":0}), "max_fires must be a whole number from 1 to 1000, or null"),
        (json!({"max_fires":1001}), "max_fires must be a whole number from 1 to 1000, or null"),
        (json!({"paused":"no"}), "field 'paused' must be true or false"),
        (json!({"webhook_format":"teams"}), "invalid webhook_format 'teams'. Allowed: json, discord, slack"),
        (json!({"message":"{{sym}}"}), "unknown placeholder '{{sym}}' in message; known: {{exchange}} {{symbol}} {{type}} {{event}} {{direction}} {{price}} {{move}} {{level}} {{wall_usd}} {{liq_usd}} {{oi_change}} {{funding}} {{note}} {{time}}"),
        (json!({"message":"x".repeat(1001)}), "message is longer than 1000 characters"),
    ];
    for (b, message) in refused {
        patch(&server, &id, &b).assert_error(422, message, &b.to_string());
    }
    let r = server.request(
        "POST",
        "/v1/alerts",
        Some(&bearer(&server)),
        Some(&json!({"symbol":PAIR,"type":"price","direction":"above","price":level,"max_fires":2}).to_string()),
    );
    r.assert_error(422, "max_fires above 1 needs repeat: true (an alert with repeat: false fires once)", "create");
    let r = server.request(
        "POST",
        "/v1/alerts",
        Some(&bearer(&server)),
        Some(&json!({"symbol":PAIR,"type":"price","direction":"above","price":level,"message":"{{nope}}"}).to_string()),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.text.contains("unknown placeholder '{{nope}}' in message"), "{}", r.text);
}

#[test]
fn the_flood_guard_pauses_at_the_sixteenth_firing_and_tells_the_account() {
    let (sim, server) = live();
    let (port, hits) = hook_receiver();
    let p = price_now(&server);
    let level = (p * 1.01).round();
    let hook = format!("http://127.0.0.1:{port}/flood");
    let a = create(
        &server,
        &json!({"symbol":PAIR,"exchange":"binance","type":"price","direction":"above","price":level,"repeat":true,"webhook_url":hook}),
    );
    let id = a["id"].clone();
    // Sixteen crossings, each after the far side: fifteen are sent, the sixteenth pauses it.
    for _ in 0..16 {
        trade(&sim, level * 0.99);
        trade(&sim, level + 5.0);
    }
    let a = until(&server, &id, "paused by the flood guard", |a| a["paused"] == json!(true));
    assert_eq!(
        (&a["pausedBy"], &a["triggerCount"], &a["status"]),
        (&json!("flood_guard"), &json!(15), &json!("active"))
    );
    let sent = hits_on(&hits, "/flood", 15);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(hits_on(&hits, "/flood", 15).len(), sent.len());
    assert_eq!(sent.len(), 15, "no 16th webhook");
    // The account is told, in its inbox (and on Telegram when it has a chat: the store's test).
    let inbox = server.get_authed("/v1/inbox?limit=100");
    let entries = inbox.ok("inbox")["data"].as_array().cloned().unwrap_or_default();
    let notice = entries.iter().find(|e| e["kind"] == "alert.paused").unwrap_or_else(|| panic!("{entries:?}"));
    assert_eq!(notice["alertId"], id);
    let event = &notice["event"];
    assert_eq!(
        (&event["reason"], &event["firings"], &event["windowS"]),
        (&json!("flood_guard"), &json!(16), &json!(180))
    );
    assert_eq!(entries.iter().filter(|e| e["kind"] == "alert.triggered").count(), 15);
    // Resumed, it fires again (counted afresh), and only at a crossing after the resume.
    patch(&server, &id, &json!({"paused":false})).ok("resume");
    trade(&sim, level * 0.99);
    trade(&sim, level + 5.0);
    let a = fired(&server, &id, 16, "after the resume");
    assert_eq!(a["paused"], false);
}

#[test]
fn discord_and_slack_receive_their_services_bodies_byte_for_byte() {
    let (sim, server) = live();
    let (port, hits) = hook_receiver();
    let p = price_now(&server);
    let level = (p * 1.01).round();
    let at = level + 3.0;
    let base = json!({"symbol":PAIR,"exchange":"binance","type":"price","direction":"above","price":level,"note":"wake \"up\""});
    let with = |extra: Value| merged(&base, extra);
    let discord = create(
        &server,
        &with(json!({"webhook_url":format!("http://127.0.0.1:{port}/discord"),"webhook_format":"discord",
                     "message":"{{symbol}} on {{exchange}} {{direction}} {{level}}: {{price}} — {{note}}"})),
    );
    let slack = create(
        &server,
        &with(json!({"webhook_url":format!("http://127.0.0.1:{port}/slack"),"webhook_format":"slack"})),
    );
    let plain = create(&server, &with(json!({"webhook_url":format!("http://127.0.0.1:{port}/json")})));
    assert_eq!((&discord["webhookFormat"], &slack["webhookFormat"]), (&json!("discord"), &json!("slack")));
    trade(&sim, at);
    let fixed = |v: f64| if v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v}") };
    let (l, t) = (fixed(level), fixed(at));
    let d = &hits_on(&hits, "/discord", 1)[0];
    assert_eq!(
        d.body,
        format!(
            r#"{{"content":"BTCUSDT on binance above {l}: {t} — wake \"up\"","allowed_mentions":{{"parse":[],"users":[],"roles":[]}}}}"#
        )
    );
    assert_eq!(d.header("content-type"), Some("application/json"));
    let s = &hits_on(&hits, "/slack", 1)[0];
    let id = slack["id"].as_i64().expect("id");
    assert_eq!(
        s.body,
        format!(r#"{{"text":"BTCUSDT · binance\nprice alert #{id}: above {l} — traded at {t}\nNote: wake \"up\""}}"#)
    );
    // The default format is the spec's body, without the text.
    let j: Value = serde_json::from_str(&hits_on(&hits, "/json", 1)[0].body).expect("json");
    assert_eq!((&j["event"], &j["alert"]["id"], j.get("text")), (&json!("alert.triggered"), &plain["id"], None));
    // The inbox entry of the alert with a message carries its text; the others do not.
    let inbox = server.get_authed("/v1/inbox?limit=10");
    let entries = inbox.ok("inbox")["data"].as_array().cloned().unwrap_or_default();
    let of = |a: &Value| entries.iter().find(|e| e["alertId"] == a["id"]).cloned().expect("an entry");
    assert_eq!(of(&discord)["event"]["text"], format!("BTCUSDT on binance above {l}: {t} — wake \"up\""));
    assert_eq!(of(&slack)["event"].get("text"), None);
    // A format can be changed; a message removed.
    let a =
        patch(&server, &discord["id"], &json!({"webhook_format":"slack","message":null})).ok("patch")["data"].clone();
    assert_eq!((&a["webhookFormat"], &a["message"]), (&json!("slack"), &Value::Null));
}

#[test]
fn note_webhook_end_and_cooldown_change_and_the_condition_cannot() {
    let (sim, server) = live();
    let (port, hits) = hook_receiver();
    let p = price_now(&server);
    let level = (p * 1.01).round();
    let body =
        json!({"symbol":PAIR,"exchange":"binance","type":"price","direction":"above","price":level,"repeat":true});
    let plain = create(&server, &body);
    let quiet = create(&server, &body);
    let id = plain["id"].clone();

    // Note, webhook and end, each alone; the answer is the Alert as GET /v1/alerts lists it.
    let hook = format!("http://127.0.0.1:{port}/patched");
    let changed = patch(&server, &id, &json!({"note":"moved","webhook_url":hook,"expires_at":"2099-01-01T00:00:00Z"}));
    changed.assert_error(422, "expires_at must be between 1 minute and 365 days from now", "an end too far");
    let changed = patch(&server, &id, &json!({"note":"moved","webhook_url":hook}));
    let a = changed.ok("patch")["data"].clone();
    assert_eq!((&a["note"], &a["webhookUrl"], a["price"].as_f64()), (&json!("moved"), &json!(hook), Some(level)));
    assert_eq!(alert(&server, &id), a, "stored as answered");
    let end = rampart_tests::now_ms() + 86_400_000;
    let a = patch(&server, &id, &json!({"expires_at":iso8601(end)})).ok("end")["data"].clone();
    assert_eq!(a["expiresAt"], iso8601(end), "{a}");
    let a = patch(&server, &id, &json!({"expires_at":null})).ok("no end")["data"].clone();
    assert_eq!((&a["expiresAt"], &a["note"]), (&Value::Null, &json!("moved")), "the rest as it was");
    // The other alert gets an hour's cooldown before it ever fires.
    let q = patch(&server, &quiet["id"], &json!({"cooldown_s":3600})).ok("cooldown")["data"].clone();
    assert_eq!(q["cooldownS"], 3600);

    // A crossing: both fire, the patched webhook receives the first alert's body.
    trade(&sim, level + 1.0);
    fired(&server, &id, 1, "the first crossing");
    fired(&server, &quiet["id"], 1, "the first crossing, the quiet one");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = hits.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(h) = got.iter().find(|h| h.request_line.starts_with("POST /patched")) {
            let v: Value = serde_json::from_str(&h.body).expect("json");
            assert_eq!((&v["alert"]["id"], &v["alert"]["note"]), (&id, &json!("moved")), "{v}");
            break;
        }
        assert!(Instant::now() < deadline, "the patched webhook got nothing: {got:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Back under the re-arm point and across again: the plain one fires, the quiet one not.
    trade(&sim, level * 0.99);
    trade(&sim, level + 1.0);
    fired(&server, &id, 2, "the second crossing");
    assert_eq!(alert(&server, &quiet["id"])["triggerCount"], 1, "held back by its cooldown");

    // The webhook removed.
    let a = patch(&server, &id, &json!({"webhook_url":null})).ok("no webhook")["data"].clone();
    assert_eq!(a["webhookUrl"], Value::Null);

    refusals(&server, &id);
}

/// Every refusal of `PATCH /v1/alerts/{id}`.
fn refusals(server: &Server, id: &Value) {
    let cases = [
        (json!({"price":1}), 422, "field 'price' cannot change: delete the alert and create another"),
        (json!({"direction":"below"}), 422, "field 'direction' cannot change: delete the alert and create another"),
        (
            json!({"pause":true}),
            422,
            "unknown field 'pause'. Allowed: note, webhook_url, paused, expires_at, cooldown_s, max_fires, message, webhook_format",
        ),
        (
            json!({}),
            422,
            "the body changes nothing: send any of note, webhook_url, paused, expires_at, cooldown_s, max_fires, message, webhook_format",
        ),
        (json!({"cooldown_s":-1}), 422, "cooldown_s must be a whole number of seconds from 0 to 86400"),
        (
            json!({"expires_at":"2020-01-01T00:00:00Z"}),
            422,
            "expires_at must be between 1 minute and 365 days from now",
        ),
        (json!({"webhook_url":"not a url"}), 422, "webhook_url must be an absolute http or https URL"),
    ];
    for (body, status, message) in cases {
        let r = patch(server, id, &body);
        assert_eq!(r.status, status, "{body}: {}", r.text);
        assert!(r.body["error"].as_str().is_some_and(|e| e.contains(message)), "{body}: {}", r.text);
    }
    let bad = server.request("PATCH", &format!("/v1/alerts/{id}"), Some(&bearer(server)), Some("{"));
    assert_eq!(bad.status, 400, "{}", bad.text);
    for unknown in ["999999", "abc", "0"] {
        let r =
            server.request("PATCH", &format!("/v1/alerts/{unknown}"), Some(&bearer(server)), Some(r#"{"note":"x"}"#));
        r.assert_error(404, "unknown alert", unknown);
    }
    // Another account's alert is unknown to it.
    let other = server.create_key("developer", None);
    let r =
        server.request("PATCH", &format!("/v1/alerts/{id}"), Some(&format!("Bearer {other}")), Some(r#"{"note":"x"}"#));
    r.assert_error(404, "unknown alert", "another account's");
    // The site's alerts have no webhook: a PATCH through the site may not set one.
    let (_, site) = SiteSession::signin(server, &server.key);
    let site = site.expect("signed in");
    let r = site.change(
        server,
        "PATCH",
        &format!("/site/v1/alerts/{id}"),
        Some(&json!({"webhook_url":"https://example.com/h"})),
    );
    assert_eq!(r.status, 422, "{}", r.text);
    let r = site.change(server, "PATCH", &format!("/site/v1/alerts/{id}"), Some(&json!({"note":"from the site"})));
    assert_eq!(r.status, 200, "{}", r.text);
    // A deleted alert is gone for PATCH too.
    server.request("DELETE", &format!("/v1/alerts/{id}"), Some(&bearer(server)), None).ok("delete");
    patch(server, id, &json!({"note":"x"})).assert_error(404, "unknown alert", "deleted");
}

/// A server with two front threads and a plan whose rate limits a burst of changes never meets.
fn live_two_fronts() -> (SimVenue, Server) {
    rampart_tests::live_binance_with(
        BIN,
        "fronts = 2\n[webhooks]\nallow_private = true\n[plans.developer]\napi = true\nprice_alert_cap = 200\n\
         pct_alerts = true\nrepeat = true\nburst_per_min = 1000000\ndaily_quota = 100000000\n",
    )
}

/// Sends `bodies` to alert `id` at once, each `PATCH` on a thread of its own.
fn patch_at_once(server: &Server, changes: &[(Value, Value)]) {
    std::thread::scope(|scope| {
        for (id, body) in changes {
            scope.spawn(move || {
                let r = patch(server, id, body);
                assert_eq!(r.status, 200, "{body}: {}", r.text);
            });
        }
    });
}

/// Issue #58: concurrent changes of one alert on two front threads reach its shard in the order
/// storage applied them (`decisions.md` §16, "One order"). Rounds of 12 concurrent `PATCH`es on
/// each of 16 alerts (8 paused and resumed at random, 8 given a cooldown of 0 or 3 600 s at
/// random); after each round, two crossings: each alert fires exactly as `GET /v1/alerts` shows
/// it (running: at both crossings, or once for an hour's cooldown that has not fired yet;
/// paused: never).
#[test]
fn concurrent_changes_on_two_front_threads_leave_each_alert_as_it_is_shown() {
    let (sim, server) = live_two_fronts();
    let p = price_now(&server);
    let level = (p * 1.01).round();
    let body =
        json!({"symbol":PAIR,"exchange":"binance","type":"price","direction":"above","price":level,"repeat":true});
    let pausing: Vec<Value> = (0..8).map(|_| create(&server, &body)["id"].clone()).collect();
    let tuning: Vec<Value> = (0..8).map(|_| create(&server, &body)["id"].clone()).collect();
    let mut rng = rampart_testkit::rng::Rng::from_env(58);
    // Firings each alert has made, as the test expects them.
    let mut want: std::collections::BTreeMap<String, i64> =
        pausing.iter().chain(&tuning).map(|id| (id.to_string(), 0)).collect();
    let mut diverged = Vec::new();
    for round in 0..3 {
        let mut changes = Vec::new();
        for _ in 0..12 {
            for id in &pausing {
                changes.push((id.clone(), json!({"paused": rng.chance(50)})));
            }
            for id in &tuning {
                changes.push((id.clone(), json!({"cooldown_s": if rng.chance(50) { 0 } else { 3600 }})));
            }
        }
        patch_at_once(&server, &changes);
        let shown: Vec<Value> = pausing.iter().chain(&tuning).map(|id| alert(&server, id)).collect();
        // Two crossings, each from the far side; then the price well below the level. The
        // simulator's own trades go on from the last injected price (`/sim/trade` restarts the
        // pair's walk there): left at the level's edge, they crossed it again by themselves,
        // firing the running alerts once more (and, in the next round's changes, an alert that
        // was running for a moment and ends paused).
        for _ in 0..2 {
            trade(&sim, level * 0.99);
            trade(&sim, level + 5.0);
        }
        trade(&sim, level * 0.98);
        for a in &shown {
            let n = want.get_mut(&a["id"].to_string()).expect("an alert of the test");
            *n += match (a["paused"].as_bool(), a["cooldownS"].as_i64()) {
                (Some(true), _) => 0,
                (_, Some(0)) => 2,
                // An hour's cooldown: one firing if it never fired, then quiet.
                (_, _) if *n == 0 => 1,
                _ => 0,
            };
        }
        std::thread::sleep(Duration::from_millis(1_500));
        for a in &shown {
            let id = &a["id"];
            let expected = want[&id.to_string()];
            let got = until(&server, id, "settled", |_| true)["triggerCount"].as_i64().unwrap_or(-1);
            if got != expected {
                diverged.push(format!(
                    "round {round}: alert {id} shown paused {} cooldownS {}: {got} firings, {expected} expected",
                    a["paused"], a["cooldownS"]
                ));
                want.insert(id.to_string(), got);
            }
        }
    }
    eprintln!("3 rounds of 12 concurrent changes on 16 alerts, two fronts: {} divergences", diverged.len());
    assert!(diverged.is_empty(), "alerts that fire otherwise than shown:\n{}", diverged.join("\n"));
}

/// Issue #58: the flood guard's window is cleared only by the resume of a paused alert. Eight
/// repeating alerts cross sixteen times; after the eighth crossing each is changed by one field
/// of `PATCH` (`paused: false` while running among them): each still sends fifteen firings and
/// is paused by the flood guard at the sixteenth.
#[test]
fn no_change_but_a_resume_clears_the_flood_guards_count() {
    let (sim, server) = live_two_fronts();
    let (port, _hits) = hook_receiver();
    let p = price_now(&server);
    let level = (p * 1.01).round();
    let body =
        json!({"symbol":PAIR,"exchange":"binance","type":"price","direction":"above","price":level,"repeat":true});
    let end = iso8601(rampart_tests::now_ms() + 86_400_000);
    let changes = [
        json!({"paused":false}),
        json!({"note":"changed"}),
        json!({"webhook_url":format!("http://127.0.0.1:{port}/flood")}),
        json!({"expires_at":end}),
        json!({"cooldown_s":0}),
        json!({"max_fires":1000}),
        json!({"message":"{{symbol}} {{price}}"}),
        json!({"webhook_format":"slack"}),
    ];
    let ids: Vec<Value> = changes.iter().map(|_| create(&server, &body)["id"].clone()).collect();
    for crossing in 0..16 {
        if crossing == 8 {
            for id in &ids {
                fired(&server, id, 8, "eight crossings");
            }
            for (id, change) in ids.iter().zip(&changes) {
                patch(&server, id, change).ok(&change.to_string());
            }
        }
        trade(&sim, level * 0.99);
        trade(&sim, level + 5.0);
    }
    for (id, change) in ids.iter().zip(&changes) {
        let a =
            until(&server, id, &format!("paused by the flood guard after {change}"), |a| a["paused"] == json!(true));
        assert_eq!(
            (&a["pausedBy"], &a["triggerCount"]),
            (&json!("flood_guard"), &json!(15)),
            "{change} must not reset the flood guard: {a}"
        );
    }
}

/// Issue #58: a note that mentions everyone, filled into a Discord or Slack message, mentions no
/// one; what the template itself says is sent as written (`decisions.md` §16, "Mentions").
#[test]
fn mentions_in_placeholder_values_reach_chat_services_as_plain_text() {
    let (sim, server) = live();
    let (port, hits) = hook_receiver();
    let p = price_now(&server);
    let level = (p * 1.01).round();
    let note = "@everyone @here <!channel> <@123>";
    let base = json!({"symbol":PAIR,"exchange":"binance","type":"price","direction":"above","price":level,"note":note});
    create(
        &server,
        &merged(
            &base,
            json!({"webhook_url":format!("http://127.0.0.1:{port}/discord"),"webhook_format":"discord",
                   "message":"<@&42> look: {{note}}"}),
        ),
    );
    create(
        &server,
        &merged(
            &base,
            json!({"webhook_url":format!("http://127.0.0.1:{port}/slack"),"webhook_format":"slack",
                   "message":"<!here> {{note}}"}),
        ),
    );
    create(
        &server,
        &merged(&base, json!({"webhook_url":format!("http://127.0.0.1:{port}/plain"),"webhook_format":"discord"})),
    );
    trade(&sim, level + 3.0);
    let d: Value = serde_json::from_str(&hits_on(&hits, "/discord", 1)[0].body).expect("json");
    assert_eq!(d["content"], "<@&42> look: @\u{200B}everyone @\u{200B}here <!channel> <@\u{200B}123>");
    assert_eq!(d["allowed_mentions"], json!({"parse":[],"users":[],"roles":["42"]}));
    let s: Value = serde_json::from_str(&hits_on(&hits, "/slack", 1)[0].body).expect("json");
    assert_eq!(s["text"], "<!here> @everyone @here &lt;!channel&gt; &lt;@123&gt;");
    let plain: Value = serde_json::from_str(&hits_on(&hits, "/plain", 1)[0].body).expect("json");
    let content = plain["content"].as_str().expect("content");
    assert!(content.ends_with("Note: @\u{200B}everyone @\u{200B}here <!channel> <@\u{200B}123>"), "{content}");
    assert_eq!(plain["allowed_mentions"], json!({"parse":[],"users":[],"roles":[]}));
}
