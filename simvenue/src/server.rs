//! The simulator's listener: hyper HTTP/1.1 for REST and the control API, the WebSocket upgrade
//! on the venues' stream paths, and the market task that steps the simulation.
//!
//! Paths (they do not collide): Binance `/api/v3/*`, `/ws[/<streams>]`, `/stream?streams=`, its
//! perpetuals `/fapi/v1/*`, `/market/ws[/<streams>]`, `/market/stream?streams=`; Bybit
//! `/v5/market/*`, `/v5/public/spot`, `/v5/public/linear`; OKX `/api/v5/*`, `/ws/v5/public`,
//! `/ws/v5/business`; Bitget `/api/v2/spot/*`, `/api/v2/mix/*`, `/v2/ws/public`; the control API
//! `/sim/*`.
//!
//! Bounds: request heads are read within 10 s and 64 KiB; control bodies within 10 s and
//! [`BODY_BYTES_MAX`] (413 above it, 408 when late); at most `Config::connections_max` TCP
//! connections are open at once (HTTP and WebSocket together), more are closed at accept.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, UPGRADE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rampart_engine::Venue;
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;

use super::market::Endpoint;
use super::text::query_pairs;
use super::{
    binance, bitget, bybit, control, now_ms, okx, perp_binance, perp_bitget, perp_bybit, perp_okx, ws, Reply,
    RestFault, RestRoute, Shared,
};

/// Period of the market task: each round steps the pairs that are due.
const ROUND_MS: u64 = 10;
/// Largest control request body; a larger one is refused with 413.
pub(crate) const BODY_BYTES_MAX: usize = 64 * 1024;
/// Time allowed to receive a control request body; 408 after it.
const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves until `shutdown` fires; then every task of the runtime ends with it.
pub(crate) async fn run(listener: std::net::TcpListener, shared: Arc<Shared>, shutdown: oneshot::Receiver<()>) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("sim-venue: listener: {e}");
            return;
        }
    };
    let market = tokio::spawn(market_loop(shared.clone()));
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(10)).max_buf_size(64 * 1024);
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            a = listener.accept() => a,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                eprintln!("sim-venue: accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if shared.open.load(Ordering::Relaxed) >= shared.cfg.connections_max {
            drop(stream);
            continue;
        }
        let _ = stream.set_nodelay(true);
        shared.open.fetch_add(1, Ordering::Relaxed);
        let (shared, builder) = (shared.clone(), builder.clone());
        tokio::spawn(async move {
            let svc_shared = shared.clone();
            let svc = service_fn(move |req| handle(svc_shared.clone(), req));
            let _ = builder.serve_connection(TokioIo::new(stream), svc).with_upgrades().await;
            shared.open.fetch_sub(1, Ordering::Relaxed);
        });
    }
    market.abort();
}

async fn market_loop(shared: Arc<Shared>) {
    let mut iv = tokio::time::interval(Duration::from_millis(ROUND_MS));
    iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        iv.tick().await;
        shared.lock().round(now_ms());
    }
}

/// A JSON response.
fn respond(reply: Reply) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(reply.body)));
    *resp.status_mut() = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn plain(status: StatusCode, msg: &str) -> Response<Full<Bytes>> {
    respond(Reply::status(status.as_u16(), format!("{{\"error\":{}}}", super::text::json_str(msg))))
}

/// The WebSocket endpoint of a path, if it is one.
pub(crate) fn ws_endpoint(path: &str) -> Option<Endpoint> {
    match path {
        "/ws/v5/public" => Some(Endpoint::OkxPublic),
        "/ws/v5/business" => Some(Endpoint::OkxBusiness),
        "/v5/public/spot" => Some(Endpoint::Bybit),
        "/v5/public/linear" => Some(Endpoint::BybitLinear),
        "/market/stream" => Some(Endpoint::BinanceFuturesCombined),
        p if p == "/market/ws" || p.starts_with("/market/ws/") => Some(Endpoint::BinanceFuturesRaw),
        "/v2/ws/public" => Some(Endpoint::Bitget),
        "/stream" => Some(Endpoint::BinanceCombined),
        p if p == "/ws" || p.starts_with("/ws/") => Some(Endpoint::BinanceRaw),
        _ => None,
    }
}

