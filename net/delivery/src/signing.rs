//! Webhook signatures in the Standard Webhooks v1 form (`decisions.md` §13): while an account
//! has a signing secret every webhook also carries `webhook-id` (the spec's deduplication pair,
//! `<alert.id>:<trigger.time>`), `webhook-timestamp` (the attempt's Unix seconds) and
//! `webhook-signature` (`v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` under each
//! secret that signs, space separated). A secret is `whsec_` and the base64 of 32 random bytes;
//! the HMAC key is those bytes. Secrets are credentials: nothing here logs one.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The prefix of every secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// Random bytes in a secret.
pub const SECRET_BYTES: usize = 32;

/// The three headers of a signed attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// `webhook-id`.
    pub id: String,
    /// `webhook-timestamp`, Unix seconds.
    pub timestamp_s: i64,
    /// `webhook-signature`: `v1,<base64>` per signing secret, space separated.
    pub signature: String,
}

/// Why no secret could be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoRandomness;

impl std::fmt::Display for NoRandomness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the operating system's random source failed")
    }
}

impl std::error::Error for NoRandomness {}

/// A new secret: `whsec_` and the base64 of 32 bytes from the operating system.
pub fn new_secret() -> Result<String, NoRandomness> {
    let mut key = [0u8; SECRET_BYTES];
    getrandom::getrandom(&mut key).map_err(|_| NoRandomness)?;
    Ok(format!("{SECRET_PREFIX}{}", BASE64.encode(key)))
}

/// The signature of `body` sent as message `id` at `timestamp_s` under every secret of
/// `secrets` (current first); `None` when there is none, or none is well-formed (the attempt
/// goes unsigned rather than with a signature no receiver could check).
pub fn sign(secrets: &[String], id: &str, timestamp_s: i64, body: &str) -> Option<Signature> {
    let signed = format!("{id}.{timestamp_s}.{body}");
    let parts: Vec<String> = secrets
        .iter()
        .filter_map(|s| {
            let key = BASE64.decode(s.strip_prefix(SECRET_PREFIX)?).ok()?;
            let mut mac = Hmac::<Sha256>::new_from_slice(&key).ok()?;
            mac.update(signed.as_bytes());
            Some(format!("v1,{}", BASE64.encode(mac.finalize().into_bytes())))
        })
        .collect();
    (!parts.is_empty()).then(|| Signature { id: id.to_owned(), timestamp_s, signature: parts.join(" ") })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification (its reference libraries' test vector).
    #[test]
    fn the_specification_example_signs_alike() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned();
        let body = r#"{"test": 2432232314}"#;
        let s = sign(&[secret], "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body).expect("signed");
        assert_eq!(s.signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assert_eq!((s.id.as_str(), s.timestamp_s), ("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330));
    }

    #[test]
    fn every_signing_secret_signs_and_malformed_ones_are_left_out() {
        let (a, b) = (new_secret().expect("a"), new_secret().expect("b"));
        assert!(a.starts_with(SECRET_PREFIX) && a.len() == SECRET_PREFIX.len() + 44 && a != b);
        let both = sign(&[a.clone(), b.clone()], "7:1", 1, "{}").expect("signed");
        let one = sign(std::slice::from_ref(&a), "7:1", 1, "{}").expect("signed");
        assert_eq!(both.signature.split(' ').count(), 2);
        assert!(both.signature.starts_with(&one.signature), "the current secret's comes first");
        assert_eq!(sign(&[], "7:1", 1, "{}"), None, "no secret: unsigned");
        assert_eq!(sign(&["whsec_!!".into(), "nope".into()], "7:1", 1, "{}"), None);
        let changed = sign(&[a], "7:1", 1, "{ }").expect("signed");
        assert_ne!(changed.signature, one.signature, "the body is signed");
    }
}
