//! Peers: this crate's greenlets against raw corosensei, `generator` and
//! `context` (and CPython's greenlet through `benches/python/run.sh`), the
//! same operations side by side in one run.
//!
//! ```text
//! benches/peers/run.sh                 # the whole table (about five minutes)
//! cargo run --release -- --help        # in benches/peers: the modes
//! ```
//! Modes: `table` (the default: times, memory, most alive, instructions
//! under callgrind, CPython, and the ratios), `op SYSTEM OP COUNT` (one
//! loop, for callgrind by hand), `rss SYSTEM` and `alive SYSTEM` (the
//! children the table runs); `hub` (the hub's table: the hub beside
//! tokio, may and gevent, `benches/peers/run.sh hub`) and `sample` (its
//! children).

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

mod callgrind;
mod crowd;
mod load;
mod python;
mod report;
mod runtimes;
mod systems;
mod timing;

use systems::{Op, System};

/// This crate's greenlets side by side with raw corosensei, generator 0.8,
/// context 3.0 and CPython's greenlet.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    mode: Option<Mode>,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Measure everything and print the table (the default).
    Table(TableArgs),
    /// Run one operation COUNT times and exit (for callgrind).
    Op {
        /// The system.
        #[arg(value_enum)]
        system: System,
        /// The operation.
        #[arg(value_enum)]
        op: Op,
        /// How many times.
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        count: u64,
    },
    /// Child: print the RSS growth per suspended coroutine, 10,000 alive.
    Rss {
        /// The system.
        #[arg(value_enum)]
        system: System,
    },
    /// The hub's table: greenlet::hub beside tokio, may, gevent
    /// and raw corosensei, with the issue's targets; writes an SVG plot.
    Hub(runtimes::HubArgs),
    /// Child of `hub`: one timed sample of a figure on a peer.
    Sample {
        /// The peer.
        #[arg(value_enum)]
        peer: runtimes::Peer,
        /// The figure.
        #[arg(value_enum)]
        figure: runtimes::Figure,
        /// Operations timed.
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        count: u64,
        /// Operations run first, untimed.
        #[arg(long, default_value_t = 0)]
        warm: u64,
    },
    /// Child: start suspended coroutines until one fails or CAP are alive.
    Alive {
        /// The system.
        #[arg(value_enum)]
        system: System,
        /// Stop here.
        #[arg(long, default_value_t = 300_000)]
        cap: usize,
    },
}

#[derive(Debug, Clone, clap::Args)]
struct TableArgs {
    /// Timed rounds per operation (each round one batch per system).
    #[arg(long, default_value_t = 21, value_parser = clap::value_parser!(u64).range(1..=1000))]
    rounds: u64,
    /// Stop the "most alive" children here.
    #[arg(long, default_value_t = 300_000)]
    cap: usize,
    /// Skip the instruction counts (callgrind).
    #[arg(long)]
    no_callgrind: bool,
    /// Skip CPython's greenlet.
    #[arg(long)]
    no_python: bool,
}

impl Default for TableArgs {
    fn default() -> Self {
        TableArgs {
            rounds: 21,
            cap: 300_000,
            no_callgrind: false,
            no_python: false,
        }
    }
}

/// The message of a panic payload.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic".to_string()
    }
}

/// generator's `cancel` unwinds with a `generator::Error::Cancel` panic:
/// keep those quiet, report every other panic as usual.
fn quiet_cancels() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !matches!(
            info.payload().downcast_ref::<generator::Error>(),
            Some(generator::Error::Cancel)
        ) {
            default(info);
        }
    }));
}

fn table(args: &TableArgs) -> Result<(), String> {
    let sampler = load::Sampler::start();
    let mut results = report::Results::default();
    for op in Op::ALL {
        eprintln!("timing {} ...", op.arg());
        results
            .times
            .push(timing::interleaved(&System::ALL, op, args.rounds as usize)?);
    }
    for system in System::ALL {
        eprintln!("memory of {} ...", system.arg());
        let child = crowd::run_child(
            &["rss".into(), system.arg().into()],
            Duration::from_secs(120),
        )?;
        results
            .rss
            .push(match (&child.failure, child.last("rss_per")) {
                (None, Some(bytes)) => bytes.parse().map_err(|_| format!("bad rss_per: {bytes}")),
                (failure, _) => Err(failure.clone().unwrap_or_else(|| "no figure".into())),
            });
        eprintln!("most alive of {} (cap {}) ...", system.arg(), args.cap);
        let child = crowd::run_child(
            &[
                "alive".into(),
                system.arg().into(),
                "--cap".into(),
                args.cap.to_string(),
            ],
            Duration::from_secs(180),
        )?;
        results.alive.push(report::Alive::from_child(&child));
    }
    if args.no_callgrind {
        results.instructions = None;
    } else if !callgrind::available() {
        eprintln!("valgrind not found: no instruction counts");
        results.instructions = None;
    } else {
        let scratch = std::env::temp_dir().join(format!("peers-callgrind-{}", std::process::id()));
        std::fs::create_dir_all(&scratch).map_err(|err| format!("{}: {err}", scratch.display()))?;
        let mut counts = Vec::new();
        for op in Op::ALL {
            let mut row = Vec::new();
            for system in System::ALL {
                eprintln!("callgrind {} {} ...", system.arg(), op.arg());
                row.push(match systems::op_loop(system, op) {
                    Ok(_) => Some(callgrind::per_op(system, op, &scratch)?),
                    Err(_) => None,
                });
            }
            counts.push(row);
        }
        let _ = std::fs::remove_dir_all(&scratch);
        results.instructions = Some(counts);
    }
    if !args.no_python {
        eprintln!("CPython's greenlet (benches/python/run.sh) ...");
        results.python = Some(python::figures()?);
    }
    results.load = sampler.finish();
    results.rounds = args.rounds;
    results.cap = args.cap;
    print!("{}", report::render(&results));
    Ok(())
}

fn main() -> ExitCode {
    quiet_cancels();
    let cli = Cli::parse();
    let outcome = match cli.mode.unwrap_or(Mode::Table(TableArgs::default())) {
        Mode::Table(args) => table(&args),
        Mode::Op { system, op, count } => match systems::op_loop(system, op) {
            Ok(run) => run(count),
            Err(why) => Err(format!("{} has no {}: {why}", system.arg(), op.arg())),
        },
        Mode::Hub(args) => runtimes::table(&args),
        Mode::Sample {
            peer,
            figure,
            count,
            warm,
        } => runtimes::sample_child(peer, figure, count, warm),
        Mode::Rss { system } => crowd::rss_child(system, crowd::RSS_COUNT),
        Mode::Alive { system, cap } => crowd::alive_child(system, cap),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("peers: {err}");
            ExitCode::FAILURE
        }
    }
}
