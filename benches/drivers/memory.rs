//! Memory per suspended greenlet: 10,000 greenlets alive at once, each
//! suspended in a switch back to main, and the process's resident set size
//! (RSS, from /proc/self/statm) before and after. Also raw corosensei
//! coroutines on pooled stacks, the floor.
//!
//! Run: `cargo run --release --example memory` (`--help` for the usage)
//!
//! Each measurement runs in a fresh child process (this program re-executes
//! itself), so that neither sees pages or pooled stacks the other left.

use std::process::Command;

use clap::{Parser, Subcommand};
use corosensei::{Coroutine, Yielder};
use greenlet::coroutine::{acquire_stack, PooledStack, DEFAULT_STACK_SIZE};
use greenlet::{getcurrent, Greenlet, Value};

/// A pooled stack as corosensei's `Stack` (the crate's stacks give their
/// addresses; the trait is implemented by the user).
struct OnPool(PooledStack);

// SAFETY: `PooledStack::base` is 64-aligned (corosensei asks for 16) and
// `limit` is the start of the guard page below the usable area, as
// `PooledStack` documents; both stay valid while the stack exists.
unsafe impl corosensei::stack::Stack for OnPool {
    fn base(&self) -> corosensei::stack::StackPointer {
        corosensei::stack::StackPointer::new(self.0.base()).expect("a stack's base is not null")
    }
    fn limit(&self) -> corosensei::stack::StackPointer {
        corosensei::stack::StackPointer::new(self.0.limit()).expect("a stack's limit is not null")
    }
}

const COUNT: usize = 10_000;

/// Resident bytes of this process.
fn resident() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .expect("statm field");
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    pages * page
}

/// Page-table bytes of this process (VmPTE), which RSS does not include.
fn page_tables() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmPTE:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<usize>()
                .ok()
        })
        .map_or(0, |kib| kib * 1024)
}

fn report(what: &str, rss: (usize, usize), pte: (usize, usize)) {
    let per = (rss.1 - rss.0) as f64 / COUNT as f64;
    let per_pte = pte.1.saturating_sub(pte.0) as f64 / COUNT as f64;
    println!(
        "{what:<44} RSS {:>6.0} bytes ({:.2} KiB) per suspended one; page tables {:>5.0} bytes more",
        per,
        per / 1024.0,
        per_pte
    );
}

fn greenlets(stack_size: usize) {
    let main = getcurrent();
    let mut alive = Vec::with_capacity(COUNT);
    let before = (resident(), page_tables());
    for _ in 0..COUNT {
        let back = main.clone();
        let g = Greenlet::builder()
            .stack_size(stack_size)
            .spawn(move |_| {
                back.switch(())?;
                Ok(Value::unit())
            })
            .expect("spawn");
        g.switch(()).expect("start");
        alive.push(g);
    }
    let after = (resident(), page_tables());
    let what = format!("greenlet, {} KiB stack", stack_size / 1024);
    report(&what, (before.0, after.0), (before.1, after.1));
    for g in &alive {
        g.kill().expect("kill");
    }
}

fn raw() {
    let mut alive = Vec::with_capacity(COUNT);
    let before = (resident(), page_tables());
    for _ in 0..COUNT {
        let stack = acquire_stack(DEFAULT_STACK_SIZE).expect("stack");
        let mut coroutine =
            Coroutine::with_stack(OnPool(stack), |yielder: &Yielder<(), ()>, ()| {
                yielder.suspend(());
            });
        coroutine.resume(());
        alive.push(coroutine);
    }
    let after = (resident(), page_tables());
    let what = format!(
        "raw corosensei, {} KiB pooled stack",
        DEFAULT_STACK_SIZE / 1024
    );
    report(&what, (before.0, after.0), (before.1, after.1));
}

/// Memory per suspended greenlet: RSS with 10,000 suspended greenlets (at
/// the default and a 64 KiB stack) and with as many raw corosensei
/// coroutines, each measured in a fresh child process.
#[derive(Parser, Debug)]
#[command(name = "memory")]
struct Cli {
    #[command(subcommand)]
    child: Option<Child>,
}

/// One measurement, run by the parent in a child process of this program.
#[derive(Subcommand, Debug)]
enum Child {
    /// 10,000 suspended greenlets with `stack_size`-byte stacks.
    #[command(hide = true)]
    Greenlets {
        /// Usable stack bytes per greenlet.
        stack_size: usize,
    },
    /// 10,000 suspended raw coroutines on pooled stacks.
    #[command(hide = true)]
    Raw,
}

fn main() {
    match Cli::parse().child {
        Some(Child::Greenlets { stack_size }) => greenlets(stack_size),
        Some(Child::Raw) => raw(),
        None => {
            println!("{COUNT} suspended at once (default stack size {DEFAULT_STACK_SIZE} bytes)");
            let exe = std::env::current_exe().expect("own path");
            let default = DEFAULT_STACK_SIZE.to_string();
            let small = (64 * 1024).to_string();
            for mode in [
                vec!["raw"],
                vec!["greenlets", &default],
                vec!["greenlets", &small],
            ] {
                let status = Command::new(&exe).args(&mode).status().expect("run child");
                assert!(status.success(), "{mode:?} measurement failed: {status}");
            }
        }
    }
}
