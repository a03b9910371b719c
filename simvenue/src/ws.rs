//! One WebSocket connection of the simulator: its outbound queue, its inbound requests, and the
//! venue's keepalive rules.
//!
//! The connection registers with the market (which then queues data on its bounded queue) and
//! loops over: a kill request (slow consumer, disconnect fault, venue down), the next queued
//! messages (written in batches of at most [`WRITE_BATCH_MAX`], then flushed), the next client
//! message (handed to the venue's handler, which answers on the same queue), and the venue's
//! timers: Binance sends a ping frame every `ping_interval_s` and closes a connection that has
//! not answered one within [`PONG_WAIT_MS`], and allows [`BINANCE_INCOMING_PER_S_MAX`] incoming
//! messages per second (more closes the connection); OKX closes with 4004 after `idle_close_s`
//! without a client message or a data push.
//!
//! Bounds: an incoming message or frame larger than [`MESSAGE_BYTES_MAX`] ends the connection
//! (tungstenite refuses it); the write buffer holds at most [`WRITE_BUFFER_BYTES_MAX`] (a batch of
//! queued messages), beyond which the write fails and the connection ends.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use rampart_engine::Venue;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};
use tokio_tungstenite::WebSocketStream;

use super::market::{ConnCtl, Endpoint, Kill};
use super::{binance, bitget, bybit, now_ms, okx, Shared};

/// Largest incoming message or frame, in bytes.
pub(crate) const MESSAGE_BYTES_MAX: usize = 64 * 1024;
/// Largest write buffer, in bytes.
const WRITE_BUFFER_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Queued messages written before one flush.
const WRITE_BATCH_MAX: usize = 64;
/// Binance: time allowed to answer a ping frame.
const PONG_WAIT_MS: i64 = 60_000;
/// Binance: incoming messages (text, ping, pong) allowed per second per connection.
pub(crate) const BINANCE_INCOMING_PER_S_MAX: usize = 5;
/// Time allowed to send a close frame before the connection is dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// How the connection loop ended.
enum End {
    /// Killed, or closed by its own rules.
    Kill(Kill),
    /// The client closed or the socket failed.
    Gone,
}

