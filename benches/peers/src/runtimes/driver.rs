//! The parent side of the hub's table: the samples of every figure on every
//! peer, interleaved (the order rotated each round, so a burst of load from
//! elsewhere falls on all of them), their medians, the instruction counts
//! under callgrind, then the report and the plot.
//!
//! Uses [`crate::crowd`]'s child runner, [`crate::callgrind`] and
//! [`crate::load`].

use std::path::PathBuf;
use std::time::Duration;

use super::report::{Cell, Instructions, Results, Row};
use super::{gevent, plot, report, Figure, Peer};
use crate::crowd::{run_child, run_program, ChildReport};
use crate::{callgrind, load};

/// The flags of `peers hub`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct HubArgs {
    /// Samples per peer of the per-operation figures (each a child).
    #[arg(long, default_value_t = 11, value_parser = clap::value_parser!(u64).range(1..=200))]
    rounds: u64,
    /// Samples per peer of the 100,000-task figures (sleepers, spawn tree).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=50))]
    whole_rounds: u64,
    /// Add instructions per operation (callgrind, (2N - N) / N) of the
    /// one-worker figures, for the hub, tokio, may and raw corosensei.
    #[arg(long)]
    callgrind: bool,
    /// Skip gevent (and its venv).
    #[arg(long)]
    no_gevent: bool,
    /// Where to write the SVG plot of the ratios.
    #[arg(long, default_value_os_t = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../hub_ratios.svg"))]
    svg: PathBuf,
}

/// The time limit of one sample's child.
const CHILD_LIMIT: Duration = Duration::from_secs(300);

/// How a sample is run: this binary's `sample` mode, or gevent's script.
enum Runner {
    Rust,
    Python(PathBuf),
}

fn sample_args(peer: Peer, figure: Figure, count: u64) -> Vec<String> {
    vec![
        "sample".into(),
        peer.arg().into(),
        figure.arg().into(),
        count.to_string(),
        "--warm".into(),
        figure.warm().to_string(),
    ]
}

/// One sample: (ns per operation, RSS per sleeper), or how it failed.
fn run_sample(runner: &Runner, peer: Peer, figure: Figure) -> Result<(f64, Option<f64>), String> {
    let count = figure.count();
    let child: ChildReport = match runner {
        Runner::Rust => run_child(&sample_args(peer, figure, count), CHILD_LIMIT)?,
        Runner::Python(python) => {
            let mut argv = vec![gevent::script().display().to_string(), "--sample".into()];
            argv.extend(sample_args(peer, figure, count).into_iter().skip(2));
            run_program(python, &argv, CHILD_LIMIT)?
        }
    };
    if let Some(failure) = child.failure.as_deref() {
        return Err(failure.to_string());
    }
    let elapsed: f64 = child
        .last("elapsed_ns")
        .and_then(|ns| ns.parse().ok())
        .ok_or("the child printed no elapsed_ns")?;
    let rss = child.last("rss_per").and_then(|b| b.parse().ok());
    Ok((elapsed / count as f64, rss))
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

/// One figure: every peer's samples, interleaved, and their medians. A
/// peer that fails is not tried again in later rounds.
fn measure(figure: Figure, rounds: u64, gevent: &Result<PathBuf, String>) -> Row {
    let peers = figure.peers();
    let mut times = vec![Vec::new(); peers.len()];
    let mut rss = vec![Vec::new(); peers.len()];
    let mut failures: Vec<Option<String>> = vec![None; peers.len()];
    for (i, peer) in peers.iter().enumerate() {
        if *peer == Peer::Gevent {
            if let Err(why) = gevent {
                failures[i] = Some(format!("not run: {why}"));
            }
        }
    }
    for round in 0..rounds as usize {
        for k in 0..peers.len() {
            let i = (k + round) % peers.len();
            if failures[i].is_some() {
                continue;
            }
            let runner = match (peers[i], gevent) {
                (Peer::Gevent, Ok(python)) => Runner::Python(python.clone()),
                _ => Runner::Rust,
            };
            eprintln!("  {} round {} ...", peers[i].arg(), round + 1);
            match run_sample(&runner, peers[i], figure) {
                Ok((t, r)) => {
                    times[i].push(t);
                    rss[i].extend(r);
                }
                Err(why) => failures[i] = Some(why),
            }
        }
    }
    let cells = peers
        .iter()
        .enumerate()
        .map(|(i, &peer)| {
            let samples = times[i].len();
            (
                peer,
                Cell {
                    ns_per_op: median(std::mem::take(&mut times[i])),
                    rss_per: median(std::mem::take(&mut rss[i])),
                    failure: failures[i].take(),
                    samples,
                },
            )
        })
        .collect();
    Row { figure, cells }
}

/// The one-worker figures counted under callgrind, and on which peers
/// (every Rust peer of each; gevent's interpreter is not counted).
const COUNTED: [(Figure, &[Peer]); 5] = [
    (Figure::SpawnJoin, &[Peer::Hub, Peer::Tokio, Peer::May]),
    (Figure::SpawnJoinBatch, &[Peer::Hub, Peer::Tokio, Peer::May]),
    (
        Figure::Yield,
        &[Peer::Hub, Peer::Tokio, Peer::May, Peer::Raw],
    ),
    (Figure::PingPong, &[Peer::Hub, Peer::Tokio]),
    (
        Figure::PingPongUnbounded,
        &[Peer::Hub, Peer::Tokio, Peer::May],
    ),
];

fn count_instructions() -> Result<Instructions, String> {
    let scratch = std::env::temp_dir().join(format!("peers-hub-callgrind-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|err| format!("{}: {err}", scratch.display()))?;
    let mut counts = Vec::new();
    for (figure, peers) in COUNTED {
        for &peer in peers {
            eprintln!("callgrind {} {} ...", peer.arg(), figure.arg());
            let n = figure.counted();
            let once = callgrind::total_of(&sample_args(peer, figure, n), &scratch)?;
            let twice = callgrind::total_of(&sample_args(peer, figure, 2 * n), &scratch)?;
            counts.push((figure, peer, twice.saturating_sub(once) as f64 / n as f64));
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(counts)
}

/// `peers hub`: measure everything, print the table, write the plot.
pub(crate) fn table(args: &HubArgs) -> Result<(), String> {
    let sampler = load::Sampler::start();
    let gevent = match args.no_gevent {
        true => Err("--no-gevent".to_string()),
        false => {
            eprintln!("gevent's venv (benches/python/run.sh --gevent --which) ...");
            gevent::interpreter()
        }
    };
    let mut rows = Vec::new();
    for figure in Figure::ALL {
        eprintln!("{} ...", figure.arg());
        let rounds = match figure.is_whole() {
            true => args.whole_rounds,
            false => args.rounds,
        };
        rows.push(measure(figure, rounds, &gevent));
    }
    let instructions = match (args.callgrind, callgrind::available()) {
        (false, _) => None,
        (true, false) => return Err("--callgrind: valgrind is not on PATH".into()),
        (true, true) => Some(count_instructions()?),
    };
    let results = Results {
        rows,
        instructions,
        load: sampler.finish(),
        rounds: args.rounds,
        whole_rounds: args.whole_rounds,
    };
    print!("{}", report::render(&results));
    plot::write(&results, &args.svg)?;
    eprintln!("wrote {}", args.svg.display());
    Ok(())
}
