//! An echo server on the hub: one green thread per connection, each
//! echoing what it reads until the client closes, with a 4 KiB read buffer
//! it holds only while data is queued (see `net_echo`).
//!
//! ```text
//! cargo run --release --example echo_server -- --addr 127.0.0.1:7000 --workers 1
//! ```

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use greenlet::hub;
use greenlet::hub::net::{serve, TcpListener};
use greenlet::hub::Runtime;

mod net_echo;

/// Echo every byte back, one green thread per connection (127.0.0.1 only).
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Address to listen on (loopback only).
    #[arg(long, default_value = "127.0.0.1:7000")]
    addr: SocketAddr,
    /// Worker OS threads.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Each connection's green-thread stack, in KiB.
    #[arg(long, default_value_t = 64)]
    stack_kib: usize,
    /// Accept with the loop written the `std` way (`loop { accept; spawn
    /// }`) instead of `net::serve` (both spread the connections over the
    /// workers).
    #[arg(long)]
    accept_loop: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !args.addr.ip().is_loopback() {
        eprintln!(
            "echo_server: --addr must be a loopback address (127.0.0.1), not {}",
            args.addr
        );
        return ExitCode::from(2);
    }
    let rt = match Runtime::builder()
        .worker_threads(args.workers)
        .stack_size(args.stack_kib * 1024)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("echo_server: {e}");
            return ExitCode::from(2);
        }
    };
    let (addr, accept_loop) = (args.addr, args.accept_loop);
    let out = rt.block_on(move || {
        let l = TcpListener::bind(addr)?;
        println!("echo_server listening on {}", l.local_addr()?);
        if !accept_loop {
            return serve(l, |s| net_echo::echo(s, 4096));
        }
        loop {
            let (s, _) = l.accept()?;
            hub::spawn(move || net_echo::echo(s, 4096));
        }
    });
    match out {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("echo_server: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("echo_server: {e}");
            ExitCode::FAILURE
        }
    }
}
