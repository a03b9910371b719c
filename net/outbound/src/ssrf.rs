//! SSRF guard for user-supplied webhook URLs: strict parsing (every spelling of an IP address
//! becomes that address) and a public-address check applied at creation and at every delivery.
//!
//! One piece of code is used in two places: when a webhook is created (a refusal is a 422 with
//! the [`SsrfError`] message) and at every delivery attempt, where [`resolve_checked`] resolves
//! the host again, checks every address and hands back only checked addresses to connect to, so
//! DNS rebinding cannot slip a private address in between the check and the connection.
//! `webhooks.allow_private = true` lets private addresses through (the host must still resolve).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// Longest accepted webhook URL, in characters.
pub const MAX_URL_LEN: usize = 500;
/// How long [`resolve_checked`] waits for the resolver.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

const MSG_TOO_LONG: &str = "webhook_url must be at most 500 characters";
const MSG_NOT_ASCII: &str =
    "webhook_url must contain only ASCII characters (percent-encode the path, use punycode hosts)";
const MSG_BAD_CHAR: &str = "webhook_url must not contain spaces, control characters or backslashes";
const MSG_NOT_HTTP: &str = "webhook_url must be an absolute http or https URL";
const MSG_USERINFO: &str = "webhook_url must not contain user information (user@host)";
const MSG_EMPTY_HOST: &str = "webhook_url host is empty";
const MSG_PERCENT_HOST: &str = "webhook_url host must not contain '%'";
const MSG_BAD_PORT: &str = "webhook_url port must be a number from 1 to 65535";
const MSG_IPV6_ZONE: &str = "webhook_url must not use an IPv6 zone";
const MSG_BAD_IPV6: &str = "webhook_url host is not a valid IPv6 address";
const MSG_BAD_IPV4: &str = "webhook_url host is not a valid IPv4 address";
const MSG_BAD_NAME: &str = "webhook_url host is not a valid host name";

/// A parsed webhook URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookUrl {
    /// `true` for `https`, `false` for `http`.
    pub https: bool,
    /// The host: an IP address (however it was spelled) or a normalised DNS name.
    pub host: Host,
    /// The port, explicit or the scheme's default (80 or 443).
    pub port: u16,
    /// The request target: the path and query, `/` when absent; the fragment is dropped.
    pub path_and_query: String,
    /// The Host header value: the normalised host (IPv6 in brackets, IPv4 in dotted-decimal),
    /// followed by `:port` when the port is not the scheme's default.
    pub authority: String,
}

/// The host of a [`WebhookUrl`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// An IP literal, in any spelling (`inet_aton` forms for IPv4, bracketed IPv6).
    Ip(IpAddr),
    /// A DNS name: ASCII, lowercase, trailing dots removed.
    Name(String),
}

/// Why a webhook URL is refused; the `Display` text is meant for 422 bodies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SsrfError {
    /// The URL is malformed or uses a refused form; the text is the whole message.
    Syntax(&'static str),
    /// The URL is, or resolves to, an address that is not public.
    NotPublic(IpAddr),
    /// The host resolved to no address at all.
    NoAddress,
    /// The resolver failed; the text is the resolver's error (or `timed out`).
    Resolve(String),
}

impl fmt::Display for SsrfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SsrfError::Syntax(msg) => f.write_str(msg),
            SsrfError::NotPublic(ip) => write!(f, "webhook_url must point to a public address ({ip} is not public)"),
            SsrfError::NoAddress => f.write_str("webhook_url host does not resolve"),
            SsrfError::Resolve(err) => write!(f, "webhook_url host does not resolve ({err})"),
        }
    }
}

impl std::error::Error for SsrfError {}

