//! The Telegram channel (`decisions.md` §10): the operator's bot (`[channels.telegram]`: the Bot
//! API base URL and the bot token) and the `sendMessage` requests the outbox holds for an
//! account's chat.
//!
//! A Telegram message is an outbox row like a webhook delivery (same transaction as the firing,
//! same sender, bounds, 10 s timeout and 0/+10/+60 s schedule); only its destination differs.
//! The row keeps the chat id and the finished request body; the URL with the token is made at
//! each attempt from the configuration, so the token is never written to the database, a log
//! or an attempt's error. The base URL is the operator's own (it may be a local Bot API server
//! on a private address), so the private-address refusal of client webhooks does not apply to
//! it; it is still parsed by the same strict URL parser and resolved at every attempt.

use std::fmt;

use rampart_outbound::ssrf;

/// The Bot API's public address, the default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.telegram.org";

/// The operator's bot: where `sendMessage` goes.
#[derive(Clone, PartialEq, Eq)]
pub struct TelegramChannel {
    /// The Bot API base URL, without a trailing `/`.
    base_url: String,
    /// The bot token (`<digits>:<letters, digits, '_' or '-'>`).
    token: String,
}

impl fmt::Debug for TelegramChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The token is a secret: never printed.
        f.debug_struct("TelegramChannel").field("base_url", &self.base_url).field("token", &"<hidden>").finish()
    }
}

/// A `[channels.telegram]` section that cannot be used: what is wrong, never the token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TelegramConfigError(String);

impl fmt::Display for TelegramConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TelegramConfigError {}

impl TelegramChannel {
    /// The channel for `base_url` (default [`DEFAULT_BASE_URL`]) and `token`; the error names
    /// what is wrong without repeating the token.
    pub fn new(base_url: Option<&str>, token: &str) -> Result<TelegramChannel, TelegramConfigError> {
        let base_url = base_url.unwrap_or(DEFAULT_BASE_URL).trim_end_matches('/').to_owned();
        if !is_token(token) {
            return Err(TelegramConfigError(
                "channels.telegram.token must look like a bot token: digits, ':', then letters, digits, '_' or '-'"
                    .into(),
            ));
        }
        let channel = TelegramChannel { base_url, token: token.to_owned() };
        let url = ssrf::parse(&channel.send_url())
            .map_err(|e| TelegramConfigError(format!("channels.telegram.base_url: {e}")))?;
        if url.path_and_query.contains('?') {
            return Err(TelegramConfigError("channels.telegram.base_url must not have a query".into()));
        }
        Ok(channel)
    }

    /// The base URL (no secret in it), for logs.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `{base}/bot{token}/sendMessage`.
    pub fn send_url(&self) -> String {
        format!("{}/bot{}/sendMessage", self.base_url, self.token)
    }
}

fn is_token(t: &str) -> bool {
    let Some((id, secret)) = t.split_once(':') else { return false };
    !id.is_empty()
        && id.bytes().all(|b| b.is_ascii_digit())
        && !secret.is_empty()
        && t.len() <= 200
        && secret.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A Telegram chat id as an account may set it: an integer (groups are negative) or a public
/// `@name` (5–32 of `[A-Za-z0-9_]`).
pub fn is_chat_id(c: &str) -> bool {
    let digits = c.strip_prefix('-').unwrap_or(c);
    let numeric = (1..=20).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit());
    let name = c
        .strip_prefix('@')
        .is_some_and(|n| (5..=32).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
    numeric || name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_base_urls_are_checked_without_echoing_the_token() {
        let ok = TelegramChannel::new(Some("http://127.0.0.1:8081/"), "123456:AA-b_c").expect("valid");
        assert_eq!(ok.send_url(), "http://127.0.0.1:8081/bot123456:AA-b_c/sendMessage");
        assert!(!format!("{ok:?}").contains("AA-b_c"), "{ok:?}");
        assert_eq!(TelegramChannel::new(None, "1:x").expect("default").base_url(), DEFAULT_BASE_URL);
        for bad in ["", "123456", ":abc", "12a:abc", "123:", "123:a/b", "123:a b", "123:a?b"] {
            let e = TelegramChannel::new(None, bad).expect_err(bad).to_string();
            assert!(e.starts_with("channels.telegram.token"), "{bad}: {e}");
        }
        for bad in ["ftp://x", "http://", "http://a b", "http://h/?q=1"] {
            let e = TelegramChannel::new(Some(bad), "1:secret").expect_err(bad).to_string();
            assert!(e.starts_with("channels.telegram.base_url") && !e.contains("secret"), "{bad}: {e}");
        }
    }

    #[test]
    fn chat_ids_are_integers_or_public_names() {
        for ok in ["12345", "-1001234567890", "@rampart_bot", "@abcde"] {
            assert!(is_chat_id(ok), "{ok}");
        }
        for bad in ["", "-", "12a", "1 2", "@abcd", "@with-dash", "@", "--1", "123456789012345678901", "@ü_name"] {
            assert!(!is_chat_id(bad), "{bad:?}");
        }
    }
}
