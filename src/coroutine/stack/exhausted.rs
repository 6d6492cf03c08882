//! What to tell a program whose greenlet stack could not be made.
//!
//! Owns: the error messages of the stack regions, which say which resource
//! ran out (the kernel's mapping count, the address-space rlimit, the commit
//! limit, virtual address space, memory) and what to change.
//!
//! Uses: `libc` (getrlimit) and files under `/proc`, read into buffers on
//! the stack: at the mapping limit a large allocation (an `mmap` of its own)
//! could fail too.

use std::fs::File;
use std::io::{self, Read};

use super::guard::{StackGuard, STACK_GUARD_ENV};

/// The step that failed.
#[derive(Clone, Copy, Debug)]
pub(super) enum Step {
    /// Reserving a region of `bytes` bytes of address space for stacks.
    Reserve {
        /// Length of the region.
        bytes: usize,
    },
    /// Installing a stack's guard page.
    Guard(StackGuard),
}

/// Wraps `error` (the OS error of `step`, for a stack of `stack_bytes`
/// bytes with its guard page and header) in a message that says what ran
/// out and what to change.
pub(super) fn explain(error: io::Error, step: Step, stack_bytes: usize) -> io::Error {
    let what = match step {
        Step::Reserve { bytes } => format!(
            "could not reserve {bytes} bytes of address space for greenlet stacks \
             ({stack_bytes} bytes each with guard page and header)"
        ),
        Step::Guard(guard) => format!(
            "could not install the {guard:?} guard page of a greenlet stack \
             ({stack_bytes} bytes with guard page and header)"
        ),
    };
    if error.raw_os_error() != Some(libc::ENOMEM) {
        return io::Error::new(error.kind(), format!("{what}: {error}"));
    }
    let why = match (mapping_limit(), step) {
        (Some((used, most)), _) => {
            let mprotect = match step {
                Step::Guard(guard) => guard == StackGuard::Mprotect,
                Step::Reserve { .. } => super::guard::stack_guard() == StackGuard::Mprotect,
            };
            let cost = if mprotect {
                format!(
                    "with mprotect guard pages each stack is two memory mappings, so this caps \
                     the process near {} live stacks; ",
                    most / 2
                )
            } else {
                String::new()
            };
            format!(
                "the process has {used} kernel memory mappings and `vm.max_map_count` allows \
                 {most}: {cost}raise it (`sysctl -w vm.max_map_count=N`), keep fewer greenlets \
                 alive, or, on Linux 6.13+, leave {STACK_GUARD_ENV} unset so that guards are \
                 guard regions, which cost no mapping"
            )
        }
        (None, Step::Guard(StackGuard::GuardRegion)) => {
            "out of memory: the kernel could not allocate the page tables of the guard region; \
             free memory or keep fewer greenlets alive"
                .to_owned()
        }
        (None, _) => match address_space_limit() {
            Some(limit) => format!(
                "the address-space limit of the process (RLIMIT_AS, `ulimit -v`) is {limit} bytes \
                 and every stack reserves its full size of it: raise the limit, or use smaller \
                 stacks (`set_default_stack_size`, the builder's `stack_size`) or fewer greenlets"
            ),
            None if strict_overcommit() => "the kernel's commit limit is reached: with \
                 `vm.overcommit_memory = 2` every stack is charged its full size even when \
                 unused; use smaller stacks (`set_default_stack_size`, the builder's \
                 `stack_size`), raise `vm.overcommit_ratio`, or use overcommit mode 0"
                .to_owned(),
            None => "out of virtual address space: every stack reserves its full size of it; \
                 use smaller stacks (`set_default_stack_size`, the builder's `stack_size`) or \
                 fewer greenlets"
                .to_owned(),
        },
    };
    io::Error::new(error.kind(), format!("{what}: {error}; {why}"))
}

/// `(mappings now, vm.max_map_count)` when the process is at (or within a
/// few mappings of) the limit, else `None`.
fn mapping_limit() -> Option<(usize, usize)> {
    let most = read_number("/proc/sys/vm/max_map_count")?;
    let used = count_lines("/proc/self/maps")?;
    (used + 8 >= most).then_some((used, most))
}

/// The soft RLIMIT_AS, when the process has one.
fn address_space_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    let queried = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0;
    (queried && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// Whether the kernel charges every private writable mapping in full.
fn strict_overcommit() -> bool {
    read_number("/proc/sys/vm/overcommit_memory") == Some(2)
}

/// The number in a small `/proc` file.
fn read_number(path: &str) -> Option<usize> {
    let mut buffer = [0u8; 64];
    let mut file = File::open(path).ok()?;
    let len = file.read(&mut buffer).ok()?;
    std::str::from_utf8(&buffer[..len])
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The number of lines of a file, read in pieces.
fn count_lines(path: &str) -> Option<usize> {
    let mut buffer = [0u8; 8192];
    let mut file = File::open(path).ok()?;
    let mut lines = 0;
    loop {
        match file.read(&mut buffer) {
            Ok(0) => return Some(lines),
            Ok(len) => lines += buffer[..len].iter().filter(|&&b| b == b'\n').count(),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}
