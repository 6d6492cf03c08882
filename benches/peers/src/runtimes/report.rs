//! The hub's table: every figure of one run, the hub's ratios to each peer,
//! and the hub's targets with a verdict each (shared with the plot).
//!
//! Owns [`Results`] and its Markdown rendering; measures nothing.

use std::fmt::Write;

use super::{Figure, Peer};
use crate::report::{ns, ratio, thousands};

/// One peer's figure: medians of its samples, or how it failed.
#[derive(Debug)]
pub(crate) struct Cell {
    /// Median time per operation (per yield, per round trip; for the whole
    /// figures, the whole run divided by its 100,000).
    pub(crate) ns_per_op: Option<f64>,
    /// Median resident bytes per sleeper.
    pub(crate) rss_per: Option<f64>,
    /// Why it stopped (the other samples, if any, still count).
    pub(crate) failure: Option<String>,
    /// How many samples succeeded.
    pub(crate) samples: usize,
}

/// One figure on every peer that has it.
#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) figure: Figure,
    pub(crate) cells: Vec<(Peer, Cell)>,
}

/// Instructions per operation: (figure, peer, count).
pub(crate) type Instructions = Vec<(Figure, Peer, f64)>;

/// Everything one run measured.
#[derive(Debug)]
pub(crate) struct Results {
    pub(crate) rows: Vec<Row>,
    pub(crate) instructions: Option<Instructions>,
    /// One-minute load average: first, last, highest.
    pub(crate) load: (f64, f64, f64),
    pub(crate) rounds: u64,
    pub(crate) whole_rounds: u64,
}

impl Results {
    fn cell(&self, figure: Figure, peer: Peer) -> Option<&Cell> {
        let row = self.rows.iter().find(|r| r.figure == figure)?;
        row.cells.iter().find(|(p, _)| *p == peer).map(|(_, c)| c)
    }

    fn time(&self, figure: Figure, peer: Peer) -> Option<f64> {
        self.cell(figure, peer)?.ns_per_op
    }

    fn instr(&self, figure: Figure, peer: Peer) -> Option<f64> {
        self.instructions
            .as_ref()?
            .iter()
            .find(|(f, p, _)| *f == figure && *p == peer)
            .map(|(_, _, n)| *n)
    }

    /// The hub's time over `peer`'s.
    pub(crate) fn time_ratio(&self, figure: Figure, peer: Peer) -> Option<f64> {
        Some(self.time(figure, Peer::Hub)? / self.time(figure, peer)?)
    }

    /// The hub's instructions per operation over `peer`'s.
    pub(crate) fn instr_ratio(&self, figure: Figure, peer: Peer) -> Option<f64> {
        Some(self.instr(figure, Peer::Hub)? / self.instr(figure, peer)?)
    }
}

/// What a target compares the hub with.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Against {
    /// The hub's time over this peer's.
    Peer(Peer),
    /// The hub's instructions per operation over this peer's.
    PeerInstr(Peer),
    /// The hub's RSS per sleeper over this many bytes.
    RssBytes(f64),
    /// The hub's instructions per operation over this many.
    Instructions(f64),
}

/// One of the hub's targets: the ratio must be at most `bound`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    /// Short label (the plot's axis).
    pub(crate) label: &'static str,
    pub(crate) figure: Figure,
    pub(crate) against: Against,
    pub(crate) bound: f64,
}

impl Target {
    /// This run's ratio.
    pub(crate) fn ratio(&self, r: &Results) -> Option<f64> {
        match self.against {
            Against::Peer(peer) => r.time_ratio(self.figure, peer),
            Against::PeerInstr(peer) => r.instr_ratio(self.figure, peer),
            Against::RssBytes(bytes) => Some(r.cell(self.figure, Peer::Hub)?.rss_per? / bytes),
            Against::Instructions(count) => Some(r.instr(self.figure, Peer::Hub)? / count),
        }
    }

