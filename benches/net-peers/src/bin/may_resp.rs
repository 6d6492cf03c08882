//! The RESP server on may: one coroutine per connection, every coroutine
//! on the one store.

use std::sync::Arc;

use may::go;
use may::net::TcpListener;
use net_peers::resp::{serve_blocking, Store};

fn main() -> std::io::Result<()> {
    let args = net_peers::Args::get();
    may::config().set_workers(args.workers);
    let store = Arc::new(Store::default());
    let acceptor = go!(move || -> std::io::Result<()> {
        let l = TcpListener::bind(args.addr)?;
        println!("may_resp listening on {}", l.local_addr()?);
        loop {
            let (s, _) = l.accept()?;
            let _ = s.set_nodelay(true);
            let store = Arc::clone(&store);
            go!(move || serve_blocking(s, &store));
        }
    });
    acceptor
        .join()
        .map_err(|_| std::io::Error::other("the acceptor panicked"))?
}
