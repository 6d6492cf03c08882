//! Name resolution that parks: [`ToSocketAddrs`], the addresses the
//! network API accepts. A literal address (`"127.0.0.1:80"`, a
//! `SocketAddr`, `(IpAddr, u16)`) resolves inline; a host name
//! (`"localhost:8080"`, `("example.com", 443)`) goes to `getaddrinfo` on
//! the runtime's blocking pool while the calling green thread parks, so
//! its worker runs other green threads meanwhile. Off a green thread (a
//! plain thread, a blocking-pool thread) the lookup runs inline.
//!
//! Owns the trait, its implementations and the lookup. Uses the worker
//! (is this a green thread?) and [`spawn_blocking`].

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use super::super::blocking::spawn_blocking;
use super::super::worker;
use super::error::NetError;

mod sealed {
    /// Only this crate implements [`ToSocketAddrs`](super::ToSocketAddrs).
    pub trait Sealed {}
}

/// An address (or addresses) to bind or connect to, resolved without
/// blocking the worker: literal addresses inline, host names on the
/// blocking pool while the green thread parks. Implemented for the types
/// `std::net::ToSocketAddrs` takes: `SocketAddr` (and its V4/V6 forms),
/// `(IpAddr, u16)`, `(&str, u16)`, `(String, u16)`, `&str`, `String`,
/// `[SocketAddr]`, and references to them.
///
/// ```
/// use greenlet::hub::{self, net::ToSocketAddrs};
/// let addrs = hub::run(|| "localhost:8080".resolve().unwrap()).unwrap();
/// assert!(addrs.iter().all(|a| a.ip().is_loopback() && a.port() == 8080));
/// assert_eq!("127.0.0.1:1".resolve().unwrap(), ["127.0.0.1:1".parse().unwrap()]);
/// ```
pub trait ToSocketAddrs: sealed::Sealed {
    /// The socket addresses this names. Parks (a parking point) while a
    /// host name is looked up.
    ///
    /// # Errors
    /// A malformed address (`InvalidInput`), or the lookup's error, with a
    /// message naming the address ([`NetError::Addr`]).
    ///
    /// ```
    /// use greenlet::hub::net::ToSocketAddrs;
    /// let err = "no-port-here".resolve().unwrap_err();
    /// assert!(err.to_string().contains("no-port-here"));
    /// ```
    fn resolve(&self) -> io::Result<Vec<SocketAddr>>;

    /// The address as written, for messages.
    ///
    /// ```
    /// use greenlet::hub::net::ToSocketAddrs;
    /// assert_eq!(("localhost", 80).describe(), "localhost:80");
    /// ```
    fn describe(&self) -> String;
}

/// Resolve `host` (not a literal address) and `port`: on the blocking
/// pool when called on a green thread, inline elsewhere.
fn lookup(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    let text = format!("{host}:{port}");
    let on_green = worker::with_current_task(|_, _| ()).is_some();
    let found = if on_green {
        let owned = host.to_owned();
        spawn_blocking(move || getaddrinfo(&owned, port))
            .join()
            .map_err(io::Error::other)
            .and_then(|r| r)
    } else {
        getaddrinfo(host, port)
    };
    match found {
        Ok(addrs) if addrs.is_empty() => Err(NetError::NoAddress { addr: text }.into()),
        Ok(addrs) => Ok(addrs),
        Err(e) => Err(NetError::at("resolve", text, e)),
    }
}

/// The system resolver, blocking.
fn getaddrinfo(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    std::net::ToSocketAddrs::to_socket_addrs(&(host, port)).map(Iterator::collect)
}

/// A host and a port (`host:port`, `[v6]:port`), or a literal address.
fn resolve_str(s: &str) -> io::Result<Vec<SocketAddr>> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(vec![a]);
    }
    let bad = || -> io::Error {
        NetError::Addr {
            op: "resolve",
            addr: s.to_owned(),
            kind: io::ErrorKind::InvalidInput,
            message: "not an address: expected host:port (like localhost:8080 or [::1]:80)".into(),
        }
        .into()
    };
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    resolve_host(host, port)
}

/// `host` (a name or a literal IP) and `port`.
fn resolve_host(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    lookup(host, port)
}

macro_rules! literal {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl ToSocketAddrs for $t {
            fn resolve(&self) -> io::Result<Vec<SocketAddr>> {
                Ok(vec![SocketAddr::from(*self)])
            }
            fn describe(&self) -> String {
                SocketAddr::from(*self).to_string()
            }
        }
    )*};
}

literal!(
    SocketAddr,
    SocketAddrV4,
    SocketAddrV6,
    (IpAddr, u16),
    (Ipv4Addr, u16),
    (Ipv6Addr, u16)
);

impl sealed::Sealed for str {}
impl ToSocketAddrs for str {
    fn resolve(&self) -> io::Result<Vec<SocketAddr>> {
        resolve_str(self)
    }
    fn describe(&self) -> String {
        self.to_owned()
    }
}

impl sealed::Sealed for String {}
impl ToSocketAddrs for String {
    fn resolve(&self) -> io::Result<Vec<SocketAddr>> {
        resolve_str(self)
    }
    fn describe(&self) -> String {
        self.clone()
    }
}

impl sealed::Sealed for (&str, u16) {}
impl ToSocketAddrs for (&str, u16) {
    fn resolve(&self) -> io::Result<Vec<SocketAddr>> {
        resolve_host(self.0, self.1)
    }
    fn describe(&self) -> String {
        format!("{}:{}", self.0, self.1)
    }
}

impl sealed::Sealed for (String, u16) {}
impl ToSocketAddrs for (String, u16) {
    fn resolve(&self) -> io::Result<Vec<SocketAddr>> {
        resolve_host(&self.0, self.1)
    }
    fn describe(&self) -> String {
        format!("{}:{}", self.0, self.1)
    }
}

impl sealed::Sealed for [SocketAddr] {}
impl ToSocketAddrs for [SocketAddr] {
    fn resolve(&self) -> io::Result<Vec<SocketAddr>> {
        Ok(self.to_vec())
    }
    fn describe(&self) -> String {
        format!("{self:?}")
    }
}

impl<T: ToSocketAddrs + ?Sized> sealed::Sealed for &T {}
impl<T: ToSocketAddrs + ?Sized> ToSocketAddrs for &T {
    fn resolve(&self) -> io::Result<Vec<SocketAddr>> {
        (**self).resolve()
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
}

/// Every address `addr` names, or [`NetError::NoAddress`] if none.
pub(crate) fn addrs_of(addr: &(impl ToSocketAddrs + ?Sized)) -> io::Result<Vec<SocketAddr>> {
    let addrs = addr.resolve()?;
    if addrs.is_empty() {
        return Err(NetError::NoAddress {
            addr: addr.describe(),
        }
        .into());
    }
    Ok(addrs)
}
