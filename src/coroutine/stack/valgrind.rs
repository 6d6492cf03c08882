//! Valgrind client requests that tell valgrind where greenlet stacks live.
//!
//! Owns: the requests this crate needs, `STACK_REGISTER` and
//! `STACK_DEREGISTER`, and `RUNNING_ON_VALGRIND` (valgrind does not know
//! every system call the pool may use: see [`super::batch`]). Without them valgrind sees the stack pointer jump into
//! an unknown mapping on every switch, prints "client switching stacks?" and
//! loses track of which memory is stack.
//!
//! Uses: inline assembly only. On x86_64 a client request is a fixed sequence
//! of register rotations (which leave the register unchanged) followed by
//! `xchg rbx, rbx`; on real hardware that is a no-op that returns the default
//! value, under valgrind the JIT recognises it and services the request whose
//! arguments are in the block `rax` points to. On other architectures the
//! requests are no-ops.

/// Request code of `VALGRIND_STACK_REGISTER` (valgrind.h).
const STACK_REGISTER: usize = 0x1501;
/// Request code of `VALGRIND_STACK_DEREGISTER` (valgrind.h).
const STACK_DEREGISTER: usize = 0x1502;
/// Request code of `RUNNING_ON_VALGRIND` (valgrind.h).
const RUNNING_ON_VALGRIND: usize = 0x1001;

/// Issues one client request and returns valgrind's answer, or `default`
/// when not running under valgrind.
#[cfg(target_arch = "x86_64")]
#[inline]
fn client_request(default: usize, request: usize, arg1: usize, arg2: usize) -> usize {
    // The request block valgrind reads: the code followed by five arguments.
    let block: [usize; 6] = [request, arg1, arg2, 0, 0, 0];
    let answer: usize;
    // SAFETY: the four rotations of rdi add up to 128 bits, so rdi ends as it
    // started (it is still declared clobbered), and `xchg rbx, rbx` swaps a
    // register with itself; on hardware the sequence only changes flags (not
    // declared preserved) and leaves rdx = `default`. Under valgrind it reads
    // `block`, which lives until the asm block ends, and writes its answer to
    // rdx. No stack memory is touched, hence `nostack`.
    unsafe {
        core::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            in("rax") block.as_ptr(),
            inout("rdx") default => answer,
            inout("rdi") 0usize => _,
            options(nostack),
        );
    }
    answer
}

/// Outside x86_64 the crate issues no client requests.
#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn client_request(default: usize, _request: usize, _arg1: usize, _arg2: usize) -> usize {
    default
}

/// Registers `[lowest, highest]` (both inclusive, as valgrind.h specifies) as
/// a stack and returns valgrind's id for it (0 when not under valgrind).
pub(super) fn register(lowest: usize, highest: usize) -> usize {
    client_request(0, STACK_REGISTER, lowest, highest)
}

/// Forgets the stack registered under `id`. A no-op when not under valgrind.
pub(super) fn deregister(id: usize) {
    client_request(0, STACK_DEREGISTER, id, 0);
}

/// Whether the process runs under valgrind.
pub(crate) fn running() -> bool {
    client_request(0, RUNNING_ON_VALGRIND, 0, 0) != 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn requests_return_the_default_outside_valgrind() {
        // The test suite does not run under valgrind: a request must behave
        // as a no-op returning its default, whatever that default is.
        // (Valgrind answers an unknown request with the default as well.)
        assert_eq!(super::client_request(7, 0x1234, 1, 2), 7);
        assert_eq!(super::client_request(usize::MAX, 0x4321, 0, 0), usize::MAX);
        assert!(!super::running());
    }
}
