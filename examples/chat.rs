//! A line chat server on the hub, written blocking-style: every line a
//! client sends goes to every other client; `/nick NAME` renames, `/who`
//! lists who is on; a client silent for `--idle-ms` is told and
//! disconnected; Ctrl-C or SIGTERM (or `--stop-after-ms`) stops the server,
//! which says goodbye to every client first.
//!
//! The parts: a broker green thread owns the table of clients and takes
//! their events from one channel; each connection is split into a reader
//! green thread, which waits in one `select` for a line, the stop event or
//! its idle deadline, and a writer green thread fed by a bounded channel
//! (a client too slow to drain it misses lines, counted, rather than
//! holding up the broker); the accept loop selects between the listener
//! and the stop event and reaps finished connections from its `TaskGroup`.
//!
//! ```text
//! cargo run --release --example chat -- --addr 127.0.0.1:7000
//! # in other terminals: nc 127.0.0.1 7000, type lines, /nick ann, /who
//! cargo run --release --example chat -- --clients 20 --lines 3
//! cargo run --release --example chat -- --silent 2 --idle-ms 300
//! ```
//!
//! With `--clients` or `--silent`, the example also runs that many clients
//! (green threads of its own runtime) and stops once they are done (a
//! talker once it has every other talker's lines, a silent one once it is
//! disconnected; a talker sends nothing after its lines, so a short
//! `--idle-ms` disconnects it too); the last line is machine-readable: `RESULT clients=.. chat_lines=.. expected=..
//! who_ok=.. idle_kicked=.. goodbyes=.. dropped=.. connections=..`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use greenlet::hub::net::{OwnedWriteHalf, TcpListener, TcpStream};
use greenlet::hub::signal::Signals;
use greenlet::hub::{
    self, Deadline, Event, Receiver, Runtime, Selectable, Sender, TaskGroup, TryRecvError,
};

/// A line chat server over TCP: broadcast, /nick, /who, idle disconnects,
/// graceful stop on Ctrl-C.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The address to listen on (127.0.0.1 only: a port, or 0 for any).
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: std::net::SocketAddrV4,
    /// Worker OS threads.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=64))]
    workers: u64,
    /// Milliseconds a client may stay silent before it is disconnected.
    #[arg(long, default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    idle_ms: u64,
    /// Stop after this many milliseconds, as Ctrl-C would (0: only on a
    /// signal, or when the built-in clients are done).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    stop_after_ms: u64,
    /// Built-in clients that talk: each sends `--lines` lines and waits
    /// for every other one's.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=500))]
    clients: u64,
    /// Lines each talking client sends.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    lines: u64,
    /// Built-in clients that never send, to be disconnected as idle.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=100))]
    silent: u64,
}

