//! The Rust side of the differential tester: runs greenlet
//! programs written in the JSON language of `tests/differential/FORMAT.md`
//! on this crate's public API and prints each one's event log, for
//! `tests/differential/difftest.py` to compare with Python's greenlet.
//!
//! ```text
//! cargo run --release --example difftest_interp -- --batch programs.jsonl > logs.jsonl
//! cargo run --release --example difftest_interp -- --one program.json
//! ```
//! `--batch` reads one `{"id": .., "program": {..}}` per line and runs each
//! program in a child process (itself with `--one`), printing one
//! `{"id", "status", "log"}` line per program. `--one` runs a single program
//! and writes its events to stderr, one `EV <event>` line each, where the
//! crate's own reports (stderr, or the `log` facade through the logger this
//! binary installs) interleave with them in order. Bad flags exit 2.
//!
//! Uses the crate's public API only (main greenlets are named after their
//! thread, the trace hook is a thread's own, kill reports carry their facts
//! as `log` key-values); serde for the program format.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::process::{Command, ExitCode, Stdio};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use clap::Parser;
use greenlet::{
    getcurrent, settrace, ErrorKind, Greenlet, GreenletError, GreenletExit, TraceEvent, Value,
};
use serde::Deserialize;

/// Seconds a program may run before its child process is killed.
const TIMEOUT_SECONDS: u32 = 10;

/// Runs differential-tester programs on the greenlet crate.
#[derive(Parser, Debug)]
#[command(name = "difftest_interp")]
struct Cli {
    /// Run every program of this JSON-lines file, each in a child process.
    #[arg(long, conflicts_with = "one")]
    batch: Option<String>,
    /// Run the single program in this JSON file ("-" for stdin).
    #[arg(long)]
    one: Option<String>,
}

/// A program: greenlet bodies by name and the main thread's ops.
#[derive(Deserialize, Debug)]
struct Program {
    greenlets: BTreeMap<String, Spec>,
    main: Vec<Op>,
}

/// A greenlet's body.
#[derive(Deserialize, Debug)]
struct Spec {
    body: Vec<Op>,
}

/// How `throw` builds its error.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum ErrKind {
    Exit,
    User,
}

/// What a `try` catches.
#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Catch {
    Exit,
    Any,
}

/// One statement of the language (FORMAT.md).
#[derive(Deserialize, Debug, Clone)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Op {
    Create {
        g: String,
        parent: Option<String>,
    },
    Switch {
        g: String,
        value: i64,
    },
    Throw {
        g: String,
        err: ErrKind,
        msg: Option<String>,
        value: Option<i64>,
    },
    SwitchParent {
        value: i64,
    },
    Kill {
        g: String,
    },
    SetParent {
        g: String,
        parent: String,
    },
    Parent {
        g: String,
    },
    Status {
        g: String,
    },
    Drop {
        g: String,
    },
    Hold {
        g: String,
    },
    Release,
    Try {
        body: Vec<Op>,
        catch: Catch,
        handler: Vec<Op>,
    },
    Raise,
    RaiseUser {
        msg: String,
    },
    RaiseExit {
        value: Option<i64>,
    },
    Return {
        value: i64,
    },
    Loop {
        n: u32,
        body: Vec<Op>,
    },
    Settrace {
        fail_at: Option<usize>,
    },
    SettraceOff,
    Thread {
        name: String,
        ops: Vec<Op>,
    },
}

/// The handle table every thread of the program shares (a handle in it is
/// the program's reference; `drop` removes it).
static TABLE: Mutex<BTreeMap<String, Greenlet>> = Mutex::new(BTreeMap::new());

/// The greenlets created on the program's main thread (the only ones whose
/// final status is logged; see FORMAT.md).
static OWNED: Mutex<std::collections::BTreeSet<String>> =
    Mutex::new(std::collections::BTreeSet::new());

thread_local! {
    /// Whether this thread is the program's main thread (only its
    /// greenlets log finalization; see FORMAT.md).
    static PROGRAM_MAIN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn emit(line: &str) {
    eprintln!("EV {line}");
}

/// Logs `text` as an event of the greenlet named `me`. The interpreters
/// know which greenlet runs an op (a body's ops run in its greenlet, main's
/// in its thread's main greenlet) and do not ask `getcurrent`, which would
/// run the kills other threads mailed (greenlet does too): only the
/// program's own operations do that.
fn log_as(me: &str, text: &str) {
    emit(&format!("[{me}] {text}"));
}

fn status(g: &Greenlet) -> &'static str {
    if g.is_dead() {
        "dead"
    } else if g.is_started() {
        "active"
    } else {
        "unstarted"
    }
}

