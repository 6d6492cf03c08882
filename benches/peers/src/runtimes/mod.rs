//! The hub's table: this crate's green threads against tokio,
//! `may` and gevent (and raw corosensei for the floor under a yield), the
//! same figures side by side in one run.
//!
//! Every sample is one child process (`peers sample PEER FIGURE COUNT`):
//! `may` takes its worker count once per process and aborts at its limits,
//! gevent is another interpreter, and a fresh address space gives every
//! peer's 100,000 sleepers the same start. A child runs an untimed warm-up
//! batch, then the timed one, timing only the operations (not the start of
//! its runtime), and prints `elapsed_ns` (and `rss_per` for the sleepers).
//! The parent ([`table`]) runs the peers of a figure in turn, the order
//! rotated each round, and takes medians.
//!
//! Owns [`Peer`], [`Figure`] and the child side's dispatch; each peer's
//! loops live in a file of their own, the report and the plot in theirs.

use std::time::Duration;

use clap::ValueEnum;

mod driver;
mod gevent;
mod hub_peer;
mod may_peer;
mod plot;
mod report;
mod tokio_peer;

pub(crate) use driver::{table, HubArgs};

/// A runtime under measurement, in the table's column order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum)]
pub(crate) enum Peer {
    /// This crate's `greenlet::hub`, default builder (256 KiB stacks).
    Hub,
    /// tokio 1.x: `current_thread` for one worker, `multi_thread` otherwise.
    Tokio,
    /// may 0.3 (stackful coroutines on `generator`, 32 KiB default stacks).
    May,
    /// gevent 26.9.0 on CPython 3.11.7 (`benches/python/gevent_bench.py`).
    Gevent,
    /// corosensei 0.3.4 alone on its own `DefaultStack`: resume + suspend,
    /// the floor under a yield's park and resume.
    Raw,
}

impl Peer {
    /// Every peer, in column order.
    pub(crate) const ALL: [Peer; 5] = [Peer::Hub, Peer::Tokio, Peer::May, Peer::Gevent, Peer::Raw];

    /// The column heading.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Peer::Hub => "hub (this crate)",
            Peer::Tokio => "tokio 1.54",
            Peer::May => "may 0.3.51",
            Peer::Gevent => "gevent 26.9.0",
            Peer::Raw => "raw corosensei (its own stacks)",
        }
    }

    /// The name on the command line.
    pub(crate) fn arg(self) -> &'static str {
        match self {
            Peer::Hub => "hub",
            Peer::Tokio => "tokio",
            Peer::May => "may",
            Peer::Gevent => "gevent",
            Peer::Raw => "raw",
        }
    }
}

/// A measured figure, in the table's row order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Figure {
    /// Spawn an empty task and join it at once, one at a time; one worker.
    SpawnJoin,
    /// Spawn [`BATCH`] empty tasks, then join them all; per task, one
    /// worker.
    SpawnJoinBatch,
    /// Two tasks yielding to each other, one worker; per yield. Each yield
    /// is a park of one task and a resume of the other: two stack
    /// switches, as raw corosensei's resume + suspend beside it.
    Yield,
    /// A round trip over two channels of capacity 1 to an echo task, one
    /// worker.
    PingPong,
    /// The same over two unbounded channels.
    PingPongUnbounded,
    /// The bounded ping-pong's code on two workers: each runtime places the
    /// echo where it places a spawned task.
    #[value(name = "ping-pong-2w")]
    PingPong2w,
    /// Two workers, the hub's echo forced onto the other worker (its
    /// pinger spins until the echo started elsewhere); tokio and may run
    /// the plain code and place their tasks themselves.
    PingPongAcross,
    /// COUNT tasks each sleeping 10 ms, all spawned, all woken, all joined;
    /// one worker.
    Sleepers,
    /// A tree of fan-out 10 with COUNT leaves, every node a task that joins
    /// its children; two workers.
    SpawnTree,
}

impl Figure {
    /// Every figure, in row order.
    pub(crate) const ALL: [Figure; 9] = [
        Figure::SpawnJoin,
        Figure::SpawnJoinBatch,
        Figure::Yield,
        Figure::PingPong,
        Figure::PingPongUnbounded,
        Figure::PingPong2w,
        Figure::PingPongAcross,
        Figure::Sleepers,
        Figure::SpawnTree,
    ];