/// A REST route: venue and route name (as `/sim/stats` counts it).
fn rest_route(path: &str) -> Option<(Venue, &'static str)> {
    Some(match path {
        "/api/v3/exchangeInfo" => (Venue::Binance, "/api/v3/exchangeInfo"),
        "/api/v3/depth" => (Venue::Binance, "/api/v3/depth"),
        "/api/v3/klines" => (Venue::Binance, "/api/v3/klines"),
        "/v5/market/instruments-info" => (Venue::Bybit, "/v5/market/instruments-info"),
        "/v5/market/kline" => (Venue::Bybit, "/v5/market/kline"),
        "/api/v5/public/instruments" => (Venue::Okx, "/api/v5/public/instruments"),
        "/api/v5/market/candles" => (Venue::Okx, "/api/v5/market/candles"),
        "/api/v5/market/history-candles" => (Venue::Okx, "/api/v5/market/history-candles"),
        "/api/v2/spot/public/symbols" => (Venue::Bitget, "/api/v2/spot/public/symbols"),
        "/api/v2/spot/market/candles" => (Venue::Bitget, "/api/v2/spot/market/candles"),
        "/api/v2/spot/market/history-candles" => (Venue::Bitget, "/api/v2/spot/market/history-candles"),
        "/fapi/v1/exchangeInfo" => (Venue::Binance, "/fapi/v1/exchangeInfo"),
        "/fapi/v1/openInterest" => (Venue::Binance, "/fapi/v1/openInterest"),
        "/fapi/v1/premiumIndex" => (Venue::Binance, "/fapi/v1/premiumIndex"),
        "/fapi/v1/fundingInfo" => (Venue::Binance, "/fapi/v1/fundingInfo"),
        "/v5/market/tickers" => (Venue::Bybit, "/v5/market/tickers"),
        "/api/v5/public/open-interest" => (Venue::Okx, "/api/v5/public/open-interest"),
        "/api/v5/public/funding-rate" => (Venue::Okx, "/api/v5/public/funding-rate"),
        "/api/v2/mix/market/contracts" => (Venue::Bitget, "/api/v2/mix/market/contracts"),
        "/api/v2/mix/market/tickers" => (Venue::Bitget, "/api/v2/mix/market/tickers"),
        "/api/v2/mix/market/current-fund-rate" => (Venue::Bitget, "/api/v2/mix/market/current-fund-rate"),
        _ => return None,
    })
}

/// The venue's own error body for `status` (used for 405 and 503).
fn venue_error(venue: Venue, status: u16, msg: &str) -> Reply {
    match venue {
        Venue::Binance => binance::error(status, -1000, msg),
        Venue::Bybit => bybit::error(status, 10_000, msg),
        Venue::Okx => okx::error(status, "50001", msg),
        Venue::Bitget => bitget::error(status, "40001", msg),
    }
}

async fn handle(shared: Arc<Shared>, mut req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_owned();
    let query = req.uri().query().map(str::to_owned);
    if let Some(endpoint) = ws_endpoint(&path) {
        return Ok(upgrade(shared, &mut req, endpoint, &path, query.as_deref()));
    }
    let method = req.method().clone();
    let body = if path.starts_with("/sim/") && method == Method::POST {
        match read_body(req.into_body()).await {
            Ok(b) => b,
            Err(resp) => return Ok(resp),
        }
    } else {
        Bytes::new()
    };
    Ok(match answer(&shared, &method, &path, query.as_deref(), &body) {
        Answer::Reply(reply) => respond(reply),
        Answer::RetryAfter(reply, seconds) => {
            let mut resp = respond(reply);
            if let Ok(v) = HeaderValue::from_str(&seconds.to_string()) {
                resp.headers_mut().insert(hyper::header::RETRY_AFTER, v);
            }
            resp
        }
        Answer::Hang => {
            // Held until the client gives up (or the simulator stops).
            std::future::pending::<Response<Full<Bytes>>>().await
        }
    })
}