fn fmt_value(v: &Value) -> String {
    if let Some(n) = v.downcast_ref::<i64>() {
        n.to_string()
    } else if v.is::<()>() {
        "none".into()
    } else if v.is::<GreenletExit>() {
        "exitobj()".into()
    } else {
        format!("other({})", v.type_name())
    }
}

fn fmt_error(e: &GreenletError) -> String {
    match e.kind() {
        ErrorKind::GreenletExit(None) => "exit".into(),
        ErrorKind::GreenletExit(Some(v)) => format!("exit({})", fmt_value(v)),
        ErrorKind::User(err) => format!("user({err})"),
        ErrorKind::WrongThread { .. } => "wrongthread".into(),
        ErrorKind::ThreadExited { .. } => "threadexited".into(),
        ErrorKind::ParentCycle { .. } => "cycle".into(),
        ErrorKind::ParentOnOtherThread { .. } => "parentthread".into(),
        ErrorKind::MainCannotHaveParent { .. } => "mainparent".into(),
        ErrorKind::KillIgnored { .. } => "killignored".into(),
        other => format!("other({other})"),
    }
}

fn lookup(name: &str) -> Option<Greenlet> {
    TABLE.lock().expect("table").get(name).cloned()
}

/// What a run of ops ended with: fell off the end, or a `return`.
type Flow = Result<Option<i64>, GreenletError>;

/// One body's locals: the handles it holds and, in a handler, the error
/// it caught.
struct Frame<'a> {
    held: &'a mut Vec<Greenlet>,
    caught: Option<GreenletError>,
}

/// Runs the ops of one greenlet (a body, or a thread's main ops).
struct Machine {
    program: Arc<Program>,
    /// The name of the greenlet that runs these ops, for the log.
    me: String,
}

impl Machine {
    fn log(&self, text: &str) {
        log_as(&self.me, text);
    }

    fn skip_missing(&self, kind: &str, g: &str) -> Option<Greenlet> {
        let found = lookup(g);
        if found.is_none() {
            self.log(&format!("{kind} {g} skip"));
        }
        found
    }

    /// Logs a failed op (`what => err ..`) and passes the error on.
    fn report<T>(&self, what: &str, r: Result<T, GreenletError>) -> Result<T, GreenletError> {
        r.inspect_err(|e| self.log(&format!("{what} => err {}", fmt_error(e))))
    }

