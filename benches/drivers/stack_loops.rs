//! The stack pool's paths as plain loops, for instruction counts:
//!
//! ```text
//! cargo build --profile bench --example stack_loops
//! valgrind --tool=callgrind target/release/examples/stack_loops pooled 200000
//! valgrind --tool=callgrind target/release/examples/stack_loops grow 20000
//! ```
//! Run each with two counts and take the difference, so that start-up is
//! not counted. `pooled`: acquire and release one stack of the default size
//! (the pool's hot path); `grow`: acquire fresh stacks (the pool emptied
//! first), touch the top page of each as a coroutine's first frame does,
//! then release them all and trim the pool.

use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use greenlet::coroutine::{acquire_stack, trim_stack_pool, DEFAULT_STACK_SIZE};

/// Which path of the stack pool to loop over.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Loop {
    /// Acquire and release one pooled stack, COUNT times.
    Pooled,
    /// Acquire COUNT fresh stacks, touching each, then release and trim.
    Grow,
}

/// Loops over one path of the stack pool (for callgrind).
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The path to loop over.
    #[arg(value_enum)]
    path: Loop,
    /// How many operations.
    #[arg(default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,
}

fn pooled(count: u64) -> std::io::Result<()> {
    for _ in 0..count {
        drop(std::hint::black_box(acquire_stack(DEFAULT_STACK_SIZE)?));
    }
    Ok(())
}

fn grow(count: u64) -> std::io::Result<()> {
    trim_stack_pool();
    let mut stacks = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let stack = acquire_stack(DEFAULT_STACK_SIZE)?;
        // SAFETY: the highest usable byte of a stack nothing else uses.
        unsafe { ((stack.base() - 1) as *mut u8).write_volatile(1) };
        stacks.push(stack);
    }
    drop(stacks);
    trim_stack_pool();
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let start = Instant::now();
    let result = match args.path {
        Loop::Pooled => pooled(args.count),
        Loop::Grow => grow(args.count),
    };
    if let Err(error) = result {
        eprintln!("stack_loops: {error}");
        return ExitCode::FAILURE;
    }
    eprintln!(
        "{:?}: {:.1} ns per operation ({} operations)",
        args.path,
        start.elapsed().as_nanos() as f64 / args.count as f64,
        args.count
    );
    ExitCode::SUCCESS
}
