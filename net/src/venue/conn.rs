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

async fn within<T>(
    limit: Duration,
    what: &str,
    f: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    future::or(f, async {
        glommio::timer::sleep(limit).await;
        Err(format!("{what} timed out"))
    })
    .await
}

/// Opens `url` and completes the WebSocket handshake; bytes that followed the handshake are
/// left in `codec`.
pub async fn connect(url: &WsUrl, tls: Option<Arc<rustls::ClientConfig>>, codec: &mut WsCodec) -> Result<Io, String> {
    let host_port = (url.host.clone(), url.port);
    let addrs: Vec<SocketAddr> = within(CONNECT_TIMEOUT, "resolve", async {
        glommio::executor()
            .spawn_blocking(move || host_port.to_socket_addrs().map(|a| a.collect::<Vec<_>>()))
            .await
            .map_err(|e| format!("resolve {}: {e}", url.host))
    })
    .await?;
    let mut last = format!("{} resolves to no address", url.host);
    let mut stream = None;
    for addr in addrs {
        match TcpStream::connect_timeout(addr, CONNECT_TIMEOUT).await {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = format!("connect {addr}: {e}"),
        }
    }
    let stream = stream.ok_or(last)?;
    let _ = stream.set_nodelay(true);
    let mut io = if url.tls {
        let config = tls.ok_or("TLS is not available")?;
        let name = rustls::pki_types::ServerName::try_from(url.host.clone()).map_err(|_| "invalid TLS server name")?;
        let s = within(CONNECT_TIMEOUT, "TLS", async {
            futures_rustls::TlsConnector::from(config).connect(name, stream).await.map_err(|e| format!("TLS: {e}"))
        })
        .await?;
        Io::Tls(Box::new(s))
    } else {
        Io::Plain(stream)
    };
    let mut key = [0u8; 16];
    getrandom::getrandom(&mut key).map_err(|e| format!("random: {e}"))?;
    let hs = Handshake::new(key);
    within(CONNECT_TIMEOUT, "WebSocket handshake", async {
        io.write_all(&hs.request(url, crate::delivery::USER_AGENT_VALUE)).await.map_err(|e| format!("send: {e}"))?;
        let mut head = Vec::with_capacity(1024);
        let mut chunk = [0u8; 1024];
        loop {
            let n = io.read(&mut chunk).await.map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("closed during the handshake".to_owned());
            }
            head.extend_from_slice(&chunk[..n]);
            if let Some(end) = hs.check_response(&head).map_err(|e| e.to_string())? {
                return codec.preload(&head[end..]).map_err(|e| e.to_string());
            }
        }
    })
    .await?;
    Ok(io)
}
