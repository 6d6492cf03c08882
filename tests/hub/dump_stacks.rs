//! The stacks in a dump: a green thread parked in a function of its own
//! shows that function's name; the wait is not disturbed (the value sent
//! after the dump is the one received; a cancel still ends it); the
//! capturing green threads are not listed; a sleep's timer outlives a
//! dump of the sleeper; the green thread taking the
//! dump is in it, running, with its own frame; the green threads of a
//! worker that does not answer are read off its thread.

use std::time::Duration;

use crate::common;
use greenlet::hub::{self, Receiver, TaskState, Wait};

#[inline(never)]
fn parks_in_a_channel_receive(rx: &Receiver<u32>) -> u32 {
    rx.recv().expect("a value")
}

fn wait_for(h: &hub::JoinHandle<u32>, state: TaskState) {
    while h.state() != state {
        std::thread::yield_now();
    }
}

#[test]
fn the_parked_frame_appears_and_the_wait_goes_on_undisturbed() {
    let _dog = common::hub::watchdog(120);
    let rt = hub::Runtime::builder().worker_threads(2).build().unwrap();
    let (tx, rx) = hub::channel::<u32>(1);
    let h = rt
        .handle()
        .spawn(move || parks_in_a_channel_receive(&rx) + 1);
    wait_for(&h, TaskState::Parked(Wait::Recv));
    let dump = rt.handle().dump();
    let text = dump.to_string();
    assert!(
        dump.tasks.iter().all(|t| !t.current),
        "a dump from a plain thread has no current green thread:\n{text}"
    );
    let t = dump
        .tasks
        .iter()
        .find(|t| t.info.id == h.id())
        .unwrap_or_else(|| panic!("the parked green thread is in the dump:\n{text}"));
    assert_eq!(t.info.state, TaskState::Parked(Wait::Recv), "{text}");
    assert!(
        t.frames
            .iter()
            .any(|f| f.contains("parks_in_a_channel_receive")),
        "the parking function's frame is in the dump:\n{text}"
    );
    assert!(
        !t.frames.iter().any(|f| f.contains("park_then")),
        "runtime frames are folded:\n{text}"
    );
    assert!(
        dump.tasks
            .iter()
            .all(|t| t.info.name != "hub-stack-capture"),
        "{text}"
    );
    assert!(dump.silent_workers.is_empty(), "{text}");
    // Still parked in its receive, still registered there.
    assert_eq!(h.state(), TaskState::Parked(Wait::Recv));
    tx.send(41).unwrap();
    assert_eq!(h.join().unwrap(), 42);
}

#[test]
fn a_green_thread_dumped_twice_is_still_cancellable() {
    let _dog = common::hub::watchdog(120);
    let rt = hub::Runtime::builder().worker_threads(1).build().unwrap();
    let (_tx, rx) = hub::channel::<u32>(1);
    let h = rt.handle().spawn(move || parks_in_a_channel_receive(&rx));
    wait_for(&h, TaskState::Parked(Wait::Recv));
    for _ in 0..2 {
        let dump = rt.handle().dump();
        assert!(
            dump.to_string().contains("parks_in_a_channel_receive"),
            "{dump}"
        );
    }
    h.cancel();
    assert!(h.join().unwrap_err().is_cancelled());
}

/// A dump takes the stack of a green thread in a sleep without ending the
/// sleep's timer: the sleep still ends at its deadline (a capture request
/// coming back from the park does not disarm the timer, else the sleeper
/// would wait for a wake that never comes).
#[test]
fn a_sleep_dumped_midway_still_ends() {
    let _dog = common::hub::watchdog(120);
    let rt = common::hub::rt(1);
    let sleeper = rt.handle().spawn(|| {
        hub::sleep(Duration::from_millis(200));
        7u32
    });
    wait_for(&sleeper, TaskState::Parked(Wait::Sleep));
    let dump = rt.handle().dump();
    assert!(
        dump.tasks.iter().any(|t| t.info.id == sleeper.id()),
        "the sleeper is in the dump: {dump}"
    );
    assert_eq!(sleeper.join().unwrap(), 7);
}

#[inline(never)]
fn takes_a_dump_here() -> hub::Dump {
    hub::dump().unwrap()
}

