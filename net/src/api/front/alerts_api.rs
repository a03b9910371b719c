//! `/v1/alerts` (create, list, delete) and `/v1/inbox`: the HTTP side of the API's alerts; their
//! parsing and rules are in `crate::alerts`, their JSON in `rampart_store::text`.

use std::rc::Rc;
use std::sync::Arc;

use hyper::header::HeaderValue;
use hyper::StatusCode;

use super::answer::count_param;
use super::answer::{clip, error, query_param, respond, ApiError, Resp};
use super::books::Books;
use crate::alerts::{request as alerts, rules};
use crate::config::Plans;
use rampart_outbound::ssrf;
use rampart_state::clock;
use rampart_state::json::Json;
use rampart_store::storage::Writer;
use rampart_store::storage::{StorageHealth, StorageThread};
use rampart_store::store::{AlertRow, DeliveryLogRow, Idempotent, KeyRow, NewAlert, Redelivery};
use rampart_store::text::alert::write_alert;

mod test_send;

/// One inbox entry as `GET /v1/inbox` lists it (and live push sends it).
pub(super) fn write_inbox_entry(j: &mut Json, r: &rampart_store::store::InboxRow) {
    j.raw("{\"id\":").int(r.id).raw(",\"kind\":").str(&r.kind).raw(",\"alertId\":");
    match r.alert_id {
        Some(a) => j.int(a),
        None => j.raw("null"),
    };
    // The body was written by this service as JSON.
    j.raw(",\"createdAt\":").str(&clock::iso8601(r.created_ms)).raw(",\"event\":").raw(&r.body).raw("}");
}

/// Delivery log rows a request answers unless told, and at most.
pub const DELIVERY_LOG_LIMIT_DEFAULT: u32 = 20;
/// See [`DELIVERY_LOG_LIMIT_DEFAULT`].
pub const DELIVERY_LOG_LIMIT_MAX: u32 = 100;

/// One delivery log row: `{"triggerTime","attempt","at","outcome","status","latencyMs","error"}`.
fn write_delivery(j: &mut Json, r: &DeliveryLogRow) {
    j.raw("{\"triggerTime\":").int(r.trigger_ms).raw(",\"attempt\":").int(r.attempt);
    j.raw(",\"at\":").str(&clock::iso8601(r.at_ms)).raw(",\"outcome\":").str(&r.outcome);
    j.raw(",\"status\":");
    match r.status {
        Some(s) => j.int(s),
        None => j.raw("null"),
    };
    j.raw(",\"latencyMs\":");
    match r.latency_ms {
        Some(ms) => j.int(ms),
        None => j.raw("null"),
    };
    j.raw(",\"error\":");
    match &r.error {
        Some(e) => j.str(e),
        None => j.raw("null"),
    };
    // Only a test send's row says so: the log's rows of firings are as before.
    if r.test {
        j.raw(",\"test\":true");
    }
    j.raw("}");
}

/// How long an `Idempotency-Key` answers the alert it created (`decisions.md` §13).
pub const IDEMPOTENCY_KEEP_MS: i64 = 24 * 3_600_000;
/// Longest `Idempotency-Key`, in characters (visible ASCII).
pub const IDEMPOTENCY_KEY_CHARS_MAX: usize = 255;

/// The `Idempotency-Key` header of a create, checked (1 to 255 visible ASCII characters), and
/// the SHA-256 of the body it came with.
fn idempotency(header: &HeaderValue, body: &[u8]) -> Result<(String, [u8; 32]), ApiError> {
    let bytes = header.as_bytes();
    if bytes.is_empty() || bytes.len() > IDEMPOTENCY_KEY_CHARS_MAX || !bytes.iter().all(|b| (0x21..=0x7e).contains(b)) {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_CHARS_MAX} visible ASCII characters"),
        ));
    }
    use sha2::Digest;
    let key = String::from_utf8_lossy(bytes).into_owned();
    Ok((key, sha2::Sha256::digest(body).into()))
}

fn reused_with_another_body() -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "Idempotency-Key was already used with another body")
}

fn created_alert_deleted(id: i64) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        format!("Idempotency-Key already created alert {id}, which has been deleted since"),
    )
}

