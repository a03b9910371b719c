//! How the process reaches other hosts, for every part that does (webhook and Telegram
//! delivery, the venues' REST and WebSocket connections): the strict URL parser and
//! public-address guard (`ssrf`), the one HTTP client (`http`: connect, TLS, handshake, the
//! head every request carries), the client TLS configuration and the `User-Agent` it sends.

use std::sync::Arc;

pub mod http;
pub mod ssrf;

/// The `User-Agent` of every request rampart makes.
pub const USER_AGENT_VALUE: &str = concat!("rampart/", env!("CARGO_PKG_VERSION"));

/// The client TLS configuration: ring, the bundled web roots plus `extra_roots_der`, no client
/// certificate. `None` if it cannot be built (an extra root that does not parse).
pub fn tls_config(extra_roots_der: &[Vec<u8>]) -> Option<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for der in extra_roots_der {
        roots.add(rustls::pki_types::CertificateDer::from(der.clone())).ok()?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Some(Arc::new(config))
}