/// Parses a webhook URL strictly: `http`/`https` (any case) with a `//` authority, no userinfo,
/// no whitespace, control characters, backslashes or non-ASCII anywhere, no `%` in the host,
/// a port from 1 to 65535. A host whose last label starts with a digit is an IPv4 address in
/// any spelling `inet_aton` accepts (or a syntax error, never a DNS name); other hosts must be
/// valid DNS names. Does not check whether the address is public: see [`resolve_checked`].
pub fn parse(url: &str) -> Result<WebhookUrl, SsrfError> {
    if url.chars().count() > MAX_URL_LEN {
        return Err(SsrfError::Syntax(MSG_TOO_LONG));
    }
    if !url.is_ascii() {
        return Err(SsrfError::Syntax(MSG_NOT_ASCII));
    }
    if url.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control() || b == b'\\') {
        return Err(SsrfError::Syntax(MSG_BAD_CHAR));
    }
    let (scheme, rest) = url.split_once(':').ok_or(SsrfError::Syntax(MSG_NOT_HTTP))?;
    let https = if scheme.eq_ignore_ascii_case("http") {
        false
    } else if scheme.eq_ignore_ascii_case("https") {
        true
    } else {
        return Err(SsrfError::Syntax(MSG_NOT_HTTP));
    };
    let rest = rest.strip_prefix("//").ok_or(SsrfError::Syntax(MSG_NOT_HTTP))?;
    let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    let tail = tail.split_once('#').map_or(tail, |(before, _fragment)| before);
    let path_and_query = if tail.is_empty() {
        "/".to_string()
    } else if tail.starts_with('?') {
        format!("/{tail}")
    } else {
        tail.to_string()
    };
    if authority.contains('@') {
        return Err(SsrfError::Syntax(MSG_USERINFO));
    }
    let default_port = if https { 443 } else { 80 };
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (inside, after) = bracketed.split_once(']').ok_or(SsrfError::Syntax(MSG_BAD_IPV6))?;
        let port = match after {
            "" => default_port,
            _ => parse_port(after.strip_prefix(':').ok_or(SsrfError::Syntax(MSG_BAD_IPV6))?)?,
        };
        (parse_ipv6_literal(inside)?, port)
    } else {
        let (host_text, port) = match authority.split_once(':') {
            None => (authority, default_port),
            Some((host_text, port_text)) => (host_text, parse_port(port_text)?),
        };
        (parse_host(host_text)?, port)
    };
    let host_text = match &host {
        Host::Ip(IpAddr::V4(v4)) => v4.to_string(),
        Host::Ip(IpAddr::V6(v6)) => format!("[{v6}]"),
        Host::Name(name) => name.clone(),
    };
    let authority = if port == default_port { host_text } else { format!("{host_text}:{port}") };
    Ok(WebhookUrl { https, host, port, path_and_query, authority })
}

/// Parses the digits after `:` in the authority: decimal only, 1 to 65535.
fn parse_port(text: &str) -> Result<u16, SsrfError> {
    if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SsrfError::Syntax(MSG_BAD_PORT));
    }
    match text.parse::<u16>() {
        Ok(port) if port != 0 => Ok(port),
        _ => Err(SsrfError::Syntax(MSG_BAD_PORT)),
    }
}

/// Parses the inside of `[...]`: an IPv6 address without a zone.
fn parse_ipv6_literal(inside: &str) -> Result<Host, SsrfError> {
    if inside.contains('%') {
        return Err(SsrfError::Syntax(MSG_IPV6_ZONE));
    }
    inside.parse::<Ipv6Addr>().map(|v6| Host::Ip(IpAddr::V6(v6))).map_err(|_| SsrfError::Syntax(MSG_BAD_IPV6))
}

/// Parses an unbracketed host: an IPv4 address in any `inet_aton` spelling, or a DNS name.
fn parse_host(text: &str) -> Result<Host, SsrfError> {
    if text.contains('%') {
        return Err(SsrfError::Syntax(MSG_PERCENT_HOST));
    }
    let lower = text.to_ascii_lowercase();
    let host = lower.trim_end_matches('.');
    if host.is_empty() {
        return Err(SsrfError::Syntax(MSG_EMPTY_HOST));
    }
    // No top-level domain starts with a digit, so a host ending in a numeric-looking label is
    // meant as an address: parse it as `inet_aton` would, and never let it reach the resolver.
    let last_label = host.rsplit('.').next().unwrap_or(host);
    if last_label.starts_with(|c: char| c.is_ascii_digit()) {
        return parse_ipv4_any(host).map(|v4| Host::Ip(IpAddr::V4(v4))).ok_or(SsrfError::Syntax(MSG_BAD_IPV4));
    }
    if is_dns_name(host) {
        Ok(Host::Name(host.to_string()))
    } else {
        Err(SsrfError::Syntax(MSG_BAD_NAME))
    }
}

/// Parses every IPv4 spelling `inet_aton` accepts: 1 to 4 dot-separated parts, each decimal,
/// octal (leading `0`) or hex (`0x`), the last part filling the remaining bytes.
fn parse_ipv4_any(text: &str) -> Option<Ipv4Addr> {
    let parts = text.split('.').map(parse_ipv4_part).collect::<Option<Vec<u32>>>()?;
    let (&last, init) = parts.split_last()?;
    if init.len() > 3 || init.iter().any(|&part| part > 0xff) {
        return None;
    }
    let last_bits = 32 - 8 * init.len() as u32;
    if last_bits < 32 && last >> last_bits != 0 {
        return None;
    }
    let high = init.iter().enumerate().fold(0u32, |acc, (i, &part)| acc | part << (24 - 8 * i as u32));
    Some(Ipv4Addr::from(high | last))
}

/// Parses one `inet_aton` part; `None` if it is malformed or exceeds 32 bits.
fn parse_ipv4_part(part: &str) -> Option<u32> {
    let (digits, radix) = if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
        (hex, 16)
    } else if part.len() > 1 && part.starts_with('0') {
        (&part[1..], 8)
    } else if part.is_empty() {
        return None;
    } else {
        (part, 10)
    };
    // As in `inet_aton`, a bare `0x` is zero.
    digits.chars().try_fold(0u32, |acc, c| acc.checked_mul(radix)?.checked_add(c.to_digit(radix)?))
}

