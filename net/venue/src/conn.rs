//! A WebSocket client connection on a shard's glommio executor: resolve, connect, TLS (rustls),
//! the opening handshake, then frames through [`WsCodec`] with reads bounded in time.
//!
//! Resolution runs on glommio's blocking pool (the system resolver blocks); everything else is
//! io_uring. Every step has a time limit ([`CONNECT_TIMEOUT`] for connect, TLS and handshake).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use futures_lite::future;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;

use super::ws::{Handshake, WsCodec, WsUrl};

/// Time allowed to resolve, connect, negotiate TLS and complete the handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The byte stream under a WebSocket.
pub enum Io {
    /// `ws://`.
    Plain(TcpStream),
    /// `wss://`.
    Tls(Box<futures_rustls::client::TlsStream<TcpStream>>),
}

impl Io {
    /// Reads some bytes; `Ok(0)` at end of stream.
    pub async fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Io::Plain(s) => s.read(buf).await,
            Io::Tls(s) => s.read(buf).await,
        }
    }

    /// Reads some bytes, or `None` when `limit` passes first.
    pub async fn read_within(&mut self, buf: &mut [u8], limit: Duration) -> Option<std::io::Result<usize>> {
        future::or(async { Some(self.read(buf).await) }, async {
            glommio::timer::sleep(limit).await;
            None
        })
        .await
    }

    /// Writes all of `bytes` and flushes.
    pub async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Io::Plain(s) => {
                s.write_all(bytes).await?;
                s.flush().await
            }
            Io::Tls(s) => {
                s.write_all(bytes).await?;
                s.flush().await
            }
        }
    }

    /// Closes the write side (best effort).
    pub async fn close(&mut self) {
        let _ = match self {
            Io::Plain(s) => s.close().await,
            Io::Tls(s) => s.close().await,
        };
    }
}

/// Why a venue connection could not be opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnectError {
    /// A step did not finish within its time (resolve, TLS, WebSocket handshake).
    TimedOut(&'static str),
    /// The host name could not be resolved.
    Resolve(String),
    /// No address could be connected (the last error).
    Connect(String),
    /// `wss://` without a TLS configuration, or a host that is not a valid TLS name.
    TlsSetup(&'static str),
    /// The TLS handshake failed.
    Tls(String),
    /// The WebSocket handshake failed: send, read, close, or a refused answer.
    Handshake(String),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::TimedOut(what) => write!(f, "{what} timed out"),
            ConnectError::Resolve(e) => write!(f, "resolve: {e}"),
            ConnectError::Connect(e) => write!(f, "connect: {e}"),
            ConnectError::TlsSetup(e) => f.write_str(e),
            ConnectError::Tls(e) => write!(f, "TLS: {e}"),
            ConnectError::Handshake(e) => write!(f, "WebSocket handshake: {e}"),
        }
    }
}

impl std::error::Error for ConnectError {}

async fn within<T>(
    limit: Duration,
    what: &'static str,
    f: impl std::future::Future<Output = Result<T, ConnectError>>,
) -> Result<T, ConnectError> {
    future::or(f, async {
        glommio::timer::sleep(limit).await;
        Err(ConnectError::TimedOut(what))
    })
    .await
}

/// Opens `url` and completes the WebSocket handshake; bytes that followed the handshake are
/// left in `codec`.
pub async fn connect(
    url: &WsUrl,
    tls: Option<Arc<rustls::ClientConfig>>,
    codec: &mut WsCodec,
) -> Result<Io, ConnectError> {
    let host_port = (url.host.clone(), url.port);
    let addrs: Vec<SocketAddr> = within(CONNECT_TIMEOUT, "resolve", async {
        glommio::executor()
            .spawn_blocking(move || host_port.to_socket_addrs().map(|a| a.collect::<Vec<_>>()))
            .await
            .map_err(|e| ConnectError::Resolve(format!("{}: {e}", url.host)))
    })
    .await?;
    let mut last = ConnectError::Resolve(format!("{} resolves to no address", url.host));
    let mut stream = None;
    for addr in addrs {
        match TcpStream::connect_timeout(addr, CONNECT_TIMEOUT).await {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = ConnectError::Connect(format!("{addr}: {e}")),
        }
    }
    let stream = stream.ok_or(last)?;
    let _ = stream.set_nodelay(true);
    let mut io = if url.tls {
        let config = tls.ok_or(ConnectError::TlsSetup("TLS is not available"))?;
        let name = rustls::pki_types::ServerName::try_from(url.host.clone())
            .map_err(|_| ConnectError::TlsSetup("invalid TLS server name"))?;
        let s = within(CONNECT_TIMEOUT, "TLS", async {
            futures_rustls::TlsConnector::from(config)
                .connect(name, stream)
                .await
                .map_err(|e| ConnectError::Tls(e.to_string()))
        })
        .await?;
        Io::Tls(Box::new(s))
    } else {
        Io::Plain(stream)
    };
    let mut key = [0u8; 16];
    getrandom::getrandom(&mut key).map_err(|e| ConnectError::Handshake(format!("random key: {e}")))?;
    let hs = Handshake::new(key);
    within(CONNECT_TIMEOUT, "WebSocket handshake", async {
        let hs_err = |what: &str, e: &dyn std::fmt::Display| ConnectError::Handshake(format!("{what}: {e}"));
        io.write_all(&hs.request(url, rampart_outbound::USER_AGENT_VALUE)).await.map_err(|e| hs_err("send", &e))?;
        let mut head = Vec::with_capacity(1024);
        let mut chunk = [0u8; 1024];
        loop {
            let n = io.read(&mut chunk).await.map_err(|e| hs_err("read", &e))?;
            if n == 0 {
                return Err(ConnectError::Handshake("closed by the venue".into()));
            }
            head.extend_from_slice(&chunk[..n]);
            if let Some(end) = hs.check_response(&head).map_err(|e| hs_err("answer", &e))? {
                return codec.preload(&head[end..]).map_err(|e| hs_err("first frames", &e));
            }
        }
    })
    .await?;
    Ok(io)
}
