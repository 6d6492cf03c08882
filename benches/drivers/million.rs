//! A million live, suspended, guarded greenlets on a stock kernel.
//!
//! Creates `--count` greenlets (default 1,000,000) with the default stack
//! size, switches into each once (each suspends in a switch back to main),
//! and prints the process's kernel mappings (`/proc/self/maps` lines) before
//! and after, its RSS and page tables per suspended greenlet, and the stack
//! pool's counters; then kills them all, trims the pool and prints the same
//! again. With guard regions (Linux 6.13+) the stacks cost a few hundred
//! mappings in all; with `--guard mprotect` each costs two, and the default
//! `vm.max_map_count` stops the run near 32,700 with an error naming it.
//!
//! Run: `cargo run --release --example million` (about 4.3 GB of RSS for a
//! million: each suspended greenlet has one or two pages of stack resident).
//! Exits 0 when every greenlet was created, ran and was killed, 1 when
//! creation stopped early (the error is printed), 2 on a bad flag.

use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use greenlet::coroutine::{
    default_stack_size, set_default_stack_size, set_stack_guard, stack_guard, stack_stats,
    trim_stack_pool, StackGuard,
};
use greenlet::{getcurrent, live_greenlets, Greenlet, Value};

/// How the guard page below each stack is made.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum GuardFlag {
    /// Whatever the process chose (GREENLET_STACK_GUARD, else the best the kernel has).
    Auto,
    /// `MADV_GUARD_INSTALL` guard regions (Linux 6.13+): no kernel mapping per stack.
    GuardRegion,
    /// `mprotect(PROT_NONE)` pages: two kernel mappings per stack.
    Mprotect,
}

/// Creates many suspended greenlets and reports what they cost.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// How many greenlets to keep alive at once.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,
    /// Usable stack bytes per greenlet (default: the crate's default, 256 KiB).
    #[arg(long)]
    stack_size: Option<usize>,
    /// Guard strategy of the stacks.
    #[arg(long, value_enum, default_value_t = GuardFlag::Auto)]
    guard: GuardFlag,
}

/// A snapshot of what the process costs the kernel.
#[derive(Clone, Copy, Debug)]
struct Usage {
    mappings: usize,
    resident: usize,
    page_tables: usize,
}

impl Usage {
    fn now() -> Usage {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let kib = |field: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(field))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<usize>()
                        .ok()
                })
                .map_or(0, |kib| kib * 1024)
        };
        Usage {
            mappings: count_lines("/proc/self/maps"),
            resident: kib("VmRSS:"),
            page_tables: kib("VmPTE:"),
        }
    }

    fn print(&self, when: &str) {
        let stats = stack_stats();
        println!(
            "{when:<28} kernel mappings {:>7}  RSS {:>8.1} MiB  page tables {:>7.1} MiB  \
             live greenlets {:>8}  stacks live {:>8} pooled {:>5}  regions {:>4}",
            self.mappings,
            self.resident as f64 / (1 << 20) as f64,
            self.page_tables as f64 / (1 << 20) as f64,
            live_greenlets(),
            stats.live,
            stats.pooled,
            stats.regions,
        );
    }
}

/// The lines of a file, read through a fixed buffer: at the mapping limit
/// growing a large `String` (a mapping of its own) fails.
fn count_lines(path: &str) -> usize {
    let Ok(mut file) = std::fs::File::open(path) else {
        return 0;
    };
    let mut buffer = [0u8; 8192];
    let mut lines = 0;
    while let Ok(len @ 1..) = std::io::Read::read(&mut file, &mut buffer) {
        lines += buffer[..len].iter().filter(|&&b| b == b'\n').count();
    }
    lines
}

/// A setting of the kernel, for the report.
fn sysctl(name: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/vm/{name}"))
        .map(|text| text.trim().to_owned())
        .unwrap_or_else(|_| "?".to_owned())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let chosen = match args.guard {
        GuardFlag::Auto => Ok(stack_guard()),
        GuardFlag::GuardRegion => set_stack_guard(StackGuard::GuardRegion).map(|_| stack_guard()),
        GuardFlag::Mprotect => set_stack_guard(StackGuard::Mprotect).map(|_| stack_guard()),
    };
    let guard = match chosen {
        Ok(guard) => guard,
        Err(error) => {
            eprintln!("million: --guard {:?}: {error}", args.guard);
            return ExitCode::from(2);
        }
    };
    if let Some(size) = args.stack_size {
        if let Err(error) = set_default_stack_size(size) {
            eprintln!("million: --stack-size {size}: {error}");
            return ExitCode::from(2);
        }
    }
    let count = args.count as usize;
    println!(
        "{count} greenlets, stack size {} bytes, guard {guard:?}; vm.max_map_count {}, \
         vm.overcommit_memory {}",
        default_stack_size(),
        sysctl("max_map_count"),
        sysctl("overcommit_memory"),
    );

    let main = getcurrent();
    let mut alive: Vec<Greenlet> = Vec::with_capacity(count);
    let before = Usage::now();
    before.print("before");
    let start = Instant::now();
    let mut failure = None;
    for _ in 0..count {
        let back = main.clone();
        let g = Greenlet::new(move |_| {
            back.switch(())?;
            Ok(Value::unit())
        });
        // The first switch maps the stack and runs the greenlet up to its
        // switch back.
        match g.switch(()) {
            Ok(_) => alive.push(g),
            Err(error) => {
                failure = Some(error.to_string());
                break;
            }
        }
    }
    let created = start.elapsed();
    let after = Usage::now();
    after.print("all suspended");
    let made = alive.len();
    let per = |bytes: usize, base: usize| bytes.saturating_sub(base) as f64 / made.max(1) as f64;
    println!(
        "{made} suspended greenlets: {:.2} KiB RSS and {:.2} KiB page tables each; \
         {} kernel mappings more for all of them; {:.2} us per create + first switch",
        per(after.resident, before.resident) / 1024.0,
        per(after.page_tables, before.page_tables) / 1024.0,
        after.mappings.saturating_sub(before.mappings),
        created.as_secs_f64() * 1e6 / made.max(1) as f64,
    );
    if let Some(error) = &failure {
        println!("creation stopped after {made}: {error}");
    }

    let start = Instant::now();
    for g in &alive {
        if let Err(error) = g.kill() {
            eprintln!("million: kill failed: {error}");
            return ExitCode::FAILURE;
        }
    }
    drop(alive);
    let killed = start.elapsed();
    Usage::now().print("all killed");
    let start = Instant::now();
    let given_back = trim_stack_pool();
    let trimmed = start.elapsed();
    Usage::now().print("pool trimmed");
    println!(
        "{:.2} us per kill + drop; trim gave back {given_back} stacks in {:.1} ms",
        killed.as_secs_f64() * 1e6 / made.max(1) as f64,
        trimmed.as_secs_f64() * 1e3,
    );
    if failure.is_some() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