    fn exec(&self, ops: &[Op], frame: &mut Frame<'_>) -> Flow {
        for op in ops {
            if let Some(v) = self.step(op, frame)? {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    fn step(&self, op: &Op, frame: &mut Frame<'_>) -> Flow {
        match op {
            Op::Create { g, parent } => self.create(g, parent.as_deref())?,
            Op::Switch { g, value } => {
                let Some(target) = self.skip_missing("switch", g) else {
                    return Ok(None);
                };
                self.log(&format!("switch {g} {value}"));
                let r = target.switch(*value);
                let v = self.report(&format!("switch {g}"), r)?;
                self.log(&format!("switch {g} => ok {}", fmt_value(&v)));
                drop(target);
            }
            Op::SwitchParent { value } => {
                let Some(target) = getcurrent().parent() else {
                    self.log("switch_parent skip");
                    return Ok(None);
                };
                self.log(&format!("switch_parent {} {value}", target.name()));
                let r = target.switch(*value);
                let v = self.report("switch_parent", r)?;
                self.log(&format!("switch_parent => ok {}", fmt_value(&v)));
                drop(target);
            }
            Op::Throw { g, err, msg, value } => {
                let Some(target) = self.skip_missing("throw", g) else {
                    return Ok(None);
                };
                let error = match err {
                    ErrKind::Exit => ErrorKind::GreenletExit(value.map(Value::new)).into(),
                    ErrKind::User => {
                        GreenletError::user(msg.clone().unwrap_or_else(|| "error".into()))
                    }
                };
                self.log(&format!(
                    "throw {g} {} ({})",
                    fmt_error(&error),
                    status(&target)
                ));
                let r = target.throw(error);
                let v = self.report(&format!("throw {g}"), r)?;
                self.log(&format!("throw {g} => ok {}", fmt_value(&v)));
                drop(target);
            }
            Op::Kill { g } => {
                let Some(target) = self.skip_missing("kill", g) else {
                    return Ok(None);
                };
                self.log(&format!("kill {g} ({})", status(&target)));
                let r = target.kill();
                self.report(&format!("kill {g}"), r)?;
                self.log(&format!("kill {g} => ok"));
                drop(target);
            }
            Op::SetParent { g, parent } => {
                let Some(target) = self.skip_missing("set_parent", g) else {
                    return Ok(None);
                };
                let Some(p) = lookup(parent) else {
                    self.log(&format!("set_parent {g} {parent} skip"));
                    return Ok(None);
                };
                match target.set_parent(&p) {
                    Ok(()) => self.log(&format!("set_parent {g} {parent} => ok")),
                    Err(e) => {
                        self.log(&format!("set_parent {g} {parent} => err {}", fmt_error(&e)))
                    }
                }
            }
            Op::Parent { g } => {
                let Some(target) = self.skip_missing("parent", g) else {
                    return Ok(None);
                };
                let p = target.parent().map_or_else(|| "none".into(), |p| p.name());
                self.log(&format!("parent {g} => {p}"));
            }
            Op::Status { g } => {
                let Some(target) = self.skip_missing("status", g) else {
                    return Ok(None);
                };
                self.log(&format!("status {g} => {}", status(&target)));
            }
            Op::Drop { g } => {
                let old = TABLE.lock().expect("table").remove(g);
                self.log(&format!(
                    "drop {g}{}",
                    if old.is_some() { "" } else { " skip" }
                ));
                drop(old);
                self.log(&format!("dropped {g}"));
            }
            Op::Hold { g } => {
                let h = lookup(g);
                self.log(&format!(
                    "hold {g}{}",
                    if h.is_some() { "" } else { " skip" }
                ));
                frame.held.extend(h);
            }
            Op::Release => {
                let held = std::mem::take(frame.held);
                self.log("release");
                clear(held);
            }
            Op::Try {
                body,
                catch,
                handler,
            } => {
                let outcome = {
                    let mut inner = Frame {
                        held: &mut *frame.held,
                        caught: None,
                    };
                    self.exec(body, &mut inner)
                };
                return match outcome {
                    Err(e) if *catch == Catch::Any || e.is_exit() => {
                        self.log(&format!("caught {}", fmt_error(&e)));
                        let mut inner = Frame {
                            held: &mut *frame.held,
                            caught: Some(e),
                        };
                        self.exec(handler, &mut inner)
                    }
                    other => other,
                };
            }
            Op::Raise => match frame.caught.take() {
                Some(e) => {
                    self.log(&format!("reraise {}", fmt_error(&e)));
                    return Err(e);
                }
                None => self.log("raise skip"),
            },
            Op::RaiseUser { msg } => {
                self.log(&format!("raise user({msg})"));
                return Err(GreenletError::user(msg.clone()));
            }
            Op::RaiseExit { value } => {
                return Err(match value {
                    Some(v) => {
                        self.log(&format!("raise exit({v})"));
                        ErrorKind::GreenletExit(Some(Value::new(*v))).into()
                    }
                    None => {
                        self.log("raise exit");
                        GreenletError::exit()
                    }
                });
            }
            Op::Return { value } => {
                self.log(&format!("return {value}"));
                return Ok(Some(*value));
            }
            Op::Loop { n, body } => {
                for _ in 0..*n {
                    if let Some(v) = self.exec(body, frame)? {
                        return Ok(Some(v));
                    }
                }
            }
            Op::Settrace { fail_at } => {
                self.log(&format!(
                    "settrace {}",
                    fail_at.map_or_else(|| "None".into(), |k| k.to_string())
                ));
                drop(settrace(Some(make_hook(*fail_at))));
            }
            Op::SettraceOff => {
                self.log("settrace off");
                drop(settrace(None));
            }
            Op::Thread { name, ops } => self.thread(name, ops),
        }
        Ok(None)
    }

    fn create(&self, g: &str, parent: Option<&str>) -> Result<(), GreenletError> {
        let mut builder = Greenlet::builder().name(g);
        if let Some(p) = parent {
            let Some(p) = lookup(p) else {
                self.log(&format!("create {g} skip"));
                return Ok(());
            };
            builder = builder.parent(&p);
        }
        let body = self.body(g);
        let created = builder.spawn(body)?;
        if PROGRAM_MAIN.with(|m| m.get()) {
            OWNED.lock().expect("owned").insert(g.to_string());
            let name = g.to_string();
            created.on_finalize(move || emit(&format!("fin {name}")));
        }
        let old = TABLE.lock().expect("table").insert(g.to_string(), created);
        self.log(&format!("create {g}"));
        drop(old);
        Ok(())
    }

    fn body(&self, name: &str) -> impl FnOnce(Value) -> Result<Value, GreenletError> + 'static {
        let program = Arc::clone(&self.program);
        let name = name.to_string();
        move |arg: Value| {
            let ops = &program.greenlets[&name].body;
            let machine = Machine {
                program: Arc::clone(&program),
                me: name.clone(),
            };
            machine.log(&format!("start {}", fmt_value(&arg)));
            let mut held = Vec::new();
            let outcome = machine.exec(
                ops,
                &mut Frame {
                    held: &mut held,
                    caught: None,
                },
            );
            match outcome {
                Err(e) => {
                    machine.log(&format!("end raise {}", fmt_error(&e)));
                    clear(held);
                    Err(e)
                }
                // As interp.py: the held handles go before a normal end is
                // logged, after an error's.
                Ok(None) => {
                    clear(held);
                    machine.log("end");
                    Ok(Value::unit())
                }
                Ok(Some(v)) => {
                    clear(held);
                    machine.log(&format!("end return {v}"));
                    Ok(Value::new(v))
                }
            }
        }
    }

    fn thread(&self, name: &str, ops: &[Op]) {
        self.log(&format!("thread {name}"));
        let program = Arc::clone(&self.program);
        let ops = ops.to_vec();
        let thread_name = name.to_string();
        let joined = std::thread::Builder::new()
            .name(thread_name.clone())
            .spawn(move || {
                TABLE
                    .lock()
                    .expect("table")
                    .insert(thread_name.clone(), getcurrent());
                let machine = Machine {
                    program,
                    me: thread_name.clone(),
                };
                let mut held = Vec::new();
                let outcome = machine.exec(
                    &ops,
                    &mut Frame {
                        held: &mut held,
                        caught: None,
                    },
                );
                match outcome {
                    Err(e) => machine.log(&format!("thread done raise {}", fmt_error(&e))),
                    Ok(_) => machine.log("thread done"),
                }
                clear(held);
            })
            .expect("spawn a program thread")
            .join();
        if joined.is_err() {
            self.log(&format!("thread {name} panicked"));
        }
        self.log(&format!("joined {name}"));
    }
}

/// Drops held handles last first, as CPython's `list.clear()` does.
fn clear(mut held: Vec<Greenlet>) {
    while let Some(handle) = held.pop() {
        drop(handle);
    }
}

fn make_hook(fail_at: Option<usize>) -> greenlet::ThreadTraceHook {
    let seen = Cell::new(0);
    Rc::new(move |event: &TraceEvent| {
        let kind = match event {
            TraceEvent::Switch { .. } => "switch",
            TraceEvent::Throw { .. } => "throw",
        };
        let n = seen.get() + 1;
        seen.set(n);
        emit(&format!(
            "trace {kind} {}->{}",
            event.origin().name(),
            event.target().name()
        ));
        if fail_at == Some(n) {
            emit("trace fail");
            return Err(GreenletError::user("hook"));
        }
        Ok(())
    })
}

/// A report's error as interp.py spells it: `killignored`, `exit` or
/// `exit(v)` (the value a `GreenletExit` carries, which its message shows as
/// `carrying Value { .., value: v }`), else the error's text.
fn report_error(error: &str) -> String {
    if error.starts_with("GreenletExit did not kill") {
        return "killignored".into();
    }
    if !error.starts_with("GreenletExit") {
        return error.into();
    }
    let Some(carried) = error
        .strip_prefix("GreenletExit carrying ")
        .and_then(|rest| rest.split_once("value: "))
        .map(|(_, value)| value.split(" }").next().unwrap_or(value))
    else {
        return "exit".into();
    };
    match carried.parse::<i64>() {
        Ok(v) => format!("exit({v})"),
        Err(_) => format!("exit(other({carried}))"),
    }
}

/// Routes the crate's `log` reports into the event stream.
struct ReportLogger;

impl log::Log for ReportLogger {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        // The crate's kill reports carry their facts as key-values.
        let kv = record.key_values();
        let field = |key: &str| kv.get(log::kv::Key::from(key)).map(|v| v.to_string());
        match (field("event"), field("greenlet")) {
            (Some(event), Some(greenlet)) => match field("error") {
                Some(error) => emit(&format!(
                    "report {event} {greenlet} {}",
                    report_error(&error)
                )),
                None => emit(&format!("report {event} {greenlet}")),
            },
            _ => emit(&format!("report {}", record.args())),
        }
    }
    fn flush(&self) {}
}

static LOGGER: ReportLogger = ReportLogger;

fn run_one(text: &str) -> ExitCode {
    let program: Program = match serde_json::from_str(text) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("difftest_interp: bad program: {e}");
            return ExitCode::from(2);
        }
    };
    // SAFETY: alarm(2) only arms a timer; the default SIGALRM action ends
    // a program that hangs, which the batch parent reports as a timeout.
    unsafe { libc::alarm(TIMEOUT_SECONDS) };
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
    let program = Arc::new(program);
    let joined = std::thread::Builder::new()
        .name("main".into())
        .spawn(move || {
            PROGRAM_MAIN.with(|m| m.set(true));
            TABLE
                .lock()
                .expect("table")
                .insert("main".into(), getcurrent());
            let machine = Machine {
                program: Arc::clone(&program),
                me: "main".into(),
            };
            let mut held = Vec::new();
            let outcome = machine.exec(
                &program.main,
                &mut Frame {
                    held: &mut held,
                    caught: None,
                },
            );
            match outcome {
                Ok(None) => machine.log("done"),
                Ok(Some(v)) => machine.log(&format!("done return {v}")),
                Err(e) => machine.log(&format!("done raise {}", fmt_error(&e))),
            }
            clear(held);
            let names: Vec<String> = OWNED.lock().expect("owned").iter().cloned().collect();
            for name in names {
                if let Some(g) = lookup(&name) {
                    machine.log(&format!("final {name} {}", status(&g)));
                }
            }
            machine.log("teardown");
        })
        .expect("spawn the program's main thread")
        .join();
    if joined.is_err() {
        return ExitCode::from(101);
    }
    ExitCode::SUCCESS
}

