//! A may_minihttp front serving the same bytes as rampart for two reads, for the front comparison
//! in `perf/front-compare.md` (robustness probe and wrk figures against the real hyper front).
//!
//! It answers `GET /v1/symbols/BTCUSDT` and `GET /v1/exchanges/binance/symbols` with bodies
//! fetched ONCE at start from a running rampart (`--from http://127.0.0.1:PORT --key rk_...`,
//! one plain `TcpStream` GET per path), so body sizes match the real server's; they are not
//! refreshed afterwards (the real server's prices move). The Bearer-key check is the same as the
//! real front's (401 `{"error":"missing API key"}` / `{"error":"invalid API key"}`), but against
//! the single `--key` only, with no SQLite lookup and no rate limiter (the bench plan's limits are
//! effectively unbounded, so the real server never refuses either).
//!
//! Configuration that may_minihttp/may allow from outside: `may::config().set_workers(n)` (may
//! defaults to one worker per CPU), `set_worker_pin(bool)` (may pins worker i to core i by
//! default, which would put worker 0 on rampart's shard core), and the coroutine stack size. Here:
//! `--workers` (default 1, like rampart's single front thread) and `--pin` (default off; pin the
//! process with `taskset` instead). Nothing else of the connection is reachable: the service gets
//! a parsed request and a response, never the socket, so there is no way to set a read timeout,
//! bound the head, close the connection, or decode a chunked body.
//!
//! Control: `--server hyper` serves the same static bytes, same routes and same key check with
//! hyper 1 (http1) on a current-thread tokio runtime, configured like rampart's front
//! (`FrontConfig::default()`: 10 s header read timeout, 64 KiB read buffer, 64 headers). It
//! separates the cost of the HTTP layer from the cost of rampart's handlers, which build every
//! body per request.
//!
//! Body handling, default ("hardened", the best we can do from our side of the API): the
//! Content-Length headers are validated before `Request::body()` is called (that method
//! `unwrap()`s the parse and panics on a malformed value), a body with a valid length is drained,
//! and `Transfer-Encoding` is refused with 501 (the crate cannot decode chunked bodies, and cannot
//! close the connection, so the chunk bytes are then parsed as the next request). With `--naive`
//! the service reads every body through `Request::body()` as the crate's own `post` example does.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use may_minihttp::{HttpServer, HttpService, Request, Response};

const SYMBOL_PATH: &str = "/v1/symbols/BTCUSDT";
const SYMBOLS_PATH: &str = "/v1/exchanges/binance/symbols";
/// Bodies longer than this are still drained (leaving them unread would desynchronise the
/// connection), but counted as refused.
const BODY_MAX: usize = 1024 * 1024;

#[derive(Clone)]
struct Bodies {
    /// Expected `Authorization` header value: `Bearer <key>`.
    key: &'static str,
    symbol: &'static str,
    symbols: &'static str,
    naive: bool,
}

/// What the Content-Length / Transfer-Encoding headers say about the body.
enum Framing {
    None,
    Length(usize),
    Bad(&'static str),
    Chunked,
}

fn framing(req: &Request) -> Framing {
    let mut length: Option<usize> = None;
    for h in req.headers() {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Framing::Chunked;
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            let parsed = std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse::<usize>().ok());
            match (parsed, length) {
                (None, _) => return Framing::Bad("{\"error\":\"invalid Content-Length\"}"),
                (Some(n), Some(prev)) if n != prev => {
                    return Framing::Bad("{\"error\":\"conflicting Content-Length headers\"}")
                }
                (Some(n), _) => length = Some(n),
            }
        }
    }
    match length {
        None | Some(0) => Framing::None,
        Some(n) => Framing::Length(n),
    }
}

fn json(rsp: &mut Response, code: usize, reason: &'static str, body: &'static str) {
    rsp.status_code(code, reason);
    rsp.header("Content-Type: application/json");
    rsp.body(body);
}

