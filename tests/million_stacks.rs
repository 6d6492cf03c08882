//! Many live guarded greenlets, under both guard strategies: 100,000 each
//! created, switched into and killed, with nothing leaked; an overflow in a
//! stack carved from a shared region still reported by name; running out of
//! mappings or of address space gives an error that says which, and the
//! process keeps working.
//!
//! Each case runs in a child process (this test binary re-executes itself
//! to run the ignored `child_process` test), so that the guard strategy
//! comes from `GREENLET_STACK_GUARD` in a fresh process, limits set with
//! `setrlimit` stay there, and the counts it checks are its own.

use std::cell::Cell;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};
use std::rc::Rc;

use greenlet::coroutine::{
    acquire_stack, default_stack_size, set_stack_guard, stack_guard, stack_stats, trim_stack_pool,
    StackGuard,
};
use greenlet::{getcurrent, live_greenlets, ErrorKind, Greenlet, GreenletError, Value};

/// Environment variable telling `child_process` what to do.
const CHILD_MODE: &str = "GREENLET_MILLION_TEST_CHILD";
/// Greenlets alive at once in the `many` case.
const MANY: usize = 100_000;

/// Runs `child_process` with `mode` and, if given, `GREENLET_STACK_GUARD`.
fn run_child(mode: &str, guard: Option<&str>) -> Output {
    let exe = std::env::current_exe().expect("test binary path");
    let mut command = Command::new(exe);
    command
        .args([
            "--exact",
            "child_process",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_MODE, mode)
        .env_remove("GREENLET_STACK_GUARD");
    if let Some(guard) = guard {
        command.env("GREENLET_STACK_GUARD", guard);
    }
    command.output().expect("run the child")
}

/// The child's stdout and stderr, for assertion messages.
fn describe(output: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The value of `key=N` in the child's stdout.
fn reported(output: &Output, key: &str) -> usize {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let prefix = format!("{key}=");
    stdout
        .split_whitespace()
        .find_map(|word| word.strip_prefix(&prefix))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in the child's output: {}", describe(output)))
}

/// Lines of /proc/self/maps, read through a fixed buffer (at the mapping
/// limit a large `String` cannot grow).
fn mappings() -> usize {
    let mut file = std::fs::File::open("/proc/self/maps").expect("open /proc/self/maps");
    let mut buffer = [0u8; 8192];
    let mut lines = 0;
    while let Ok(len @ 1..) = std::io::Read::read(&mut file, &mut buffer) {
        lines += buffer[..len].iter().filter(|&&b| b == b'\n').count();
    }
    lines
}

/// A number from /proc/sys/vm.
fn vm_setting(name: &str) -> usize {
    std::fs::read_to_string(format!("/proc/sys/vm/{name}"))
        .expect("read the sysctl")
        .trim()
        .parse()
        .expect("a number")
}

/// Counts its drops: each greenlet holds one, dropped when it is unwound.
struct Exit(Rc<Cell<usize>>);

impl Drop for Exit {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

/// A greenlet that counts each time it is switched into and switches back
/// to `main`, until it is killed.
fn counting(main: &Greenlet, switches: &Rc<Cell<usize>>, exits: &Rc<Cell<usize>>) -> Greenlet {
    let (main, switches, exit) = (main.clone(), Rc::clone(switches), Exit(Rc::clone(exits)));
    Greenlet::new(move |_| {
        let _exit = exit;
        loop {
            switches.set(switches.get() + 1);
            main.switch(())?;
        }
    })
}

/// Creates and starts up to `count` counting greenlets; stops at the first
/// that cannot get a stack and returns its error too.
fn start_many(
    count: usize,
    switches: &Rc<Cell<usize>>,
    exits: &Rc<Cell<usize>>,
) -> (Vec<Greenlet>, Option<GreenletError>) {
    let main = getcurrent();
    let mut alive = Vec::with_capacity(count);
    for _ in 0..count {
        let g = counting(&main, switches, exits);
        match g.switch(()) {
            Ok(_) => alive.push(g),
            Err(error) => return (alive, Some(error)),
        }
    }
    (alive, None)
}

/// The `many` case: 100,000 greenlets (or as many as the mapping limit
/// allows), a second switch into each, a kill of each, no leak. Prints
/// `made=N limited=0|1`.
fn many() {
    let main = getcurrent();
    let (live_before, maps_before) = (live_greenlets(), mappings());
    assert_eq!(stack_stats().live, 0);
    let (switches, exits) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let (alive, error) = start_many(MANY, &switches, &exits);
    let made = alive.len();
    let maps_alive = mappings();
    if let Some(error) = &error {
        let message = error.to_string();
        assert!(
            matches!(error.kind(), ErrorKind::StackAllocation { .. })
                && message.contains("vm.max_map_count")
                && message.contains("two memory mappings"),
            "only the mapping limit may stop the run: {message}"
        );
        println!("limit error: {message}");
    }
    assert_eq!(live_greenlets(), live_before + made);
    assert_eq!(stack_stats().live, made);
    for g in &alive {
        g.switch(()).expect("switch into a suspended greenlet");
    }
    assert_eq!(
        switches.get(),
        2 * made,
        "started, then switched into once more"
    );
    if error.is_some() {
        // At the limit: the greenlets already alive still switch and die,
        // and a new one can start as soon as one stack is back.
        alive[made - 1].kill().expect("kill");
        let again = counting(&main, &switches, &exits);
        again
            .switch(())
            .expect("a stack again once one was released");
        again.kill().expect("kill");
    }
    for g in &alive {
        g.kill().expect("kill");
        assert!(g.is_dead());
    }
    // At the limit, two more: the greenlet that got no stack (its closure
    // dropped unrun) and the one started after a stack came back.
    assert_eq!(
        exits.get(),
        made + 2 * usize::from(error.is_some()),
        "every greenlet unwound"
    );
    drop(alive);
    assert_eq!(live_greenlets(), live_before, "no greenlet leaked");
    let stats = stack_stats();
    assert_eq!(stats.live, 0, "no stack leaked: {stats:?}");
    trim_stack_pool();
    let stats = stack_stats();
    assert_eq!(
        (stats.pooled, stats.regions),
        (0, 0),
        "all given back: {stats:?}"
    );
    assert!(
        mappings() <= maps_before + 2,
        "the regions are unmapped: {} mappings, {maps_before} before",
        mappings()
    );
    println!(
        "made={made} limited={} mappings_alive={maps_alive} mappings_before={maps_before}",
        usize::from(error.is_some())
    );
}

/// Recurses without end (a 512-byte frame per call).
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth as u8; 512]);
    if depth == u64::MAX {
        return 0;
    }
    recurse(depth + 1) + u64::from(frame[7])
}

