//! Test-only TLS material (`fixtures/tls/`, how it was made in its README): a test CA and a leaf
//! for `localhost` / `127.0.0.1` it signed, for the https delivery test and the venue's `wss`
//! test. Never trusted anywhere else.

/// The test CA's certificate (PEM): the extra root a client under test trusts.
pub const CA_PEM: &[u8] = include_bytes!("../fixtures/tls/ca.pem");
/// The leaf certificate (PEM) a test server presents.
pub const CERT_PEM: &[u8] = include_bytes!("../fixtures/tls/cert.pem");
/// The leaf's private key (PEM).
pub const KEY_PEM: &[u8] = include_bytes!("../fixtures/tls/key.pem");