/// `{"data":<Alert>}`.
fn alert_answer(row: &AlertRow) -> Resp {
    let mut j = Json::with_capacity(512);
    j.raw("{\"data\":");
    write_alert(&mut j, row);
    j.raw("}");
    respond(StatusCode::OK, j.finish())
}

/// What the create's storage job did.
enum Created {
    /// Inserted: a new alert.
    New(AlertRow),
    /// The `Idempotency-Key` had made this alert already.
    Replay(AlertRow),
    /// The `Idempotency-Key` had come with another body.
    Conflict,
    /// The `Idempotency-Key` had made this alert, deleted since.
    Deleted(i64),
    /// The plan's cap is reached.
    Full,
}

/// `/v1/alerts` and `/v1/inbox`: what they read and write.
pub struct AlertsApi {
    books: Rc<Books>,
    storage: StorageThread,
    health: Arc<StorageHealth>,
    plans: Plans,
    /// Webhook URLs may name private addresses (`[webhooks] allow_private`).
    allow_private: bool,
    /// The sender of test sends (`POST /v1/alerts/{id}/test`).
    sender: rampart_delivery::Target,
}

impl AlertsApi {
    /// Alerts on the pairs of `books`, stored through `storage` (its failures told to `health`).
    pub(super) fn new(
        books: Rc<Books>,
        storage: StorageThread,
        health: Arc<StorageHealth>,
        plans: Plans,
        allow_private: bool,
    ) -> AlertsApi {
        AlertsApi { books, storage, health, plans, allow_private, sender: test_send::test_target(allow_private) }
    }

    /// The alert an earlier create with the same `Idempotency-Key` and body made, if any (a
    /// retry after a timeout or a 5xx answers it, whatever the market did since).
    async fn replayed(
        &self,
        account_id: i64,
        key: &(String, [u8; 32]),
        now_ms: i64,
    ) -> Result<Option<AlertRow>, ApiError> {
        let (k, hash) = key.clone();
        let since = now_ms - IDEMPOTENCY_KEEP_MS;
        match self.storage.run(move |store| store.idempotent_alert(account_id, &k, &hash, since)).await? {
            Idempotent::Same(row) => Ok(Some(*row)),
            Idempotent::Other => Err(reused_with_another_body()),
            Idempotent::Deleted(id) => Err(created_alert_deleted(id)),
            Idempotent::New => Ok(None),
        }
    }