/// The `overflow` case: a named greenlet whose stack has live neighbours
/// on both sides in its region overflows its default-size stack.
fn overflow() {
    let (switches, exits) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let (mut below, _) = start_many(3, &switches, &exits);
    let (above, _) = start_many(3, &switches, &exits);
    // The third stack goes back to this thread's pool, where the next
    // greenlet to start takes it: between the second and the fourth.
    below.pop().expect("three").kill().expect("kill");
    let g = Greenlet::builder()
        .name("slab-overflow")
        .spawn(|_| Ok(Value::new(recurse(0))))
        .expect("spawn");
    assert_eq!(stack_stats().regions, 1, "all the stacks in one region");
    println!("overflowing id={} guard={:?}", g.id(), stack_guard());
    let _ = g.switch(());
    drop((below, above));
}

/// The `address-space` case: under an RLIMIT_AS a little above what the
/// process uses, stacks run out with an error naming the limit; once they
/// are given back, stacks and greenlets work again. Prints `made=N`.
fn address_space() {
    let size = default_stack_size();
    let mut stacks = Vec::with_capacity(10_000);
    let status = std::fs::read_to_string("/proc/self/status").expect("read status");
    let used_kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmSize:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmSize");
    let limit = used_kib * 1024 + 256 * 1024 * 1024;
    let rlimit = libc::rlimit {
        rlim_cur: limit,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads the struct we pass; lowering the soft limit
    // only makes later mappings fail.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &rlimit) }, 0);
    let error = loop {
        match acquire_stack(size) {
            Ok(stack) if stacks.len() < stacks.capacity() => stacks.push(stack),
            Ok(_) => panic!("{} stacks fit under a 256 MiB margin", stacks.capacity()),
            Err(error) => break error,
        }
    };
    let message = error.to_string();
    assert_eq!(error.raw_os_error(), None, "a message of ours: {message}");
    assert!(
        message.contains("RLIMIT_AS") && message.contains("smaller stacks"),
        "the error names the limit and what to change: {message}"
    );
    // A region the limit refuses is retried at half its size, down to one
    // slot, so stacks fill nearly all of the margin (not only the regions
    // that fitted whole).
    let slot = size + 2 * 4096;
    assert!(
        stacks.len() >= 256 * 1024 * 1024 / slot * 9 / 10,
        "{} stacks of {slot} bytes in a 256 MiB margin",
        stacks.len()
    );
    println!("made={} error: {message}", stacks.len());
    drop(stacks);
    trim_stack_pool();
    drop(acquire_stack(size).expect("a stack once the others are given back"));
    let g = Greenlet::new(Ok);
    assert_eq!(
        g.switch(5u32).expect("run").downcast::<u32>().expect("u32"),
        5
    );
}

/// The mappings of /proc/self/maps: start, end and permissions of each.
fn mapping_table() -> Vec<(usize, usize, String)> {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
    maps.lines()
        .map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next().expect("an address range");
            let (start, end) = range.split_once('-').expect("start-end");
            let address = |hex| usize::from_str_radix(hex, 16).expect("a hex address");
            let perms = fields.next().expect("permissions").to_owned();
            (address(start), address(end), perms)
        })
        .collect()
}

