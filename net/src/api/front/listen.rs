//! The API port's listener: accepts connections (bounded in all and per address, each refused
//! at once, unanswered, past its bound), serves each on its own task of this thread with hyper,
//! and hands the routes that keep the connection (a stream's upgrade, an event stream) the
//! request whole; every other request goes to [`Front::serve_request`].

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Either;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request};
use hyper_util::rt::{TokioIo, TokioTimer};

use super::{Front, FrontConfig, JsonErrors, Role, ACCESS_LOG_TARGET};
use crate::api::route::Route;

/// Accepts connections on `listener` until `shutdown` resolves, serving each on this thread
/// what `role` says.
/// Must run inside a `tokio::task::LocalSet`.
// Long: the accept loop and its per-connection task: the bounds on connections, the streaming
// hand-off and hyper's settings read best in one place.
pub async fn serve(
    listener: tokio::net::TcpListener,
    front: Rc<Front>,
    config: FrontConfig,
    role: Role,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_read_timeout)
        .max_buf_size(config.read_buffer_bytes_max)
        .max_headers(config.headers_max)
        .keep_alive(true);
    // The API's slots are every front thread's; the metrics listener (one thread) has its own.
    let active = match role {
        Role::Api => front.slots.clone(),
        Role::Metrics => Arc::new(Slots::default()),
    };
    let mut accept_errors = AcceptErrors::default();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // Out of descriptors and similar: back off briefly instead of spinning, and
                // log once a second at most.
                accept_errors.note(&e, front.clock.now_ms());
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if !active.open(peer.ip(), &config) {
            drop(stream);
            continue;
        }
        let _ = stream.set_nodelay(true);
        let (front, active, builder) = (front.clone(), active.clone(), builder.clone());
        tokio::task::spawn_local(async move {
            let svc = service_fn(|req: Request<Incoming>| {
                let front = front.clone();
                async move {
                    let api = role == Role::Api && !front.is_market_node();
                    // The routes that keep the connection (an upgrade, an event stream) are
                    // answered here, with the request whole; every other goes to `answer`.
                    let streaming = match Route::parse(req.method(), req.uri().path()) {
                        Ok(Route::Stream) if api => Some(Route::Stream),
                        Ok(Route::SiteStream) if api => Some(Route::SiteStream),
                        Ok(Route::SiteEvents) if role == Role::Api && req.method() == Method::GET => {
                            Some(Route::SiteEvents)
                        }
                        _ => None,
                    };
                    if streaming == Some(Route::Stream) {
                        tracing::info!(target: ACCESS_LOG_TARGET, peer = %peer.ip(), front = front.index, "stream requested");
                        return Ok::<_, Infallible>(front.streams.stream(req, peer.ip()).await);
                    }
                    if streaming == Some(Route::SiteStream) {
                        tracing::info!(target: ACCESS_LOG_TARGET, peer = %peer.ip(), front = front.index, "site stream requested");
                        return Ok::<_, Infallible>(front.streams.site_stream(req).await);
                    }
                    if streaming == Some(Route::SiteEvents) {
                        tracing::info!(target: ACCESS_LOG_TARGET, peer = %peer.ip(), front = front.index, "event stream requested");
                        return Ok::<_, Infallible>(front.streams.site_events(req).await);
                    }
                    let (parts, body) = req.into_parts();
                    Ok(front.serve_request(parts, body, peer.ip(), role).await.map(Either::Left))
                }
            });
            let _ = builder.serve_connection(JsonErrors::new(TokioIo::new(stream)), svc).with_upgrades().await;
            active.close(peer.ip());
        });
    }
}

/// The API port's connection slots, shared by every front thread: a bound in all and per
/// address is exact whichever thread accepts.
#[derive(Debug, Default)]
pub struct Slots(Mutex<Connections>);

impl Slots {
    /// Takes a slot for a connection from `peer`; false at either bound.
    fn open(&self, peer: IpAddr, config: &FrontConfig) -> bool {
        super::gate::lock(&self.0).open(peer, config)
    }

    /// Frees the slot of a connection from `peer`.
    fn close(&self, peer: IpAddr) {
        super::gate::lock(&self.0).close(peer);
    }
}

/// The open connections, in all and per address (addresses with none are not kept, so the
/// map holds at most `connections_max` entries).
#[derive(Debug, Default)]
struct Connections {
    total: usize,
    by_address: HashMap<IpAddr, usize>,
}

impl Connections {
    /// Takes a slot for a connection from `peer`; false at either bound.
    fn open(&mut self, peer: IpAddr, config: &FrontConfig) -> bool {
        if self.total >= config.connections_max {
            return false;
        }
        let n = self.by_address.entry(peer).or_insert(0);
        if *n >= config.connections_per_address_max {
            return false;
        }
        *n += 1;
        self.total += 1;
        true
    }

    /// Frees the slot of a connection from `peer`.
    fn close(&mut self, peer: IpAddr) {
        self.total = self.total.saturating_sub(1);
        if let Some(n) = self.by_address.get_mut(&peer) {
            *n -= 1;
            if *n == 0 {
                self.by_address.remove(&peer);
            }
        }
    }
}

/// Accept failures, logged once a second at most with the count since the last line.
#[derive(Debug, Default)]
struct AcceptErrors {
    last_log_ms: i64,
    suppressed: u64,
}

impl AcceptErrors {
    fn note(&mut self, e: &std::io::Error, now_ms: i64) {
        if now_ms - self.last_log_ms < 1_000 {
            self.suppressed += 1;
            return;
        }
        tracing::warn!("accept: {e} ({} more since the last line)", self.suppressed);
        self.last_log_ms = now_ms;
        self.suppressed = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_slots_are_bounded_in_all_and_per_address() {
        let config = FrontConfig { connections_max: 3, connections_per_address_max: 2, ..FrontConfig::default() };
        let (a, b, c): (IpAddr, IpAddr, IpAddr) = ([127, 0, 0, 1].into(), [127, 0, 0, 2].into(), [127, 0, 0, 3].into());
        let mut open = Connections::default();
        assert!(open.open(a, &config) && open.open(a, &config));
        assert!(!open.open(a, &config), "a third from one address");
        assert!(open.open(b, &config));
        assert!(!open.open(c, &config), "over the total");
        open.close(a);
        assert!(open.open(c, &config), "a freed slot is reused");
        open.close(a);
        open.close(b);
        open.close(c);
        assert_eq!((open.total, open.by_address.len()), (0, 0), "nothing kept for closed connections");
    }
}
