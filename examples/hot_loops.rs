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
//! the setup is counted too). Prints the mean wall time per operation on
//! stderr; exits 2 on bad arguments.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use greenlet::{getcurrent, Greenlet, GreenletError, Value};

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

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let count = match args.get(1).map(|n| n.parse::<u64>()) {
        None => 1_000_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("the count must be a positive integer");
            return ExitCode::from(2);
        }
    };
    let main = getcurrent();
    let start = Instant::now();
    let result = match args.first().map(String::as_str) {
        Some("round-trip") => round_trip(&main, count),
        Some("ping-pong") => ping_pong(&main, count),
        Some("create") => create(count),
        Some("kill") => kill(&main, count),
        _ => {
            eprintln!("usage: hot_loops round-trip|ping-pong|create|kill [COUNT]");
            return ExitCode::from(2);
        }
    };
    let elapsed = start.elapsed();
    if let Err(err) = result {
        eprintln!("hot_loops: {err}");
        return ExitCode::FAILURE;
    }
    eprintln!(
        "{}: {:.1} ns per operation ({count} operations)",
        args[0],
        elapsed.as_nanos() as f64 / count as f64
    );
    ExitCode::SUCCESS
}
