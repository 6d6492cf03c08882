//! A line-echo service on the hub that shuts down gracefully: on Ctrl-C
//! (SIGINT), or after `--stop-after-ms`, a green thread calls
//! `Handle::shutdown`; the `serve` loop then returns `Ok(())`, every
//! connection's green thread is cancelled at its next parking point (its
//! destructors run: here each says goodbye to its client), and the runtime's
//! owner finishes the shutdown and prints what it found.
//!
//! ```text
//! cargo run --release --example graceful_shutdown -- --addr 127.0.0.1:7000
//! # in another terminal: nc 127.0.0.1 7000, type lines, then Ctrl-C the server
//! cargo run --release --example graceful_shutdown -- --stop-after-ms 200 --clients 4
//! ```
//!
//! The last line is machine-readable: `RESULT served=.. goodbyes=.. refused=.. serve_ok=..`.

use std::io::{BufRead, BufReader, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use greenlet::hub::net::{serve, TcpListener, TcpStream};
use greenlet::hub::{self, signal, Handle, Runtime};

/// Echo lines over TCP until Ctrl-C, then stop gracefully.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The address to listen on (127.0.0.1 only: a port, or 0 for any).
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: std::net::SocketAddrV4,
    /// Worker OS threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=64))]
    workers: u64,
    /// How long the shutdown waits for the connections' green threads, in
    /// milliseconds.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    grace_ms: u64,
    /// Stop after this many milliseconds, as Ctrl-C would (0: only on Ctrl-C).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    stop_after_ms: u64,
    /// Client connections (on plain threads of this process) that stay
    /// open across the shutdown, to show each one's goodbye.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=100))]
    clients: u64,
}

/// Says goodbye to its client when its connection's green thread ends,
/// however it ends (the shutdown's cancellation unwinds through it).
struct Goodbye<'a> {
    stream: &'a TcpStream,
    said: &'a AtomicUsize,
}

impl Drop for Goodbye<'_> {
    fn drop(&mut self) {
        if self.stream.write_all(b"goodbye\n").is_ok() {
            self.said.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Echo each line of one connection until it closes or the service stops.
fn handle(s: TcpStream, served: &AtomicUsize, said: &AtomicUsize) {
    served.fetch_add(1, Ordering::SeqCst);
    let _goodbye = Goodbye { stream: &s, said };
    let mut r = BufReader::new(&s);
    let mut line = String::new();
    loop {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if (&s).write_all(line.as_bytes()).is_err() {
                    return;
                }
            }
        }
    }
}

/// A client that sends one line, checks its echo, then waits for the
/// server's goodbye; whether it got both.
fn client(addr: std::net::SocketAddr) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    if s.write_all(b"hello\n").is_err() {
        return false;
    }
    let mut r = BufReader::new(s);
    let (mut echo, mut bye) = (String::new(), String::new());
    r.read_line(&mut echo).is_ok()
        && echo == "hello\n"
        && r.read_line(&mut bye).is_ok()
        && bye == "goodbye\n"
}

fn main() -> ExitCode {
    let args = Args::parse();
    let rt = match Runtime::builder()
        .worker_threads(args.workers as usize)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("graceful_shutdown: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let grace = Duration::from_millis(args.grace_ms);
    let served = Arc::new(AtomicUsize::new(0));
    let said = Arc::new(AtomicUsize::new(0));
    let (s1, s2) = (Arc::clone(&served), Arc::clone(&said));
    let stop_after = args.stop_after_ms;
    let addr = args.addr;
    let listener = rt.block_on(move || TcpListener::bind(addr));
    let listener = match listener {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => {
            eprintln!("graceful_shutdown: cannot listen on {addr}: {e}");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("graceful_shutdown: {e}");
            return ExitCode::FAILURE;
        }
    };
    let local = listener
        .local_addr()
        .expect("a bound listener has an address");
    println!("listening on {local}; Ctrl-C stops");
    // The stopper: Ctrl-C, or the timer.
    rt.handle().spawn(move || {
        if stop_after > 0 {
            hub::sleep(Duration::from_millis(stop_after));
        } else if let Err(e) = signal::ctrl_c() {
            eprintln!("graceful_shutdown: cannot watch Ctrl-C ({e}); stopping now");
        }
        println!("stopping");
        Handle::current()
            .expect("a green thread runs in a runtime")
            .shutdown(grace);
    });
    let clients: Vec<_> = (0..args.clients)
        .map(|_| std::thread::spawn(move || client(local)))
        .collect();
    let server = rt
        .handle()
        .spawn(move || serve(listener, move |s| handle(s, &s1, &s2)));
    let serve_ok = matches!(server.join(), Ok(Ok(())));
    let report = rt.shutdown_timeout(grace);
    let clients_ok = clients
        .into_iter()
        .map(|c| c.join().unwrap_or(false))
        .filter(|ok| *ok)
        .count();
    println!(
        "RESULT served={} goodbyes={} clients_ok={clients_ok} refused={} serve_ok={serve_ok}",
        served.load(Ordering::SeqCst),
        said.load(Ordering::SeqCst),
        report.refused.len()
    );
    if serve_ok && report.refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