impl Bodies {
    fn answer(&self, req: &Request, rsp: &mut Response) {
        let path = req.path().split('?').next().unwrap_or("");
        if path != "/v1" && !path.starts_with("/v1/") {
            return json(rsp, 404, "Not Found", "{\"error\":\"not found\"}");
        }
        let auth = req.headers().iter().find(|h| h.name.eq_ignore_ascii_case("authorization"));
        let Some(auth) = auth else {
            return json(rsp, 401, "Unauthorized", "{\"error\":\"missing API key\"}");
        };
        if auth.value != self.key.as_bytes() {
            return json(rsp, 401, "Unauthorized", "{\"error\":\"invalid API key\"}");
        }
        let get = matches!(req.method(), "GET" | "HEAD");
        match path {
            SYMBOL_PATH | SYMBOLS_PATH if !get => {
                rsp.header("Allow: GET");
                json(rsp, 405, "Method Not Allowed", "{\"error\":\"method not allowed\"}")
            }
            SYMBOL_PATH => json(rsp, 200, "OK", self.symbol),
            SYMBOLS_PATH => json(rsp, 200, "OK", self.symbols),
            _ => json(rsp, 404, "Not Found", "{\"error\":\"not found\"}"),
        }
    }
}

impl HttpService for Bodies {
    fn call(&mut self, req: Request, rsp: &mut Response) -> io::Result<()> {
        if self.naive {
            // The crate's documented way: `body()` parses Content-Length itself (unwrap) and the
            // reader drains the rest on drop.
            self.answer(&req, rsp);
            let mut sink = Vec::new();
            req.body().read_to_end(&mut sink)?;
            return Ok(());
        }
        match framing(&req) {
            Framing::Chunked => {
                json(rsp, 501, "Not Implemented", "{\"error\":\"Transfer-Encoding is not supported\"}");
                Ok(())
            }
            Framing::Bad(body) => {
                json(rsp, 400, "Bad Request", body);
                Ok(())
            }
            Framing::None => {
                self.answer(&req, rsp);
                Ok(())
            }
            Framing::Length(n) => {
                if n > BODY_MAX {
                    json(rsp, 413, "Payload Too Large", "{\"error\":\"body too large\"}");
                } else {
                    self.answer(&req, rsp);
                }
                // Drain exactly `n` bytes; the reader stops at the length we validated.
                io::copy(&mut req.body(), &mut io::sink())?;
                Ok(())
            }
        }
    }
}

type HyperResp = hyper::Response<Full<Bytes>>;

fn hyper_json(status: StatusCode, body: &'static str) -> HyperResp {
    let mut r = hyper::Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

impl Bodies {
    /// The same answers as [`Bodies::answer`], for the hyper control.
    fn hyper_answer(&self, req: &hyper::Request<Incoming>) -> HyperResp {
        let path = req.uri().path();
        if path != "/v1" && !path.starts_with("/v1/") {
            return hyper_json(StatusCode::NOT_FOUND, "{\"error\":\"not found\"}");
        }
        let Some(auth) = req.headers().get(AUTHORIZATION) else {
            return hyper_json(StatusCode::UNAUTHORIZED, "{\"error\":\"missing API key\"}");
        };
        if auth.as_bytes() != self.key.as_bytes() {
            return hyper_json(StatusCode::UNAUTHORIZED, "{\"error\":\"invalid API key\"}");
        }
        let get = matches!(*req.method(), Method::GET | Method::HEAD);
        match path {
            SYMBOL_PATH | SYMBOLS_PATH if !get => {
                let mut r = hyper_json(StatusCode::METHOD_NOT_ALLOWED, "{\"error\":\"method not allowed\"}");
                r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET"));
                r
            }
            SYMBOL_PATH => hyper_json(StatusCode::OK, self.symbol),
            SYMBOLS_PATH => hyper_json(StatusCode::OK, self.symbols),
            _ => hyper_json(StatusCode::NOT_FOUND, "{\"error\":\"not found\"}"),
        }
    }
}

/// The hyper control: rampart's front configuration, static bodies.
fn serve_hyper(listen: &str, bodies: Bodies) -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        println!("listening on {listen} (hyper control, one current-thread tokio runtime)");
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(Duration::from_secs(10))
            .max_buf_size(64 * 1024)
            .max_headers(64)
            .keep_alive(true);
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    eprintln!("minihttp_front: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let (builder, bodies) = (builder.clone(), bodies.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req: hyper::Request<Incoming>| {
                    let resp = bodies.hyper_answer(&req);
                    async move { Ok::<_, std::convert::Infallible>(resp) }
                });
                let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
            });
        }
    })
}