    fn bound_text(&self) -> String {
        match self.against {
            Against::Peer(peer) if self.bound < 0.1 => {
                format!("≤ 1/{:.0} × {}", 1.0 / self.bound, peer.arg())
            }
            Against::Peer(peer) => format!("≤ {:.1} × {}", self.bound, peer.arg()),
            Against::PeerInstr(peer) => {
                format!("instructions ≤ {:.2} × {}'s", self.bound, peer.arg())
            }
            Against::RssBytes(bytes) => format!("≤ {:.0} KiB per sleeper", bytes / 1024.0),
            Against::Instructions(count) => format!("≤ {count:.0} instructions each"),
        }
    }
}

/// The hub's benchmark targets.
pub(crate) const TARGETS: [Target; 13] = [
    Target {
        label: "spawn+join / tokio",
        figure: Figure::SpawnJoin,
        against: Against::Peer(Peer::Tokio),
        bound: 0.7,
    },
    Target {
        label: "spawn+join / may",
        figure: Figure::SpawnJoin,
        against: Against::Peer(Peer::May),
        bound: 0.5,
    },
    Target {
        label: "spawn+join / gevent",
        figure: Figure::SpawnJoin,
        against: Against::Peer(Peer::Gevent),
        bound: 1.0 / 30.0,
    },
    Target {
        label: "yield / tokio",
        figure: Figure::Yield,
        against: Against::Peer(Peer::Tokio),
        bound: 0.3,
    },
    Target {
        label: "ping-pong 1w / tokio",
        figure: Figure::PingPong,
        against: Against::Peer(Peer::Tokio),
        bound: 0.3,
    },
    Target {
        label: "ping-pong 2w / tokio",
        figure: Figure::PingPong2w,
        against: Against::Peer(Peer::Tokio),
        bound: 1.0,
    },
    Target {
        label: "100k sleepers / tokio",
        figure: Figure::Sleepers,
        against: Against::Peer(Peer::Tokio),
        bound: 2.0,
    },
    Target {
        label: "sleeper instr / 2,000",
        figure: Figure::Sleepers,
        against: Against::Instructions(2_000.0),
        bound: 1.0,
    },
    Target {
        label: "RSS per sleeper / 8 KiB",
        figure: Figure::Sleepers,
        against: Against::RssBytes(8192.0),
        bound: 1.0,
    },
    Target {
        label: "spawn tree / tokio",
        figure: Figure::SpawnTree,
        against: Against::Peer(Peer::Tokio),
        bound: 1.0,
    },
    Target {
        label: "yield / raw corosensei",
        figure: Figure::Yield,
        against: Against::Peer(Peer::Raw),
        bound: 2.0,
    },
    Target {
        label: "spawn+join batched, instr / tokio",
        figure: Figure::SpawnJoinBatch,
        against: Against::PeerInstr(Peer::Tokio),
        bound: 0.7,
    },
    Target {
        label: "ping-pong unbounded, instr / tokio",
        figure: Figure::PingPongUnbounded,
        against: Against::PeerInstr(Peer::Tokio),
        bound: 0.35,
    },
];

/// The columns: every peer that some figure has.
const COLUMNS: [Peer; 5] = Peer::ALL;

fn kib(bytes: f64) -> String {
    format!("{:.1} KiB", bytes / 1024.0)
}

/// A failure, shortened for the table: a panic's message without its
/// location and backtrace, at most 160 characters.
fn short(failure: &str) -> String {
    let text = match failure.split_once("panicked at ") {
        Some((_, rest)) => {
            let message = rest.split_once(": ").map_or(rest, |(_, m)| m);
            let end = ["stack backtrace", "note:"]
                .iter()
                .filter_map(|stop| message.find(stop))
                .min()
                .unwrap_or(message.len());
            format!("panicked: {}", message[..end].trim())
        }
        None => failure.to_string(),
    };
    text.chars().take(160).collect::<String>().replace('|', "/")
}

