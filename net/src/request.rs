//! Request parsing shared by the API and the site: a strict JSON object body (an unknown field
//! refused naming the allowed ones), typed field readers, the pair symbol's syntax, `repeat` and
//! `note`, and the refusal they all return with its exact message (`decisions.md` §11).

use serde_json::{Map, Value};

/// Longest `note`, in characters.
pub const NOTE_CHARS_MAX: usize = 500;
/// Longest `cooldown_s` of any alert, the API's and the site's: a day.
pub const COOLDOWN_S_MAX: u64 = 86_400;

/// A refused request: HTTP status and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// HTTP status (400 or 422).
    pub status: u16,
    /// The `error` message.
    pub message: String,
}

/// A 422 refusal with `message`.
pub fn invalid(message: impl Into<String>) -> Invalid {
    Invalid { status: 422, message: message.into() }
}

/// The field `name` when present and not null.
pub fn present<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    obj.get(name).filter(|v| !v.is_null())
}

/// The string field `name`, if present; a 422 when it is not a string.
pub fn string<'a>(obj: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, Invalid> {
    match present(obj, name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(format!("field '{name}' must be a string"))),
    }
}

/// The string field `name`; a 422 when it is missing or not a string.
pub fn required_string<'a>(obj: &'a Map<String, Value>, name: &str) -> Result<&'a str, Invalid> {
    string(obj, name)?.ok_or_else(|| invalid(format!("missing field '{name}'")))
}

/// The number field `name`, if present; a 422 when it is not a number.
pub fn number<'a>(obj: &'a Map<String, Value>, name: &str) -> Result<Option<&'a serde_json::Number>, Invalid> {
    match present(obj, name) {
        None => Ok(None),
        Some(Value::Number(n)) => Ok(Some(n)),
        Some(_) => Err(invalid(format!("field '{name}' must be a number"))),
    }
}

/// The first `n` characters of `s` (a client's text quoted in a message is clipped).
pub fn clip(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// A request body that must be a JSON object with no field outside `fields` (400 when it is
/// not JSON; 422 naming the allowed fields otherwise).
pub fn body_object(body: &[u8], fields: &[&str]) -> Result<Map<String, Value>, Invalid> {
    body_object_fixed(body, fields, &[])
}

/// [`body_object`] for a change to a resource: a field of `fixed` (one it was made with, which
/// cannot change) is refused with 422 naming it, apart from the unknown ones.
pub fn body_object_fixed(body: &[u8], fields: &[&str], fixed: &[&str]) -> Result<Map<String, Value>, Invalid> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| Invalid { status: 400, message: format!("malformed JSON: {e}") })?;
    let Value::Object(obj) = value else {
        return Err(invalid("request body must be a JSON object"));
    };
    if let Some(f) = obj.keys().find(|k| fixed.contains(&k.as_str())) {
        return Err(invalid(format!("field '{f}' cannot change: delete the alert and create another")));
    }
    if let Some(unknown) = obj.keys().find(|k| !fields.contains(&k.as_str())) {
        return Err(invalid(format!("unknown field '{}'. Allowed: {}", clip(unknown, 64), fields.join(", "))));
    }
    Ok(obj)
}

/// `repeat` (default false) and `note` (default empty, at most [`NOTE_CHARS_MAX`] characters).
pub fn repeat_and_note(obj: &Map<String, Value>) -> Result<(bool, String), Invalid> {
    let repeat = match present(obj, "repeat") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(invalid("field 'repeat' must be a boolean")),
    };
    let note = string(obj, "note")?.unwrap_or("");
    if note.chars().count() > NOTE_CHARS_MAX {
        return Err(invalid(format!("note is longer than {NOTE_CHARS_MAX} characters")));
    }
    Ok((repeat, note.to_owned()))
}

/// The refusal of `repeat: false` on an alert on every pair of a venue (`symbol: "*"`, a site
/// density request without a pair): such an alert repeats (`decisions.md` §15's choices).
pub const UNIVERSE_REPEATS: &str = "an alert on every pair of the venue repeats: repeat false is not allowed (an alert that ends at its first pair is a one-pair alert: name the pair instead)";

/// A pair symbol as a client may spell it: 1 to 64 ASCII letters and digits.
pub fn symbol_syntax(symbol: &str) -> Result<(), Invalid> {
    if symbol.is_empty() || symbol.len() > 64 || !symbol.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(invalid("field 'symbol' must be a pair symbol such as BTCUSDT"));
    }
    Ok(())
}
