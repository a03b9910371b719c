//! The baseline HTTP server of the latency harness: axum serving fixed bytes per path on one
//! thread, so the cost of rampart's front (HTTP layer plus handlers) can be set against a common
//! Rust HTTP stack doing no work, in the same run and with the same client.
//!
//! [`start`] binds `127.0.0.1:0` and serves on a thread of its own running a current-thread tokio
//! runtime: one thread serves everything, as rampart's front does (rationale: the comparison is
//! per core; a multi-threaded baseline would measure the machine, not the stack). A known path
//! (with its exact query string) gets `200` with `Content-Type: application/json` and the given
//! body; any other path gets `404`. Headers, `Authorization` included, are ignored. The server
//! stops when the [`BaselineServer`] is dropped.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use axum::body::Bytes;
use axum::http::header::CONTENT_TYPE;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::sync::oneshot;

/// Most routes [`start`] accepts; more is refused with `InvalidInput`.
pub const ROUTES_MAX: usize = 4096;

/// A running baseline server; dropping it stops the server and joins its threads.
pub struct BaselineServer {
    addr: SocketAddr,
    stops: Vec<oneshot::Sender<()>>,
    threads: Vec<JoinHandle<()>>,
}

impl BaselineServer {
    /// The address it listens on (`127.0.0.1`, an ephemeral port).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for BaselineServer {
    fn drop(&mut self) {
        for stop in self.stops.drain(..) {
            let _ = stop.send(());
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// The bodies of one path, by query string.
#[derive(Default)]
struct Variants {
    /// For a request target without `?`.
    plain: Option<Bytes>,
    /// By the text after `?`.
    by_query: HashMap<String, Bytes>,
}

/// Starts a server answering each of `routes`, `(path with optional "?query", body)`, on one
/// thread. See [`start_threads`].
///
/// Errors: as [`start_threads`].
pub fn start(routes: Vec<(String, Vec<u8>)>) -> io::Result<BaselineServer> {
    start_threads(routes, 1)
}

/// Starts a server answering each of `routes` on `threads` threads, each a current-thread runtime
/// accepting from the same listening socket (as several single-threaded fronts would).
/// The harness runs a two-thread one beside the usual one to measure what a second front thread
/// could gain on this machine, load generator included.
///
/// Errors: `InvalidInput` for a path that does not start with `/`, holds `{`, `}`, `*` or `:`
/// (axum's route syntax) or whitespace, appears twice, or for more than [`ROUTES_MAX`] routes;
/// otherwise whatever binding the socket, building the runtime or spawning the thread returns.
pub fn start_threads(routes: Vec<(String, Vec<u8>)>, threads: usize) -> io::Result<BaselineServer> {
    start_threads_on(routes, threads, None)
}

/// [`start_threads`], each thread on `cpus` when given (as `taskset -c` puts rampart on them), so
/// both servers have the same CPUs.
pub fn start_threads_on(
    routes: Vec<(String, Vec<u8>)>,
    threads: usize,
    cpus: Option<Vec<usize>>,
) -> io::Result<BaselineServer> {
    let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
    if routes.len() > ROUTES_MAX {
        return Err(invalid(format!("{} routes, at most {ROUTES_MAX}", routes.len())));
    }
    let mut paths: HashMap<String, Variants> = HashMap::new();
    for (target, body) in routes {
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p.to_owned(), Some(q.to_owned())),
            None => (target.clone(), None),
        };
        let bad = |c: char| matches!(c, '{' | '}' | '*' | ':') || c.is_whitespace() || c.is_control();
        if !path.starts_with('/') || path.contains(bad) || query.as_deref().is_some_and(|q| q.contains(bad)) {
            return Err(invalid(format!("route {target:?} is not a plain absolute path")));
        }
        let variants = paths.entry(path).or_default();
        let previous = match query {
            Some(q) => variants.by_query.insert(q, Bytes::from(body)),
            None => variants.plain.replace(Bytes::from(body)),
        };
        if previous.is_some() {
            return Err(invalid(format!("route {target:?} given twice")));
        }
    }
    let mut app = Router::new();
    for (path, variants) in paths {
        let variants = Arc::new(variants);
        app = app.route(&path, get(move |uri: Uri| answer(variants, uri)));
    }
    let app = app.fallback(|| async { StatusCode::NOT_FOUND });

    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let mut server = BaselineServer { addr, stops: Vec::new(), threads: Vec::new() };
    for i in 0..threads.max(1) {
        let (listener, app) = (listener.try_clone()?, app.clone());
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let listener = {
            let _inside = runtime.enter();
            tokio::net::TcpListener::from_std(listener)?
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let cpus = cpus.clone();
        let thread = std::thread::Builder::new().name(format!("baseline-http-{i}")).spawn(move || {
            if let Some(cpus) = &cpus {
                pin_this_thread(cpus);
            }
            runtime.block_on(async move {
                // A dropped sender stops the server too. Leaving `block_on` and dropping the
                // runtime cancels every connection task.
                tokio::select! {
                    _ = axum::serve(listener, app) => {}
                    _ = stopped => {}
                }
            });
        })?;
        server.stops.push(stop);
        server.threads.push(thread);
    }
    Ok(server)
}

/// Runs the calling thread on `cpus` only (ignored when the kernel refuses, as `taskset` would
/// say: the figure is then the scheduler's placement, which the run's notes cannot tell apart).
#[allow(unsafe_code)] // two libc calls (the set, the affinity), with no safe wrapper among the workspace's crates
fn pin_this_thread(cpus: &[usize]) {
    // SAFETY: `set` is a plain bit set owned by this frame; `sched_setaffinity(0, ..)` reads it
    // for the calling thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c, &mut set);
        }
        let _ = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// The body for the request's query string, or 404.
async fn answer(variants: Arc<Variants>, uri: Uri) -> Response {
    let body = match uri.query() {
        Some(q) => variants.by_query.get(q),
        None => variants.plain.as_ref(),
    };
    match body {
        Some(body) => ([(CONTENT_TYPE, "application/json")], body.clone()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_routes_are_refused() {
        for bad in ["v1/x", "/v1/{x}", "/v1/*x", "/v1/:x", "/v1/a b"] {
            let r = start(vec![(bad.to_owned(), b"{}".to_vec())]);
            assert_eq!(r.err().map(|e| e.kind()), Some(io::ErrorKind::InvalidInput), "{bad}");
        }
        let twice = vec![("/a?x=1".to_owned(), Vec::new()), ("/a?x=1".to_owned(), Vec::new())];
        assert!(start(twice).is_err());
    }
}