/// What a connection tells the broker.
enum ToBroker {
    Join { id: u64, out: Sender<Arc<str>> },
    Line { id: u64, text: String },
    Nick { id: u64, name: String },
    Who { id: u64 },
    Leave { id: u64, why: &'static str },
    Stop,
}

/// Lines each client's writer may hold before the broker drops lines for it.
const OUTBOX: usize = 1024;

/// The broker: the one owner of the table of clients. Returns how many
/// lines it dropped for clients whose outbox was full.
fn broker(events: Receiver<ToBroker>) -> usize {
    let mut clients: HashMap<u64, (String, Sender<Arc<str>>)> = HashMap::new();
    let mut dropped = 0;
    let mut tell = |out: &Sender<Arc<str>>, line: &Arc<str>| {
        if out.try_send(Arc::clone(line)).is_err() {
            dropped += 1;
        }
    };
    for event in events.iter() {
        match event {
            ToBroker::Join { id, out } => {
                let nick = format!("guest{id}");
                tell(&out, &format!("* welcome, you are {nick}\n").into());
                clients.insert(id, (nick, out));
            }
            ToBroker::Line { id, text } => {
                let Some((nick, _)) = clients.get(&id) else {
                    continue;
                };
                let line: Arc<str> = format!("<{nick}> {text}\n").into();
                for (_, (_, out)) in clients.iter().filter(|(other, _)| **other != id) {
                    tell(out, &line);
                }
            }
            ToBroker::Nick { id, name } => {
                let taken = clients.values().any(|(n, _)| *n == name);
                let Some((nick, out)) = clients.get_mut(&id) else {
                    continue;
                };
                if taken || name.is_empty() || name.contains(char::is_whitespace) {
                    tell(
                        out,
                        &format!("* the name '{name}' is taken or not one word\n").into(),
                    );
                    continue;
                }
                let note: Arc<str> = format!("* {nick} is now {name}\n").into();
                *nick = name;
                for (_, out) in clients.values() {
                    tell(out, &note);
                }
            }
            ToBroker::Who { id } => {
                let mut names: Vec<&str> = clients.values().map(|(n, _)| n.as_str()).collect();
                names.sort_unstable();
                let line: Arc<str> = format!("* online: {}\n", names.join(" ")).into();
                if let Some((_, out)) = clients.get(&id) {
                    tell(out, &line);
                }
            }
            ToBroker::Leave { id, why } => {
                if let Some((nick, _)) = clients.remove(&id) {
                    let note: Arc<str> = format!("* {nick} left ({why})\n").into();
                    for (_, out) in clients.values() {
                        tell(out, &note);
                    }
                }
            }
            ToBroker::Stop => {
                let bye: Arc<str> = "* the server is stopping, goodbye\n".into();
                for (_, out) in clients.values() {
                    tell(out, &bye);
                }
                // Dropping the outboxes ends the writers once they drain.
                return dropped;
            }
        }
    }
    dropped
}

/// Write what the broker sends until it drops the outbox, then close.
fn writer(mut w: OwnedWriteHalf, outbox: Receiver<Arc<str>>) {
    for line in outbox.iter() {
        if w.write_all(line.as_bytes()).is_err() {
            return;
        }
    }
}

/// One connection: its writer green thread, and its reader here.
fn connection(id: u64, s: TcpStream, events: Sender<ToBroker>, stop: Arc<Event>, idle: Duration) {
    let (r, w) = s.into_split();
    let (out, outbox) = hub::channel::<Arc<str>>(OUTBOX);
    let Ok(writer) = hub::task()
        .name(format!("chat writer {id}"))
        .spawn(move || writer(w, outbox))
    else {
        return;
    };
    if events
        .send(ToBroker::Join {
            id,
            out: out.clone(),
        })
        .is_err()
    {
        return;
    }
    let mut r = BufReader::new(r);
    let mut line = String::new();
    let why = loop {
        if r.buffer().is_empty() {
            // Nothing buffered: wait for the socket, the stop or the idle
            // deadline, whichever comes first.
            let idle_at = Deadline::after(idle);
            let arms: [&dyn Selectable; 3] = [&r.get_ref().select_readable(), &*stop, &idle_at];
            match hub::select(&arms, None) {
                Ok(0) => {}
                Ok(1) => break None,
                _ => {
                    let _ = out.try_send(format!("* silent for {idle:?}: disconnecting\n").into());
                    break Some("idle");
                }
            }
        }
        line.clear();
        let text = match r.read_line(&mut line) {
            Ok(0) => break Some("quit"),
            Ok(_) => line.trim_end_matches(['\r', '\n']),
            Err(_) => break Some("error"),
        };
        let event = if let Some(name) = text.strip_prefix("/nick ") {
            ToBroker::Nick {
                id,
                name: name.trim().to_string(),
            }
        } else if text == "/who" {
            ToBroker::Who { id }
        } else {
            ToBroker::Line {
                id,
                text: text.to_string(),
            }
        };
        if events.send(event).is_err() {
            break None;
        }
    };
    // On a stop the broker says goodbye and drops every outbox itself.
    if let Some(why) = why {
        let _ = events.send(ToBroker::Leave { id, why });
    }
    drop(out);
    let _ = writer.join();
}

/// The accept loop: a connection green thread each, in a group reaped as
/// they finish, until the stop event; then the broker's goodbye and the
/// connections' ends. Returns (connections, dropped lines).
fn accept_loop(listener: TcpListener, stop: Arc<Event>, idle: Duration) -> (u64, usize) {
    let (events, inbox) = hub::unbounded::<ToBroker>();
    let broker = hub::task().name("chat broker").spawn(move || broker(inbox));
    let Ok(broker) = broker else {
        return (0, 0);
    };
    let mut conns = TaskGroup::new();
    let mut accepted = 0;
    loop {
        let arms: [&dyn Selectable; 2] = [&listener.select_readable(), &*stop];
        if hub::select(&arms, None) != Ok(0) {
            break;
        }
        let Ok((s, _)) = listener.accept() else {
            continue;
        };
        accepted += 1;
        let (events, stop) = (events.clone(), Arc::clone(&stop));
        let _ = conns.spawn(move || connection(accepted, s, events, stop, idle));
        while conns.try_join_next().is_some() {}
    }
    let _ = events.send(ToBroker::Stop);
    let dropped = broker.join().unwrap_or(0);
    conns.join_all();
    (accepted, dropped)
}

/// What the built-in clients saw.
#[derive(Default)]
struct Seen {
    chat_lines: AtomicUsize,
    who_ok: AtomicUsize,
    idle_kicked: AtomicUsize,
    goodbyes: AtomicUsize,
    /// Talkers whose new name the server confirmed.
    renamed: AtomicUsize,
}

/// A built-in client: renames itself, waits for every talker to be on,
/// sends its lines, reads until it has every other talker's (then tells
/// `done`), and on until the server closes. A silent one only reads, and
/// tells `done` when the server closes it.
fn client(
    addr: SocketAddr,
    i: u64,
    (talkers, lines): (u64, u64),
    all_on: Arc<Event>,
    seen: Arc<Seen>,
    done: Sender<()>,
) -> std::io::Result<()> {
    let s = TcpStream::connect(addr)?;
    let mut r = BufReader::new(&s);
    let mut line = String::new();
    let talker = i < talkers;
    let expected = (talkers.saturating_sub(1) * lines) as usize;
    let mut chat = 0;
    let mut done = Some(done);
    if talker {
        (&s).write_all(format!("/nick talker{i}\n").as_bytes())?;
        // On once the server confirmed the name.
        while !line.contains(&format!("is now talker{i}")) {
            line.clear();
            if r.read_line(&mut line)? == 0 {
                return Ok(());
            }
        }
        if seen.renamed.fetch_add(1, Ordering::SeqCst) + 1 == talkers as usize {
            all_on.set();
        }
        all_on.wait();
        if i == 0 {
            (&s).write_all(b"/who\n")?;
        }
        for k in 0..lines {
            (&s).write_all(format!("line {k} from talker{i}\n").as_bytes())?;
        }
    }
    loop {
        if talker && chat == expected {
            if let Some(done) = done.take() {
                let _ = done.send(());
            }
        }
        line.clear();
        if r.read_line(&mut line)? == 0 {
            break;
        }
        if line.starts_with('<') {
            chat += 1;
        } else if let Some(names) = line.strip_prefix("* online: ") {
            let on = names.split_whitespace().filter(|n| n.starts_with("talker"));
            if on.count() == talkers as usize {
                seen.who_ok.fetch_add(1, Ordering::SeqCst);
            }
        } else if line.starts_with("* silent for") {
            seen.idle_kicked.fetch_add(1, Ordering::SeqCst);
        } else if line.starts_with("* the server is stopping") {
            seen.goodbyes.fetch_add(1, Ordering::SeqCst);
        }
    }
    if talker {
        seen.chat_lines.fetch_add(chat, Ordering::SeqCst);
    }
    if let Some(done) = done {
        let _ = done.send(());
    }
    Ok(())
}

/// Set `stop` on SIGINT or SIGTERM, after `stop_after` if not zero, or
/// once `want` (if not zero) built-in clients said they are done: one
/// `select` over the signals, the timer and the clients' channel.
fn stopper(stop: Arc<Event>, stop_after: Duration, done: Receiver<()>, want: usize) {
    let signals = Signals::new(&[libc::SIGINT, libc::SIGTERM]);
    if let Err(e) = &signals {
        eprintln!("chat: cannot watch Ctrl-C ({e}); stopping on the timer or the clients only");
    }
    let timer = (!stop_after.is_zero()).then(|| Deadline::after(stop_after));
    let mut arms: Vec<&dyn Selectable> = Vec::new();
    if want > 0 {
        arms.push(&done);
    }
    if let Some(t) = &timer {
        arms.push(t);
    }
    if let Ok(s) = &signals {
        arms.push(s);
    }
    let mut finished = 0;
    // With no arm (no clients, no timer, no signals) it waits until the
    // runtime's shutdown cancels it.
    while let Ok(i) = hub::select(&arms, None) {
        if want > 0 && i == 0 {
            match done.try_recv() {
                Ok(()) => finished += 1,
                // Every client is gone, some without saying done (an error).
                Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) => {}
            }
            if finished < want {
                continue;
            }
        }
        break;
    }
    stop.set();
}

