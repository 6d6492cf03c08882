//! The table: every figure of one run, the ratios of this crate's figures
//! to each peer's, and the targets with a verdict each.
//!
//! Owns [`Results`] and its Markdown rendering; measures nothing.

use std::collections::HashMap;
use std::fmt::Write;

use crate::crowd::{ChildReport, RSS_COUNT};
use crate::systems::{op_loop, Op, System};

/// How many coroutines a system had alive when it stopped, and why.
pub(crate) struct Alive {
    count: Option<u64>,
    how: String,
}

impl Alive {
    /// From an `alive` child's report.
    pub(crate) fn from_child(child: &ChildReport) -> Alive {
        let count = child.last("alive").and_then(|n| n.parse().ok());
        let how = if let Some(reason) = child.last("stopped") {
            if reason.contains("os error 12") || reason.contains("Cannot allocate memory") {
                "then mmap failed: ENOMEM".to_string()
            } else {
                format!("then: {reason}")
            }
        } else if child.lines.iter().any(|(k, _)| k == "cap") {
            "the cap".to_string()
        } else {
            format!(
                "then the child died: {}",
                child.failure.as_deref().unwrap_or("no report")
            )
        };
        Alive { count, how }
    }
}

/// Everything one run measured. Rows are in [`Op::ALL`] order, columns in
/// [`System::ALL`] order.
#[derive(Default)]
pub(crate) struct Results {
    pub(crate) times: Vec<Vec<Option<f64>>>,
    pub(crate) instructions: Option<Vec<Vec<Option<f64>>>>,
    pub(crate) rss: Vec<Result<f64, String>>,
    pub(crate) alive: Vec<Alive>,
    pub(crate) python: Option<HashMap<String, String>>,
    pub(crate) load: (f64, f64, f64),
    pub(crate) rounds: u64,
    pub(crate) cap: usize,
}

/// `12,345` for 12345.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub(crate) fn ns(value: f64) -> String {
    if value < 10.0 {
        format!("{value:.2} ns")
    } else if value < 100.0 {
        format!("{value:.1} ns")
    } else {
        format!("{} ns", thousands(value.round() as u64))
    }
}

pub(crate) fn ratio(value: f64) -> String {
    if value < 0.1 {
        // Two significant digits: 0.021×, 0.0032×.
        let decimals = (1.0 - value.log10().floor()).max(0.0) as usize;
        format!("{value:.decimals$}×")
    } else if value < 10.0 {
        format!("{value:.2}×")
    } else {
        format!("{value:.0}×")
    }
}

/// The greenlet column's index.
fn me() -> usize {
    System::ALL
        .iter()
        .position(|&s| s == System::Greenlet)
        .expect("greenlet is a column")
}

/// CPython's figure for `op`, in ns.
fn python_ns(results: &Results, op: Op) -> Option<f64> {
    let key = match op {
        Op::RoundTrip => "round_trip_ns",
        Op::Switch => "switch_ns",
        Op::Create => "create_ns",
        Op::Kill => "start_kill_ns",
    };
    results.python.as_ref()?.get(key)?.parse().ok()
}

impl Results {
    fn time(&self, op: usize, system: usize) -> Option<f64> {
        self.times.get(op)?.get(system).copied().flatten()
    }

    fn instr(&self, op: usize, system: usize) -> Option<f64> {
        self.instructions
            .as_ref()?
            .get(op)?
            .get(system)
            .copied()
            .flatten()
    }

    fn cell(&self, op: usize, system: usize) -> String {
        if let Err(why) = op_loop(System::ALL[system], Op::ALL[op]) {
            return format!("— ({why})");
        }
        match (self.time(op, system), self.instr(op, system)) {
            (Some(t), Some(i)) => format!("{}, {} instr", ns(t), thousands(i.round() as u64)),
            (Some(t), None) => ns(t),
            _ => "—".into(),
        }
    }
}

