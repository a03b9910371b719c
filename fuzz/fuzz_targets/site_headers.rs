//! Fuzzes the small readers of site client bytes: `Last-Event-ID`
//! (`rampart_net::api::front::session::last_event_id`) and the Telegram chat id an account sets
//! (`rampart_delivery::telegram::is_chat_id`), with the `sendMessage` body made from an
//! accepted one: never a panic, an id is never negative, and an accepted chat id always makes a
//! JSON body that carries it back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rampart_delivery::telegram::is_chat_id;
use rampart_store::text::telegram::message_body;
use rampart_net::api::front::session::last_event_id;

fuzz_target!(|data: &[u8]| {
    if let Some(id) = last_event_id(data) {
        assert!(id >= 0);
    }
    let Ok(text) = std::str::from_utf8(data) else { return };
    if !is_chat_id(text) {
        return;
    }
    let body: serde_json::Value = serde_json::from_str(&message_body(text, text)).expect("a JSON body");
    let chat = match &body["chat_id"] {
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::String(s) => s.clone(),
        other => panic!("chat_id {other}"),
    };
    // A number is sent as a number (leading zeros and the sign of zero are not kept), anything
    // else as the string itself.
    let digits = |s: &str| s.trim_start_matches('-').trim_start_matches('0').to_owned();
    assert_eq!(digits(&chat), digits(text), "{text}");
    assert_eq!(body["text"], text);
});