/// A DNS name: labels of 1 to 63 letters, digits and inner hyphens; at most 253 characters.
fn is_dns_name(host: &str) -> bool {
    host.len() <= 253
        && host.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// `localhost` and `*.localhost` (RFC 6761): loopback by definition, refused without DNS.
fn is_localhost_name(name: &str) -> bool {
    name == "localhost" || name.ends_with(".localhost")
}

/// IPv4 ranges that are not public: (network, prefix length).
const V4_NOT_PUBLIC: [(Ipv4Addr, u32); 15] = [
    (Ipv4Addr::new(0, 0, 0, 0), 8),       // "this network", unspecified
    (Ipv4Addr::new(10, 0, 0, 0), 8),      // private
    (Ipv4Addr::new(100, 64, 0, 0), 10),   // CGNAT shared address space
    (Ipv4Addr::new(127, 0, 0, 0), 8),     // loopback
    (Ipv4Addr::new(169, 254, 0, 0), 16),  // link-local, cloud metadata
    (Ipv4Addr::new(172, 16, 0, 0), 12),   // private
    (Ipv4Addr::new(192, 0, 0, 0), 24),    // IETF protocol assignments
    (Ipv4Addr::new(192, 0, 2, 0), 24),    // documentation TEST-NET-1
    (Ipv4Addr::new(192, 88, 99, 0), 24),  // deprecated 6to4 relay anycast
    (Ipv4Addr::new(192, 168, 0, 0), 16),  // private
    (Ipv4Addr::new(198, 18, 0, 0), 15),   // benchmarking
    (Ipv4Addr::new(198, 51, 100, 0), 24), // documentation TEST-NET-2
    (Ipv4Addr::new(203, 0, 113, 0), 24),  // documentation TEST-NET-3
    (Ipv4Addr::new(224, 0, 0, 0), 4),     // multicast
    (Ipv4Addr::new(240, 0, 0, 0), 4),     // reserved, broadcast
];

/// IPv6 ranges refused outright: (network, prefix length). Ranges that embed an IPv4 address
/// (mapped, translated, NAT64, 6to4) are checked against the IPv4 rules instead.
const V6_NOT_PUBLIC: [(Ipv6Addr, u32); 10] = [
    (Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48), // local-use NAT64
    (Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0), 64),     // discard-only
    (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 23),    // IETF protocols: Teredo, benchmarking, ORCHID
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32), // documentation
    (Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20),    // documentation
    (Ipv6Addr::new(0x5f00, 0, 0, 0, 0, 0, 0, 0), 16),    // segment routing SIDs, not globally reachable
    (Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7),     // unique local
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10),    // link-local
    (Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10),    // deprecated site-local
    (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8),     // multicast
];

/// Whether `bits` lies in `net/len` (`len` from 1 to 128).
fn in_v6_prefix(bits: u128, net: Ipv6Addr, len: u32) -> bool {
    (bits ^ net.to_bits()) >> (128 - len) == 0
}

