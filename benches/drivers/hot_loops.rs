//! The benchmarked greenlet operations as plain loops, for instruction-level
//! profiling (criterion's harness would drown them in its own work).
//!
//! ```text
//! cargo build --profile bench --example hot_loops
//! valgrind --tool=callgrind target/release/examples/hot_loops round-trip 100000
//! ```
//! Operations: `round-trip` (main ↔ greenlet), `ping-pong` (A ↔ B, one
//! count per round of two switches), `create` (create + run + finish +
//! drop), `kill` (start 100 suspended greenlets, then kill and drop each;
//! the setup is counted too), `thread-exit` (a thread that exits leaving 10
//! suspended greenlets with a finalizer each, against `thread-exit-bare`'s
//! thread with greenlet state and no greenlet), `hub-yield` (a hub green
//! thread's park + resume through `yield_now`, one worker), and the raw corosensei floors the benches
//! compare with: `raw-round-trip` (one resume + one suspend) and
//! `raw-ping-pong` (two coroutines resumed in turn by a loop on the native
//! stack, one count per round of two resumes). Prints the mean wall time per operation on
//! stderr; `--help` for the usage, exit 2 on a bad argument.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use corosensei::{Coroutine, CoroutineResult, Yielder};
use greenlet::coroutine::{acquire_stack, PooledStack, DEFAULT_STACK_SIZE};
use greenlet::{getcurrent, Greenlet, GreenletError, Value};

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

fn raw_coroutine() -> Result<Coroutine<usize, usize, (), OnPool>, GreenletError> {
    let stack = acquire_stack(DEFAULT_STACK_SIZE)?;
    Ok(Coroutine::with_stack(
        OnPool(stack),
        |yielder: &Yielder<usize, usize>, mut value| loop {
            value = yielder.suspend(value + 1);
        },
    ))
}

fn resume_raw(coroutine: &mut Coroutine<usize, usize, (), OnPool>, value: usize) -> usize {
    match coroutine.resume(value) {
        CoroutineResult::Yield(value) => value,
        CoroutineResult::Return(()) => unreachable!("the raw coroutines loop forever"),
    }
}

fn raw_round_trip(count: u64) -> Result<(), GreenletError> {
    let mut coroutine = raw_coroutine()?;
    for _ in 0..count {
        black_box(resume_raw(&mut coroutine, black_box(1)));
    }
    Ok(())
}

fn raw_ping_pong(rounds: u64) -> Result<(), GreenletError> {
    let (mut a, mut b) = (raw_coroutine()?, raw_coroutine()?);
    let mut value = 0;
    for _ in 0..rounds {
        value = resume_raw(&mut a, black_box(value));
        value = resume_raw(&mut b, black_box(value));
    }
    black_box(value);
    Ok(())
}

fn round_trip(main: &Greenlet, count: u64) -> Result<(), GreenletError> {
    let main = main.clone();
    let g = Greenlet::new(move |mut value: Value| loop {
        value = main.switch(value)?;
    });
    g.switch(0usize)?;
    for _ in 0..count {
        black_box(g.switch(black_box(1usize))?);
    }
    g.kill()
}

fn ping_pong(main: &Greenlet, rounds: u64) -> Result<(), GreenletError> {
    let main = main.clone();
    let a = Greenlet::new(move |first: Value| {
        let b = first.downcast::<Greenlet>()?;
        let rounds = main.switch(())?.downcast::<u64>()?;
        for _ in 0..rounds {
            b.switch(())?;
        }
        Ok(Value::unit())
    });
    let a_handle = a.clone();
    let b = Greenlet::new(move |_| loop {
        a_handle.switch(())?;
    });
    a.switch(Value::new(b.clone()))?;
    a.switch(rounds)?;
    b.kill()
}

fn create(count: u64) -> Result<(), GreenletError> {
    for _ in 0..count {
        let g = Greenlet::new(|value: Value| Ok(value));
        black_box(g.switch(black_box(1usize))?);
    }
    Ok(())
}

