//! A request's body, read within its bounds before it is acted on, or read and dropped after a
//! refusal: at most [`BODY_BYTES_MAX`] within [`BODY_TIMEOUT`] (413 and 408 past them).

use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::StatusCode;

use super::answer::ApiError;

/// Largest request body read; past it the answer is 413.
pub const BODY_BYTES_MAX: usize = 64 * 1024;
/// A request body must arrive within this time; past it the answer is 408.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes of a refused request's body read and dropped, at most, before the answer is sent.
pub const BODY_DISCARD_BYTES_MAX: u64 = 1 << 20;
/// Time spent reading and dropping a refused request's body, at most.
pub const BODY_DISCARD_TIME: Duration = Duration::from_secs(1);

/// Reads and drops what is left of a refused request's body, keeping nothing, until its end or
/// [`BODY_DISCARD_BYTES_MAX`] or [`BODY_DISCARD_TIME`].
///
/// Rationale: hyper closes a connection whose request body was not read; a client still
/// sending then gets a reset (or a broken pipe) instead of the answer. Reading a bounded amount
/// first lets an authenticated client read its 413; one that sends more is cut off. Only
/// requests with a valid key are drained: a flood without keys must cost no reading at all.
async fn discard_body(mut body: Incoming) {
    use http_body_util::BodyExt;
    let mut left = BODY_DISCARD_BYTES_MAX;
    let _ = tokio::time::timeout(BODY_DISCARD_TIME, async {
        while let Some(Ok(frame)) = body.frame().await {
            let n = frame.data_ref().map_or(0, |d| d.len() as u64);
            if n >= left {
                break;
            }
            left -= n;
        }
    })
    .await;
}

/// Reads an accepted request's body: at most [`BODY_BYTES_MAX`] within [`BODY_TIMEOUT`].
pub(super) async fn read_body(mut body: Incoming, waits_for_continue: bool) -> Result<Bytes, ApiError> {
    use http_body_util::BodyExt;
    use hyper::body::Body as _;
    let too_large =
        || ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("request body too large (max {BODY_BYTES_MAX} bytes)"));
    // A declared length over the bound is refused without reading it; one the client may well
    // be sending already (under BODY_DISCARD_BYTES_MAX, no `Expect`) is dropped first.
    let declared = body.size_hint().lower();
    if declared > BODY_BYTES_MAX as u64 {
        if declared <= BODY_DISCARD_BYTES_MAX && !waits_for_continue {
            discard_body(body).await;
        }
        return Err(too_large());
    }
    let mut buf = bytes::BytesMut::new();
    let read = tokio::time::timeout(BODY_TIMEOUT, async {
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, "malformed request body"))?;
            if let Ok(data) = frame.into_data() {
                if buf.len() + data.len() > BODY_BYTES_MAX {
                    return Err(too_large());
                }
                buf.extend_from_slice(&data);
            }
        }
        Ok(())
    })
    .await;
    match read {
        Ok(Ok(())) => Ok(buf.freeze()),
        Ok(Err(e)) => {
            if e.status == StatusCode::PAYLOAD_TOO_LARGE {
                discard_body(body).await;
            }
            Err(e)
        }
        Err(_) => Err(ApiError::new(StatusCode::REQUEST_TIMEOUT, "request body not received in time")),
    }
}
