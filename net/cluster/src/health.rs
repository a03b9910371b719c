//! `rampart deliver`'s own `/healthz` and `/metrics`, on the address given by `--listen`: what
//! an operator watches on a delivery node. Healthy when every worker thread is connected to the
//! firings stream and the last storage call succeeded (or none failed); 503 otherwise, with why.
//! Metrics (OpenMetrics text): attempts by outcome, firings in hand, connected workers, storage
//! errors. Anything but `GET /healthz` and `GET /metrics` is 404.

use std::convert::Infallible;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use rampart_state::json::Json;

/// What the workers of one process report, shared with the health endpoint.
pub struct WorkerStats {
    workers: usize,
    /// Worker threads connected to the stream now.
    pub connected: Gauge,
    /// Firings held by the workers now.
    pub in_hand: Gauge,
    /// Attempts that ended delivered.
    pub delivered: Counter,
    /// Attempts that failed with another one due (asked again after the delay).
    pub rescheduled: Counter,
    /// Attempts that failed for good (the third).
    pub failed: Counter,
    /// Storage calls that failed (read or record; the firing is asked again).
    pub storage_errors: Counter,
    /// Attempts cut to give their slot to another account under its part of a full bound
    /// (`rampart_delivery::fair`; the firing waits and is sent again).
    pub cut: Counter,
    /// First deliveries taken from the delivery their message carried, without reading the row
    /// (`crate::DELIVERY_HEADER`).
    pub carried: Counter,
    last_storage_error_ms: AtomicI64,
    last_storage_ok_ms: AtomicI64,
    registry: Registry,
}

impl WorkerStats {
    /// Stats for `workers` worker threads, registered for `/metrics`.
    pub fn new(workers: usize) -> WorkerStats {
        let (connected, in_hand) = (Gauge::default(), Gauge::default());
        let (delivered, rescheduled, failed, storage_errors) =
            (Counter::default(), Counter::default(), Counter::default(), Counter::default());
        let mut registry = Registry::with_prefix("rampart_deliver");
        registry.register("workers_connected", "Worker threads connected to the firings stream", connected.clone());
        registry.register("in_hand", "Firings held by the workers", in_hand.clone());
        registry.register("delivered", "Attempts that ended delivered", delivered.clone());
        registry.register("rescheduled", "Failed attempts with another one due", rescheduled.clone());
        registry.register("failed", "Attempts that failed for good", failed.clone());
        let cut = Counter::default();
        registry.register(
            "cuts",
            "Attempts cut to give their slot to another account under its part of a full bound (sent again)",
            cut.clone(),
        );
        registry.register("storage_errors", "Storage calls that failed", storage_errors.clone());
        let carried = Counter::default();
        registry.register(
            "carried",
            "First deliveries taken from the delivery their message carried, without reading the row",
            carried.clone(),
        );
        WorkerStats {
            workers,
            connected,
            in_hand,
            delivered,
            rescheduled,
            failed,
            storage_errors,
            cut,
            carried,
            last_storage_error_ms: AtomicI64::new(0),
            last_storage_ok_ms: AtomicI64::new(0),
            registry,
        }
    }

    /// Records a storage call's outcome at `now_ms`.
    pub fn storage(&self, ok: bool, now_ms: i64) {
        if ok {
            self.last_storage_ok_ms.fetch_max(now_ms, Relaxed);
        } else {
            self.storage_errors.inc();
            self.last_storage_error_ms.fetch_max(now_ms, Relaxed);
        }
    }

    /// The `/healthz` answer: status and body.
    pub fn healthz(&self) -> (u16, String) {
        let connected = usize::try_from(self.connected.get()).unwrap_or(0);
        let storage_ok = self.last_storage_error_ms.load(Relaxed) <= self.last_storage_ok_ms.load(Relaxed);
        let mut j = Json::with_capacity(256);
        let status = match (connected == self.workers, storage_ok) {
            (true, true) => {
                j.raw("{\"status\":\"ok\"");
                200
            }
            (false, _) => {
                j.raw("{\"error\":\"not every worker is connected to the firings stream\",\"status\":\"degraded\"");
                503
            }
            (true, false) => {
                j.raw("{\"error\":\"storage cannot be read or written\",\"status\":\"degraded\"");
                503
            }
        };
        j.raw(",\"role\":\"deliver\",\"workers\":").int(self.workers as i64);
        j.raw(",\"connected\":").int(connected as i64).raw(",\"inHand\":").int(self.in_hand.get());
        j.raw(",\"storage\":{\"writable\":").bool(storage_ok).raw("}}");
        (status, j.finish())
    }

    /// The `/metrics` exposition.
    pub fn metrics(&self) -> String {
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!("metrics: {e}");
        }
        out
    }
}

/// Serves `/healthz` and `/metrics` on `listener` until the task is dropped.
pub async fn serve(listener: tokio::net::TcpListener, stats: Arc<WorkerStats>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let stats = stats.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let stats = stats.clone();
                async move { Ok::<_, Infallible>(answer(&req, &stats)) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, svc).await;
        });
    }
}

fn answer(req: &Request<Incoming>, stats: &WorkerStats) -> Response<Full<Bytes>> {
    let (status, kind, body) = match (req.method().as_str(), req.uri().path()) {
        ("GET", "/healthz") => {
            let (status, body) = stats.healthz();
            (status, "application/json", body)
        }
        ("GET", "/readyz") => {
            // Ready exactly when healthy: every worker on the stream and storage answering.
            let (status, body) = stats.healthz();
            (status, "application/json", body)
        }
        ("GET", "/livez") => {
            let body = format!("{{\"status\":\"live\",\"role\":\"deliver\",\"workers\":{}}}", stats.workers);
            (200, "application/json", body)
        }
        ("GET", "/metrics") => (200, rampart_delivery::metrics::CONTENT_TYPE, stats.metrics()),
        _ => (404, "application/json", "{\"error\":\"not found\"}".to_owned()),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = hyper::header::HeaderValue::from_str(kind) {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn healthy_only_with_every_worker_connected_and_storage_answering() {
        let s = WorkerStats::new(2);
        assert_eq!(s.healthz().0, 503, "no worker connected yet");
        s.connected.inc();
        s.connected.inc();
        assert_eq!(s.healthz().0, 200);
        s.storage(false, 1_000);
        let (status, body) = s.healthz();
        assert_eq!(status, 503);
        assert!(body.contains("\"writable\":false"), "{body}");
        s.storage(true, 1_001);
        assert_eq!(s.healthz().0, 200, "a later success clears it");
        s.delivered.inc();
        let m = s.metrics();
        assert!(m.contains("rampart_deliver_delivered_total 1"), "{m}");
        assert!(m.contains("rampart_deliver_workers_connected 2"), "{m}");
        assert!(m.contains("rampart_deliver_storage_errors_total 1"), "{m}");
    }
}
