//! The HTTP/1.1 hello server on may + httparse: one coroutine per
//! connection.

use std::io::{Read, Write};

use may::go;
use may::net::{TcpListener, TcpStream};

fn http(mut s: TcpStream) {
    let mut buf = vec![0u8; 8192];
    let mut filled = 0;
    let mut out = Vec::with_capacity(4096);
    loop {
        match s.read(&mut buf[filled..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => filled += n,
        }
        let (used, close) = net_peers::respond(&buf[..filled], &mut out);
        if !out.is_empty() {
            if s.write_all(&out).is_err() {
                return;
            }
            out.clear();
        }
        if close {
            return;
        }
        buf.copy_within(used..filled, 0);
        filled -= used;
        if filled == buf.len() {
            return;
        }
    }
}

fn main() -> std::io::Result<()> {
    let args = net_peers::Args::get();
    may::config().set_workers(args.workers);
    let acceptor = go!(move || -> std::io::Result<()> {
        let l = TcpListener::bind(args.addr)?;
        println!("may_http listening on {}", l.local_addr()?);
        loop {
            let (s, _) = l.accept()?;
            go!(move || http(s));
        }
    });
    acceptor
        .join()
        .map_err(|_| std::io::Error::other("the acceptor panicked"))?
}
