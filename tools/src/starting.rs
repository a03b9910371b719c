//! The port's answer while the process is not serving yet: while the live feed lists its
//! venues, every request gets `503 {"error":"starting","status":"starting"}` with `Retry-After:
//! 1`, so clients and health checks see a starting service instead of a refused or silent port;
//! while a market node waits as its partition's standby (issue #50), `503` with the standby's
//! state and the owner's epoch ([`Phase::set`]). `/livez` answers `200` with the same state
//! meanwhile: the process works, it is only not ready.
//!
//! It runs on its own thread with a current-thread runtime over the already bound listener;
//! [`Starting::finish`] stops it and hands the listener back for the real front. Requests in
//! flight at that moment are cut (their clients retry, as the 503 told them to). Connections are
//! closed after each answer, and at most [`STARTING_CONNECTIONS_MAX`] are served at once (more are closed
//! at accept), so this phase holds little memory or descriptors whatever clients do.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, RETRY_AFTER};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::oneshot;

/// Connections served at once at most while starting.
pub const STARTING_CONNECTIONS_MAX: usize = 256;
/// The body of every answer while the venues are listed.
const BODY: &str = "{\"error\":\"starting\",\"status\":\"starting\"}";

/// What the port says while waiting: the 503's body and `/livez`'s, changed as the wait goes.
#[derive(Clone, Debug)]
pub struct Phase(Arc<std::sync::Mutex<(String, String)>>);

impl Phase {
    /// `not_ready` for every path, `live` for `/livez`.
    pub fn new(not_ready: String, live: String) -> Phase {
        Phase(Arc::new(std::sync::Mutex::new((not_ready, live))))
    }

    /// Says `not_ready` and `live` from now on.
    pub fn set(&self, not_ready: String, live: String) {
        if let Ok(mut p) = self.0.lock() {
            *p = (not_ready, live);
        }
    }

    fn bodies(&self) -> (String, String) {
        self.0.lock().map(|p| p.clone()).unwrap_or_default()
    }
}

/// The responder, running.
pub struct Starting {
    stop: oneshot::Sender<()>,
    thread: JoinHandle<std::io::Result<std::net::TcpListener>>,
}

impl Starting {
    /// Starts answering "starting" on `listener` (bound, non-blocking).
    pub fn start(listener: std::net::TcpListener) -> std::io::Result<Starting> {
        let live = "{\"status\":\"live\",\"state\":\"starting\"}".to_owned();
        Starting::start_as(listener, Phase::new(BODY.to_owned(), live))
    }

    /// Starts answering what `phase` says on `listener` (bound, non-blocking).
    pub fn start_as(listener: std::net::TcpListener, phase: Phase) -> std::io::Result<Starting> {
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new().name("starting".into()).spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(serve(listener, stopped, phase))
        })?;
        Ok(Starting { stop, thread })
    }

    /// Stops answering and gives the listener back.
    pub fn finish(self) -> std::io::Result<std::net::TcpListener> {
        let _ = self.stop.send(());
        match self.thread.join() {
            Ok(r) => r,
            Err(_) => Err(std::io::Error::other("the starting responder panicked")),
        }
    }
}

async fn serve(
    listener: std::net::TcpListener,
    mut stopped: oneshot::Receiver<()>,
    phase: Phase,
) -> std::io::Result<std::net::TcpListener> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let open = Arc::new(AtomicUsize::new(0));
    let mut builder = http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(5)).keep_alive(false);
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => break,
            a = listener.accept() => a,
        };
        let Ok((stream, _)) = accepted else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if open.load(Ordering::Relaxed) >= STARTING_CONNECTIONS_MAX {
            continue;
        }
        open.fetch_add(1, Ordering::Relaxed);
        let (open, builder, phase) = (open.clone(), builder.clone(), phase.clone());
        tokio::spawn(async move {
            let svc = service_fn(|req: hyper::Request<hyper::body::Incoming>| {
                let (not_ready, live) = phase.bodies();
                let answered = match req.uri().path() {
                    "/livez" => answer(StatusCode::OK, live),
                    _ => answer(StatusCode::SERVICE_UNAVAILABLE, not_ready),
                };
                async { Ok::<_, Infallible>(answered) }
            });
            let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
            open.fetch_sub(1, Ordering::Relaxed);
        });
    }
    let listener = listener.into_std()?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

fn answer(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(RETRY_AFTER, HeaderValue::from_static("1"));
    h.insert(CONNECTION, HeaderValue::from_static("close"));
    resp
}
