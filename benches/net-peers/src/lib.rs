//! What the peer servers share: their flags, the tokio servers' listener
//! (with the hub's, may's and monoio's listen backlog) and the HTTP/1.1
//! request handling (runtime-agnostic: bytes in, response bytes out), so
//! the tokio, may and monoio servers have the same shape as the hub's
//! examples; the RESP handling ([`resp`]) and monoio's thread-per-core
//! start ([`monoio_cores`]) in modules of their own.

use std::io;
use std::net::SocketAddr;

pub mod monoio_cores;
pub mod resp;

use clap::Parser;

/// Flags of every peer server.
#[derive(Parser, Debug)]
#[command(about = "A peer server for the hub's network comparison (127.0.0.1 only)")]
pub struct Args {
    /// Address to listen on (loopback only).
    #[arg(long, default_value = "127.0.0.1:7000")]
    pub addr: SocketAddr,
    /// Worker OS threads.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
}

impl Args {
    /// Parse the flags; a non-loopback address exits with status 2.
    pub fn get() -> Args {
        let a = Args::parse();
        if !a.addr.ip().is_loopback() || a.workers == 0 {
            eprintln!("--addr must be a loopback address and --workers at least 1");
            std::process::exit(2);
        }
        a
    }
}

/// The listen backlog of every server in the comparison: the hub's
/// `TcpListener::bind` and may's listen with 1,024; tokio's `bind` (through
/// mio) with 128, which 500 clients connecting at once overflow (the
/// dropped SYNs wait for a retransmission), so the tokio servers bind
/// through [`tokio_listener`] instead.
pub const BACKLOG: u32 = 1024;

/// A tokio listener on `addr` with `SO_REUSEADDR` (as mio's `bind`) and a
/// backlog of [`BACKLOG`]. Call it inside the runtime.
pub fn tokio_listener(addr: SocketAddr) -> io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// The hello response.
pub const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, world!";
const BAD_REQUEST: &[u8] =
    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// Answer every complete request in `buf` (pipelined ones too) into `out`;
/// returns the bytes consumed and whether to close the connection.
pub fn respond(buf: &[u8], out: &mut Vec<u8>) -> (usize, bool) {
    let mut start = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[start..]) {
            Ok(httparse::Status::Complete(len)) => {
                let close = req.headers.iter().any(|h| {
                    h.name.eq_ignore_ascii_case("connection")
                        && h.value.eq_ignore_ascii_case(b"close")
                });
                out.extend_from_slice(RESPONSE);
                start += len;
                if close {
                    return (start, true);
                }
            }
            Ok(httparse::Status::Partial) => return (start, false),
            Err(_) => {
                out.extend_from_slice(BAD_REQUEST);
                return (start, true);
            }
        }
    }
}
