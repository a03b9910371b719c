//! `POST /v1/alerts/{id}/test` (`decisions.md` §16): the alert's webhook sent now, the body of a
//! firing at the current price with `event` `alert.test` (a chat format's text marked `[test]`),
//! through the sender's own attempt: the same address check, signing and header, with
//! `alert.test` as the event header. The outcome is written to the alert's delivery log (a row
//! marked `test`) and answered once the attempt ends (at most the attempt's 10 s).

use hyper::StatusCode;

use super::AlertsApi;
use crate::api::front::answer::Resp;
use crate::api::front::answer::{respond, ApiError};
use rampart_delivery::Target;
use rampart_engine::alert::Condition;
use rampart_engine::perp_alert::PerpCondition;
use rampart_engine::BookId;
use rampart_state::json::Json;
use rampart_state::Command;
use rampart_store::storage::Writer;
use rampart_store::store::{AlertRow, AttemptResult, Channel, FiringRecord, KeyRow, OutboxRow, Render, WebhookFormat};
use rampart_store::text::{alert::test_body, chat, Texts};

/// The sender a front's test sends go through: the delivery's attempt, its timeout, a pool of
/// its own, no Telegram.
pub(in crate::api::front) fn test_target(allow_private: bool) -> Target {
    Target {
        allow_private,
        timeout: rampart_delivery::ATTEMPT_TIMEOUT,
        tls: rampart_outbound::tls_config(&[]),
        pool: rampart_delivery::pool::Pool::default(),
        telegram: None,
    }
}

impl AlertsApi {
    /// Sends `account`'s alert `id`'s webhook now; `{"data":{"outcome","status","latencyMs"}}`.
    pub(in crate::api::front) async fn test(&self, account: &KeyRow, id: &str, now_ms: i64) -> Result<Resp, ApiError> {
        let unknown = || ApiError::new(StatusCode::NOT_FOUND, "unknown alert");
        let Some(id) = id.parse::<i64>().ok().filter(|&i| i > 0) else { return Err(unknown()) };
        let acc = account.account_id;
        let read = self
            .storage
            .run(move |store| {
                let Some(row) = store.alert(id)?.filter(|r| r.account_id == acc) else { return Ok(None) };
                Ok(Some((row, store.webhook_secrets(acc, now_ms)?)))
            })
            .await;
        self.health.record(Writer::Front, &read, now_ms);
        let (row, secrets) = read?.ok_or_else(unknown)?;
        let Some(url) = row.webhook_url.clone() else {
            return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "the alert has no webhook_url to test"));
        };
        let firing = self.test_firing(&row, now_ms).await?;
        let body = match row.webhook_format {
            WebhookFormat::Json => test_body(&row, &firing),
            format => {
                chat::chat_body_of(format, &row, &firing, "[test] ").unwrap_or_else(|| Texts.alert_fired(&row, &firing))
            }
        };
        let delivery = OutboxRow {
            id: 0,
            alert_id: row.id,
            url,
            body,
            state: "pending".into(),
            attempts: 0,
            first_failure_ms: None,
            next_attempt_ms: now_ms,
            last_status: None,
            last_error: None,
            account_id: acc,
            channel: Channel::Webhook,
            trigger_ms: now_ms,
        };
        let started = std::time::Instant::now();
        let result = rampart_delivery::test_attempt(&delivery, &self.sender, &secrets, now_ms).await;
        let latency_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
        let logged = result.clone();
        let written = self.storage.run(move |store| store.log_test_attempt(id, now_ms, &logged, latency_ms)).await;
        self.health.record(Writer::Front, &written, now_ms);
        written?;
        Ok(outcome_answer(&result, latency_ms))
    }

    /// The firing a test sends: at the pair's current price (a `*` alert's: its venue's first
    /// pair with a price, named as its one trigger); a derivatives alert's with the trigger object
    /// a firing would carry now, when its shard has the value ([`AlertsApi::perp_test_firing`]).
    async fn test_firing(&self, row: &AlertRow, now_ms: i64) -> Result<FiringRecord, ApiError> {
        if let Condition::Perp(condition) = row.condition {
            if let Some(f) = self.perp_test_firing(row, condition, now_ms).await {
                return Ok(f);
            }
        }
        let registry = self.books.shared.registry();
        let no_price = || ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "no price for this pair yet; retry shortly");
        if row.symbol != super::alerts::UNIVERSE {
            let book = registry.find(row.exchange, &row.symbol).ok_or_else(no_price)?;
            let price = self.books.shared.price(book).0;
            return (price > 0).then(|| FiringRecord::at_price(row.id, price, now_ms, false)).ok_or_else(no_price);
        }
        let priced = registry.venue_books(row.exchange).iter().map(|&b| (b, self.books.shared.price(b).0));
        let (book, price) = priced.into_iter().find(|(_, p)| *p > 0).ok_or_else(no_price)?;
        let symbol = Some(registry.get(book).symbol.clone());
        Ok(FiringRecord::collected(vec![FiringRecord {
            symbol,
            ..FiringRecord::at_price(row.id, price, now_ms, false)
        }]))
    }
}

impl AlertsApi {
    /// A derivatives alert's test firing with §17's trigger object, read by the pair's shard
    /// now (a `*` alert's: the first of its venue's pairs with a perpetual, a price and the value,
    /// of the first [`PERP_TEST_PAIRS_MAX`] tried, named as its one trigger). `None` when no pair
    /// has the value yet or the shard does not answer (a cluster's api node does not ask): the
    /// test then goes at the price alone.
    async fn perp_test_firing(&self, row: &AlertRow, condition: PerpCondition, now_ms: i64) -> Option<FiringRecord> {
        let registry = self.books.shared.registry();
        let books: Vec<BookId> = if row.symbol == super::alerts::UNIVERSE {
            let with_perp = |b: &&BookId| self.books.shared.slots[b.index()].perp.load().is_some();
            registry.venue_books(row.exchange).iter().filter(with_perp).take(PERP_TEST_PAIRS_MAX).copied().collect()
        } else {
            registry.find(row.exchange, &row.symbol).into_iter().collect()
        };
        for book in books {
            let price = self.books.shared.price(book).0;
            if price <= 0 {
                continue;
            }
            let asked = self.books.ask_shard(book, |reply| Command::PerpTrigger { book, condition, reply }).await;
            let Ok(Some(trigger)) = asked else { continue };
            let one = FiringRecord { perp: Some(trigger), ..FiringRecord::at_price(row.id, price, now_ms, false) };
            if row.symbol != super::alerts::UNIVERSE {
                return Some(one);
            }
            let symbol = Some(registry.get(book).symbol.clone());
            return Some(FiringRecord::collected(vec![FiringRecord { symbol, ..one }]));
        }
        None
    }
}

/// Pairs a `*` derivatives alert's test send asks its shards about at most (each answer waits at
/// most as a candles read does).
const PERP_TEST_PAIRS_MAX: usize = 8;

/// `{"data":{"outcome","status","latencyMs"}}`.
fn outcome_answer(result: &AttemptResult, latency_ms: i64) -> Resp {
    let status = match result {
        AttemptResult::Delivered { status } => Some(*status),
        AttemptResult::Failed { status, .. } => *status,
    };
    let mut j = Json::with_capacity(96);
    j.raw("{\"data\":{\"outcome\":").str(result.outcome()).raw(",\"status\":");
    match status {
        Some(s) => j.int(i64::from(s)),
        None => j.raw("null"),
    };
    j.raw(",\"latencyMs\":").int(latency_ms).raw("}}");
    respond(StatusCode::OK, j.finish())
}
