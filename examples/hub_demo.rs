//! Green threads on the hub: a pipeline of stages joined by bounded
//! channels, many sleepers (with the resident memory each costs), or a
//! dump of a runtime's green threads.
//!
//! Run with `cargo run --release --example hub_demo -- --help`.

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use greenlet::hub::{self, Runtime, TaskState};

/// Green threads on the hub.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Worker OS threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=256))]
    workers: u16,
    /// Stack size of each green thread, in KiB.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(16..=65536))]
    stack_kib: u32,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Numbers flow through a chain of green threads joined by bounded
    /// channels; each stage adds one (the default command).
    Pipeline {
        /// Values sent through the chain.
        #[arg(long, default_value_t = 10_000)]
        items: u64,
        /// Green threads in the chain.
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=10_000))]
        stages: u64,
    },
    /// Spawn green threads that all sleep, and report the time taken and
    /// the resident memory per sleeper.
    Sleepers {
        /// Green threads (each holds a guarded stack: two kernel mappings,
        /// so the default vm.max_map_count allows about 32k).
        #[arg(long, default_value_t = 10_000)]
        count: usize,
        /// How long each sleeps, in milliseconds.
        #[arg(long, default_value_t = 10)]
        sleep_ms: u64,
    },
    /// Print the runtime's green threads while a few of them wait.
    Dump,
}

fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn pipeline(items: u64, stages: u64) -> u64 {
    let (first_tx, mut rx) = hub::channel::<u64>(16);
    let mut stage_handles = Vec::new();
    for _ in 0..stages {
        let (tx, next_rx) = hub::channel::<u64>(16);
        let input = std::mem::replace(&mut rx, next_rx);
        stage_handles.push(hub::spawn(move || {
            for v in input.iter() {
                if tx.send(v + 1).is_err() {
                    break;
                }
            }
        }));
    }
    let feeder = hub::spawn(move || (0..items).for_each(|i| first_tx.send(i).unwrap()));
    let sum: u64 = rx.iter().sum();
    feeder.join().unwrap();
    stage_handles.into_iter().for_each(|h| h.join().unwrap());
    sum
}

fn sleepers(count: usize, sleep_ms: u64) -> Result<(), String> {
    let before = resident_bytes();
    let parked = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let handles: Vec<_> = (0..count)
        .map(|_| {
            let p = Arc::clone(&parked);
            hub::spawn(move || {
                p.fetch_add(1, Ordering::Relaxed);
                hub::sleep(Duration::from_millis(sleep_ms));
            })
        })
        .collect();
    // All parked (or failed to start: no stack) before the RSS is read.
    while parked.load(Ordering::Relaxed) + handles.iter().filter(|h| h.is_finished()).count()
        < count
    {
        hub::sleep(Duration::from_millis(1));
    }
    let during = resident_bytes();
    let mut failed = 0;
    for h in handles {
        if let Err(e) = h.join() {
            failed += 1;
            if failed == 1 {
                eprintln!("hub_demo: {e}");
            }
        }
    }
    let elapsed = start.elapsed();
    println!("{count} sleepers of {sleep_ms} ms: all woken after {elapsed:?}");
    if let (Some(b), Some(d)) = (before, during) {
        let per = d.saturating_sub(b) / count.max(1) as u64;
        println!(
            "resident memory per sleeper: {per} bytes ({:.1} KiB)",
            per as f64 / 1024.0
        );
    }
    if failed > 0 {
        return Err(format!("{failed} green threads could not start"));
    }
    Ok(())
}

fn dump() {
    let (tx, rx) = hub::unbounded::<()>();
    let rx = Arc::new(rx);
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let rx = Arc::clone(&rx);
            hub::task()
                .name(format!("waiter-{i}"))
                .spawn(move || {
                    let _ = rx.recv();
                })
                .expect("in a runtime")
        })
        .collect();
    let sleeper = hub::task()
        .name("sleeper")
        .spawn(|| hub::sleep(Duration::from_secs(3600)))
        .expect("in a runtime");
    while waiters
        .iter()
        .any(|w| !matches!(w.state(), TaskState::Parked(_)))
        || !matches!(sleeper.state(), TaskState::Parked(_))
    {
        hub::yield_now();
    }
    for t in hub::tasks().expect("in a runtime") {
        println!("{t}");
    }
    drop(tx);
    sleeper.cancel();
    waiters.into_iter().for_each(|w| w.join().unwrap());
    let _ = sleeper.join();
}

fn main() -> ExitCode {
    let args = Args::parse();
    let rt = match Runtime::builder()
        .worker_threads(usize::from(args.workers))
        .stack_size(args.stack_kib as usize * 1024)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hub_demo: {e}");
            return ExitCode::FAILURE;
        }
    };
    let command = args.command.unwrap_or(Command::Pipeline {
        items: 10_000,
        stages: 8,
    });
    let result = match command {
        Command::Pipeline { items, stages } => rt
            .block_on(move || {
                let start = Instant::now();
                let sum = pipeline(items, stages);
                let expected = (0..items).map(|i| i + stages).sum::<u64>();
                println!(
                    "{items} values through {stages} stages in {:?}: sum {sum} (expected {expected})",
                    start.elapsed()
                );
                if sum == expected {
                    Ok(())
                } else {
                    Err("the pipeline lost or changed values".to_string())
                }
            })
            .map_err(|e| e.to_string())
            .and_then(|r| r),
        Command::Sleepers { count, sleep_ms } => rt
            .block_on(move || sleepers(count, sleep_ms))
            .map_err(|e| e.to_string())
            .and_then(|r| r),
        Command::Dump => rt.block_on(dump).map_err(|e| e.to_string()),
    };
    let report = rt.shutdown_timeout(Duration::from_secs(10));
    match result {
        Ok(()) if report.refused.is_empty() => ExitCode::SUCCESS,
        Ok(()) => {
            eprintln!(
                "hub_demo: {} green threads refused to stop",
                report.refused.len()
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("hub_demo: {e}");
            ExitCode::FAILURE
        }
    }
}
