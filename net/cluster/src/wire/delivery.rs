//! A webhook delivery carried by its firing's message on the stream (issue #59,
//! docs/design/cluster.md step (a)): what a worker needs to send a first delivery without
//! reading its outbox row. Untrusted bytes: each text is bounded before it is kept, and a
//! delivery encoded past [`DELIVERY_BYTES_MAX`] is not sent this way at all (its row goes as its
//! id alone and the worker reads it).

use super::{In, Out, WireError};

/// Longest encoded delivery carried by a message; a longer one goes as its id alone.
pub const DELIVERY_BYTES_MAX: usize = 64 * 1024;

/// A webhook delivery as its outbox row holds it when committed (no attempt made yet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The outbox row's id (where the outcome is recorded).
    pub id: i64,
    /// The alert's account (its signing secret, its fairness).
    pub account_id: i64,
    /// The alert.
    pub alert_id: i64,
    /// The firing's time.
    pub trigger_ms: i64,
    /// The webhook URL (checked again before the attempt, as every attempt's).
    pub url: String,
    /// The body to send.
    pub body: String,
}

/// The delivery's bytes: the version, four numbers, then the URL and the body, each a length
/// and its UTF-8 bytes. `None` past [`DELIVERY_BYTES_MAX`].
pub fn delivery(d: &Delivery) -> Option<Vec<u8>> {
    let size = 1 + 8 * 4 + 4 * 2 + d.url.len() + d.body.len();
    if size > DELIVERY_BYTES_MAX {
        return None;
    }
    let mut out = Out::new(size);
    for n in [d.id, d.account_id, d.alert_id, d.trigger_ms] {
        out.i64(n);
    }
    for text in [&d.url, &d.body] {
        out.count(text.len());
        out.bytes(text.as_bytes());
    }
    debug_assert_eq!(out.len(), size, "the size computed is the size written");
    Some(out.0)
}

/// Reads a delivery.
pub fn read_delivery(buf: &[u8]) -> Result<Delivery, WireError> {
    if buf.len() > DELIVERY_BYTES_MAX {
        return Err(WireError::Invalid("delivery size"));
    }
    let mut r = In::new(buf)?;
    let (id, account_id, alert_id, trigger_ms) = (r.i64()?, r.i64()?, r.i64()?, r.i64()?);
    let url = text(&mut r, "url")?;
    let body = text(&mut r, "body")?;
    r.end()?;
    Ok(Delivery { id, account_id, alert_id, trigger_ms, url, body })
}

fn text(r: &mut In<'_>, what: &'static str) -> Result<String, WireError> {
    let n = r.count(1)?;
    let bytes = r.take(n)?;
    std::str::from_utf8(bytes).map(str::to_owned).map_err(|_| WireError::Invalid(what))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Delivery {
        Delivery {
            id: 41,
            account_id: 3,
            alert_id: 9_007,
            trigger_ms: 1_700_000_000_123,
            url: "https://example.com/hook?x=1".into(),
            body: "{\"type\":\"alert.triggered\",\"note\":\"é ✓\"}".into(),
        }
    }

    #[test]
    fn a_delivery_reads_back_as_written() {
        let bytes = delivery(&sample()).expect("within the bound");
        assert_eq!(read_delivery(&bytes), Ok(sample()));
    }

    #[test]
    fn malformed_deliveries_are_errors() {
        let bytes = delivery(&sample()).expect("bytes");
        for cut in 0..bytes.len() {
            assert!(read_delivery(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert_eq!(read_delivery(&trailing), Err(WireError::Trailing));
        let mut version = bytes.clone();
        version[0] = 99;
        assert_eq!(read_delivery(&version), Err(WireError::Version(99)));
        // The URL's length claims more than the message holds.
        let mut long = bytes.clone();
        long[33..37].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(read_delivery(&long), Err(WireError::Truncated));
        // Bytes that are not UTF-8 in the body.
        let mut bad = bytes.clone();
        let last = bad.len() - 1;
        bad[last] = 0xff;
        assert_eq!(read_delivery(&bad), Err(WireError::Invalid("body")));
        assert_eq!(read_delivery(&vec![0; DELIVERY_BYTES_MAX + 1]), Err(WireError::Invalid("delivery size")));
    }

    #[test]
    fn a_delivery_past_the_bound_is_not_encoded() {
        let mut d = sample();
        d.body = "x".repeat(DELIVERY_BYTES_MAX);
        assert_eq!(delivery(&d), None);
    }
}