fn main() -> ExitCode {
    let args = Args::parse();
    let rt = match Runtime::builder()
        .worker_threads(args.workers as usize)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("chat: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let out = rt.block_on(move || {
        let listener = TcpListener::bind(args.addr)?;
        let addr = listener.local_addr()?;
        println!("chat on {addr}; Ctrl-C stops");
        let stop = Arc::new(Event::new());
        let seen = Arc::new(Seen::default());
        let want = (args.clients + args.silent) as usize;
        let (done, done_rx) = hub::unbounded::<()>();
        let st = Arc::clone(&stop);
        let stop_after = Duration::from_millis(args.stop_after_ms);
        let _ = hub::task()
            .name("chat stopper")
            .spawn(move || stopper(st, stop_after, done_rx, want));
        let all_on = Arc::new(Event::new());
        let mut clients = TaskGroup::new();
        for i in 0..want as u64 {
            let (all_on, seen, done) = (Arc::clone(&all_on), Arc::clone(&seen), done.clone());
            // Talkers first (ids below --clients), then the silent ones.
            let talk = (args.clients, args.lines);
            let _ = clients.spawn(move || client(addr, i, talk, all_on, seen, done));
        }
        drop(done);
        let (connections, dropped) =
            accept_loop(listener, stop, Duration::from_millis(args.idle_ms));
        let failed = clients
            .join_all()
            .into_iter()
            .filter(|r| !matches!(r, Ok(Ok(()))))
            .count();
        Ok::<_, std::io::Error>((seen, connections, dropped, failed))
    });
    let (seen, connections, dropped, failed) = match out {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            eprintln!("chat: {e}");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("chat: {e}");
            return ExitCode::FAILURE;
        }
    };
    let load = |a: &AtomicUsize| a.load(Ordering::SeqCst);
    println!(
        "RESULT clients={} chat_lines={} expected={} who_ok={} idle_kicked={} goodbyes={} dropped={dropped} connections={connections} failed={failed}",
        args.clients + args.silent,
        load(&seen.chat_lines),
        args.clients * args.clients.saturating_sub(1) * args.lines,
        load(&seen.who_ok),
        load(&seen.idle_kicked),
        load(&seen.goodbyes),
    );
    ExitCode::SUCCESS
}