/// One GET against the real rampart; returns the body of a 200.
fn fetch(from: &str, path: &str, key: &str) -> Result<String, String> {
    let addr = from.strip_prefix("http://").unwrap_or(from).trim_end_matches('/');
    let mut s = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    let req =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).map_err(|e| format!("write: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8(raw).map_err(|_| "response is not UTF-8".to_owned())?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no end of head")?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("{path}: {}", head.lines().next().unwrap_or("")));
    }
    let length = head
        .lines()
        .find_map(|l| l.split_once(':').filter(|(n, _)| n.eq_ignore_ascii_case("content-length")))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .ok_or("no Content-Length")?;
    if body.len() != length {
        return Err(format!("{path}: body is {} bytes, Content-Length {length}", body.len()));
    }
    Ok(body.to_owned())
}

struct Args {
    listen: String,
    from: String,
    key: String,
    workers: usize,
    pin: bool,
    naive: bool,
    hyper: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        listen: "127.0.0.1:18182".to_owned(),
        from: String::new(),
        key: String::new(),
        workers: 1,
        pin: false,
        naive: false,
        hyper: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--listen" => a.listen = value()?,
            "--from" => a.from = value()?,
            "--key" => a.key = value()?,
            "--workers" => a.workers = value()?.parse().map_err(|_| "--workers takes a number")?,
            "--pin" => a.pin = true,
            "--naive" => a.naive = true,
            "--server" => match value()?.as_str() {
                "minihttp" => a.hyper = false,
                "hyper" => a.hyper = true,
                other => return Err(format!("invalid --server '{other}'. Allowed: minihttp, hyper")),
            },
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    if a.from.is_empty() || a.key.is_empty() {
        return Err("--from http://HOST:PORT and --key KEY are required".to_owned());
    }
    Ok(a)
}

fn main() -> std::process::ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("minihttp_front: {e}\nusage: minihttp_front --from http://127.0.0.1:PORT --key rk_... [--listen ADDR] [--server minihttp|hyper] [--workers N] [--pin] [--naive]");
            return std::process::ExitCode::from(2);
        }
    };
    let (symbol, symbols) =
        match (fetch(&args.from, SYMBOL_PATH, &args.key), fetch(&args.from, SYMBOLS_PATH, &args.key)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("minihttp_front: fetching bodies from {}: {e}", args.from);
                return std::process::ExitCode::from(1);
            }
        };
    println!("bodies: {SYMBOL_PATH} {} bytes, {SYMBOLS_PATH} {} bytes", symbol.len(), symbols.len());
    let service = Bodies {
        key: Box::leak(format!("Bearer {}", args.key).into_boxed_str()),
        symbol: Box::leak(symbol.into_boxed_str()),
        symbols: Box::leak(symbols.into_boxed_str()),
        naive: args.naive,
    };
    if args.hyper {
        return match serve_hyper(&args.listen, service) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("minihttp_front: {}: {e}", args.listen);
                std::process::ExitCode::from(1)
            }
        };
    }
    may::config().set_workers(args.workers);
    may::config().set_worker_pin(args.pin);
    let server = match HttpServer(service).start(&args.listen) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("minihttp_front: binding {}: {e}", args.listen);
            return std::process::ExitCode::from(1);
        }
    };
    println!(
        "listening on {} ({} worker(s), pinning {}, {} bodies)",
        args.listen,
        args.workers,
        if args.pin { "on" } else { "off" },
        if args.naive { "naive" } else { "hardened" }
    );
    let _ = server.join();
    std::process::ExitCode::SUCCESS
}