/// The `locked` case: in a process whose memory is locked, the kernel
/// refuses guard regions (EINVAL); stacks get mprotect guard pages instead.
/// Prints `locked=1` when it could lock, `locked=0` when not allowed.
///
/// Each stack's guard page must be in a PROT_NONE mapping that ends with
/// it, and its usable area in a read-write mapping that starts right above
/// it. A count of the process's mappings cannot say so: the kernel merges a
/// new region with an adjacent anonymous mapping of the same flags (under
/// `mlockall`, glibc's thread-arena heap, also `MAP_NORESERVE`), so four
/// stacks can add seven lines, not eight, depending on where ASLR put that
/// heap.
fn locked() {
    // SAFETY: mlockall has no memory-safety preconditions.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        println!("locked=0 ({})", std::io::Error::last_os_error());
        return;
    }
    let stacks: Vec<_> = (0..4)
        .map(|_| acquire_stack(64 * 1024).expect("a stack in locked memory"))
        .collect();
    let table = mapping_table();
    let holding = |address: usize| {
        table
            .iter()
            .find(|(start, end, _)| (*start..*end).contains(&address))
            .unwrap_or_else(|| panic!("no mapping holds {address:#x}: {table:x?}"))
    };
    for stack in &stacks {
        let limit = stack.limit();
        let base = stack.base();
        // The lowest slot's guard may merge with a PROT_NONE mapping below
        // the region: where the guard mapping starts is not asked.
        let (_, end, perms) = holding(limit);
        assert_eq!(
            (*end, perms.as_str()),
            (limit + 4096, "---p"),
            "the guard page at {limit:#x} is PROT_NONE and its mapping ends there: {table:x?}"
        );
        let (start, end, perms) = holding(limit + 4096);
        assert!(
            *start == limit + 4096 && *end >= base && perms == "rw-p",
            "the usable area {:#x}..{base:#x} is a read-write mapping that starts at the \
             guard's end: {table:x?}",
            limit + 4096
        );
    }
    let g = Greenlet::new(Ok);
    assert_eq!(g.switch(7u8).expect("run").downcast::<u8>().expect("u8"), 7);
    println!("locked=1 guard={:?}", stack_guard());
}

/// Started by `run_child` only (it is ignored in normal runs).
#[test]
#[ignore = "child process of the tests in this file; does nothing without GREENLET_MILLION_TEST_CHILD"]
fn child_process() {
    match std::env::var(CHILD_MODE).as_deref() {
        Ok("many") => many(),
        Ok("overflow") => overflow(),
        Ok("address-space") => address_space(),
        Ok("locked") => locked(),
        Ok("guard") => println!(
            "guard={:?} supported={}",
            stack_guard(),
            u8::from(set_stack_guard(StackGuard::GuardRegion).is_ok())
        ),
        _ => {}
    }
}

#[test]
fn a_hundred_thousand_greenlets_with_guard_regions() {
    if !kernel_has_guard_regions() {
        println!("skipped: this kernel has no guard regions (Linux 6.13+)");
        return;
    }
    let output = run_child("many", Some("guard-region"));
    assert!(output.status.success(), "{}", describe(&output));
    assert_eq!(reported(&output, "made"), MANY, "{}", describe(&output));
    let (alive, before) = (
        reported(&output, "mappings_alive"),
        reported(&output, "mappings_before"),
    );
    assert!(
        alive < before + 100,
        "{MANY} guarded stacks cost {} kernel mappings",
        alive - before
    );
}

