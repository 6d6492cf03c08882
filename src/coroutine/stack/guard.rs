//! How the page below each greenlet stack is made to fault.
//!
//! Owns: the [`StackGuard`] strategies, the process-wide choice between
//! them (from `GREENLET_STACK_GUARD`, read once, or [`set_stack_guard`];
//! otherwise the best the kernel offers, probed once) and the installation
//! of one guard page.
//!
//! Uses: `libc` (madvise, mprotect, munmap), the parent's `map_noreserve`,
//! the batched advice of [`super::batch`] and the crate's diagnostics (a
//! `GREENLET_STACK_GUARD` value it does not know).
//!
//! Both strategies make the same page fault on any access, so a stack
//! overflow is caught the same way; they differ in what the kernel pays.
//! A guard region (`MADV_GUARD_INSTALL`, Linux 6.13+) is a marker in the
//! page tables that leaves the mapping whole, so a region of thousands of
//! stacks stays one line of `/proc/self/maps`. An `mprotect(PROT_NONE)` page
//! splits the mapping around it: two kernel mappings per stack, and Linux's
//! default `vm.max_map_count` of 65,530 then caps a process near 32,700
//! live stacks.

use std::io;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Once;

use super::batch::{self, MADV_GUARD_INSTALL};
use super::{map_noreserve, page_size};

/// The environment variable that chooses the guard strategy: `mprotect`,
/// `guard-region` or `auto` (the default: guard regions where the kernel
/// has them).
pub(super) const STACK_GUARD_ENV: &str = "GREENLET_STACK_GUARD";

/// How the guard page below a greenlet stack is made inaccessible.
///
/// Either way any access to it raises SIGSEGV, which the crate reports as
/// that greenlet's stack overflow. [`stack_guard`] says which one new
/// stacks get; `GREENLET_STACK_GUARD=mprotect` in the environment (read
/// once) or [`set_stack_guard`] chooses.
///
/// ```
/// use greenlet::coroutine::{stack_guard, StackGuard};
///
/// match stack_guard() {
///     StackGuard::GuardRegion => println!("guard regions: no kernel mapping per stack"),
///     StackGuard::Mprotect => println!("PROT_NONE pages: two kernel mappings per stack"),
///     _ => {}
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StackGuard {
    /// `madvise(MADV_GUARD_INSTALL)`: a lightweight guard region (Linux
    /// 6.13+) that does not split the mapping the stack lives in.
    GuardRegion,
    /// `mprotect(PROT_NONE)` on the page: works on every kernel, costs two
    /// kernel mappings per stack (see `vm.max_map_count`).
    Mprotect,
}

/// Not chosen yet / [`StackGuard::GuardRegion`] / [`StackGuard::Mprotect`].
const UNSET: u8 = 0;
const GUARD_REGION: u8 = 1;
const MPROTECT: u8 = 2;

/// The strategy in force, once chosen.
static CHOSEN: AtomicU8 = AtomicU8::new(UNSET);
/// Whether this kernel installs guard regions: unknown / yes / no.
static KERNEL_HAS_GUARD_REGIONS: AtomicU8 = AtomicU8::new(UNSET);
static READ_ENV: Once = Once::new();

fn encode(guard: StackGuard) -> u8 {
    match guard {
        StackGuard::GuardRegion => GUARD_REGION,
        StackGuard::Mprotect => MPROTECT,
    }
}

fn decode(value: u8) -> Option<StackGuard> {
    match value {
        GUARD_REGION => Some(StackGuard::GuardRegion),
        MPROTECT => Some(StackGuard::Mprotect),
        _ => None,
    }
}

/// The guard strategy stacks prepared from now on get.
///
/// Chosen once per process: `GREENLET_STACK_GUARD` from the environment
/// (`mprotect`, `guard-region`, or `auto`), else guard regions when the
/// kernel installs them (Linux 6.13+; probed once), else `mprotect`. Asking
/// for `guard-region` on a kernel without them falls back to `mprotect`
/// with a warning. [`set_stack_guard`] changes it later.
///
/// ```
/// use greenlet::coroutine::{stack_guard, StackGuard};
///
/// let guard = stack_guard();
/// assert!(matches!(guard, StackGuard::GuardRegion | StackGuard::Mprotect));
/// assert_eq!(stack_guard(), guard, "chosen once");
/// ```
pub fn stack_guard() -> StackGuard {
    if let Some(guard) = decode(CHOSEN.load(Ordering::Relaxed)) {
        return guard;
    }
    READ_ENV.call_once(|| {
        let wanted = std::env::var(STACK_GUARD_ENV).ok();
        let guard = match wanted.as_deref().map(str::trim) {
            Some("mprotect") => StackGuard::Mprotect,
            None | Some("" | "auto") => best_available(),
            Some("guard-region") => {
                let best = best_available();
                if best != StackGuard::GuardRegion {
                    crate::diag::diag_warn!(
                        "{STACK_GUARD_ENV}=guard-region: this kernel does not install guard \
                         regions (MADV_GUARD_INSTALL needs Linux 6.13 or later); greenlet \
                         stacks use mprotect guard pages"
                    );
                }
                best
            }
            Some(other) => {
                let best = best_available();
                crate::diag::diag_warn!(
                    "{STACK_GUARD_ENV}={other:?} is not a guard strategy (mprotect, \
                     guard-region or auto); using {best:?}"
                );
                best
            }
        };
        // A `set_stack_guard` that ran meanwhile wins.
        let _ = CHOSEN.compare_exchange(UNSET, encode(guard), Ordering::Relaxed, Ordering::Relaxed);
    });
    decode(CHOSEN.load(Ordering::Relaxed)).unwrap_or(StackGuard::Mprotect)
}