/// The whole report, Markdown.
pub(crate) fn render(r: &Results) -> String {
    let mut out = String::new();
    let python_title = match &r.python {
        Some(p) => format!(
            "CPython {} greenlet {}",
            p.get("python").map_or("?", String::as_str),
            p.get("greenlet").map_or("?", String::as_str)
        ),
        None => "CPython greenlet (not run)".into(),
    };
    let (first, last, max) = r.load;
    let _ = writeln!(
        out,
        "Load average (1 min) during the run: {first:.2} at the start, {last:.2} at the end, \
         {max:.2} at most ({} CPUs). Times: the median of {} interleaved batches per system; \
         instructions: callgrind, (total of 2N - total of N) / N.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        r.rounds
    );
    let mut head = String::from("| operation |");
    for s in System::ALL {
        let _ = write!(head, " {} |", s.title());
    }
    let _ = writeln!(out, "{head} {python_title} |");
    let _ = writeln!(out, "|---|{}---|", "---|".repeat(System::ALL.len()));
    for (o, op) in Op::ALL.iter().enumerate() {
        let _ = write!(out, "| {} |", op.title());
        for s in 0..System::ALL.len() {
            let _ = write!(out, " {} |", r.cell(o, s));
        }
        let py = python_ns(r, *op).map_or("—".into(), ns);
        let _ = writeln!(out, " {py} |");
    }
    let _ = write!(
        out,
        "| RSS per suspended coroutine ({} alive, 256 KiB stacks) |",
        thousands(RSS_COUNT as u64)
    );
    for rss in &r.rss {
        match rss {
            Ok(bytes) => {
                let _ = write!(out, " {} B |", thousands(bytes.round() as u64));
            }
            Err(why) => {
                let _ = write!(out, " — ({why}) |");
            }
        }
    }
    let py_rss = r
        .python
        .as_ref()
        .and_then(|p| p.get("rss_per_bytes")?.parse::<f64>().ok())
        .map_or("—".into(), |b| {
            format!("{} B", thousands(b.round() as u64))
        });
    let _ = writeln!(out, " {py_rss} |");
    let _ = write!(
        out,
        "| most alive at once (cap {}) |",
        thousands(r.cap as u64)
    );
    for alive in &r.alive {
        let count = alive.count.map_or("?".into(), thousands);
        let _ = write!(out, " {count} ({}) |", alive.how);
    }
    let py_alive = r
        .python
        .as_ref()
        .and_then(|p| {
            Some((
                p.get("most_alive")?.parse::<u64>().ok()?,
                p.get("most_alive_how")?,
            ))
        })
        .map_or("—".into(), |(n, how)| format!("{} ({how})", thousands(n)));
    let _ = writeln!(out, " {py_alive} |");
    if let Ok(limit) = std::fs::read_to_string("/proc/sys/vm/max_map_count") {
        let _ = writeln!(
            out,
            "\n`vm.max_map_count` is {} here: a guard-paged stack is two mappings.",
            limit.trim()
        );
    }

    // Ratios.
    let _ = writeln!(
        out,
        "\nThis crate against each system: greenlet's time / the system's time \
         (instructions likewise); below 1 the crate is ahead.\n"
    );
    let mut head = String::from("| operation |");
    for (s, system) in System::ALL.iter().enumerate() {
        if s != me() {
            let _ = write!(head, " vs {} |", system.title());
        }
    }
    let _ = writeln!(out, "{head} vs CPython greenlet |");
    let _ = writeln!(out, "|---|{}---|", "---|".repeat(System::ALL.len() - 1));
    for (o, op) in Op::ALL.iter().enumerate() {
        let _ = write!(out, "| {} |", op.arg());
        for s in 0..System::ALL.len() {
            if s == me() {
                continue;
            }
            let time = r.time(o, me()).zip(r.time(o, s)).map(|(a, b)| a / b);
            let instr = r.instr(o, me()).zip(r.instr(o, s)).map(|(a, b)| a / b);
            let text = match (time, instr) {
                (Some(t), Some(i)) => format!("{} time, {} instr", ratio(t), ratio(i)),
                (Some(t), None) => format!("{} time", ratio(t)),
                _ => "—".into(),
            };
            let _ = write!(out, " {text} |");
        }
        let py = r
            .time(o, me())
            .zip(python_ns(r, *op))
            .map_or("—".into(), |(a, b)| format!("{} time", ratio(a / b)));
        let _ = writeln!(out, " {py} |");
    }

    // Targets.
    let column = |system: System| {
        System::ALL
            .iter()
            .position(|&s| s == system)
            .expect("column")
    };
    let (ctx, generator) = (column(System::Context), column(System::Generator));
    let _ = writeln!(out, "\nThe issue's targets:\n");
    let _ = writeln!(out, "| target | this run | verdict |");
    let _ = writeln!(out, "|---|---|---|");
    let mut target = |name: &str, figure: String, met: Option<bool>| {
        let verdict = match met {
            Some(true) => "met",
            Some(false) => "**not met**",
            None => "not measured",
        };
        let _ = writeln!(out, "| {name} | {figure} | {verdict} |");
    };
    let both = |a: Option<bool>, b: Option<bool>| a.zip(b).map(|(a, b)| a && b);
    let time_vs = |o: usize, s: usize| r.time(o, me()).zip(r.time(o, s)).map(|(a, b)| a / b);
    let show = |x: Option<f64>, f: fn(f64) -> String| x.map_or("?".into(), f);
    for (o, op) in Op::ALL.iter().enumerate() {
        let instr = r.instr(o, me());
        let count = |i: f64| thousands(i.round() as u64);
        match op {
            Op::RoundTrip => target(
                "round trip: faster than context, ≤ 100 instructions",
                format!(
                    "{} context's time, {} instr",
                    show(time_vs(o, ctx), ratio),
                    show(instr, count)
                ),
                both(time_vs(o, ctx).map(|t| t < 1.0), instr.map(|i| i <= 100.0)),
            ),
            Op::Switch => target(
                "A<->B: no slower than context's direct jump, ≤ 60 instructions",
                format!(
                    "{} context's time, {} instr",
                    show(time_vs(o, ctx), ratio),
                    show(instr, count)
                ),
                both(time_vs(o, ctx).map(|t| t <= 1.0), instr.map(|i| i <= 60.0)),
            ),
            Op::Create => target(
                "create + run + drop: faster than generator, ≤ 250 instructions (moonshot 150)",
                format!(
                    "{} generator's time, {} instr",
                    show(time_vs(o, generator), ratio),
                    show(instr, count)
                ),
                both(
                    time_vs(o, generator).map(|t| t < 1.0),
                    instr.map(|i| i <= 250.0),
                ),
            ),
            Op::Kill => target(
                "kill of a suspended greenlet: ≤ 600 instructions (start + kill + drop here)",
                format!("{} instr", show(instr, count)),
                instr.map(|i| i <= 600.0),
            ),
        }
    }
    let rss = r.rss.get(me()).and_then(|x| x.as_ref().ok().copied());
    target(
        "RSS per suspended greenlet ≤ 4.5 KiB (4,608 B)",
        show(rss, |b| format!("{} B", thousands(b.round() as u64))),
        rss.map(|b| b <= 4608.0),
    );
    let python_threads = r.python.as_ref().and_then(|p| {
        let bare: f64 = p.get("thread_bare_ns")?.parse().ok()?;
        let loaded: f64 = p.get("thread_10_greenlets_ns")?.parse().ok()?;
        Some((bare, loaded))
    });
    if let Some((bare, loaded)) = python_threads {
        let _ = writeln!(
            out,
            "\nCPython greenlet, 1,000 short-lived threads one after another (the load of \
             `cargo bench --bench cleanup`'s last group): {:.1} µs per bare thread, {:.1} µs \
             per thread leaving 10 suspended greenlets with a weakref callback each ({:.1} µs \
             more).",
            bare / 1000.0,
            loaded / 1000.0,
            (loaded - bare) / 1000.0
        );
    }
    out
}
