//! Who may use the API over TCP: an allow-list of client networks checked at accept, an
//! optional TLS layer that can require client certificates, and a deadline for a new
//! connection's first bytes. Unix sockets are not concerned: their file mode and group decide.
//!
//! A peer outside the allow-list is closed before a byte is read, logged and counted
//! (`splitprover_connections_refused_total{reason="not_allowed"}`); so is a connection that
//! sends nothing before the deadline (`reason="silent"`), which would otherwise hold one of
//! `max_connections` forever. With `[service] tls`, every TCP listener speaks TLS only, and with
//! a `client_ca` a client without a certificate that CA signed fails the handshake.
//!
//! ```
//! use launcher::api::access::AllowList;
//! let allow = AllowList::parse(&["10.0.0.0/8".into(), "::1/128".into()]).unwrap();
//! assert!(allow.admits("10.1.2.3".parse().unwrap()));
//! assert!(!allow.admits("192.168.0.1".parse().unwrap()));
//! ```

use std::fmt;
use std::future::Future;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::str::FromStr;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::{Connected, TcpConnectInfo};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// One client network: an address and a prefix length (`10.0.0.0/8`, `::1/128`; a bare address
/// is the network of that one address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Network {
    addr: IpAddr,
    prefix: u8,
}

/// A network that cannot be parsed.
#[derive(Debug, thiserror::Error)]
#[error("bad network `{text}` in [service] allow: {reason}\nhint: CIDR like \"10.0.0.0/8\" or \"::1/128\"")]
pub struct BadNetwork {
    text: String,
    reason: String,
}

impl FromStr for Network {
    type Err = BadNetwork;

    fn from_str(s: &str) -> Result<Network, BadNetwork> {
        let bad = |reason: String| BadNetwork {
            text: s.to_owned(),
            reason,
        };
        let (addr, prefix) = match s.trim().split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s.trim(), None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|e| bad(format!("`{addr}` is not an IP address ({e})")))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => return Err(bad(format!("the prefix length `{p}` is not 0 to {max}"))),
            },
        };
        Ok(Network { addr, prefix })
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl Network {
    /// Whether `ip` is in this network (an IPv4-mapped IPv6 peer counts as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let keep = |bits: u32, width: u32| -> u128 {
            if bits == 0 {
                0
            } else {
                (!0u128 >> (128 - width)) & !((1u128 << (width - bits)) - 1)
            }
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = keep(u32::from(self.prefix), 32);
                u128::from(u32::from(net)) & mask == u128::from(u32::from(ip)) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = if self.prefix == 128 {
                    !0u128
                } else {
                    keep(u32::from(self.prefix), 128)
                };
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// The client networks TCP listeners admit (`[service] allow`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowList(Vec<Network>);

impl AllowList {
    /// The default: loopback only (`127.0.0.0/8`, `::1/128`).
    pub fn loopback() -> AllowList {
        AllowList(vec![
            Network {
                addr: IpAddr::from([127, 0, 0, 0]),
                prefix: 8,
            },
            Network {
                addr: IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1]),
                prefix: 128,
            },
        ])
    }

    /// The list `[service] allow` writes.
    pub fn parse(networks: &[String]) -> Result<AllowList, BadNetwork> {
        networks
            .iter()
            .map(|n| n.parse())
            .collect::<Result<_, _>>()
            .map(AllowList)
    }

    /// Whether a peer at `ip` may connect.
    pub fn admits(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|n| n.contains(ip))
    }
}

impl fmt::Display for AllowList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list: Vec<String> = self.0.iter().map(Network::to_string).collect();
        f.write_str(&list.join(", "))
    }
}

/// The PEM files of `[service] tls`: plain data of the config file, read here.
pub use crate::config::TlsFiles;

/// A TLS file that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read `{}` ({what})", path.display())]
pub struct TlsFileError {
    what: &'static str,
    path: PathBuf,
    #[source]
    cause: std::io::Error,
}

fn read_pem(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsFileError> {
    std::fs::read(path).map_err(|cause| TlsFileError {
        what,
        path: path.to_owned(),
        cause,
    })
}

impl TlsFiles {
    /// The server's TLS settings: its identity and, with a `client_ca`, client certificates
    /// required; a handshake not done in `handshake_timeout` is abandoned.
    pub fn server(&self, handshake_timeout: Duration) -> Result<ServerTlsConfig, TlsFileError> {
        let identity = Identity::from_pem(
            read_pem("tls cert", &self.cert)?,
            read_pem("tls key", &self.key)?,
        );
        let mut tls = ServerTlsConfig::new()
            .identity(identity)
            .timeout(handshake_timeout);
        if let Some(ca) = &self.client_ca {
            tls = tls.client_ca_root(Certificate::from_pem(read_pem("tls client_ca", ca)?));
        }
        Ok(tls)
    }
}

/// What a client needs to speak TLS to the service: the CA that signed the server's
/// certificate, and its own certificate and key where the service asks for one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientTls {
    /// The CA of the server's certificate (PEM file).
    pub ca: Option<PathBuf>,
    /// The client's certificate (PEM file).
    pub cert: Option<PathBuf>,
    /// The client's private key (PEM file).
    pub key: Option<PathBuf>,
    /// The name the server's certificate must carry; default: the host of the address.
    pub domain: Option<String>,
}

