//! The process's one HTTP client (issue #46): connect to the first address that accepts, TLS for
//! `https` (the roots of [`crate::tls_config`]), the HTTP/1.1 handshake with its driver task, and
//! the head every request carries (`Host`, `User-Agent`). Webhook and Telegram delivery
//! (`rampart_delivery`, which keeps connections alive in its pool and re-checks every address
//! with [`crate::ssrf`]) and the venues' REST calls (`rampart_venue::rest`) both go through it.
//!
//! Which addresses to try is the caller's: delivery hands in addresses the public-address guard
//! just checked; the venues' configured URLs are resolved with [`resolve`]. The driver task is a
//! `spawn_local`: callers run on a `LocalSet` (the delivery and venue-REST threads).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderValue, HOST, USER_AGENT};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::ssrf::{Host, WebhookUrl};
use crate::USER_AGENT_VALUE;

/// An open HTTP/1.1 client connection: its request handle and the task driving it (stopped
/// when the connection is dropped), and since when it has been idle.
pub struct Conn {
    /// Sends requests on it.
    pub sender: SendRequest<Full<Bytes>>,
    driver: tokio::task::JoinHandle<()>,
    /// When it was opened or last handed back idle.
    pub idle_since: Instant,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// Why no connection could be opened (connect, TLS or the HTTP handshake), as a sentence for
/// the caller's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoConnection(pub String);

impl std::fmt::Display for NoConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NoConnection {}

/// The addresses `url`'s host resolves to (an IP literal: itself), unchecked: for URLs from the
/// operator's configuration. A client's URL goes through [`crate::ssrf::resolve_checked`].
pub async fn resolve(url: &WebhookUrl) -> Result<Vec<SocketAddr>, NoConnection> {
    let host = match &url.host {
        Host::Name(n) => n.clone(),
        Host::Ip(ip) => return Ok(vec![SocketAddr::new(*ip, url.port)]),
    };
    let found = tokio::net::lookup_host((host.as_str(), url.port)).await;
    let addrs: Vec<SocketAddr> = found.map_err(|e| NoConnection(format!("resolve {host}: {e}")))?.collect();
    match addrs.is_empty() {
        true => Err(NoConnection(format!("resolve {host}: no address"))),
        false => Ok(addrs),
    }
}

/// Opens a connection to the first of `addrs` that accepts, with TLS for `https` (`tls`: the
/// client configuration; `None` refuses `https`), and shakes hands; the address it reached.
pub async fn open(
    addrs: &[SocketAddr],
    url: &WebhookUrl,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<(SocketAddr, Conn), NoConnection> {
    let mut last = String::from("no address");
    let mut stream = None;
    for &addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => {
                stream = Some((addr, s));
                break;
            }
            Err(e) => last = format!("connect {addr}: {e}"),
        }
    }
    let Some((addr, stream)) = stream else { return Err(NoConnection(last)) };
    let _ = stream.set_nodelay(true);
    if !url.https {
        return Ok((addr, handshake(TokioIo::new(stream)).await?));
    }
    let name = match &url.host {
        Host::Name(n) => rustls::pki_types::ServerName::try_from(n.clone()),
        Host::Ip(ip) => Ok(rustls::pki_types::ServerName::IpAddress((*ip).into())),
    };
    let Ok(name) = name else { return Err(NoConnection("invalid TLS server name".into())) };
    let Some(tls) = tls else { return Err(NoConnection("TLS is not available".into())) };
    match tokio_rustls::TlsConnector::from(tls).connect(name, stream).await {
        Ok(s) => Ok((addr, handshake(TokioIo::new(s)).await?)),
        Err(e) => Err(NoConnection(format!("TLS: {e}"))),
    }
}

/// The HTTP/1.1 handshake over `io`, its driver task started.
async fn handshake<I>(io: I) -> Result<Conn, NoConnection>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .title_case_headers(true)
        .handshake(io)
        .await
        .map_err(|e| NoConnection(format!("HTTP: {e}")))?;
    let driver = tokio::task::spawn_local(async move {
        let _ = conn.await;
    });
    Ok(Conn { sender, driver, idle_since: Instant::now() })
}

/// Why a request could not be made from a URL (its parts were parsed strictly; this is the
/// last check before the bytes go out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadRequest {
    /// The path and query are not a valid request target.
    Path,
    /// The authority is not a valid `Host` header value.
    Host,
}

impl std::fmt::Display for BadRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BadRequest::Path => "invalid path",
            BadRequest::Host => "invalid host",
        })
    }
}

/// A request to `url` with `body`, carrying what every request of rampart carries: its `Host`
/// and rampart's `User-Agent`; the caller adds the rest of its head.
pub fn request(method: Method, url: &WebhookUrl, body: Bytes) -> Result<Request<Full<Bytes>>, BadRequest> {
    let mut request = Request::new(Full::new(body));
    *request.method_mut() = method;
    *request.uri_mut() = url.path_and_query.parse().map_err(|_| BadRequest::Path)?;
    let host = HeaderValue::from_str(&url.authority).map_err(|_| BadRequest::Host)?;
    request.headers_mut().insert(HOST, host);
    request.headers_mut().insert(USER_AGENT, HeaderValue::from_static(USER_AGENT_VALUE));
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ssrf::parse;

    #[test]
    fn a_request_carries_its_host_and_the_user_agent() {
        let url = parse("http://127.0.0.1:9/a/b?c=1").expect("url");
        let r = request(Method::GET, &url, Bytes::new()).expect("request");
        assert_eq!((r.method(), r.uri().to_string().as_str()), (&Method::GET, "/a/b?c=1"));
        assert_eq!(r.headers()[HOST], "127.0.0.1:9");
        assert_eq!(r.headers()[USER_AGENT], USER_AGENT_VALUE);
    }

    /// The real thing on loopback: a refused port is a sentence naming the address; a
    /// listening one answers through the connection.
    #[test]
    fn a_connection_opens_to_the_first_address_that_accepts() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let good = listener.local_addr().expect("addr");
            let closed = {
                let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
                l.local_addr().expect("addr")
            };
            tokio::task::spawn_local(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let (mut s, _) = listener.accept().await.expect("accept");
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n").await;
            });
            let url = parse(&format!("http://{good}/x")).expect("url");
            let refused = open(&[closed], &url, None).await.err().expect("refused");
            assert!(refused.0.starts_with(&format!("connect {closed}:")), "{refused}");
            let (reached, mut conn) = open(&[closed, good], &url, None).await.expect("the second accepts");
            assert_eq!(reached, good);
            let answer = conn.sender.send_request(request(Method::GET, &url, Bytes::new()).expect("r")).await;
            assert_eq!(answer.expect("an answer").status(), 204);
            let held = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let at = held.local_addr().expect("addr");
            let https = parse(&format!("https://{at}/x")).expect("url");
            assert_eq!(open(&[at], &https, None).await.err(), Some(NoConnection("TLS is not available".into())));
        });
    }
}