/// Runs one upgraded connection on `endpoint` until it ends; Binance `streams` from the URL are
/// subscribed first.
// Long: the simulator's connection loop (read, answer, push queued market data, close rules);
// a test double.
pub(crate) async fn run<S>(shared: Arc<Shared>, io: S, endpoint: Endpoint, streams: Vec<String>, micros: bool)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let config = WebSocketConfig::default()
        .max_message_size(Some(MESSAGE_BYTES_MAX))
        .max_frame_size(Some(MESSAGE_BYTES_MAX))
        .max_write_buffer_size(WRITE_BUFFER_BYTES_MAX);
    let mut ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
    let (tx, mut rx) = mpsc::channel::<Utf8Bytes>(shared.cfg.queue_messages_max);
    let ctl = Arc::new(ConnCtl::default());
    let venue = endpoint.venue();
    let id = {
        let mut st = shared.lock();
        let id = st.register(endpoint, tx, ctl.clone(), micros);
        if venue == Venue::Binance {
            binance::on_open(&mut st, id, &streams);
        }
        id
    };
    let start = tokio::time::Instant::now();
    let ping_period = Duration::from_secs(shared.cfg.ping_interval_s);
    let mut ping = tokio::time::interval_at(start + ping_period, ping_period);
    let idle_ms = shared.cfg.idle_close_s as i64 * 1000;
    let idle_period = Duration::from_millis((idle_ms as u64 / 4).clamp(50, 1000));
    let mut idle = tokio::time::interval_at(start + idle_period, idle_period);
    let mut last_client_ms = now_ms();
    let mut last_push_ms = last_client_ms;
    let mut awaiting_pong_since: Option<i64> = None;
    let mut incoming: VecDeque<i64> = VecDeque::with_capacity(BINANCE_INCOMING_PER_S_MAX);
    let end = loop {
        tokio::select! {
            biased;
            _ = ctl.notify.notified() => break End::Kill(ctl.take().unwrap_or(Kill::Drop)),
            queued = rx.recv() => {
                let Some(first) = queued else { break End::Gone };
                let written = tokio::select! {
                    r = write_batch(&mut ws, first, &mut rx) => r,
                    _ = ctl.notify.notified() => break End::Kill(ctl.take().unwrap_or(Kill::Drop)),
                };
                if written.is_err() {
                    break End::Gone;
                }
                last_push_ms = now_ms();
            }
            inbound = ws.next() => {
                let msg = match inbound {
                    Some(Ok(m)) => m,
                    _ => break End::Gone,
                };
                let now = now_ms();
                if venue == Venue::Binance && !matches!(msg, Message::Close(_) | Message::Frame(_)) {
                    while incoming.front().is_some_and(|&t| now - t >= 1000) {
                        incoming.pop_front();
                    }
                    if incoming.len() >= BINANCE_INCOMING_PER_S_MAX {
                        break End::Kill(Kill::Close(1008, "Too many requests".into()));
                    }
                    incoming.push_back(now);
                }
                match msg {
                    Message::Text(t) => {
                        last_client_ms = now;
                        let kill = match venue {
                            Venue::Binance => binance::on_text(&shared, id, t.as_str()),
                            Venue::Bybit => bybit::on_text(&shared, id, t.as_str()),
                            Venue::Okx => okx::on_text(&shared, id, endpoint, t.as_str()),
                            Venue::Bitget => bitget::on_text(&shared, id, t.as_str()),
                        };
                        if let Some(k) = kill {
                            break End::Kill(k);
                        }
                    }
                    Message::Pong(_) => {
                        last_client_ms = now;
                        awaiting_pong_since = None;
                    }
                    Message::Close(_) => {
                        // tungstenite has queued the close reply; send it.
                        let _ = tokio::time::timeout(CLOSE_TIMEOUT, ws.flush()).await;
                        break End::Gone;
                    }
                    Message::Ping(_) | Message::Binary(_) | Message::Frame(_) => last_client_ms = now,
                }
            }
            _ = ping.tick(), if venue == Venue::Binance => {
                let now = now_ms();
                if awaiting_pong_since.is_some_and(|t| now - t >= PONG_WAIT_MS) {
                    break End::Kill(Kill::Close(1008, "pong timeout".into()));
                }
                awaiting_pong_since.get_or_insert(now);
                let payload = now.to_string().into_bytes();
                if ws.send(Message::Ping(payload.into())).await.is_err() {
                    break End::Gone;
                }
            }
            _ = idle.tick(), if venue == Venue::Okx => {
                if now_ms() - last_client_ms.max(last_push_ms) >= idle_ms {
                    let reason = format!("No data received in {}s", shared.cfg.idle_close_s);
                    break End::Kill(Kill::Close(4004, reason));
                }
            }
        }
    };
    shared.lock().unregister(id);
    drop(rx);
    if let End::Kill(Kill::Close(code, reason)) = end {
        let frame = CloseFrame { code: CloseCode::from(code), reason: reason.into() };
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, ws.close(Some(frame))).await;
    }
}

/// Writes `first` and up to [`WRITE_BATCH_MAX`] − 1 more queued messages, then flushes.
async fn write_batch<S>(
    ws: &mut WebSocketStream<S>,
    first: Utf8Bytes,
    rx: &mut mpsc::Receiver<Utf8Bytes>,
) -> Result<(), tokio_tungstenite::tungstenite::Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    ws.feed(Message::Text(stamp(first))).await?;
    for _ in 1..WRITE_BATCH_MAX {
        match rx.try_recv() {
            Ok(t) => ws.feed(Message::Text(stamp(t))).await?,
            Err(_) => break,
        }
    }
    ws.flush().await
}

/// Fills the send-time placeholder of a microsecond Binance payload with the wall clock now.
fn stamp(text: Utf8Bytes) -> Utf8Bytes {
    let mark = crate::SEND_TIME_MARK;
    if !text.as_str().contains(mark) {
        return text;
    }
    let now = crate::now_us().to_string();
    text.as_str().replace(mark, &now).into()
}