/// Whether `ip` is a public unicast address a webhook may be delivered to. IPv4-mapped,
/// IPv4-translated, NAT64 (`64:ff9b::/96`) and 6to4 (`2002::/16`) addresses are judged by the
/// IPv4 address they embed; IPv4-compatible (`::/96`) addresses are refused.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let bits = ip.to_bits();
    !V4_NOT_PUBLIC.iter().any(|&(net, len)| (bits ^ net.to_bits()) >> (32 - len) == 0)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let bits = ip.to_bits();
    let o = ip.octets();
    let low_v4 = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    if in_v6_prefix(bits, Ipv6Addr::UNSPECIFIED, 96) {
        // ::, ::1 and the deprecated IPv4-compatible addresses.
        return false;
    }
    let embeds_low_v4 = [
        Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0),    // IPv4-mapped
        Ipv6Addr::new(0, 0, 0, 0, 0xffff, 0, 0, 0),    // IPv4-translated (RFC 2765)
        Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), // NAT64 well-known prefix
    ];
    if embeds_low_v4.iter().any(|&net| in_v6_prefix(bits, net, 96)) {
        return is_public_v4(low_v4);
    }
    if in_v6_prefix(bits, Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16) {
        return is_public_v4(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    !V6_NOT_PUBLIC.iter().any(|&(net, len)| in_v6_prefix(bits, net, len))
}

/// Resolves (unless the host is an IP literal) and checks EVERY address; returns the checked
/// socket addresses (port applied) to connect to, in resolver order. One address that is not
/// public refuses the whole URL. With `allow_private`, any address is accepted (still must
/// resolve). `localhost` and `*.localhost` are refused without DNS unless `allow_private`.
/// Resolution gives up after [`RESOLVE_TIMEOUT`] with `Resolve("timed out")`.
pub async fn resolve_checked(url: &WebhookUrl, allow_private: bool) -> Result<Vec<SocketAddr>, SsrfError> {
    let addrs: Vec<SocketAddr> = match &url.host {
        Host::Ip(ip) => vec![SocketAddr::new(*ip, url.port)],
        Host::Name(name) => {
            if !allow_private && is_localhost_name(name) {
                return Err(SsrfError::NotPublic(IpAddr::V4(Ipv4Addr::LOCALHOST)));
            }
            match tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((name.as_str(), url.port))).await {
                Err(_elapsed) => return Err(SsrfError::Resolve("timed out".to_string())),
                Ok(Err(err)) => return Err(SsrfError::Resolve(err.to_string())),
                Ok(Ok(found)) => found.collect(),
            }
        }
    };
    if addrs.is_empty() {
        return Err(SsrfError::NoAddress);
    }
    if !allow_private {
        if let Some(bad) = addrs.iter().find(|addr| !is_public(addr.ip())) {
            return Err(SsrfError::NotPublic(bad.ip()));
        }
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime builds")
            .block_on(future)
    }

    /// `parse`, then `resolve_checked` without `allow_private`: what creation does.
    fn check(url: &str, allow_private: bool) -> Result<Vec<SocketAddr>, SsrfError> {
        let parsed = parse(url)?;
        block_on(resolve_checked(&parsed, allow_private))
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("test addresses are valid")
    }

    #[derive(Clone, Copy, Debug)]
    enum Want {
        Syntax,
        NotPublic(&'static str),
    }
    use Want::{NotPublic as Private, Syntax};

    /// Every URL here must be refused, with the right kind of error (and the right address).
    const REFUSED: &[(&str, Want)] = &[
        // Every IPv4 range, both ends where it matters.
        ("http://0.0.0.0/", Private("0.0.0.0")),
        ("http://0.255.255.255/", Private("0.255.255.255")),
        ("http://10.0.0.1/", Private("10.0.0.1")),
        ("http://10.255.255.255/", Private("10.255.255.255")),
        ("http://100.64.0.1/", Private("100.64.0.1")),
        ("http://100.127.255.254/", Private("100.127.255.254")),
        ("http://127.0.0.1/", Private("127.0.0.1")),
        ("http://127.255.255.254/", Private("127.255.255.254")),
        ("http://169.254.169.254/latest/meta-data/", Private("169.254.169.254")),
        ("http://172.16.0.1/", Private("172.16.0.1")),
        ("http://172.31.255.255/", Private("172.31.255.255")),
        ("http://192.0.0.1/", Private("192.0.0.1")),
        ("http://192.0.2.1/", Private("192.0.2.1")),
        ("http://192.88.99.1/", Private("192.88.99.1")),
        ("http://192.168.1.1/", Private("192.168.1.1")),
        ("http://198.18.0.1/", Private("198.18.0.1")),
        ("http://198.19.255.255/", Private("198.19.255.255")),
        ("http://198.51.100.1/", Private("198.51.100.1")),
        ("http://203.0.113.1/", Private("203.0.113.1")),
        ("http://224.0.0.1/", Private("224.0.0.1")),
        ("http://239.255.255.250/", Private("239.255.255.250")),
        ("http://240.0.0.1/", Private("240.0.0.1")),
        ("http://255.255.255.255/", Private("255.255.255.255")),
        // Spellings of 127.0.0.1.
        ("http://2130706433/", Private("127.0.0.1")),
        ("http://0x7f000001/", Private("127.0.0.1")),
        ("http://0X7F000001/", Private("127.0.0.1")),
        ("http://017700000001/", Private("127.0.0.1")),
        ("http://0177.0.0.1/", Private("127.0.0.1")),
        ("http://0x7f.0.0.1/", Private("127.0.0.1")),
        ("http://0x7f.1/", Private("127.0.0.1")),
        ("http://127.1/", Private("127.0.0.1")),
        ("http://127.0.1/", Private("127.0.0.1")),
        ("http://127.000.000.001/", Private("127.0.0.1")),
        ("http://0000000000177.0.0.1/", Private("127.0.0.1")),
        ("http://127.0.0.1./", Private("127.0.0.1")),
        ("http://127.0.0.1../", Private("127.0.0.1")),
        ("http://127.0.0.1.:8080/", Private("127.0.0.1")),
        ("http://0/", Private("0.0.0.0")),
        ("http://0x/", Private("0.0.0.0")),
        // Spellings of 10.0.0.1.
        ("http://167772161/", Private("10.0.0.1")),
        ("http://0xa000001/", Private("10.0.0.1")),
        ("http://01200000001/", Private("10.0.0.1")),
        ("http://012.0.0.1/", Private("10.0.0.1")),
        ("http://0xa.0.0.1/", Private("10.0.0.1")),
        ("http://10.1/", Private("10.0.0.1")),
        ("http://10.0.1/", Private("10.0.0.1")),
        ("http://10.0.0.1./", Private("10.0.0.1")),
        // Spellings of 169.254.169.254 (cloud metadata).
        ("http://2852039166/", Private("169.254.169.254")),
        ("http://0xa9fea9fe/", Private("169.254.169.254")),
        ("http://025177524776/", Private("169.254.169.254")),
        ("http://0251.0376.0251.0376/", Private("169.254.169.254")),
        ("http://0xa9.0xfe.0xa9.0xfe/", Private("169.254.169.254")),
        ("http://169.254.43518/", Private("169.254.169.254")),
        ("http://169.16689662/", Private("169.254.169.254")),
        ("http://169.254.169.254./", Private("169.254.169.254")),
        // Spellings of 192.168.1.1.
        ("http://3232235777/", Private("192.168.1.1")),
        ("http://0xc0a80101/", Private("192.168.1.1")),
        ("http://030052000401/", Private("192.168.1.1")),
        ("http://0300.0250.1.1/", Private("192.168.1.1")),
        ("http://0xc0.0xa8.0x1.0x1/", Private("192.168.1.1")),
        ("http://192.168.257/", Private("192.168.1.1")),
        ("http://192.11010305/", Private("192.168.1.1")),
        ("http://192.168.1.1./", Private("192.168.1.1")),
        // IPv6.
        ("http://[::1]/", Private("::1")),
        ("http://[::]/", Private("::")),
        ("http://[0:0:0:0:0:0:0:1]:8080/", Private("::1")),
        ("http://[::ffff:127.0.0.1]/", Private("::ffff:127.0.0.1")),
        ("http://[::ffff:7f00:1]/", Private("::ffff:127.0.0.1")),
        ("http://[::FFFF:7F00:1]/", Private("::ffff:127.0.0.1")),
        ("http://[::ffff:10.0.0.1]/", Private("::ffff:10.0.0.1")),
        ("http://[::ffff:a9fe:a9fe]/", Private("::ffff:169.254.169.254")),
        ("http://[::ffff:0:a9fe:a9fe]/", Private("::ffff:0:169.254.169.254")),
        ("http://[::127.0.0.1]/", Private("::127.0.0.1")),
        ("http://[::8.8.8.8]/", Private("::8.8.8.8")),
        ("http://[64:ff9b::a00:1]/", Private("64:ff9b::a00:1")),
        ("http://[64:ff9b::127.0.0.1]/", Private("64:ff9b::7f00:1")),
        ("http://[64:ff9b:1::1]/", Private("64:ff9b:1::1")),
        ("http://[2002:7f00:1::]/", Private("2002:7f00:1::")),
        ("http://[2002:a9fe:a9fe::1]/", Private("2002:a9fe:a9fe::1")),
        ("http://[fe80::1]/", Private("fe80::1")),
        ("http://[FE80::1]/", Private("fe80::1")),
        ("http://[febf::1]/", Private("febf::1")),
        ("http://[fec0::1]/", Private("fec0::1")),
        ("http://[fc00::1]/", Private("fc00::1")),
        ("http://[fd12:3456::1]/", Private("fd12:3456::1")),
        ("http://[ff02::1]/", Private("ff02::1")),
        ("http://[2001:db8::1]/", Private("2001:db8::1")),
        ("http://[2001::1]/", Private("2001::1")),
        ("http://[2001:2::1]/", Private("2001:2::1")),
        ("http://[2001:1ff::1]/", Private("2001:1ff::1")),
        ("http://[100::1]/", Private("100::1")),
        ("http://[3fff::1]/", Private("3fff::1")),
        ("http://[fe80::1%25eth0]/", Syntax),
        ("http://[fe80::1%eth0]/", Syntax),
        // Userinfo and delimiter tricks.
        ("http://example.com@127.0.0.1/", Syntax),
        ("http://user:pass@example.com/", Syntax),
        ("http://127.0.0.1:80@example.com/", Syntax),
        ("http://@127.0.0.1/", Syntax),
        ("http://127.0.0.1#@example.com/", Private("127.0.0.1")),
        ("http://127.0.0.1?@example.com/", Private("127.0.0.1")),
        ("http://127.0.0.1\\@example.com/", Syntax),
        ("http:\\\\127.0.0.1\\", Syntax),
        ("http://example.com\r\nHost: 127.0.0.1/", Syntax),
        // Localhost names (refused without DNS).
        ("http://localhost/", Private("127.0.0.1")),
        ("http://LOCALHOST./", Private("127.0.0.1")),
        ("http://foo.localhost/", Private("127.0.0.1")),
        ("http://localhost:9/", Private("127.0.0.1")),
        // Bad syntax.
        ("ftp://x", Syntax),
        ("javascript:alert(1)", Syntax),
        ("file:///etc/passwd", Syntax),
        ("//x", Syntax),
        ("x", Syntax),
        ("", Syntax),
        ("http:/x", Syntax),
        ("http:x", Syntax),
        ("http://", Syntax),
        ("http:///x", Syntax),
        ("http://./", Syntax),
        ("http://:80/", Syntax),
        ("http://exa mple.com", Syntax),
        ("http://example.com/a b", Syntax),
        ("http://example.com/\t", Syntax),
        (" http://example.com/", Syntax),
        ("http://[::1", Syntax),
        ("http://[::1]x/", Syntax),
        ("http://[127.0.0.1]/", Syntax),
        ("http://[v1.x]/", Syntax),
        ("http://::1/", Syntax),
        ("http://x:0/", Syntax),
        ("http://x:99999/", Syntax),
        ("http://x:65536/", Syntax),
        ("http://x:-1/", Syntax),
        ("http://x:8o/", Syntax),
        ("http://x:/", Syntax),
        ("http://x:80:80/", Syntax),
        ("http://%31%32%37.0.0.1/", Syntax),
        ("http://127.0.0.%31/", Syntax),
        ("http://256.0.0.1/", Syntax),
        ("http://1.2.3.256/", Syntax),
        ("http://127.0.65536/", Syntax),
        ("http://4294967296/", Syntax),
        ("http://0x100000000/", Syntax),
        ("http://99999999999999999999999/", Syntax),
        ("http://0x1g.0.0.1/", Syntax),
        ("http://08.0.0.1/", Syntax),
        ("http://1.2.3.4.5/", Syntax),
        ("http://127..1/", Syntax),
        ("http://.127.0.0.1/", Syntax),
        ("http://example.com.1/", Syntax),
        ("http://a_b.example.com/", Syntax),
        ("http://-a.example.com/", Syntax),
        ("http://a-.example.com/", Syntax),
        ("http://a..example.com/", Syntax),
        ("http://ex\u{e4}mple.com/", Syntax),
        ("http://\u{ff11}\u{ff12}\u{ff17}.0.0.1/", Syntax),
    ];

    #[test]
    fn ssrf_matrix_is_refused_with_the_right_error() {
        let mut failures = Vec::new();
        for &(url, want) in REFUSED {
            let got = check(url, false);
            let ok = match (want, &got) {
                (Want::Syntax, Err(SsrfError::Syntax(_))) => true,
                (Want::NotPublic(addr), Err(SsrfError::NotPublic(found))) => *found == ip(addr),
                _ => false,
            };
            if !ok {
                failures.push(format!("{url:?}: want {want:?}, got {got:?}"));
            }
        }
        assert!(REFUSED.len() >= 40);
        assert!(failures.is_empty(), "{} of {} wrong:\n{}", failures.len(), REFUSED.len(), failures.join("\n"));
    }

    #[test]
    fn ssrf_long_urls_are_refused() {
        let ok = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN - "https://example.com/".len()));
        assert_eq!(ok.len(), MAX_URL_LEN);
        assert!(parse(&ok).is_ok());
        let long = format!("{ok}a");
        assert_eq!(parse(&long), Err(SsrfError::Syntax(MSG_TOO_LONG)));
        let long_name = format!("http://{}.com/", ["a"; 130].join("."));
        assert_eq!(parse(&long_name), Err(SsrfError::Syntax(MSG_BAD_NAME)));
        let long_label = format!("http://{}.com/", "a".repeat(64));
        assert_eq!(parse(&long_label), Err(SsrfError::Syntax(MSG_BAD_NAME)));
        let max_label = format!("http://{}.com/", "a".repeat(63));
        assert!(parse(&max_label).is_ok());
    }

    #[test]
    fn ssrf_accepts_a_dns_name_without_resolving() {
        let url = parse("https://example.com/hook?s=1").expect("valid URL");
        assert_eq!(
            url,
            WebhookUrl {
                https: true,
                host: Host::Name("example.com".to_string()),
                port: 443,
                path_and_query: "/hook?s=1".to_string(),
                authority: "example.com".to_string(),
            }
        );
    }

    #[test]
    fn ssrf_accepts_public_ipv4_with_port_and_path() {
        let url = parse("http://8.8.8.8:8080/x").expect("valid URL");
        assert!(!url.https);
        assert_eq!(url.host, Host::Ip(ip("8.8.8.8")));
        assert_eq!(url.port, 8080);
        assert_eq!(url.path_and_query, "/x");
        assert_eq!(url.authority, "8.8.8.8:8080");
        assert!(is_public(ip("8.8.8.8")));
        let addrs = block_on(resolve_checked(&url, false)).expect("public address");
        assert_eq!(addrs, vec![SocketAddr::new(ip("8.8.8.8"), 8080)]);
    }

    #[test]
    fn ssrf_accepts_public_ipv6_literal() {
        let url = parse("https://[2606:4700:4700::1111]/").expect("valid URL");
        assert_eq!(url.host, Host::Ip(ip("2606:4700:4700::1111")));
        assert_eq!(url.port, 443);
        assert_eq!(url.authority, "[2606:4700:4700::1111]");
        let addrs = block_on(resolve_checked(&url, false)).expect("public address");
        assert_eq!(addrs, vec![SocketAddr::new(ip("2606:4700:4700::1111"), 443)]);
        let url = parse("http://[2606:4700:4700::1111]:8443").expect("valid URL");
        assert_eq!(
            (url.port, url.authority.as_str(), url.path_and_query.as_str()),
            (8443, "[2606:4700:4700::1111]:8443", "/")
        );
    }

    #[test]
    fn ssrf_accepts_bare_host_and_normalises_case() {
        let url = parse("http://93.184.216.34").expect("valid URL");
        assert_eq!((url.host, url.port, url.path_and_query.as_str()), (Host::Ip(ip("93.184.216.34")), 80, "/"));

        let url = parse("HTTPS://EXAMPLE.COM./Hook?A=B#Frag").expect("valid URL");
        assert!(url.https);
        assert_eq!(url.host, Host::Name("example.com".to_string()));
        assert_eq!(url.path_and_query, "/Hook?A=B");
        assert_eq!(url.authority, "example.com");

        let url = parse("HtTp://Example.Com:443?x=1").expect("valid URL");
        assert!(!url.https);
        assert_eq!((url.port, url.path_and_query.as_str(), url.authority.as_str()), (443, "/?x=1", "example.com:443"));

        let url = parse("https://example.com:443#frag").expect("valid URL");
        assert_eq!((url.path_and_query.as_str(), url.authority.as_str()), ("/", "example.com"));
    }

    #[test]
    fn ssrf_other_spellings_of_public_addresses_become_ip_literals() {
        for spelling in
            ["0x08080808", "134744072", "010.010.010.010", "8.8.2056", "8.526344", "8.8.8.8.", "0x8.0x8.0x8.0x8"]
        {
            let url = parse(&format!("http://{spelling}/")).expect("valid URL");
            assert_eq!(url.host, Host::Ip(ip("8.8.8.8")), "{spelling}");
            assert_eq!(url.authority, "8.8.8.8", "{spelling}");
        }
    }

    #[test]
    fn ssrf_at_sign_after_the_authority_is_not_userinfo() {
        let url = parse("http://example.com/?@127.0.0.1/").expect("valid URL");
        assert_eq!(url.host, Host::Name("example.com".to_string()));
        assert_eq!(url.path_and_query, "/?@127.0.0.1/");
        let url = parse("http://example.com/a@127.0.0.1").expect("valid URL");
        assert_eq!(url.host, Host::Name("example.com".to_string()));
    }

    #[test]
    fn ssrf_allow_private_accepts_loopback_literal() {
        let url = parse("http://127.0.0.1:9/").expect("valid URL");
        assert_eq!(block_on(resolve_checked(&url, false)), Err(SsrfError::NotPublic(ip("127.0.0.1"))));
        assert_eq!(block_on(resolve_checked(&url, true)), Ok(vec![SocketAddr::new(ip("127.0.0.1"), 9)]));
    }

    #[test]
    fn ssrf_allow_private_resolves_localhost() {
        let url = parse("http://localhost:9/").expect("valid URL");
        assert_eq!(url.host, Host::Name("localhost".to_string()));
        assert_eq!(block_on(resolve_checked(&url, false)), Err(SsrfError::NotPublic(ip("127.0.0.1"))));
        let addrs = block_on(resolve_checked(&url, true)).expect("localhost resolves through /etc/hosts");
        assert!(!addrs.is_empty());
        assert!(addrs.iter().all(|addr| addr.ip().is_loopback() && addr.port() == 9), "{addrs:?}");
    }

    #[test]
    fn ssrf_unresolvable_name_is_refused() {
        let url = parse("http://no-such-host.invalid/").expect("valid URL");
        match block_on(resolve_checked(&url, false)) {
            Err(SsrfError::Resolve(_) | SsrfError::NoAddress) => {}
            other => panic!("expected a resolver failure, got {other:?}"),
        }
    }

    #[test]
    fn ssrf_is_public_ipv4_boundaries() {
        let public = [
            "1.1.1.1",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "169.255.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.0",
            "192.0.3.0",
            "192.88.98.255",
            "192.88.100.0",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "198.51.99.255",
            "198.51.101.0",
            "203.0.112.255",
            "203.0.114.0",
            "223.255.255.255",
        ];
        for addr in public {
            assert!(is_public(ip(addr)), "{addr} should be public");
        }
        let not_public = [
            "0.0.0.0",
            "10.0.0.0",
            "100.64.0.0",
            "100.127.255.255",
            "127.0.0.0",
            "169.254.0.0",
            "172.16.0.0",
            "172.31.255.255",
            "192.0.0.255",
            "192.0.2.255",
            "192.88.99.255",
            "192.168.255.255",
            "198.18.0.0",
            "198.19.255.255",
            "198.51.100.255",
            "203.0.113.255",
            "224.0.0.0",
            "239.255.255.255",
            "240.0.0.0",
            "255.255.255.254",
            "255.255.255.255",
        ];
        for addr in not_public {
            assert!(!is_public(ip(addr)), "{addr} should not be public");
        }
    }

    #[test]
    fn ssrf_is_public_ipv6() {
        let public = [
            "2606:4700:4700::1111",
            "2001:4860:4860::8888",
            "2001:200::1",
            "2001:db9::1",
            "2000::1",
            "4000::1",
            "fbff::1",
        ];
        for addr in public {
            assert!(is_public(ip(addr)), "{addr} should be public");
        }
        let not_public = [
            "::",
            "::1",
            "::2",
            "::ffff:ffff",
            "100::",
            "100::ffff:ffff:ffff:ffff",
            "64:ff9b:1::",
            "2001::",
            "2001:1ff:ffff::",
            "2001:db8:ffff::",
            "3fff:fff::1",
            "5f00::1",
            "fc00::",
            "fdff::1",
            "fe80::",
            "febf::1",
            "fec0::",
            "feff::1",
            "ff00::",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ];
        for addr in not_public {
            assert!(!is_public(ip(addr)), "{addr} should not be public");
        }
    }

    #[test]
    fn ssrf_embedded_ipv4_follows_ipv4_rules() {
        for (v4, public) in [("8.8.8.8", true), ("93.184.216.34", true), ("127.0.0.1", false), ("10.1.2.3", false)] {
            let o = match ip(v4) {
                IpAddr::V4(a) => a.octets(),
                IpAddr::V6(_) => unreachable!("the table holds IPv4 addresses"),
            };
            let (hi, lo) = (u16::from_be_bytes([o[0], o[1]]), u16::from_be_bytes([o[2], o[3]]));
            let forms = [
                Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, hi, lo),
                Ipv6Addr::new(0, 0, 0, 0, 0xffff, 0, hi, lo),
                Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, hi, lo),
                Ipv6Addr::new(0x2002, hi, lo, 0, 0, 0, 0, 1),
            ];
            for v6 in forms {
                assert_eq!(is_public(IpAddr::V6(v6)), public, "{v6} embeds {v4}");
            }
            // IPv4-compatible addresses are refused whatever they embed.
            assert!(!is_public(IpAddr::V6(Ipv6Addr::new(0, 0, 0, 0, 0, 0, hi, lo))));
        }
    }

    #[test]
    fn ssrf_resolve_checked_refuses_if_any_address_is_private() {
        // Literal hosts go straight to the check; the same loop checks every resolved address.
        let url = parse("http://[::ffff:192.168.0.1]:8080/").expect("valid URL");
        assert_eq!(block_on(resolve_checked(&url, false)), Err(SsrfError::NotPublic(ip("::ffff:192.168.0.1"))));
        assert_eq!(block_on(resolve_checked(&url, true)), Ok(vec![SocketAddr::new(ip("::ffff:192.168.0.1"), 8080)]));
    }

    #[test]
    fn ssrf_display_messages_are_stable() {
        assert_eq!(
            SsrfError::NotPublic(ip("127.0.0.1")).to_string(),
            "webhook_url must point to a public address (127.0.0.1 is not public)"
        );
        assert_eq!(
            SsrfError::NotPublic(ip("fe80::1")).to_string(),
            "webhook_url must point to a public address (fe80::1 is not public)"
        );
        assert_eq!(SsrfError::NoAddress.to_string(), "webhook_url host does not resolve");
        assert_eq!(
            SsrfError::Resolve("timed out".to_string()).to_string(),
            "webhook_url host does not resolve (timed out)"
        );
        assert_eq!(
            parse("ftp://example.com/").map_err(|e| e.to_string()),
            Err("webhook_url must be an absolute http or https URL".to_string())
        );
        assert_eq!(
            parse("http://a@example.com/").map_err(|e| e.to_string()),
            Err("webhook_url must not contain user information (user@host)".to_string())
        );
        assert_eq!(
            parse("http://example.com:0/").map_err(|e| e.to_string()),
            Err("webhook_url port must be a number from 1 to 65535".to_string())
        );
        assert_eq!(parse("http://").map_err(|e| e.to_string()), Err("webhook_url host is empty".to_string()));
        assert_eq!(
            parse("http://256.1.1.1/").map_err(|e| e.to_string()),
            Err("webhook_url host is not a valid IPv4 address".to_string())
        );
    }
}