    /// The row heading.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Figure::SpawnJoin => "spawn + join an empty task, one at a time, 1 worker",
            Figure::SpawnJoinBatch => {
                "spawn 10,000 empty tasks, then join them, per task, 1 worker"
            }
            Figure::Yield => {
                "two tasks yielding to each other, per yield (a park and a resume), 1 worker; \
                 raw corosensei: a resume + suspend"
            }
            Figure::PingPong => "ping-pong over channels of capacity 1, per round trip, 1 worker",
            Figure::PingPongUnbounded => {
                "ping-pong over unbounded channels, per round trip, 1 worker"
            }
            Figure::PingPong2w => {
                "ping-pong, capacity 1, per round trip, 2 workers (the same code)"
            }
            Figure::PingPongAcross => {
                "ping-pong, capacity 1, 2 workers: the hub forced across workers \
                 (tokio and may place their tasks themselves)"
            }
            Figure::Sleepers => "100,000 tasks: spawn, sleep 10 ms, all woken and joined, 1 worker",
            Figure::SpawnTree => "spawn tree, 100,000 leaves (fan-out 10), 2 workers",
        }
    }

    /// The name on the command line (and in gevent_bench.py).
    pub(crate) fn arg(self) -> &'static str {
        match self {
            Figure::SpawnJoin => "spawn-join",
            Figure::SpawnJoinBatch => "spawn-join-batch",
            Figure::Yield => "yield",
            Figure::PingPong => "ping-pong",
            Figure::PingPongUnbounded => "ping-pong-unbounded",
            Figure::PingPong2w => "ping-pong-2w",
            Figure::PingPongAcross => "ping-pong-across",
            Figure::Sleepers => "sleepers",
            Figure::SpawnTree => "spawn-tree",
        }
    }

    /// The peers that have this figure (gevent has one worker only; may
    /// has no bounded channel, so its ping-pong is the unbounded one and
    /// its two-worker rows run that; the raw floor has only the yield).
    pub(crate) fn peers(self) -> &'static [Peer] {
        match self {
            Figure::SpawnJoin
            | Figure::SpawnJoinBatch
            | Figure::PingPongUnbounded
            | Figure::Sleepers => &[Peer::Hub, Peer::Tokio, Peer::May, Peer::Gevent],
            Figure::PingPong => &[Peer::Hub, Peer::Tokio, Peer::Gevent],
            Figure::Yield => &[Peer::Hub, Peer::Tokio, Peer::May, Peer::Gevent, Peer::Raw],
            Figure::PingPong2w | Figure::PingPongAcross | Figure::SpawnTree => {
                &[Peer::Hub, Peer::Tokio, Peer::May]
            }
        }
    }

    /// Worker threads of the runtimes.
    pub(crate) fn workers(self) -> usize {
        match self {
            Figure::PingPong2w | Figure::PingPongAcross | Figure::SpawnTree => 2,
            _ => 1,
        }
    }

    /// Operations of one timed sample (a few milliseconds for the slowest
    /// peer, or the 100,000).
    pub(crate) fn count(self) -> u64 {
        match self {
            Figure::SpawnJoin | Figure::SpawnJoinBatch => 20_000,
            Figure::Yield => 100_000,
            Figure::PingPong | Figure::PingPongUnbounded => 50_000,
            Figure::PingPong2w | Figure::PingPongAcross => 20_000,
            Figure::Sleepers | Figure::SpawnTree => 100_000,
        }
    }

    /// Operations of the untimed warm-up before it (a constant, so that
    /// callgrind's difference of two counts cancels it): the whole figure
    /// for the small loops, one batch for the batched spawn, 1,000 (a
    /// 1,000-leaf tree) for the big ones.
    pub(crate) fn warm(self) -> u64 {
        match self {
            Figure::Sleepers | Figure::SpawnTree => 1_000,
            Figure::SpawnJoinBatch => BATCH,
            other => other.count() / 4,
        }
    }

    /// N of callgrind's (2N - N) / N: a tenth of the timed count, or one
    /// batch for the batched spawn (so that N and 2N are whole batches).
    pub(crate) fn counted(self) -> u64 {
        match self {
            Figure::SpawnJoinBatch => BATCH,
            other => other.count() / 10,
        }
    }

    /// Whether the figure is a whole run (shown in ms) rather than a cost
    /// per operation (shown in ns).
    pub(crate) fn is_whole(self) -> bool {
        matches!(self, Figure::Sleepers | Figure::SpawnTree)
    }
}

/// Tasks spawned before any is joined in the batched spawn + join.
pub(crate) const BATCH: u64 = 10_000;

/// What one child measured.
#[derive(Debug)]
pub(crate) struct Sample {
    /// The timed batch, start to end.
    pub(crate) elapsed: Duration,
    /// Resident bytes per sleeper (the sleepers figure only).
    pub(crate) rss_per: Option<f64>,
}

impl Sample {
    /// A time alone.
    pub(crate) fn time(elapsed: Duration) -> Sample {
        Sample {
            elapsed,
            rss_per: None,
        }
    }
}

/// The sleep of every sleeper.
pub(crate) const SLEEP: Duration = Duration::from_millis(10);

/// Fan-out of the spawn tree.
pub(crate) const FAN_OUT: u64 = 10;

/// The peak resident bytes of this process so far (`VmHWM`).
pub(crate) fn peak_resident_bytes() -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|err| format!("reading /proc/self/status: {err}"))?;
    status
        .lines()
        .find_map(|line| {
            let kib = line.strip_prefix("VmHWM:")?.trim().strip_suffix("kB")?;
            kib.trim().parse::<u64>().ok()
        })
        .map(|kib| kib * 1024)
        .ok_or_else(|| "no VmHWM line in /proc/self/status".to_string())
}

/// Child: one sample of `figure` on `peer` (`warm` untimed operations, then
/// `count` timed); prints `elapsed_ns` and, for the sleepers, `rss_per`.
pub(crate) fn sample_child(
    peer: Peer,
    figure: Figure,
    count: u64,
    warm: u64,
) -> Result<(), String> {
    if !figure.peers().contains(&peer) {
        return Err(format!("{} has no {} figure", peer.arg(), figure.arg()));
    }
    let sample = match peer {
        Peer::Hub => hub_peer::sample(figure, count, warm)?,
        Peer::Tokio => tokio_peer::sample(figure, count, warm)?,
        Peer::May => may_peer::sample(figure, count, warm)?,
        Peer::Raw => {
            let run = crate::systems::op_loop(
                crate::systems::System::Corosensei,
                crate::systems::Op::RoundTrip,
            )
            .map_err(str::to_string)?;
            run(warm)?;
            let start = std::time::Instant::now();
            run(count)?;
            Sample::time(start.elapsed())
        }
        Peer::Gevent => return Err("gevent runs in CPython: benches/python/run.sh --gevent".into()),
    };
    println!("elapsed_ns {}", sample.elapsed.as_nanos());
    if let Some(bytes) = sample.rss_per {
        println!("rss_per {bytes}");
    }
    Ok(())
}