fn run_batch(path: &str) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open {path}: {e}"))?;
    let stdout = std::io::stdout();
    for line in std::io::BufReader::new(file).lines() {
        let line = line.map_err(|e| format!("cannot read {path}: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let item: serde_json::Value =
            serde_json::from_str(&line).map_err(|e| format!("bad line in {path}: {e}"))?;
        let mut child = Command::new(&exe)
            .args(["--one", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
        let program = item["program"].to_string();
        child
            .stdin
            .take()
            .expect("piped stdin")
            .write_all(program.as_bytes())
            .map_err(|e| format!("cannot write to the child: {e}"))?;
        let output = child
            .wait_with_output()
            .map_err(|e| format!("cannot wait for the child: {e}"))?;
        let text = String::from_utf8_lossy(&output.stderr);
        let log: Vec<String> = text
            .lines()
            .map(|l| match l.strip_prefix("EV ") {
                Some(event) => event.to_string(),
                None => format!("stderr {l}"),
            })
            .collect();
        let status = match (output.status.code(), signal_of(&output.status)) {
            (Some(0), _) => "ok".to_string(),
            (_, Some(sig)) if sig == libc::SIGALRM => "timeout".to_string(),
            (_, Some(sig)) => format!("crash:{sig}"),
            (Some(code), None) => format!("error:exit {code}"),
            (None, None) => "error:unknown".to_string(),
        };
        let out = serde_json::json!({"id": item["id"], "status": status, "log": log});
        writeln!(stdout.lock(), "{out}").map_err(|e| format!("cannot write: {e}"))?;
    }
    Ok(())
}

fn signal_of(status: &std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match (cli.batch, cli.one) {
        (Some(path), None) => match run_batch(&path) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("difftest_interp: {e}");
                ExitCode::FAILURE
            }
        },
        (None, Some(path)) => {
            let mut text = String::new();
            let read = if path == "-" {
                std::io::stdin().read_to_string(&mut text).map(|_| ())
            } else {
                std::fs::read_to_string(&path).map(|t| text = t)
            };
            match read {
                Ok(()) => run_one(&text),
                Err(e) => {
                    eprintln!("difftest_interp: cannot read {path}: {e}");
                    ExitCode::from(2)
                }
            }
        }
        _ => {
            eprintln!("difftest_interp: give --batch FILE or --one FILE (see --help)");
            ExitCode::from(2)
        }
    }
}
