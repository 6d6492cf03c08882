//! A Unix-socket echo server on the hub, with its own clients: the
//! server accepts on `--path` and echoes each line back in a green thread
//! per connection; `--clients` green threads each send `--lines` lines and
//! check every echo. Ctrl-C (SIGINT) stops a server run with `--serve`.
//!
//! ```text
//! cargo run --release --example unix_echo -- --clients 20 --lines 100
//! cargo run --release --example unix_echo -- --serve --path /tmp/echo.sock   # then: nc -U /tmp/echo.sock
//! ```
//!
//! The last line is machine-readable: `RESULT clients=.. lines=.. ok=.. ms=..`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use greenlet::hub::net::{UnixListener, UnixStream};
use greenlet::hub::{self, signal, Runtime};

/// Echo lines over a Unix-domain socket.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The socket file (removed first if it is a stale socket, and on exit).
    #[arg(long, default_value = "/tmp/greenlet-unix-echo.sock")]
    path: PathBuf,
    /// Client green threads (at most 1,000).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1000))]
    clients: u64,
    /// Lines each client sends (at most 100,000).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    lines: u64,
    /// Worker OS threads.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    workers: u64,
    /// Serve until Ctrl-C instead of running the clients.
    #[arg(long)]
    serve: bool,
}

/// Echo each line of one connection.
fn handle(s: UnixStream) {
    let mut r = BufReader::new(&s);
    let mut line = String::new();
    loop {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if (&s).write_all(line.as_bytes()).is_err() {
                    return;
                }
            }
        }
    }
}

/// Accept until the listener fails; a green thread per connection.
fn accept_loop(l: UnixListener) {
    while let Ok((s, _)) = l.accept() {
        hub::spawn(move || handle(s));
    }
}

/// One client: send `lines` lines and count the echoes that match.
fn client(path: &Path, id: u64, lines: u64) -> std::io::Result<u64> {
    let s = UnixStream::connect(path)?;
    let mut r = BufReader::new(&s);
    let mut ok = 0;
    let mut back = String::new();
    for i in 0..lines {
        let msg = format!("client {id} line {i}\n");
        (&s).write_all(msg.as_bytes())?;
        back.clear();
        r.read_line(&mut back)?;
        ok += u64::from(back == msg);
    }
    Ok(ok)
}

/// Remove `path` if it is a socket left by an earlier run.
fn remove_stale(path: &Path) {
    use std::os::unix::fs::FileTypeExt;
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(path);
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let rt = match Runtime::builder()
        .worker_threads(args.workers as usize)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("unix_echo: {e}");
            return ExitCode::FAILURE;
        }
    };
    remove_stale(&args.path);
    let path = args.path.clone();
    let result = rt.block_on(move || -> Result<String, String> {
        let l = UnixListener::bind(&path).map_err(|e| e.to_string())?;
        if args.serve {
            println!("serving on {}; Ctrl-C stops", path.display());
            let server = hub::spawn(move || accept_loop(l));
            signal::ctrl_c().map_err(|e| e.to_string())?;
            server.cancel();
            return Ok("stopped by Ctrl-C".into());
        }
        let server = hub::spawn(move || accept_loop(l));
        let start = Instant::now();
        let clients: Vec<_> = (0..args.clients)
            .map(|id| {
                let path = path.clone();
                hub::spawn(move || client(&path, id, args.lines))
            })
            .collect();
        let mut ok = 0;
        for c in clients {
            ok += c
                .join()
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
        }
        let ms = start.elapsed().as_millis();
        server.cancel();
        let want = args.clients * args.lines;
        if ok != want {
            return Err(format!("{ok} of {want} echoes matched"));
        }
        Ok(format!(
            "RESULT clients={} lines={} ok={ok} ms={ms}",
            args.clients, args.lines
        ))
    });
    let _ = std::fs::remove_file(&args.path);
    match result {
        Ok(Ok(line)) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            eprintln!("unix_echo: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("unix_echo: {e}");
            ExitCode::FAILURE
        }
    }
}