    // Long: the creation rules in the order the API applies them (idempotency, validate, plan,
    // cap, price, store, hand to the shard); each step is a few lines and they share the
    // request's state.
    pub(super) async fn create(
        &self,
        account: &KeyRow,
        body: &[u8],
        idempotency_key: Option<&HeaderValue>,
        now_ms: i64,
    ) -> Result<Resp, ApiError> {
        let idem = idempotency_key.map(|h| idempotency(h, body)).transpose()?;
        if let Some(key) = &idem {
            if let Some(row) = self.replayed(account.account_id, key, now_ms).await? {
                return Ok(alert_answer(&row));
            }
        }
        let req = alerts::parse_create(body)?;
        let derivatives_on = self.books.shared.derivatives.load(std::sync::atomic::Ordering::Relaxed);
        rules::check_derivatives_on(&req.condition, derivatives_on)?;
        let (venue, book) = match (req.exchange, req.universe()) {
            // A `*` alert: every pair of the venue (its exchange is required).
            (Some(v), true) => (self.books.venue_or_404(v.as_str())?, None),
            (Some(v), false) => (v, Some(self.books.book(v, &req.symbol)?)),
            (None, _) => self.books.any_venue(&req.symbol).map(|(v, b)| (v, Some(b))).ok_or_else(|| {
                ApiError::new(StatusCode::NOT_FOUND, format!("unknown symbol '{}'", clip(&req.symbol, 64)))
            })?,
        };
        let Some(plan) = self.plans.get(&account.plan) else {
            return Err(ApiError::new(StatusCode::FORBIDDEN, "API access needs an active Developer plan"));
        };
        rules::check_plan(plan, &req)?;
        rules::check_expiry(req.expires_ms, now_ms)?;
        // A `*` alert has no one price: stored as 0, shown as null.
        let current = match book {
            Some(book) => self.books.shared.price(book).0,
            None => 1,
        };
        if current <= 0 {
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "no price for this pair yet; retry shortly"));
        }
        rules::check_side(&req.condition, current)?;
        let perp = book.and_then(|b| self.books.shared.slots[b.index()].perp.load_full());
        let symbol = book.map(|_| req.symbol.as_str()).filter(|_| !req.universe());
        rules::check_perp(&req.condition, venue, symbol, perp.as_deref())?;
        let created_price = if book.is_some() { current } else { 0 };
        // The public-address rule, checked with the same guard every delivery attempt uses.
        if let Some(url) = &req.webhook_url {
            let unprocessable = |e: ssrf::SsrfError| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string());
            let parsed = ssrf::parse(url).map_err(unprocessable)?;
            ssrf::resolve_checked(&parsed, self.allow_private).await.map_err(unprocessable)?;
        }
        let new = NewAlert {
            account_id: account.account_id,
            exchange: venue,
            symbol: match book {
                Some(book) => self.books.shared.registry().get(book).symbol.clone(),
                None => alerts::UNIVERSE.to_owned(),
            },
            condition: req.condition,
            repeat: req.repeat,
            note: req.note.clone(),
            webhook_url: req.webhook_url.clone(),
            created_price,
            created_ms: now_ms,
            expires_ms: req.expires_ms,
            cooldown_s: req.cooldown_s,
            max_fires: req.max_fires,
            message: req.message.clone(),
            webhook_format: req.webhook_format,
        };
        // Counted against its cap (`rules::Cap`, decisions.md §2 and §15) and inserted in one
        // storage job so two concurrent requests cannot both take the last place. Committed
        // before the answer: a crash after the 200 loses nothing acknowledged. A concurrent
        // create with the same Idempotency-Key is looked for again under the account's lock, so
        // two at once make one alert.
        let cap = rules::Cap::of(&new.condition);
        let limit = cap.limit(plan);
        let inserted = self
            .storage
            .run(move |store| {
                // The common case in one statement: no key to look for, the account below its
                // price cap (every active alert counted; the walls it leaves out are counted
                // below only when the account holds the cap's number).
                if idem.is_none() && cap == rules::Cap::Price {
                    if let Some(row) = store.insert_alert_below(&new, limit)? {
                        return Ok(Created::New(row));
                    }
                }
                let counted = match cap {
                    rules::Cap::Density => store.active_density_alerts(new.account_id)?,
                    rules::Cap::Price => store.active_price_alerts(new.account_id)?,
                };
                if let Some((key, hash)) = &idem {
                    match store.idempotent_alert(new.account_id, key, hash, now_ms - IDEMPOTENCY_KEEP_MS)? {
                        Idempotent::Same(row) => return Ok(Created::Replay(*row)),
                        Idempotent::Other => return Ok(Created::Conflict),
                        Idempotent::Deleted(id) => return Ok(Created::Deleted(id)),
                        Idempotent::New => {}
                    }
                }
                if cap.full(limit, counted, || store.active_wall_alerts(new.account_id))? {
                    return Ok(Created::Full);
                }
                let row = store.insert_alert(&new)?;
                if let Some((key, hash)) = &idem {
                    store.remember_idempotent(new.account_id, key, hash, row.id, now_ms)?;
                }
                Ok(Created::New(row))
            })
            .await;
        self.health.record(Writer::Front, &inserted, now_ms);
        let row = match inserted? {
            Created::New(row) => row,
            Created::Replay(row) => return Ok(alert_answer(&row)),
            Created::Conflict => return Err(reused_with_another_body()),
            Created::Deleted(id) => return Err(created_alert_deleted(id)),
            Created::Full => return Err(cap.reached(plan).into()),
        };
        if !self.books.hand_over_new(&row) {
            let id = row.id;
            let _ = self.storage.run(move |store| store.forget_alert(id)).await;
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "busy; retry shortly"));
        }
        Ok(alert_answer(&row))
    }

    pub(super) async fn list(&self, account: &KeyRow, filter: rampart_store::store::StatusFilter) -> Resp {
        let acc = account.account_id;
        let rows = match self.storage.run(move |store| store.list_alerts(acc, filter)).await {
            Ok(r) => r,
            Err(e) => return ApiError::from(e).into_response(),
        };
        let mut j = Json::with_capacity(64 + rows.len() * 400);
        j.raw("{\"data\":[");
        for (i, row) in rows.iter().enumerate() {
            if i > 0 {
                j.raw(",");
            }
            write_alert(&mut j, row);
        }
        j.raw("]}");
        respond(StatusCode::OK, j.finish())
    }

    /// `PATCH /v1/alerts/{id}` (`decisions.md` §16): the note, webhook, pause, end, cooldown,
    /// limit of firings, text and webhook format; the same rules as at create for each. A pause
    /// takes the alert off its shards and a resume hands it back (a price alert past its level
    /// waits for the far side); a new cooldown reaches the shards, which keep the alert's state.
    pub(super) async fn update(&self, account: &KeyRow, id: &str, body: &[u8], now_ms: i64) -> Result<Resp, ApiError> {
        let unknown = || ApiError::new(StatusCode::NOT_FOUND, "unknown alert");
        let Some(id) = id.parse::<i64>().ok().filter(|&i| i > 0) else { return Err(unknown()) };
        let changes = crate::alerts::patch::parse_patch(body)?;
        if let Some(Some(at)) = changes.expires_ms {
            rules::check_expiry(Some(at), now_ms)?;
        }
        if let Some(Some(url)) = &changes.webhook_url {
            let unprocessable = |e: ssrf::SsrfError| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string());
            let parsed = ssrf::parse(url).map_err(unprocessable)?;
            ssrf::resolve_checked(&parsed, self.allow_private).await.map_err(unprocessable)?;
        }
        let acc = account.account_id;
        let retuned = changes.cooldown_s.is_some();
        // Read and changed in one storage job: the rules that depend on the alert as it is.
        let updated = self
            .storage
            .run(move |store| {
                let Some(before) = store.alert(id)?.filter(|r| r.account_id == acc) else { return Ok(None) };
                if let Err(refused) = crate::alerts::lifecycle::check_change(&before, &changes) {
                    return Ok(Some(Err(refused)));
                }
                Ok(store.update_alert(acc, id, &changes)?.map(|after| Ok((before, after))))
            })
            .await;
        self.health.record(Writer::Front, &updated, now_ms);
        let (before, row) = updated?.ok_or_else(unknown)??;
        // Every change goes to the shards with the row's version, so they end with the newest
        // stored state whatever order the front threads hand changes over in (a change that
        // moves nothing there, a note's, also mends an earlier one a full queue held back).
        let moved = before.running() != row.running() || (row.running() && retuned);
        let handed = self.books.hand_over(&row, row.change_after(&before));
        if moved && !handed {
            // Stored: a retry of the same change is harmless and reaches the shard then.
            return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "busy; retry shortly"));
        }
        Ok(alert_answer(&row))
    }

    pub(super) async fn delete(&self, account: &KeyRow, id: &str, now_ms: i64) -> Resp {
        let unknown = || error(StatusCode::NOT_FOUND, "unknown alert");
        let Some(id) = id.parse::<i64>().ok().filter(|&i| i > 0) else { return unknown() };
        let acc = account.account_id;
        let deleted = self.storage.run(move |store| store.delete_alert(acc, id, now_ms)).await;
        self.health.record(Writer::Front, &deleted, now_ms);
        let row = match deleted {
            Ok(Some(row)) => row,
            Ok(None) => return unknown(),
            Err(e) => return ApiError::from(e).into_response(),
        };
        // A full queue leaves it held until restart, firing nothing stored.
        let _ = self.books.hand_over(&row, row.change(false));
        let mut j = Json::with_capacity(64);
        j.raw("{\"data\":{\"id\":").int(id).raw(",\"deleted\":true}}");
        respond(StatusCode::OK, j.finish())
    }

    pub(super) async fn inbox(&self, account: &KeyRow, query: Option<&str>) -> Resp {
        let limit = match query_param(query, "limit") {
            None => 100,
            Some(v) => match v.parse::<u32>() {
                Ok(n) if (1..=1_000).contains(&n) => n,
                _ => return error(StatusCode::UNPROCESSABLE_ENTITY, "limit must be an integer from 1 to 1000"),
            },
        };
        // Paging: the entries older than an entry already seen.
        // An id past any there can be (beyond i64) is below nothing: every entry.
        let before = match query_param(query, "before") {
            None => i64::MAX,
            Some(v) if v.bytes().all(|b| b.is_ascii_digit()) && v.bytes().any(|b| b != b'0') => {
                v.parse::<i64>().unwrap_or(i64::MAX)
            }
            Some(_) => {
                return error(StatusCode::UNPROCESSABLE_ENTITY, "before must be an inbox entry id (an integer from 1)")
            }
        };
        let acc = account.account_id;
        let rows = match self.storage.run(move |store| store.inbox(acc, before, limit)).await {
            Ok(r) => r,
            Err(e) => return ApiError::from(e).into_response(),
        };
        let mut j = Json::with_capacity(64 + rows.len() * 512);
        j.raw("{\"data\":[");
        for (i, r) in rows.iter().enumerate() {
            if i > 0 {
                j.raw(",");
            }
            write_inbox_entry(&mut j, r);
        }
        j.raw("]}");
        respond(StatusCode::OK, j.finish())
    }

    /// `GET /v1/alerts/{id}/deliveries?limit=` (1–100, default 20): the alert's delivery log,
    /// newest first (`decisions.md` §13). Another account's alert, or none, is 404.
    pub(super) async fn delivery_log(&self, account: &KeyRow, id: &str, query: Option<&str>) -> Resp {
        let unknown = || error(StatusCode::NOT_FOUND, "unknown alert");
        let Some(id) = id.parse::<i64>().ok().filter(|&i| i > 0) else { return unknown() };
        let (default, max) = (DELIVERY_LOG_LIMIT_DEFAULT as usize, DELIVERY_LOG_LIMIT_MAX as usize);
        let limit = match count_param(query, "limit", default, max) {
            Ok(n) => n as u32,
            Err(e) => return e.into_response(),
        };
        let acc = account.account_id;
        let rows = match self.storage.run(move |store| store.delivery_log(acc, id, limit)).await {
            Ok(Some(rows)) => rows,
            Ok(None) => return unknown(),
            Err(e) => return ApiError::from(e).into_response(),
        };
        let mut j = Json::with_capacity(64 + rows.len() * 200);
        j.raw("{\"data\":[");
        for (i, r) in rows.iter().enumerate() {
            if i > 0 {
                j.raw(",");
            }
            write_delivery(&mut j, r);
        }
        j.raw("]}");
        respond(StatusCode::OK, j.finish())
    }

    /// `POST /v1/alerts/{id}/deliveries/{triggerTime}/redeliver`: the firing's webhook again,
    /// same body and pair, on the §6 schedule; within 7 days; a pending delivery is a 422.
    pub(super) async fn redeliver(&self, account: &KeyRow, id: &str, at: &str, now_ms: i64) -> Resp {
        let unknown = || error(StatusCode::NOT_FOUND, "unknown delivery");
        let (Some(id), Some(at)) = (id.parse::<i64>().ok().filter(|&i| i > 0), at.parse::<i64>().ok()) else {
            return unknown();
        };
        let acc = account.account_id;
        let queued = self.storage.run(move |store| store.redeliver(acc, id, at, now_ms)).await;
        self.health.record(Writer::Front, &queued, now_ms);
        match queued {
            Ok(Redelivery::Queued) => {
                let mut j = Json::with_capacity(96);
                j.raw("{\"data\":{\"alertId\":").int(id).raw(",\"triggerTime\":").int(at).raw(",\"queued\":true}}");
                respond(StatusCode::OK, j.finish())
            }
            Ok(Redelivery::Unknown) => unknown(),
            Ok(Redelivery::Pending) => error(StatusCode::UNPROCESSABLE_ENTITY, "the delivery is still pending"),
            Err(e) => ApiError::from(e).into_response(),
        }
    }
}
