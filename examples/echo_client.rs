//! A load generator for echo servers: `--connections` green threads, each
//! sending `--size`-byte messages and reading each echo back (checking
//! every byte) for `--duration` seconds; prints requests/s and latency
//! percentiles from an HDR histogram. `--idle N` first opens N connections
//! that never send (slowloris), to compare the active clients' p99 with
//! and without them.
//!
//! ```text
//! cargo run --release --example echo_client -- --addr 127.0.0.1:7000 --connections 50 --size 64 --duration 5
//! ```
//!
//! Fairness: each connection counts the echoes it got back; the report
//! gives the slowest connection's count over the mean count (1.0: every
//! connection served alike; 0.5: one got half the average).
//!
//! The last line is machine-readable:
//! `RESULT requests=.. rps=.. p50_us=.. p99_us=.. p999_us=.. max_us=.. slowest_over_mean=.. errors=..`.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use greenlet::hub::net::TcpStream;
use greenlet::hub::{self, Runtime};
use hdrhistogram::Histogram;

/// Drive an echo server and report its throughput and latency.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The server (loopback only).
    #[arg(long, default_value = "127.0.0.1:7000")]
    addr: SocketAddr,
    /// Concurrent connections.
    #[arg(long, default_value_t = 50)]
    connections: usize,
    /// Message size in bytes.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Seconds to run (at most 600).
    #[arg(long, default_value_t = 5)]
    duration: u64,
    /// Worker OS threads of the client.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Idle connections opened first and held open without sending (a
    /// slowloris load next to the measured ones), at most 10,000.
    #[arg(long, default_value_t = 0)]
    idle: usize,
}

/// What one connection measured.
struct Outcome {
    hist: Histogram<u64>,
    errors: u64,
}

fn connection(addr: SocketAddr, size: usize, end: Instant, id: usize) -> Outcome {
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 2).expect("histogram bounds");
    let mut errors = 0;
    let mut s = match TcpStream::connect(addr) {
        Ok(s) => s,
        Err(_) => return Outcome { hist, errors: 1 },
    };
    let _ = s.set_nodelay(true);
    let msg: Vec<u8> = (0..size).map(|i| (i + id) as u8).collect();
    let mut back = vec![0u8; size];
    while Instant::now() < end {
        let t = Instant::now();
        if s.write_all(&msg).is_err() || s.read_exact(&mut back).is_err() {
            errors += 1;
            break;
        }
        if back != msg {
            errors += 1;
        }
        let us = t.elapsed().as_micros().max(1) as u64;
        hist.saturating_record(us);
    }
    Outcome { hist, errors }
}

/// The fewest echoes any connection got over the mean per connection (0
/// when nothing was served).
fn slowest_over_mean(served: &[u64]) -> f64 {
    let total: u64 = served.iter().sum();
    let least = served.iter().copied().min().unwrap_or(0);
    if total == 0 {
        return 0.0;
    }
    least as f64 * served.len() as f64 / total as f64
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !args.addr.ip().is_loopback() {
        eprintln!(
            "echo_client: --addr must be a loopback address, not {}",
            args.addr
        );
        return ExitCode::from(2);
    }
    if args.connections == 0
        || args.size == 0
        || args.duration == 0
        || args.duration > 600
        || args.idle > 10_000
    {
        eprintln!(
            "echo_client: --connections and --size must be at least 1, --duration 1..=600, \
             --idle at most 10000"
        );
        return ExitCode::from(2);
    }
    let mut idle = Vec::with_capacity(args.idle);
    for _ in 0..args.idle {
        match std::net::TcpStream::connect(args.addr) {
            Ok(c) => idle.push(c),
            Err(e) => {
                eprintln!("echo_client: an idle connection failed: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let rt = match Runtime::builder()
        .worker_threads(args.workers)
        .stack_size(64 * 1024)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("echo_client: {e}");
            return ExitCode::from(2);
        }
    };
    let Args {
        addr,
        connections,
        size,
        duration,
        ..
    } = args;
    let out = rt.block_on(move || {
        let start = Instant::now();
        let end = start + Duration::from_secs(duration);
        let hs: Vec<_> = (0..connections)
            .map(|id| hub::spawn(move || connection(addr, size, end, id)))
            .collect();
        let mut hist =
            Histogram::<u64>::new_with_bounds(1, 60_000_000, 2).expect("histogram bounds");
        let mut errors = 0;
        let mut served = Vec::with_capacity(connections);
        for h in hs {
            match h.join() {
                Ok(o) => {
                    let _ = hist.add(&o.hist);
                    served.push(o.hist.len());
                    errors += o.errors;
                }
                Err(_) => {
                    served.push(0);
                    errors += 1;
                }
            }
        }
        (hist, errors, start.elapsed(), slowest_over_mean(&served))
    });
    let (hist, errors, elapsed, slowest) = match out {
        Ok(v) => v,
        Err(e) => {
            eprintln!("echo_client: {e}");
            return ExitCode::FAILURE;
        }
    };
    drop(idle);
    let n = hist.len();
    let rps = n as f64 / elapsed.as_secs_f64();
    println!(
        "{connections} connections, {size} B messages, {:.1} s: {n} requests, {rps:.0} requests/s; \
         latency p50 {} us, p99 {} us, p99.9 {} us, max {} us; slowest connection served \
         {slowest:.2} of the mean; {errors} errors",
        elapsed.as_secs_f64(),
        hist.value_at_quantile(0.5),
        hist.value_at_quantile(0.99),
        hist.value_at_quantile(0.999),
        hist.max()
    );
    println!(
        "RESULT requests={n} rps={rps:.0} p50_us={} p99_us={} p999_us={} max_us={} \
         slowest_over_mean={slowest:.3} errors={errors}",
        hist.value_at_quantile(0.5),
        hist.value_at_quantile(0.99),
        hist.value_at_quantile(0.999),
        hist.max()
    );
    if errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
