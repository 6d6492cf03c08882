//! The echo server on may: one coroutine per connection.

use std::io::{Read, Write};

use may::go;
use may::net::TcpListener;

fn main() -> std::io::Result<()> {
    let args = net_peers::Args::get();
    may::config().set_workers(args.workers);
    let acceptor = go!(move || -> std::io::Result<()> {
        let l = TcpListener::bind(args.addr)?;
        println!("may_echo listening on {}", l.local_addr()?);
        loop {
            let (mut s, _) = l.accept()?;
            let _ = s.set_nodelay(true);
            go!(move || {
                let mut buf = vec![0u8; 4096];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    acceptor
        .join()
        .map_err(|_| std::io::Error::other("the acceptor panicked"))?
}
