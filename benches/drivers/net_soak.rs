//! Many connections against a hub echo server in a child process: how much
//! resident memory each idle connection costs the server, and a soak that
//! checks every echoed byte while sampling the server's RSS.
//!
//! ```text
//! cargo run --release --example net_soak -- --connections 30000 --duration 0   # idle cost only
//! cargo run --release --example net_soak -- --connections 10000 --duration 60  # soak
//! ```
//!
//! The server is this program re-run with `--serve` (one worker, 64 KiB
//! stacks), so its RSS (`/proc/PID/status` VmRSS) is the server's alone.
//! Descriptor limits are raised to what the run needs (root may raise the
//! hard limit). Loopback only; the run is bounded by `--duration`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use greenlet::hub::net::{serve, TcpListener, TcpStream};
use greenlet::hub::{self, Runtime};

#[path = "../../examples/net_echo/mod.rs"]
mod net_echo;

/// Idle-connection memory and a byte-checked soak against a hub echo server.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Concurrent connections.
    #[arg(long, default_value_t = 10_000)]
    connections: usize,
    /// Seconds of soak after the idle measurement (0: idle measurement only; at most 600).
    #[arg(long, default_value_t = 60)]
    duration: u64,
    /// Message size of the soak, in bytes.
    #[arg(long, default_value_t = 1024)]
    size: usize,
    /// The server handler's read buffer, in bytes (heap, held while data is
    /// queued, none while idle).
    #[arg(long, default_value_t = 4096)]
    buffer: usize,
    /// Run as the server (internal).
    #[arg(long, hide = true)]
    serve: bool,
}

fn raise_nofile(want: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit to fill, then to read.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < want {
            lim.rlim_cur = want;
            lim.rlim_max = lim.rlim_max.max(want);
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                eprintln!("net_soak: could not raise RLIMIT_NOFILE to {want}");
            }
        }
    }
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// How many mappings the process has (`/proc/PID/maps` lines), against
/// `vm.max_map_count`.
fn map_count(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

fn server(buffer: usize) -> ExitCode {
    raise_nofile(70_000);
    let rt = match Runtime::builder()
        .worker_threads(1)
        .stack_size(64 * 1024)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("net_soak server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let out = rt.block_on(move || {
        let l = TcpListener::bind("127.0.0.1:0")?;
        println!("PORT {}", l.local_addr()?.port());
        serve(l, move |s| net_echo::echo(s, buffer))
    });
    match out {
        Ok(Ok(())) => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}

fn start_server(buffer: usize) -> std::io::Result<(Child, SocketAddr)> {
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--serve", "--buffer", &buffer.to_string()])
        .stdout(Stdio::piped())
        .spawn()?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        BufReader::new(out).read_line(&mut line)?;
    }
    let port: u16 = line
        .trim()
        .strip_prefix("PORT ")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("server said {line:?}")))?;
    Ok((child, SocketAddr::from(([127, 0, 0, 1], port))))
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.serve {
        return server(args.buffer);
    }
    if args.connections == 0 || args.size == 0 || args.buffer == 0 || args.duration > 600 {
        eprintln!(
            "net_soak: --connections, --size and --buffer must be at least 1, --duration at most 600"
        );
        return ExitCode::from(2);
    }
    raise_nofile(args.connections as u64 + 1000);
    let (mut child, addr) = match start_server(args.buffer) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("net_soak: could not start the server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(200));
    let base = rss_kib(pid);
    let base_maps = map_count(pid);
    // Idle: plain blocking sockets (no client green threads), one byte
    // echoed on each so every handler has run and parked in its read.
    let start = Instant::now();
    let mut idle = Vec::with_capacity(args.connections);
    for i in 0..args.connections {
        match std::net::TcpStream::connect(addr) {
            Ok(c) => idle.push(c),
            Err(e) => {
                eprintln!("net_soak: connection {i} failed: {e}");
                break;
            }
        }
    }
    let connected_in = start.elapsed();
    let mut served = 0usize;
    for c in &mut idle {
        let _ = c.set_read_timeout(Some(Duration::from_secs(30)));
        let mut b = [0u8; 1];
        if c.write_all(b"x").is_ok() && c.read_exact(&mut b).is_ok() && b[0] == b'x' {
            served += 1;
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    let with = rss_kib(pid);
    let with_maps = map_count(pid);
    let per = (with.saturating_sub(base)) as f64 * 1024.0 / served.max(1) as f64;
    println!(
        "idle: {served}/{} connections served and parked in {:.1} s (connected in {:.1} s); server RSS \
         {base} KiB -> {with} KiB: {per:.0} bytes per idle connection",
        args.connections,
        start.elapsed().as_secs_f64(),
        connected_in.as_secs_f64()
    );
    println!("server mappings: {base_maps} before, {with_maps} with the idle connections");
    drop(idle);
    let mut ok = served == args.connections;
    if args.duration > 0 {
        ok &= soak(&args, addr, pid);
    }
    let _ = child.kill();
    let _ = child.wait();
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Every connection echoes `size`-byte messages for `duration` seconds,
/// checking every byte; the server's RSS is sampled every 5 s.
fn soak(args: &Args, addr: SocketAddr, pid: u32) -> bool {
    let rt = match Runtime::builder()
        .worker_threads(1)
        .stack_size(64 * 1024)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("net_soak: {e}");
            return false;
        }
    };
    let (n, size, duration) = (args.connections, args.size, args.duration);
    let bytes = Arc::new(AtomicU64::new(0));
    let bad = Arc::new(AtomicU64::new(0));
    let (b2, bad2) = (Arc::clone(&bytes), Arc::clone(&bad));
    let out = rt.block_on(move || {
        let end = Instant::now() + Duration::from_secs(duration);
        let hs: Vec<_> = (0..n)
            .map(|id| {
                let (bytes, bad) = (Arc::clone(&b2), Arc::clone(&bad2));
                hub::spawn(move || {
                    let Ok(mut s) = TcpStream::connect(addr) else {
                        bad.fetch_add(1, Ordering::Relaxed);
                        return;
                    };
                    let mut msg: Vec<u8> = (0..size).map(|i| (i * 7 + id) as u8).collect();
                    let mut back = vec![0u8; size];
                    let mut round = 0u8;
                    while Instant::now() < end {
                        msg[0] = round;
                        if s.write_all(&msg).is_err()
                            || s.read_exact(&mut back).is_err()
                            || back != msg
                        {
                            bad.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                        bytes.fetch_add(size as u64, Ordering::Relaxed);
                        round = round.wrapping_add(1);
                    }
                })
            })
            .collect();
        let sampler = hub::spawn(move || {
            let mut samples = Vec::new();
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(duration) {
                hub::sleep(Duration::from_secs(5).min(Duration::from_secs(duration)));
                samples.push((t0.elapsed().as_secs(), rss_kib(pid)));
            }
            samples
        });
        for h in hs {
            let _ = h.join();
        }
        sampler.join().unwrap_or_default()
    });
    let samples = out.unwrap_or_default();
    let total = bytes.load(Ordering::Relaxed);
    let bad = bad.load(Ordering::Relaxed);
    println!(
        "soak: {n} connections x {size} B for {duration} s: {} MiB echoed and checked, {bad} lost or corrupted",
        total >> 20
    );
    println!("server RSS (s, KiB): {samples:?}");
    bad == 0
}
