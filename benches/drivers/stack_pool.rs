//! Raw corosensei coroutines on the crate's pooled, guard-paged stacks.
//!
//! Runs a few coroutines that switch back and forth and use some of their
//! stack, releases them to the pool, reuses the pooled stacks, and prints the
//! pool's counters. Also the program used to check the valgrind registration:
//!
//! ```text
//! cargo build --example stack_pool && valgrind target/debug/examples/stack_pool
//! ```
//! must print no "client switching stacks?" warning.

use clap::Parser;
use corosensei::{Coroutine, Yielder};
use greenlet::coroutine::{acquire_stack, stack_stats, PooledStack, DEFAULT_STACK_SIZE};

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

/// Sums `0..n` recursively, touching `n` small frames of the current stack.
fn sum_to(n: u64) -> u64 {
    let frame = std::hint::black_box([n; 8]);
    if n == 0 {
        0
    } else {
        frame[0] + sum_to(n - 1)
    }
}

/// Raw corosensei coroutines on the pooled, guard-paged stacks: runs,
/// releases and reuses them, and prints the pool's counters. Takes no flags.
#[derive(Parser, Debug)]
#[command(name = "stack_pool")]
struct Cli {}

fn main() -> std::io::Result<()> {
    Cli::parse();
    for round in 0..3 {
        let mut coroutines = Vec::new();
        for index in 0..8u64 {
            let stack = acquire_stack(DEFAULT_STACK_SIZE)?;
            stack.set_label(&format!("coroutine {index}"));
            coroutines.push(Coroutine::with_stack(
                OnPool(stack),
                move |yielder: &Yielder<u64, u64>, start: u64| {
                    let mut total = start;
                    for step in 0..4 {
                        total += sum_to(100 * (index + 1)) + yielder.suspend(total + step);
                    }
                    total
                },
            ));
        }
        let mut results = Vec::new();
        for coroutine in &mut coroutines {
            let mut input = 1;
            let result = loop {
                match coroutine.resume(input) {
                    corosensei::CoroutineResult::Yield(value) => input = value % 7,
                    corosensei::CoroutineResult::Return(value) => break value,
                }
            };
            results.push(result);
        }
        drop(coroutines);
        let stats = stack_stats();
        println!("round {round}: results {results:?}");
        println!(
            "  stacks: live {}, pooled {}, created {}",
            stats.live, stats.pooled, stats.created
        );
    }
    Ok(())
}
