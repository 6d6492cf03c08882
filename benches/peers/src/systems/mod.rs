//! The systems compared and the operations measured on each, as plain loops
//! that the timing harness, the callgrind mode and the memory children all
//! call.
//!
//! Owns [`System`], [`Op`], [`Crowd`] and the table from a system and an
//! operation to its loop. Each system's loops live in a file of their own;
//! all of them use stacks of the crate's default size (256 KiB), so the
//! memory rows compare like with like.

use clap::ValueEnum;

mod context_peer;
mod corosensei_peer;
mod generator_peer;
mod greenlet_peer;

use corosensei_peer::{Own, Pool};

/// Bytes of stack every system's coroutines get.
pub(crate) const STACK_BYTES: usize = greenlet::DEFAULT_STACK_SIZE;

/// A system under measurement, in the table's column order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum System {
    /// corosensei 0.3.4 used directly, on its own `DefaultStack`: the floor.
    Corosensei,
    /// corosensei 0.3.4 used directly, on this crate's stack pool.
    CorosenseiPool,
    /// This crate.
    Greenlet,
    /// generator 0.8 (the coroutines `may` runs on).
    Generator,
    /// context 3.0.0 (Boost.Context's fcontext).
    Context,
}

impl System {
    /// Every Rust system, in column order.
    pub(crate) const ALL: [System; 5] = [
        System::Corosensei,
        System::CorosenseiPool,
        System::Greenlet,
        System::Generator,
        System::Context,
    ];

    /// The column heading.
    pub(crate) fn title(self) -> &'static str {
        match self {
            System::Corosensei => "raw corosensei (its own stacks)",
            System::CorosenseiPool => "raw corosensei (this crate's stack pool)",
            System::Greenlet => "greenlet (this crate)",
            System::Generator => "generator 0.8",
            System::Context => "context 3.0",
        }
    }

    /// The name on the command line.
    pub(crate) fn arg(self) -> &'static str {
        match self {
            System::Corosensei => "corosensei",
            System::CorosenseiPool => "corosensei-pool",
            System::Greenlet => "greenlet",
            System::Generator => "generator",
            System::Context => "context",
        }
    }
}

/// A measured operation, in the table's row order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Op {
    /// Resume a suspended coroutine and have it suspend back: one round trip.
    RoundTrip,
    /// Two coroutines passing control to each other, per switch (through a
    /// loop on the thread's stack where the library only resumes and
    /// suspends).
    Switch,
    /// Create a coroutine, run it to its end, drop it; stacks are reused.
    Create,
    /// Start a coroutine, so that it suspends, then kill it (its frames
    /// unwound, destructors run) and drop it.
    Kill,
}

impl Op {
    /// Every operation, in row order.
    pub(crate) const ALL: [Op; 4] = [Op::RoundTrip, Op::Switch, Op::Create, Op::Kill];

    /// The row heading.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Op::RoundTrip => "round trip into a coroutine and back",
            Op::Switch => "A<->B, per switch (trampoline where the library is asymmetric)",
            Op::Create => "create + run to the end + drop, stacks reused",
            Op::Kill => "start + kill a suspended one + drop",
        }
    }

    /// The name on the command line.
    pub(crate) fn arg(self) -> &'static str {
        match self {
            Op::RoundTrip => "round-trip",
            Op::Switch => "switch",
            Op::Create => "create",
            Op::Kill => "kill",
        }
    }

    /// Operations per timed batch: a few milliseconds for the slowest
    /// system, long enough that the batch's own setup does not show.
    pub(crate) fn batch(self) -> u64 {
        match self {
            Op::RoundTrip | Op::Switch => 100_000,
            Op::Create => 50_000,
            Op::Kill => 5_000,
        }
    }
}

/// One measured loop: runs the operation `count` times.
pub(crate) type Loop = fn(u64) -> Result<(), String>;

/// The loop of `op` on `system`, or why the system has none.
pub(crate) fn op_loop(system: System, op: Op) -> Result<Loop, &'static str> {
    Ok(match (system, op) {
        (System::Corosensei, Op::RoundTrip) => corosensei_peer::round_trip::<Own>,
        (System::Corosensei, Op::Switch) => corosensei_peer::switch::<Own>,
        (System::Corosensei, Op::Create) => corosensei_peer::create_own,
        (System::Corosensei, Op::Kill) => corosensei_peer::kill::<Own>,
        (System::CorosenseiPool, Op::RoundTrip) => corosensei_peer::round_trip::<Pool>,
        (System::CorosenseiPool, Op::Switch) => corosensei_peer::switch::<Pool>,
        (System::CorosenseiPool, Op::Create) => corosensei_peer::create_pooled,
        (System::CorosenseiPool, Op::Kill) => corosensei_peer::kill::<Pool>,
        (System::Greenlet, Op::RoundTrip) => greenlet_peer::round_trip,
        (System::Greenlet, Op::Switch) => greenlet_peer::switch,
        (System::Greenlet, Op::Create) => greenlet_peer::create,
        (System::Greenlet, Op::Kill) => greenlet_peer::kill,
        (System::Generator, Op::RoundTrip) => generator_peer::round_trip,
        (System::Generator, Op::Switch) => generator_peer::switch,
        (System::Generator, Op::Create) => generator_peer::create,
        (System::Generator, Op::Kill) => generator_peer::kill,
        (System::Context, Op::RoundTrip) => context_peer::round_trip,
        (System::Context, Op::Switch) => context_peer::switch,
        (System::Context, Op::Create) => context_peer::create,
        (System::Context, Op::Kill) => return Err(context_peer::NO_KILL),
    })
}

/// Many suspended coroutines of one system, kept alive together.
pub(crate) trait Crowd {
    /// Start one more coroutine, each on a stack of its own, and leave it
    /// suspended. An `Err` says why the system could not.
    fn add(&mut self) -> Result<(), String>;
}

/// An empty crowd of `system`'s coroutines with room for `capacity`
/// (reserved now, so that growing it is not counted).
pub(crate) fn crowd(system: System, capacity: usize) -> Box<dyn Crowd> {
    match system {
        System::Corosensei => Box::new(corosensei_peer::Suspended::<Own>::with_capacity(capacity)),
        System::CorosenseiPool => {
            Box::new(corosensei_peer::Suspended::<Pool>::with_capacity(capacity))
        }
        System::Greenlet => Box::new(greenlet_peer::Suspended::with_capacity(capacity)),
        System::Generator => Box::new(generator_peer::Suspended::with_capacity(capacity)),
        System::Context => Box::new(context_peer::Suspended::with_capacity(capacity)),
    }
}
