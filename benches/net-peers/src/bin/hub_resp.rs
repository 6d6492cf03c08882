//! The RESP server on this crate's hub: `greenlet::hub::net::serve` starts
//! a green thread per connection, which reads and writes with the plain
//! `std::io` traits (each read or write parks the green thread until its
//! socket is ready); every green thread on the one store. The same green
//! thread stacks as the hub's `http_hello` example (64 KiB).

use std::process::ExitCode;
use std::sync::Arc;

use greenlet::hub::net::{serve, TcpListener};
use greenlet::hub::Runtime;
use net_peers::resp::{serve_blocking, Store};

fn main() -> ExitCode {
    let args = net_peers::Args::get();
    let rt = match Runtime::builder()
        .worker_threads(args.workers)
        .stack_size(64 * 1024)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hub_resp: {e}");
            return ExitCode::from(2);
        }
    };
    let store = Arc::new(Store::default());
    let addr = args.addr;
    let out = rt.block_on(move || {
        let l = TcpListener::bind(addr)?;
        println!("hub_resp listening on {}", l.local_addr()?);
        serve(l, move |s| {
            let _ = s.set_nodelay(true);
            serve_blocking(s, &store)
        })
    });
    match out {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("hub_resp: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("hub_resp: {e}");
            ExitCode::FAILURE
        }
    }
}
