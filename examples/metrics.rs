//! Runtime metrics while a load runs: channel ping-pong pairs, sleepers,
//! a spawn churn and blocking calls on a hub runtime, with the runtime's
//! [`Metrics`](greenlet::hub::Metrics) printed every interval.
//!
//! ```text
//! cargo run --release --example metrics -- --workers 2 --seconds 3 --interval-ms 500
//! cargo run --release --example metrics -- --idle --seconds 10 --watchdog-ms 100
//! ```
//! With `--idle` no load runs (the runtime only waits), and the end says
//! how often the watchdog thread woke and how much CPU it used (from its
//! `/proc` schedstat line, on Linux): the measurement behind the
//! watchdog's default threshold. `--help` for the flags, exit 2 on a bad
//! flag.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;
use greenlet::hub::{self, Runtime};

/// Print a hub runtime's metrics periodically while a load runs.
#[derive(Parser, Debug)]
#[command(name = "metrics")]
struct Cli {
    /// Worker threads.
    #[arg(long, value_name = "N", default_value = "2",
          value_parser = clap::value_parser!(u16).range(1..=64))]
    workers: u16,
    /// How long to run, in seconds.
    #[arg(long, value_name = "SECONDS", default_value = "3",
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    seconds: u64,
    /// Milliseconds between two printed snapshots.
    #[arg(long, value_name = "MS", default_value = "500",
          value_parser = clap::value_parser!(u64).range(10..=60_000))]
    interval_ms: u64,
    /// The watchdog's threshold in milliseconds (0: no watchdog).
    #[arg(long, value_name = "MS", default_value = "100",
          value_parser = clap::value_parser!(u64).range(0..=60_000))]
    watchdog_ms: u64,
    /// Run no load: measure an idle runtime (and its watchdog thread).
    #[arg(long)]
    idle: bool,
}

fn main() {
    let cli = Cli::parse();
    let watchdog = (cli.watchdog_ms > 0).then(|| Duration::from_millis(cli.watchdog_ms));
    let rt = Runtime::builder()
        .worker_threads(usize::from(cli.workers))
        .max_blocking_threads(4)
        .watchdog(watchdog)
        .build()
        .unwrap_or_else(|e| {
            eprintln!("metrics: cannot start the runtime: {e}");
            std::process::exit(1);
        });
    let handle = rt.handle();
    let stop = Arc::new(AtomicBool::new(false));
    let load = (!cli.idle).then(|| {
        let stop = Arc::clone(&stop);
        handle.spawn(move || run_load(&stop))
    });
    let start = Instant::now();
    let end = start + Duration::from_secs(cli.seconds);
    let interval = Duration::from_millis(cli.interval_ms);
    // The watchdog thread names itself once it runs: look for a moment.
    let watchdog_before = (0..100).find_map(|_| {
        let seen = watchdog_schedstat();
        if seen.is_none() && watchdog.is_some() {
            thread::sleep(Duration::from_millis(1));
        }
        seen
    });
    while Instant::now() < end {
        thread::sleep(interval.min(end.saturating_duration_since(Instant::now())));
        println!(
            "--- {:.1} s\n{}",
            start.elapsed().as_secs_f64(),
            handle.metrics()
        );
    }
    let watchdog_after = watchdog_schedstat();
    let elapsed = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::SeqCst);
    if let Some(load) = load {
        let rounds = load.join().expect("the load ends without a panic");
        println!("load: {rounds} ping-pong rounds");
    }
    match (watchdog_before, watchdog_after) {
        (Some((cpu0, runs0)), Some((cpu1, runs1))) => println!(
            "watchdog thread: {:.1} wakeups/s, {:.1} us CPU/s ({:.4} % of one CPU)",
            (runs1 - runs0) as f64 / elapsed,
            (cpu1 - cpu0) as f64 / 1e3 / elapsed,
            (cpu1 - cpu0) as f64 / 1e7 / elapsed
        ),
        _ => println!("watchdog thread: none (or no /proc schedstat to read)"),
    }
}

/// The load, in a green thread: two ping-pong pairs, eight sleepers, a
/// spawn churn and a blocking call now and then, until `stop`. Returns the
/// ping-pong rounds done.
fn run_load(stop: &Arc<AtomicBool>) -> u64 {
    let mut group = Vec::new();
    for _ in 0..2 {
        let stop = Arc::clone(stop);
        group.push(hub::spawn(move || {
            let (to_echo, from_main) = hub::channel::<u64>(1);
            let (to_main, from_echo) = hub::channel::<u64>(1);
            let echo = hub::spawn(move || {
                for v in from_main.iter() {
                    if to_main.send(v).is_err() {
                        break;
                    }
                }
            });
            let mut rounds = 0;
            while !stop.load(Ordering::Relaxed) {
                if to_echo.send(rounds).is_err() || from_echo.recv().is_err() {
                    break;
                }
                rounds += 1;
                if rounds % 1024 == 0 {
                    hub::sleep(Duration::from_millis(1));
                }
            }
            drop(to_echo);
            let _ = echo.join();
            rounds
        }));
    }
    for i in 0..8u64 {
        let stop = Arc::clone(stop);
        group.push(hub::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                hub::sleep(Duration::from_millis(5 + i));
            }
            0
        }));
    }
    let churn_stop = Arc::clone(stop);
    group.push(hub::spawn(move || {
        let mut n = 0u64;
        while !churn_stop.load(Ordering::Relaxed) {
            let batch: Vec<_> = (0..16).map(|i| hub::spawn(move || i * 2)).collect();
            for h in batch {
                let _ = h.join();
            }
            n += 1;
            if n.is_multiple_of(64) {
                let _ = hub::spawn_blocking(|| thread::sleep(Duration::from_millis(2))).join();
            }
            hub::sleep(Duration::from_millis(1));
        }
        0
    }));
    group.into_iter().map(|h| h.join().unwrap_or(0)).sum()
}

/// The watchdog thread's CPU time (ns) and times scheduled, from its
/// `/proc/self/task/TID/schedstat` line; `None` where there is none.
fn watchdog_schedstat() -> Option<(u64, u64)> {
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = entry.ok()?.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() != "hub-watchdog" {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("schedstat")).ok()?;
        let mut fields = stat.split_whitespace().map(|f| f.parse::<u64>().ok());
        let cpu = fields.next()??;
        let runs = fields.nth(1)??;
        return Some((cpu, runs));
    }
    None
}
