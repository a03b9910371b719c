//! `wss://` venue connections: the shard-side WebSocket client (glommio TCP, rustls, the
//! handshake, frames) against a real TLS WebSocket server on loopback with the test certificate.
//! An untrusted certificate is refused; trusted through an extra root, the handshake completes,
//! a text frame arrives, a ping is answered with a pong carrying the same payload.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use base64::Engine as _;
use glommio::{LocalExecutorBuilder, Placement};
use rampart_venue::conn;
use rampart_venue::ws::{Event, WsCodec, WsUrl};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha1::{Digest, Sha1};

/// A TLS WebSocket server: answers the upgrade, sends `{"hello":1}` and a ping `p1`, records
/// what the client sends back (raw bytes after the handshake), then closes.
fn wss_server() -> (u16, Arc<Mutex<Vec<u8>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let cert = CertificateDer::from_pem_slice(rampart_testkit::tls::CERT_PEM).expect("cert");
    let key = PrivateKeyDer::from_pem_slice(rampart_testkit::tls::KEY_PEM).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let std_listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    std_listener.set_nonblocking(true).expect("nonblocking");
    let port = std_listener.local_addr().expect("addr").port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).expect("listener");
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let (acceptor, g) = (acceptor.clone(), g.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(stream).await else { return };
                    let mut head = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tls.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&head).into_owned();
                    let key = text
                        .lines()
                        .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
                        .unwrap_or_default()
                        .trim()
                        .to_owned();
                    let mut h = Sha1::new();
                    h.update(key.as_bytes());
                    h.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
                    let accept = base64::engine::general_purpose::STANDARD.encode(h.finalize());
                    let reply = format!(
                        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
                    );
                    let mut out = reply.into_bytes();
                    out.extend_from_slice(&[0x81, 11]);
                    out.extend_from_slice(br#"{"hello":1}"#);
                    out.extend_from_slice(&[0x89, 2, b'p', b'1']);
                    let _ = tls.write_all(&out).await;
                    // Collect what the client sends (its pong, masked) for a moment, then close.
                    let mut seen = Vec::new();
                    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
                    while seen.len() < 8 {
                        match tokio::time::timeout_at(deadline, tls.read(&mut chunk)).await {
                            Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&chunk[..n]),
                            _ => break,
                        }
                    }
                    if let Ok(mut g) = g.lock() {
                        *g = seen;
                    }
                    let _ = tls.write_all(&[0x88, 2, 0x03, 0xE8]).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
    });
    (port, got)
}

/// Connects with `tls` and returns the events seen until the close, as text.
fn client(port: u16, tls: Option<Arc<rustls::ClientConfig>>) -> Result<Vec<String>, String> {
    let handle = LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(1 << 20)
        .spawn(move || async move {
            let url = WsUrl::parse(&format!("wss://127.0.0.1:{port}/ws/v5/public")).map_err(|e| e.to_string())?;
            let mut codec = WsCodec::new(1 << 16, 5);
            let mut io = conn::connect(&url, tls, &mut codec).await.map_err(|e| e.to_string())?;
            let mut seen = Vec::new();
            loop {
                loop {
                    let pong = match codec.next_event().map_err(|e| e.to_string())? {
                        None => break,
                        Some(Event::Text(t)) => {
                            seen.push(format!("text {}", String::from_utf8_lossy(t)));
                            None
                        }
                        Some(Event::Ping(p)) => {
                            seen.push(format!("ping {}", String::from_utf8_lossy(p)));
                            Some(p.to_vec())
                        }
                        Some(Event::Close { code, .. }) => {
                            seen.push(format!("close {code}"));
                            return Ok(seen);
                        }
                        Some(other) => {
                            seen.push(format!("{other:?}"));
                            None
                        }
                    };
                    if let Some(p) = pong {
                        io.write_all(codec.pong(&p)).await.map_err(|e| e.to_string())?;
                    }
                }
                match io.read_within(codec.read_space(), Duration::from_secs(5)).await {
                    Some(Ok(0)) | None => return Ok(seen),
                    Some(Ok(n)) => codec.filled(n),
                    Some(Err(e)) => return Err(e.to_string()),
                }
            }
        })
        .expect("executor");
    handle.join().expect("executor thread")
}

#[test]
fn wss_connections_verify_the_certificate_and_carry_frames() {
    let (port, got) = wss_server();
    // The bundled web roots do not know the test CA.
    let untrusted = rampart_outbound::tls_config(&[]);
    let err = client(port, untrusted).expect_err("an untrusted certificate is refused");
    assert!(err.starts_with("TLS:"), "{err}");
    // Trusted through an extra root.
    let ca = CertificateDer::from_pem_slice(rampart_testkit::tls::CA_PEM).expect("ca");
    let trusted = rampart_outbound::tls_config(&[ca.to_vec()]);
    let seen = client(port, trusted).expect("trusted connection");
    assert_eq!(seen, [r#"text {"hello":1}"#, "ping p1", "close 1000"]);
    // The pong went back masked with the ping's payload.
    let pong = got.lock().map(|g| g.clone()).unwrap_or_default();
    assert!(pong.len() >= 8, "{pong:?}");
    assert_eq!((pong[0], pong[1]), (0x8A, 0x80 | 2), "a masked pong of two bytes");
    let key = &pong[2..6];
    assert_eq!([pong[6] ^ key[0], pong[7] ^ key[1]], *b"p1");
}
