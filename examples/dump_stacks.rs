//! Seeing inside a running hub: a dump of every green thread with its
//! stack where it waits (taken from a green thread, which is listed too,
//! running), the runtime's metrics, a worker held by a green thread that
//! does not park (the watchdog's report, with the stacks of that worker's
//! green threads, and its recovery), then a deadlock that the runtime
//! reports and turns into the root call's error. Reports go through the
//! log facade, printed here to stderr.
//!
//! Run with `cargo run --release --example dump_stacks -- --help`.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use greenlet::hub::{self, Receiver, Runtime, Sender, TaskState, Wait};

/// A dump with stacks, and a deadlock report.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Worker OS threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    workers: u16,
    /// Green threads parked on a channel for the dump.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=1000))]
    waiters: u16,
    /// Skip the stalled-worker part.
    #[arg(long)]
    no_stall: bool,
    /// Skip the deadlock part.
    #[arg(long)]
    no_deadlock: bool,
}

/// Prints error records to stderr.
struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            eprintln!("[{}] {}", r.level(), r.args());
        }
    }
    fn flush(&self) {}
}

#[inline(never)]
fn waits_for_an_order(rx: &Receiver<u32>) -> u32 {
    rx.recv().unwrap_or(0)
}

/// Sleeps, then returns (not a tail call: its frame stays on the stack).
#[inline(never)]
fn naps() -> bool {
    hub::sleep(Duration::from_secs(3600));
    std::hint::black_box(true)
}

#[inline(never)]
fn waits_for_the_other(rx: Receiver<u8>, tx: Sender<u8>) {
    if rx.recv().is_ok() {
        let _ = tx.send(1);
    }
}

/// Takes the dump from a green thread: it shows this frame too.
#[inline(never)]
fn looks_around() -> hub::Dump {
    hub::dump().unwrap_or_default()
}

fn dump_part(workers: usize, waiters: u16) -> Result<(), String> {
    let rt = Runtime::builder()
        .worker_threads(workers)
        .build()
        .map_err(|e| e.to_string())?;
    let mut handles = Vec::new();
    let mut senders = Vec::new();
    for i in 0..waiters {
        let (tx, rx) = hub::channel::<u32>(1);
        senders.push(tx);
        handles.push(
            rt.handle()
                .spawn(move || waits_for_an_order(&rx) + u32::from(i)),
        );
    }
    let napper = rt.handle().spawn(naps);
    for h in &handles {
        while h.state() != TaskState::Parked(Wait::Recv) {
            std::thread::yield_now();
        }
    }
    while napper.state() != TaskState::Parked(Wait::Sleep) {
        std::thread::yield_now();
    }
    let dump = rt.block_on(looks_around).map_err(|e| e.to_string())?;
    println!("== a dump with stacks ==\n{dump}");
    println!("== the runtime's metrics ==\n{}", rt.handle().metrics());
    for tx in senders {
        tx.send(1).map_err(|e| e.to_string())?;
    }
    for h in handles {
        h.join().map_err(|e| e.to_string())?;
    }
    napper.cancel();
    Ok(())
}

/// Computes for `ms` milliseconds without parking: the frame the
/// watchdog's report shows.
#[inline(never)]
fn computes_without_parking(ms: u64) -> u64 {
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < Duration::from_millis(ms) {
        n = std::hint::black_box(n.wrapping_add(1));
    }
    n
}

fn stall_part() -> Result<(), String> {
    let rt = Runtime::builder()
        .worker_threads(1)
        .watchdog(Some(Duration::from_millis(50)))
        .build()
        .map_err(|e| e.to_string())?;
    println!("== a worker held for 300 ms (the watchdog's report goes to the log, here stderr) ==");
    rt.block_on(|| {
        let (tx, rx) = hub::channel::<u32>(1);
        let waiter = hub::task()
            .name("waiter")
            .spawn(move || waits_for_an_order(&rx))
            .map_err(|e| e.to_string())?;
        while waiter.state() != TaskState::Parked(Wait::Recv) {
            hub::yield_now();
        }
        let hog = hub::task()
            .name("hog")
            .spawn(|| computes_without_parking(300))
            .map_err(|e| e.to_string())?;
        hog.join().map_err(|e| e.to_string())?;
        tx.send(1).map_err(|e| e.to_string())?;
        waiter.join().map_err(|e| e.to_string())?;
        Ok(())
    })
    .map_err(|e| e.to_string())?
}

fn deadlock_part(workers: usize) -> Result<(), String> {
    let rt = Runtime::builder()
        .worker_threads(workers)
        .fail_on_deadlock(true)
        .build()
        .map_err(|e| e.to_string())?;
    println!("== a deadlock (its report goes to the log, here stderr) ==");
    let out = rt.block_on(|| {
        let (to_a, a_rx) = hub::channel::<u8>(1);
        let (to_b, b_rx) = hub::channel::<u8>(1);
        let a = hub::task()
            .name("a")
            .spawn(move || waits_for_the_other(a_rx, to_b));
        let b = hub::task()
            .name("b")
            .spawn(move || waits_for_the_other(b_rx, to_a));
        if let (Ok(a), Ok(b)) = (a, b) {
            let _ = a.join();
            let _ = b.join();
        }
    });
    match out {
        Err(e) => println!("block_on returned: {e}"),
        Ok(()) => return Err("the deadlock was not reported".into()),
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    if log::set_logger(&Stderr).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
    let workers = usize::from(args.workers);
    let mut result = dump_part(workers, args.waiters);
    if result.is_ok() && !args.no_stall {
        result = stall_part();
    }
    if result.is_ok() && !args.no_deadlock {
        result = deadlock_part(workers);
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dump_stacks: {e}");
            ExitCode::FAILURE
        }
    }
}