/// `count` threads one after another, each leaving `suspended` greenlets
/// suspended (each holding the only handle to itself, with a finalizer) for
/// its exit to kill and finalize: `benches/cleanup.rs`'s thread-exit load.
fn thread_exit(count: u64, suspended: usize) -> Result<(), GreenletError> {
    for _ in 0..count {
        // A `GreenletError` is thread-bound: its message crosses.
        let worker = std::thread::spawn(move || -> Result<(), String> {
            let main = getcurrent();
            for _ in 0..suspended {
                let main = main.clone();
                let g = Greenlet::new(move |me: Value| {
                    let _me = me.downcast::<Greenlet>()?;
                    main.switch(())?;
                    Ok(Value::unit())
                });
                g.on_finalize(|| {
                    black_box(());
                });
                g.switch(Value::new(g.clone()))
                    .map_err(|err| err.to_string())?;
            }
            Ok(())
        });
        worker
            .join()
            .expect("the worker thread")
            .map_err(GreenletError::user)?;
    }
    Ok(())
}

/// A green thread of a one-worker hub parking and being resumed `count`
/// times (`yield_now`: a park on the ready queue, a scheduler round, the
/// resume), the hub's park + resume round trip.
fn hub_yield(count: u64) -> Result<(), GreenletError> {
    let rt = greenlet::hub::Runtime::builder()
        .worker_threads(1)
        .build()
        .map_err(|err| GreenletError::user(err.to_string()))?;
    rt.block_on(move || (0..count).for_each(|_| greenlet::hub::yield_now()))
        .map_err(|err| GreenletError::user(err.to_string()))
}

fn kill(main: &Greenlet, count: u64) -> Result<(), GreenletError> {
    for _ in 0..count.div_ceil(100) {
        let mut batch = Vec::with_capacity(100);
        for _ in 0..100 {
            let main = main.clone();
            let g = Greenlet::new(move |_| {
                main.switch(())?;
                Ok(Value::unit())
            });
            g.switch(())?;
            batch.push(g);
        }
        for g in batch {
            g.kill()?;
        }
    }
    Ok(())
}

/// The benchmarked greenlet operations as plain loops, for callgrind:
/// prints the mean wall time per operation on stderr.
#[derive(Parser, Debug)]
#[command(name = "hot_loops")]
struct Cli {
    /// The operation to loop.
    #[arg(value_enum)]
    op: Op,
    /// How many operations.
    #[arg(default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,
}

/// The looped operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Op {
    /// Main <-> greenlet, one count per round trip.
    RoundTrip,
    /// A <-> B, one count per round of two switches.
    PingPong,
    /// Create + run + finish + drop.
    Create,
    /// Kill and drop suspended greenlets (started 100 at a time).
    Kill,
    /// A thread that exits with 10 suspended greenlets (a finalizer each),
    /// one count per thread.
    ThreadExit,
    /// A thread that exits with greenlet state and no greenlet, one count
    /// per thread (the base `thread-exit` is compared with).
    ThreadExitBare,
    /// A hub green thread's `yield_now` (park + scheduler round + resume),
    /// one worker.
    HubYield,
    /// One corosensei resume + one suspend.
    RawRoundTrip,
    /// Two corosensei coroutines resumed in turn, one count per round.
    RawPingPong,
}

fn main() -> ExitCode {
    let Cli { op, count } = Cli::parse();
    let main = getcurrent();
    let start = Instant::now();
    let result = match op {
        Op::RoundTrip => round_trip(&main, count),
        Op::PingPong => ping_pong(&main, count),
        Op::Create => create(count),
        Op::Kill => kill(&main, count),
        Op::ThreadExit => thread_exit(count, 10),
        Op::ThreadExitBare => thread_exit(count, 0),
        Op::HubYield => hub_yield(count),
        Op::RawRoundTrip => raw_round_trip(count),
        Op::RawPingPong => raw_ping_pong(count),
    };
    let elapsed = start.elapsed();
    if let Err(err) = result {
        eprintln!("hot_loops: {err}");
        return ExitCode::FAILURE;
    }
    eprintln!(
        "{}: {:.1} ns per operation ({count} operations)",
        op.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string()),
        elapsed.as_nanos() as f64 / count as f64
    );
    ExitCode::SUCCESS
}