#[test]
fn with_mprotect_guards_as_many_as_the_mapping_limit_allows() {
    let output = run_child("many", Some("mprotect"));
    assert!(output.status.success(), "{}", describe(&output));
    let made = reported(&output, "made");
    let limit = vm_setting("max_map_count");
    if reported(&output, "limited") == 1 {
        // Two mappings per stack, the process's own below 200.
        assert!(
            made >= limit / 2 - 200 && made < MANY,
            "{made} stacks under vm.max_map_count {limit}: {}",
            describe(&output)
        );
    } else {
        assert_eq!(made, MANY, "{}", describe(&output));
        assert!(
            limit >= 2 * MANY,
            "{MANY} made under vm.max_map_count {limit}?"
        );
    }
    let (alive, before) = (
        reported(&output, "mappings_alive"),
        reported(&output, "mappings_before"),
    );
    assert!(alive >= before + 2 * made - 2, "two mappings per stack");
}

#[test]
fn an_overflow_in_a_region_stack_is_reported_by_name_under_both_guards() {
    for guard in ["guard-region", "mprotect"] {
        let output = run_child("overflow", Some(guard));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.signal(),
            Some(libc::SIGABRT),
            "{}",
            describe(&output)
        );
        let id = reported(&output, "id");
        let size = acquire_stack(default_stack_size()).expect("stack").size();
        let wanted = format!(
            "greenlet 'slab-overflow' (id {id}) has overflowed its stack (stack size {size} bytes"
        );
        assert!(stderr.contains(&wanted), "{guard}: {}", describe(&output));
        if guard == "mprotect" || kernel_has_guard_regions() {
            let expected = if guard == "mprotect" {
                "Mprotect"
            } else {
                "GuardRegion"
            };
            assert!(stdout.contains(&format!("guard={expected}")), "{stdout}");
        }
    }
}

#[test]
fn running_out_of_address_space_says_so_and_the_process_goes_on() {
    let output = run_child("address-space", None);
    assert!(output.status.success(), "{}", describe(&output));
    assert!(reported(&output, "made") > 0, "{}", describe(&output));
}

/// Whether this kernel installs guard regions, asked of a child.
fn kernel_has_guard_regions() -> bool {
    let output = run_child("guard", Some("mprotect"));
    assert!(output.status.success(), "{}", describe(&output));
    reported(&output, "supported") == 1
}

#[test]
fn the_guard_comes_from_the_environment() {
    let best = if kernel_has_guard_regions() {
        "guard=GuardRegion"
    } else {
        "guard=Mprotect"
    };
    let guard = |value: Option<&str>| {
        let output = run_child("guard", value);
        assert!(output.status.success(), "{}", describe(&output));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        (stdout, stderr)
    };
    assert!(
        guard(None).0.contains(best),
        "unset: the best the kernel has"
    );
    assert!(guard(Some("auto")).0.contains(best));
    assert!(guard(Some("guard-region")).0.contains(best));
    assert!(guard(Some("mprotect")).0.contains("guard=Mprotect"));
    let (stdout, stderr) = guard(Some("bogus"));
    assert!(stdout.contains(best), "{stdout}");
    assert!(
        stderr.contains("GREENLET_STACK_GUARD=\"bogus\" is not a guard strategy"),
        "a warning names the bad value: {stderr}"
    );
}

#[test]
fn where_the_kernel_refuses_a_guard_region_the_guard_is_an_mprotect_page() {
    let output = run_child("locked", Some("guard-region"));
    assert!(output.status.success(), "{}", describe(&output));
    if reported(&output, "locked") == 0 {
        println!(
            "skipped: mlockall is not allowed here: {}",
            describe(&output)
        );
        return;
    }
    // The strategy is the kernel's answer, not the locked probe's: locked
    // memory refuses a guard region on any kernel, and only the stacks
    // that are locked fall back.
    let chosen = if kernel_has_guard_regions() {
        "guard=GuardRegion"
    } else {
        "guard=Mprotect"
    };
    assert!(
        String::from_utf8_lossy(&output.stdout).contains(chosen),
        "{chosen} expected: {}",
        describe(&output)
    );
}
