//! The site's sessions and its JSON routes through the real binary (`decisions.md` §10): sign in
//! with a key (any plan, `free` included) for a cookie that is HttpOnly and SameSite=Strict and
//! never the key; every state change needs the session's CSRF token; sign-out and revoking the
//! key end the session; a restart signs nobody out; one account never sees another's alerts;
//! every refusal.

use std::time::Duration;

use rampart_tests::{raw_exchange, Reply, Server, SiteSession};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_rampart-under-test");

fn signin(server: &Server, key: &str) -> (Reply, Option<SiteSession>) {
    SiteSession::signin(server, key)
}

#[test]
fn sign_in_csrf_sign_out_and_revocation() {
    let server = Server::start(BIN, &["--sim-pairs", "4"]);
    let free = server.create_key("free", Some("site"));
    let (r, signed) = signin(&server, &free);
    let s = signed.expect("signed in");
    let set = r.header("set-cookie").expect("cookie").to_owned();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(flag), "{set}");
    }
    assert!(!set.contains(&free), "the cookie never holds the key: {set}");
    assert_eq!(r.header("cache-control"), Some("no-store"));
    assert_eq!(
        (r.body["data"]["plan"].as_str(), r.body["data"]["csrf"].as_str().map(str::len)),
        (Some("free"), Some(64))
    );
    let me = s.get(&server, "/site/session");
    assert_eq!((me.status, me.body["data"]["plan"].as_str()), (200, Some("free")), "{}", me.text);

    // State changes need the token: absent or wrong is 403, and nothing is created.
    let alert = json!({"type":"market","exchange":"binance","number":"walls","direction":"above","threshold":1000000});
    let no_token = server.request_with("POST", "/site/site-alerts", &[("Cookie", &s.cookie)], Some(&alert.to_string()));
    no_token.assert_error(403, "missing or wrong CSRF token", "no token");
    let wrong = [("Cookie", s.cookie.as_str()), ("X-CSRF-Token", "0000")];
    server.request_with("POST", "/site/site-alerts", &wrong, Some(&alert.to_string())).assert_error(
        403,
        "missing or wrong CSRF token",
        "wrong token",
    );
    assert_eq!(s.get(&server, "/site/site-alerts").body["data"], json!([]));
    let made = s.change(&server, "POST", "/site/site-alerts", Some(&alert));
    assert_eq!(made.status, 200, "{}", made.text);
    let id = made.body["data"]["id"].as_i64().expect("id");
    assert_eq!(s.get(&server, "/site/site-alerts").body["data"][0]["id"].as_i64(), Some(id));

    // The API's messages; the plan's cap (market: 2 on free).
    let bad = s.change(
        &server,
        "POST",
        "/site/site-alerts",
        Some(&json!({"type":"market","exchange":"binance","number":"mood"})),
    );
    bad.assert_error(
        422,
        "invalid number 'mood'. Allowed: sentiment, advancing, declining, up5, down5, walls, atLevel, perps, \
         liqLongUsd, liqShortUsd, oiUsd, oiChange, funding, fundingHigh, fundingLow",
        "bad number",
    );
    let unknown = s.change(
        &server,
        "POST",
        "/site/site-alerts",
        Some(&json!({"type":"density","exchange":"binance","symbol":"NOPEUSDT","min_usd":1})),
    );
    unknown.assert_error(404, "unknown symbol 'NOPEUSDT' on binance", "unknown pair");
    assert_eq!(s.change(&server, "POST", "/site/site-alerts", Some(&alert)).status, 200);
    s.change(&server, "POST", "/site/site-alerts", Some(&alert)).assert_error(
        422,
        "active market-alert limit reached (2 on plan free)",
        "cap",
    );

    // Another account sees none of it and cannot delete it.
    let other = signin(&server, &server.create_key("developer", None)).1.expect("signed in");
    assert_eq!(other.get(&server, "/site/site-alerts").body["data"], json!([]));
    other.change(&server, "DELETE", &format!("/site/site-alerts/{id}"), None).assert_error(
        404,
        "unknown alert",
        "not its own",
    );
    let gone = s.change(&server, "DELETE", &format!("/site/site-alerts/{id}"), None);
    assert_eq!((gone.status, gone.body["data"]["deleted"].as_bool()), (200, Some(true)), "{}", gone.text);

    // Sign-out ends the session; the cookie is cleared.
    let out = s.change(&server, "POST", "/site/signout", None);
    assert_eq!(out.status, 200, "{}", out.text);
    assert!(out.header("set-cookie").is_some_and(|c| c.contains("Max-Age=0")));
    s.get(&server, "/site/session").assert_error(401, "not signed in", "after sign-out");

    // Revoking the key ends every session opened with it (within the key poll).
    let (_, again) = signin(&server, &free);
    let again = again.expect("signed in again");
    let rows = server.key_rows();
    let row = rows.iter().find(|k| k.label == "site").expect("the key's row");
    assert!(server.keys(&["revoke", &row.id.to_string()]).status.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while again.get(&server, "/site/session").status == 200 {
        assert!(std::time::Instant::now() < deadline, "the session outlived its key");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    again.get(&server, "/site/session").assert_error(401, "not signed in", "revoked");
    signin(&server, &free).0.assert_error(401, "revoked API key", "revoked key");
}

#[test]
fn bad_sign_ins_and_routes_are_refused() {
    let server = Server::start(BIN, &["--sim-pairs", "4"]);
    let post = |body: &str| server.request_with("POST", "/site/signin", &[], Some(body));
    post(r#"{"key":"rk_00000000000000000000000000000000"}"#).assert_error(401, "invalid API key", "unknown key");
    post(r#"{"secret":"x"}"#).assert_error(422, "unknown field 'secret'. Allowed: key", "unknown field");
    post(r#"{}"#).assert_error(422, "missing field 'key'", "no key");
    post("{").assert_some_error(400, "malformed");
    server.request_with("GET", "/site/signin", &[], None).assert_error(405, "method not allowed", "GET signin");
    server.request_with("GET", "/site/session", &[], None).assert_error(401, "not signed in", "no cookie");
    let forged = format!("rampart_session={}", "a".repeat(64));
    server.request_with("GET", "/site/session", &[("Cookie", &forged)], None).assert_error(
        401,
        "not signed in",
        "forged",
    );
    server.request_with("GET", "/site/site-alerts", &[], None).assert_error(401, "not signed in", "list");
    server.request_with("DELETE", "/site/site-alerts/1", &[], None).assert_error(401, "not signed in", "delete");
    server.request_with("PUT", "/site/site-alerts", &[], None).assert_error(405, "method not allowed", "put");
    server.request_with("GET", "/site/nothing", &[], None).assert_error(404, "not found", "unknown route");
}

/// Login CSRF: a page on another origin (another port of the same host included) cannot sign a
/// visitor's browser in. Sign-in takes a JSON body only (a cross-site form or "simple" request
/// can send `text/plain`, never `application/json` without a preflight), and the browser's
/// `Sec-Fetch-Site` and `Origin` must say this site; clients that send neither (curl, bots) are
/// unaffected. The requests carry exactly the headers a browser would.
#[test]
fn a_sign_in_from_another_site_is_refused() {
    let server = Server::start(BIN, &["--sim-pairs", "4"]);
    let key = server.key.clone();
    let this = format!("http://127.0.0.1:{}", server.port);
    let other = format!("http://127.0.0.1:{}", server.port.wrapping_add(1));
    let post = |content_type: &str, headers: &[(&str, &str)], body: &str| {
        let mut head = format!(
            "POST /site/signin HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
            server.port,
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        let out = raw_exchange(server.port, format!("{head}\r\n{body}").as_bytes(), false, Duration::from_secs(5));
        let responses = out.responses();
        let r = responses.first().unwrap_or_else(|| panic!("an answer to {content_type} {headers:?}"));
        (r.status, r.body.clone(), r.header("set-cookie").map(str::to_owned))
    };
    let json = format!(r#"{{"key":"{key}"}}"#);
    // The form another page's script or <form enctype=text/plain> can send.
    let (status, body, cookie) = post("text/plain", &[("Origin", &other), ("Sec-Fetch-Site", "same-site")], &json);
    assert_eq!((status, cookie), (415, None), "a text/plain sign-in from another port: {body}");
    assert!(body.contains("sign-in takes a JSON body"), "{body}");
    let (status, _, cookie) = post("text/plain", &[], &json);
    assert_eq!((status, cookie), (415, None), "text/plain even without Origin");
    // JSON, but from another origin (after a preflight the front never grants, or a bad client).
    for headers in [
        vec![("Origin", other.as_str())],
        vec![("Origin", other.as_str()), ("Sec-Fetch-Site", "same-site")],
        vec![("Sec-Fetch-Site", "cross-site")],
        vec![("Origin", "null")],
    ] {
        let (status, body, cookie) = post("application/json", &headers, &json);
        assert_eq!((status, cookie), (403, None), "{headers:?}: {body}");
        assert!(body.contains("sign-in from another site is refused"), "{body}");
    }
    // The site's own page, and a client that is not a browser.
    let (status, body, cookie) =
        post("application/json; charset=utf-8", &[("Origin", &this), ("Sec-Fetch-Site", "same-origin")], &json);
    assert_eq!(status, 200, "the site's own sign-in: {body}");
    assert!(cookie.is_some_and(|c| c.starts_with("rampart_session=")), "a session cookie");
    let (status, body, _) = post("application/json", &[], &json);
    assert_eq!(status, 200, "a client without Origin: {body}");
}

#[test]
fn a_session_outlives_a_restart() {
    let server = Server::start(BIN, &["--sim-pairs", "4"]);
    let key = server.create_key("free", Some("site"));
    let s = signin(&server, &key).1.expect("signed in");
    let server = server.restart(&["--sim-pairs", "4"]);
    let again = s.get(&server, "/site/session");
    assert_eq!(again.ok("the session after a restart")["data"]["csrf"], s.csrf.as_str());
    s.change(&server, "PUT", "/site/channels", Some(&json!({"telegramChatId": "@trading_desk"})))
        .ok("a change after it");
    s.change(&server, "POST", "/site/signout", None).ok("sign out");
    s.get(&server, "/site/session").assert_error(401, "not signed in", "signed out");
}