fn render_cell(r: &Results, figure: Figure, peer: Peer) -> String {
    let Some(cell) = r.cell(figure, peer) else {
        return String::new();
    };
    let mut text = match cell.ns_per_op {
        Some(t) if figure.is_whole() => {
            format!("{:.0} ms", t * figure.count() as f64 / 1e6)
        }
        Some(t) => ns(t),
        None => "—".into(),
    };
    if let Some(bytes) = cell.rss_per {
        let _ = write!(text, ", {} per sleeper", kib(bytes));
    }
    if let Some(i) = r.instr(figure, peer) {
        let _ = write!(text, ", {} instr", thousands(i.round() as u64));
    }
    match (&cell.failure, cell.samples) {
        (Some(failure), 0) => text = format!("failed: {}", short(failure)),
        (Some(failure), n) => {
            let _ = write!(text, " (then failed, after {n}: {})", short(failure));
        }
        (None, _) => {}
    }
    text
}

/// The whole report, Markdown.
pub(crate) fn render(r: &Results) -> String {
    let mut out = String::new();
    let (first, last, max) = r.load;
    let _ = writeln!(
        out,
        "Load average (1 min) during the run: {first:.2} at the start, {last:.2} at the end, \
         {max:.2} at most ({} CPUs). Times: the median of {} samples per peer ({} for the \
         100,000-task figures), each a child process, peers interleaved{}.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        r.rounds,
        r.whole_rounds,
        if r.instructions.is_some() {
            "; instructions per operation: callgrind, (total of 2N - total of N) / N"
        } else {
            ""
        }
    );
    let mut head = String::from("| figure |");
    for peer in COLUMNS {
        let _ = write!(head, " {} |", peer.title());
    }
    let _ = writeln!(out, "{head}");
    let _ = writeln!(out, "|---|{}", "---|".repeat(COLUMNS.len()));
    for row in &r.rows {
        let _ = write!(out, "| {} |", row.figure.title());
        for peer in COLUMNS {
            let _ = write!(out, " {} |", render_cell(r, row.figure, peer));
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(
        out,
        "\nGo: {}.",
        match std::process::Command::new("go").arg("version").output() {
            Ok(o) if o.status.success() => format!(
                "{} is installed, but this table has no Go peer",
                String::from_utf8_lossy(&o.stdout).trim()
            ),
            _ => "not installed here (no `go` on PATH), so the spawn tree has no Go column".into(),
        }
    );

    let _ = writeln!(
        out,
        "\nThe hub against each peer: the hub's time / the peer's (below 1 the hub is ahead).\n"
    );
    let others: Vec<Peer> = COLUMNS.into_iter().filter(|&p| p != Peer::Hub).collect();
    let mut head = String::from("| figure |");
    for peer in &others {
        let _ = write!(head, " vs {} |", peer.arg());
    }
    let _ = writeln!(out, "{head} instructions vs tokio | instructions vs may |");
    let _ = writeln!(out, "|---|{}", "---|".repeat(others.len() + 2));
    for row in &r.rows {
        let _ = write!(out, "| {} |", row.figure.arg());
        for &peer in &others {
            let text = r.time_ratio(row.figure, peer).map_or(String::new(), ratio);
            let _ = write!(out, " {text} |");
        }
        for peer in [Peer::Tokio, Peer::May] {
            let text = r.instr_ratio(row.figure, peer).map_or(String::new(), ratio);
            let _ = write!(out, " {text} |");
        }
        let _ = writeln!(out);
    }

    let _ = writeln!(out, "\nThe hub's targets:\n");
    let _ = writeln!(out, "| target | this run | verdict |");
    let _ = writeln!(out, "|---|---|---|");
    for target in TARGETS {
        let shown = |x: f64| match target.against {
            Against::RssBytes(bytes) => format!("{} ({})", kib(x * bytes), ratio(x)),
            Against::Instructions(count) => format!("{:.0} instr ({})", x * count, ratio(x)),
            Against::Peer(_) | Against::PeerInstr(_) => ratio(x),
        };
        let (figure, verdict) = match target.ratio(r) {
            Some(x) if x <= target.bound => (shown(x), "met"),
            Some(x) => (shown(x), "**not met**"),
            None => ("—".into(), "not measured"),
        };
        let _ = writeln!(
            out,
            "| {}: {} | {figure} | {verdict} |",
            target.figure.arg(),
            target.bound_text()
        );
    }
    out
}