/// What a REST or control request gets.
pub(crate) enum Answer {
    /// This reply.
    Reply(Reply),
    /// This reply with a `Retry-After` header of so many seconds.
    RetryAfter(Reply, u64),
    /// No answer ever (an injected `hang`).
    Hang,
}

/// Answers a REST or control request (not a WebSocket path): the same code serves sockets and
/// the in-process driver ([`crate::inproc`]).
pub(crate) fn answer(shared: &Shared, method: &Method, path: &str, query: Option<&str>, body: &[u8]) -> Answer {
    if path.starts_with("/sim/") {
        return Answer::Reply(control::handle(shared, method, path, query, body));
    }
    let not_found =
        |msg: &str| Answer::Reply(Reply::status(404, format!("{{\"error\":{}}}", super::text::json_str(msg))));
    let Some((venue, route)) = rest_route(path) else { return not_found("no such path") };
    if !shared.cfg.venues.contains(&venue) {
        return not_found("venue not served by this simulator");
    }
    shared.stats.rest(venue, route);
    if method != Method::GET {
        return Answer::Reply(venue_error(venue, 405, "method not allowed"));
    }
    if !shared.venue_up(venue) {
        return Answer::Reply(venue_error(venue, 503, "service unavailable"));
    }
    let pairs = query_pairs(query);
    let perp = match venue {
        Venue::Binance => route.starts_with("/fapi/"),
        Venue::Bybit => perp_bybit::is_linear(route, &pairs),
        Venue::Okx => perp_okx::is_swap(route, &pairs),
        Venue::Bitget => perp_bitget::is_mix(route),
    };
    let class = match route {
        _ if perp => RestRoute::Perp,
        r if r.ends_with("exchangeInfo") || r.ends_with("instruments-info") || r.ends_with("instruments") => {
            RestRoute::Listing
        }
        r if r.ends_with("symbols") => RestRoute::Listing,
        "/api/v3/depth" => RestRoute::Depth,
        _ => RestRoute::Candles,
    };
    match shared.rest_fault(venue, class) {
        RestFault::None => {}
        RestFault::Hang => return Answer::Hang,
        RestFault::Empty => return Answer::Reply(Reply::ok(empty_listing(venue))),
        RestFault::Status(status, retry_after) => {
            let reply = venue_error(venue, status, "injected by /sim/rest");
            return match retry_after {
                Some(s) => Answer::RetryAfter(reply, s),
                None => Answer::Reply(reply),
            };
        }
    }
    if perp {
        return Answer::Reply(match venue {
            Venue::Binance => perp_binance::rest(shared, route, &pairs),
            Venue::Bybit => perp_bybit::rest(shared, route, &pairs),
            Venue::Okx => perp_okx::rest(shared, route, &pairs),
            Venue::Bitget => perp_bitget::rest(shared, route, &pairs),
        });
    }
    Answer::Reply(match venue {
        Venue::Binance => binance::rest(shared, route, &pairs),
        Venue::Bybit => bybit::rest(shared, route, &pairs),
        Venue::Okx => okx::rest(shared, route, &pairs),
        Venue::Bitget => bitget::rest(shared, route, &pairs),
    })
}

