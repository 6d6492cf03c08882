//! Child processes on the hub: `--children` green threads each run a
//! shell command and read its output while parking, so the worker keeps
//! a ticker green thread going meanwhile (the ticks printed show it was
//! never held up); then one child's stdin and stdout are driven through
//! parking pipes.
//!
//! ```text
//! cargo run --release --example child_process -- --children 8 --command 'sleep 0.2; echo hi'
//! ```
//!
//! The last line is machine-readable: `RESULT children=.. ok=.. ticks=.. ms=..`.

use std::io::{Read, Write};
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use greenlet::hub::process::Command;
use greenlet::hub::{self, Runtime};

/// Run child processes from green threads without blocking the worker.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Children run at once (at most 256).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=256))]
    children: u64,
    /// The shell command each child runs (`sh -c`).
    #[arg(long, default_value = "sleep 0.1; echo hello from $$")]
    command: String,
}

fn run(args: &Args) -> Result<String, String> {
    let ticks = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let (t, d) = (Arc::clone(&ticks), Arc::clone(&done));
    // A ticker on the same worker: it advances only while the children are
    // waited for by parking, not by blocking.
    let ticker = hub::spawn(move || {
        while d.load(Ordering::SeqCst) == 0 {
            hub::sleep(Duration::from_millis(5));
            t.fetch_add(1, Ordering::SeqCst);
        }
    });
    let start = Instant::now();
    let children: Vec<_> = (0..args.children)
        .map(|_| {
            let command = args.command.clone();
            hub::spawn(move || Command::new("sh").args(["-c", &command]).output())
        })
        .collect();
    let mut ok = 0;
    for (i, c) in children.into_iter().enumerate() {
        let out = c
            .join()
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        print!(
            "child {i}: {} {}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
        if !out.stdout.ends_with(b"\n") {
            println!();
        }
        ok += u64::from(out.status.success());
    }
    let ms = start.elapsed().as_millis();
    done.store(1, Ordering::SeqCst);
    ticker.join().map_err(|e| e.to_string())?;

    // Both directions through parking pipes: `tr` upper-cases what we send.
    let mut tr = Command::new("tr")
        .args(["a-z", "A-Z"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut stdin = tr.stdin.take().ok_or("no stdin pipe")?;
    let writer = hub::spawn_local(move || stdin.write_all(b"parked, not blocked\n"));
    let mut upper = String::new();
    tr.stdout
        .take()
        .ok_or("no stdout pipe")?
        .read_to_string(&mut upper)
        .map_err(|e| e.to_string())?;
    writer
        .join()
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    tr.wait().map_err(|e| e.to_string())?;
    print!("tr: {upper}");

    Ok(format!(
        "RESULT children={} ok={ok} ticks={} ms={ms}",
        args.children,
        ticks.load(Ordering::SeqCst)
    ))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let rt = match Runtime::builder().worker_threads(1).build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("child_process: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(move || run(&args)) {
        Ok(Ok(line)) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            eprintln!("child_process: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("child_process: {e}");
            ExitCode::FAILURE
        }
    }
}
