//! Each venue's REST error body and Binance's combined-stream wrapper: the envelopes the spot
//! and the perpetual modules of every venue share (a floor below both).

use super::text::{json_str, push_json_str};
use super::{now_ms, Reply};

/// Binance's error body `{"code":..,"msg":..}` with `status`.
pub(crate) fn binance_error(status: u16, code: i64, msg: &str) -> Reply {
    Reply::status(status, format!("{{\"code\":{code},\"msg\":{}}}", json_str(msg)))
}

/// `{"stream":<stream>,"data":<raw>}`.
pub(crate) fn wrap(stream: &str, raw: &str) -> String {
    let mut out = String::with_capacity(raw.len() + stream.len() + 24);
    out.push_str("{\"stream\":");
    push_json_str(&mut out, stream);
    out.push_str(",\"data\":");
    out.push_str(raw);
    out.push('}');
    out
}

/// Bybit's envelope with a non-zero `retCode` and `status`.
pub(crate) fn bybit_error(status: u16, code: i64, msg: &str) -> Reply {
    Reply::status(
        status,
        format!(
            "{{\"retCode\":{code},\"retMsg\":{},\"result\":{{}},\"retExtInfo\":{{}},\"time\":{}}}",
            json_str(msg),
            now_ms()
        ),
    )
}

/// OKX's error body `{"code":..,"msg":..,"data":[]}` with `status`.
pub(crate) fn okx_error(status: u16, code: &str, msg: &str) -> Reply {
    Reply::status(status, format!("{{\"code\":\"{code}\",\"msg\":{},\"data\":[]}}", json_str(msg)))
}

/// Bitget's error body with `status`.
pub(crate) fn bitget_error(status: u16, code: &str, msg: &str) -> Reply {
    Reply::status(
        status,
        format!("{{\"code\":\"{code}\",\"msg\":{},\"requestTime\":{},\"data\":null}}", json_str(msg), now_ms()),
    )
}