/// A valid listing with no instruments, in the venue's own envelope.
fn empty_listing(venue: Venue) -> String {
    let now = now_ms();
    match venue {
        Venue::Binance => format!(
            "{{\"timezone\":\"UTC\",\"serverTime\":{now},\"rateLimits\":[],\"exchangeFilters\":[],\"symbols\":[]}}"
        ),
        Venue::Bybit => format!(
            "{{\"retCode\":0,\"retMsg\":\"OK\",\"result\":{{\"category\":\"spot\",\"list\":[]}},\"retExtInfo\":{{}},\"time\":{now}}}"
        ),
        Venue::Okx => "{\"code\":\"0\",\"msg\":\"\",\"data\":[]}".to_owned(),
        Venue::Bitget => {
            format!("{{\"code\":\"00000\",\"msg\":\"success\",\"requestTime\":{now},\"data\":[]}}")
        }
    }
}

async fn read_body(body: Incoming) -> Result<Bytes, Response<Full<Bytes>>> {
    match tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, BODY_BYTES_MAX).collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            Err(plain(StatusCode::PAYLOAD_TOO_LARGE, "request body too large"))
        }
        Ok(Err(_)) => Err(plain(StatusCode::BAD_REQUEST, "malformed request body")),
        Err(_) => Err(plain(StatusCode::REQUEST_TIMEOUT, "request body not received in time")),
    }
}

fn header_has(req: &Request<Incoming>, name: hyper::header::HeaderName, token: &str) -> bool {
    req.headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
}

/// Answers a WebSocket handshake on `endpoint` and hands the upgraded connection to its task.
fn upgrade(
    shared: Arc<Shared>,
    req: &mut Request<Incoming>,
    endpoint: Endpoint,
    path: &str,
    query: Option<&str>,
) -> Response<Full<Bytes>> {
    let venue = endpoint.venue();
    if !shared.cfg.venues.contains(&venue) {
        return plain(StatusCode::NOT_FOUND, "venue not served by this simulator");
    }
    if req.method() != Method::GET || !header_has(req, UPGRADE, "websocket") || !header_has(req, CONNECTION, "upgrade")
    {
        return plain(StatusCode::BAD_REQUEST, "this path is a WebSocket endpoint: send a WebSocket upgrade");
    }
    if !shared.venue_up(venue) {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "venue is down");
    }
    if req.headers().get("sec-websocket-version").and_then(|v| v.to_str().ok()) != Some("13") {
        let mut resp = plain(StatusCode::UPGRADE_REQUIRED, "Sec-WebSocket-Version 13 required");
        resp.headers_mut().insert("sec-websocket-version", HeaderValue::from_static("13"));
        return resp;
    }
    let Some(key) = req.headers().get(SEC_WEBSOCKET_KEY).map(|k| k.as_bytes().to_vec()) else {
        return plain(StatusCode::BAD_REQUEST, "Sec-WebSocket-Key missing");
    };
    let streams = match endpoint {
        Endpoint::BinanceRaw
        | Endpoint::BinanceCombined
        | Endpoint::BinanceFuturesRaw
        | Endpoint::BinanceFuturesCombined => match binance::url_streams(path, query) {
            Ok(s) => s,
            Err(msg) => return plain(StatusCode::BAD_REQUEST, &msg),
        },
        _ => Vec::new(),
    };
    if shared.open.load(Ordering::Relaxed) >= shared.cfg.connections_max {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "too many connections");
    }
    // Binance `timeUnit=MICROSECOND` (any case): time fields in microseconds on this connection.
    let micros = endpoint.venue() == rampart_engine::Venue::Binance
        && query.is_some_and(|q| q.split('&').any(|kv| kv.eq_ignore_ascii_case("timeUnit=MICROSECOND")));
    let on_upgrade = hyper::upgrade::on(req);
    let accept = derive_accept_key(&key);
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                shared.open.fetch_add(1, Ordering::Relaxed);
                ws::run(shared.clone(), TokioIo::new(upgraded), endpoint, streams, micros).await;
                shared.open.fetch_sub(1, Ordering::Relaxed);
            }
            Err(e) => eprintln!("sim-venue: upgrade failed: {e}"),
        }
    });
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        h.insert(SEC_WEBSOCKET_ACCEPT, v);
    }
    resp
}