#[test]
fn a_dump_from_a_green_thread_shows_its_siblings_and_itself_running() {
    let _dog = common::hub::watchdog(120);
    let (dump, me) = hub::run(|| {
        let (tx, rx) = hub::channel::<u32>(1);
        let h = hub::spawn(move || parks_in_a_channel_receive(&rx));
        while h.state() != TaskState::Parked(Wait::Recv) {
            hub::yield_now();
        }
        let dump = takes_a_dump_here();
        tx.send(1).unwrap();
        assert_eq!(h.join().unwrap(), 1);
        let me = hub::tasks()
            .unwrap()
            .into_iter()
            .find(|t| t.name == "block_on")
            .unwrap()
            .id;
        (dump, me)
    })
    .unwrap();
    let text = dump.to_string();
    assert!(text.contains("parks_in_a_channel_receive"), "{text}");
    let mine: Vec<_> = dump.tasks.iter().filter(|t| t.current).collect();
    assert_eq!(mine.len(), 1, "one current green thread:\n{text}");
    assert_eq!(mine[0].info.id, me, "{text}");
    assert_eq!(mine[0].info.state, TaskState::Running, "{text}");
    assert!(
        mine[0]
            .frames
            .iter()
            .any(|f| f.contains("takes_a_dump_here")),
        "its own frame is in the dump:\n{text}"
    );
    assert!(
        text.contains("block_on [running] on worker")
            && text.contains("(this one, taking the dump)"),
        "{text}"
    );
}

/// Holds its worker without parking until `release` is set.
#[inline(never)]
fn spins_on_its_worker(release: &std::sync::atomic::AtomicBool) {
    while !release.load(std::sync::atomic::Ordering::SeqCst) {
        std::hint::spin_loop();
    }
}

#[test]
fn a_silent_workers_green_threads_are_read_off_its_thread() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let _dog = common::hub::watchdog(120);
    let rt = common::hub::rt(1);
    let (tx, rx) = hub::channel::<u32>(1);
    let parked = rt.handle().spawn(move || parks_in_a_channel_receive(&rx));
    wait_for(&parked, TaskState::Parked(Wait::Recv));
    let release = Arc::new(AtomicBool::new(false));
    let r = Arc::clone(&release);
    let spinner = rt.handle().spawn(move || spins_on_its_worker(&r));
    while spinner.state() != TaskState::Running {
        std::thread::yield_now();
    }
    let dump = rt.handle().dump();
    release.store(true, Ordering::SeqCst);
    let text = dump.to_string();
    assert_eq!(dump.silent_workers, vec![0], "{text}");
    if cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        let of = |id: u64| dump.tasks.iter().find(|t| t.info.id == id).unwrap();
        assert!(
            of(spinner.id())
                .frames
                .iter()
                .any(|f| f.contains("spins_on_its_worker")),
            "{text}"
        );
        assert!(
            of(parked.id())
                .frames
                .iter()
                .any(|f| f.contains("parks_in_a_channel_receive")),
            "{text}"
        );
    }
    spinner.join().unwrap();
    tx.send(1).unwrap();
    assert_eq!(parked.join().unwrap(), 1);
}

/// The child of [`a_signal_prints_the_dump_to_stderr`]: a runtime that
/// dumps on `SIGUSR2`, one green thread parked in
/// `parks_in_a_channel_receive`; says "ready" on stdout, then waits to be
/// killed. Run only as that child (ignored otherwise).
#[test]
#[ignore = "the child process of a_signal_prints_the_dump_to_stderr"]
fn signal_child() {
    let rt = hub::Runtime::builder()
        .worker_threads(1)
        .dump_on_signal(libc::SIGUSR2)
        .build()
        .unwrap();
    let (_tx, rx) = hub::channel::<u32>(1);
    let h = rt.handle().spawn(move || parks_in_a_channel_receive(&rx));
    wait_for(&h, TaskState::Parked(Wait::Recv));
    println!("ready");
    std::thread::sleep(Duration::from_secs(3600));
}

#[test]
fn a_signal_prints_the_dump_to_stderr() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    let _dog = common::hub::watchdog(120);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &crate::common::test_path(module_path!(), "signal_child"),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ready = false;
    for line in stdout.lines() {
        if line.unwrap().contains("ready") {
            ready = true;
            break;
        }
    }
    assert!(ready, "the child got ready");
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: `kill` with our own child's pid and a signal it catches.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGUSR2) }, 0);
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    let mut found = false;
    for line in stderr.lines() {
        let line = line.unwrap();
        found = line.contains("parks_in_a_channel_receive");
        seen.push(line);
        if found {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(found, "the dump on stderr names the parked frame: {seen:?}");
}