/// Chooses the guard strategy of stacks prepared from now on, in every
/// thread, and returns the previous one. Stacks already prepared (live or
/// pooled) keep the guard they have.
///
/// # Errors
/// [`io::ErrorKind::Unsupported`] for [`StackGuard::GuardRegion`] on a
/// kernel without guard regions (before Linux 6.13); the strategy is then
/// left unchanged.
///
/// ```
/// use greenlet::coroutine::{set_stack_guard, stack_guard, StackGuard};
///
/// let previous = set_stack_guard(StackGuard::Mprotect)?;
/// assert_eq!(stack_guard(), StackGuard::Mprotect);
/// set_stack_guard(previous)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn set_stack_guard(guard: StackGuard) -> io::Result<StackGuard> {
    if guard == StackGuard::GuardRegion && best_available() != StackGuard::GuardRegion {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this kernel does not install guard regions (MADV_GUARD_INSTALL needs Linux 6.13 \
             or later); greenlet stacks can only use StackGuard::Mprotect here",
        ));
    }
    let previous = stack_guard();
    CHOSEN.store(encode(guard), Ordering::Relaxed);
    Ok(previous)
}

/// Guard regions if this kernel installs them, else `mprotect`: probed once
/// on a scratch mapping of two pages.
fn best_available() -> StackGuard {
    if let Some(known) = decode(KERNEL_HAS_GUARD_REGIONS.load(Ordering::Relaxed)) {
        return known;
    }
    let page = page_size();
    let Ok(scratch) = map_noreserve(2 * page) else {
        // Out of mappings or address space: cannot tell now, ask again later.
        return StackGuard::Mprotect;
    };
    let scratch = scratch as *mut libc::c_void;
    // The question is the kernel's, not this mapping's: after
    // `mlockall(MCL_FUTURE)` the scratch mapping is locked, and the kernel
    // refuses guard regions on locked memory (EINVAL) even where it has
    // them. Locked stacks fall back one by one in `install`.
    // SAFETY: the scratch mapping made above, which nothing else uses;
    // unlocking it (a no-op when it is not locked) changes nothing else.
    unsafe { libc::munlock(scratch, 2 * page) };
    // SAFETY: the first page of the scratch mapping made above, which
    // nothing else uses.
    let answer = unsafe { libc::madvise(scratch, page, MADV_GUARD_INSTALL) };
    // SAFETY: unmapping the scratch mapping, which nothing refers to.
    unsafe { libc::munmap(scratch, 2 * page) };
    let known = if answer == 0 {
        StackGuard::GuardRegion
    } else {
        // EINVAL: a kernel before 6.13 (or one built without it); anything
        // else is as good a reason not to rely on it.
        StackGuard::Mprotect
    };
    KERNEL_HAS_GUARD_REGIONS.store(encode(known), Ordering::Relaxed);
    known
}

/// Makes the page at `page_start` (page-aligned, inside a private anonymous
/// read-write mapping that nothing else uses) a guard page with `guard`.
/// A guard region the kernel refuses with `EINVAL` (it does on locked
/// memory, after `mlockall(MCL_FUTURE)`) becomes an mprotect guard page.
///
/// # Errors
/// The OS error and the strategy that failed: `ENOMEM` from mprotect when
/// the process is at its limit of kernel mappings; from madvise when page
/// tables cannot be allocated.
pub(super) fn install(guard: StackGuard, page_start: usize) -> Result<(), (io::Error, StackGuard)> {
    let page = page_size();
    let address = page_start as *mut libc::c_void;
    if guard == StackGuard::GuardRegion {
        // SAFETY: the caller owns the page, which holds nothing; discarding
        // it and marking it as a guard region affects nothing else.
        if unsafe { libc::madvise(address, page, MADV_GUARD_INSTALL) } == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINVAL) {
            return Err((error, guard));
        }
    }
    // SAFETY: as above: only the caller's page becomes inaccessible.
    if unsafe { libc::mprotect(address, page, libc::PROT_NONE) } == 0 {
        Ok(())
    } else {
        Err((io::Error::last_os_error(), StackGuard::Mprotect))
    }
}

/// Makes the first page of each of up to `count` slots of `slot_len` bytes
/// from `first` on (as [`install`] wants them) a guard page with `guard`:
/// guard regions in one batched call where the kernel allows it, else the
/// first slot's alone. Returns how many slots, from the first, got their
/// guard (at least one).
///
/// # Errors
/// As [`install`], for the first slot.
pub(super) fn install_many(
    guard: StackGuard,
    first: usize,
    slot_len: usize,
    count: usize,
) -> Result<usize, (io::Error, StackGuard)> {
    const MOST: usize = 64;
    let count = count.min(MOST);
    if guard == StackGuard::GuardRegion && count > 1 && batch::batching() {
        let page = page_size();
        let mut pages = [(0, 0); MOST];
        for (i, range) in pages.iter_mut().take(count).enumerate() {
            *range = (first + i * slot_len, page);
        }
        // SAFETY: the first pages of the caller's slots, which hold nothing
        // (as `install` requires): guarding them affects nothing else.
        let done = unsafe { batch::advise(&pages[..count], MADV_GUARD_INSTALL) };
        if done > 0 {
            return Ok(done);
        }
    }
    install(guard, first).map(|()| 1)
}