impl ClientTls {
    /// Whether any TLS setting is given (then the client speaks TLS).
    pub fn is_set(&self) -> bool {
        self.ca.is_some() || self.cert.is_some() || self.key.is_some()
    }

    /// tonic's client settings for a server at `host`.
    pub fn config(&self, host: &str) -> Result<ClientTlsConfig, TlsFileError> {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let mut tls = ClientTlsConfig::new().domain_name(self.domain.clone().unwrap_or(host));
        if let Some(ca) = &self.ca {
            tls = tls.ca_certificate(Certificate::from_pem(read_pem("--tls-ca", ca)?));
        }
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                tls = tls.identity(Identity::from_pem(
                    read_pem("--tls-cert", cert)?,
                    read_pem("--tls-key", key)?,
                ));
            }
            (None, None) => {}
            (Some(p), None) | (None, Some(p)) => {
                return Err(TlsFileError {
                    what: "--tls-cert and --tls-key go together",
                    path: p.clone(),
                    cause: std::io::Error::new(std::io::ErrorKind::InvalidInput, "one of the pair"),
                })
            }
        }
        Ok(tls)
    }
}

/// A TCP connection that must send its first bytes before a deadline, or is closed: a client
/// that connects and says nothing does not hold a connection slot.
pub struct FirstByteDeadline<T> {
    inner: T,
    /// Pending until the first bytes arrive; `None` after.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    on_silent: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl<T> FirstByteDeadline<T> {
    /// `inner`, closed unless it sends within `timeout`; `on_silent` runs when it does not.
    pub fn new(inner: T, timeout: Duration, on_silent: Box<dyn FnOnce() + Send + Sync>) -> Self {
        FirstByteDeadline {
            inner,
            deadline: Some(Box::pin(tokio::time::sleep(timeout))),
            on_silent: Some(on_silent),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for FirstByteDeadline<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    this.deadline = None;
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                let expired = match &mut this.deadline {
                    Some(d) => d.as_mut().poll(cx).is_ready(),
                    None => false,
                };
                if !expired {
                    return Poll::Pending;
                }
                if let Some(f) = this.on_silent.take() {
                    f();
                }
                Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the client sent nothing before the deadline",
                )))
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for FirstByteDeadline<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<T: Connected<ConnectInfo = TcpConnectInfo>> Connected for FirstByteDeadline<T> {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn networks_contain_their_addresses_v4_and_v6() {
        let allow = AllowList::parse(&[
            "10.0.0.0/8".into(),
            "192.168.1.7".into(),
            "fd00::/8".into(),
            "::1/128".into(),
        ])
        .unwrap();
        for yes in [
            "10.0.0.1",
            "10.255.255.255",
            "192.168.1.7",
            "fd12::1",
            "::1",
        ] {
            assert!(allow.admits(ip(yes)), "{yes}");
        }
        for no in ["11.0.0.1", "192.168.1.8", "127.0.0.1", "fe80::1", "::2"] {
            assert!(!allow.admits(ip(no)), "{no}");
        }
        // An IPv4 peer on a dual-stack listener arrives IPv4-mapped.
        assert!(allow.admits(ip("::ffff:10.1.2.3")));
        let all = AllowList::parse(&["0.0.0.0/0".into(), "::/0".into()]).unwrap();
        assert!(all.admits(ip("8.8.8.8")) && all.admits(ip("2001:db8::1")));
        assert!(AllowList::parse(&[])
            .unwrap()
            .admits(ip("127.0.0.1"))
            .eq(&false));
    }

    #[test]
    fn the_default_admits_loopback_only() {
        let l = AllowList::loopback();
        assert!(l.admits(ip("127.0.0.1")) && l.admits(ip("127.3.2.1")) && l.admits(ip("::1")));
        assert!(!l.admits(ip("10.0.0.1")) && !l.admits(ip("::2")));
        assert_eq!(l.to_string(), "127.0.0.0/8, ::1/128");
    }

    #[test]
    fn bad_networks_are_named() {
        for (bad, why) in [
            ("10.0.0.0/33", "prefix length `33` is not 0 to 32"),
            ("::1/129", "not 0 to 128"),
            ("10.0.0/8", "not an IP address"),
            ("host/8", "not an IP address"),
            ("10.0.0.0/x", "prefix length `x`"),
        ] {
            let e = bad.parse::<Network>().unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains(why), "{e}");
        }
    }
}
