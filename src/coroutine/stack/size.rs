//! The sizes of stacks: the default usable size a greenlet gets, the slot
//! length that holds a given size (also the pool's size class), the page
//! size, and the `MAP_NORESERVE` mapping that slots are carved from.
//!
//! Uses the [`Header`]'s size and the stack colours of the
//! parent module, and `libc`.

use std::io;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

use corosensei::stack::MIN_STACK_SIZE;

use super::{Header, CACHE_LINE, STACK_COLOURS};

/// Usable stack size of a greenlet when none is given: 256 KiB.
///
/// Only the pages a greenlet touches become resident (stacks are mapped with
/// `MAP_NORESERVE` and the kernel commits pages on first touch), so the size
/// mostly costs address space, not memory: an idle greenlet's RSS is the same
/// ~4.3 KiB with a 64 KiB or a 1 MiB stack (`cargo run --release --example
/// memory`). The size does cost page tables, which RSS does not show: the
/// kernel needs a 4 KiB page-table page per 2 MiB of address space in use,
/// so 1 MiB stacks add ~2 KiB per idle greenlet (measured: 2068 bytes) and
/// 256 KiB stacks ~0.5 KiB (530 bytes). 256 KiB leaves ample room for ordinary Rust code
/// (a panic that captures and prints a backtrace fits in 32 KiB) and for
/// moderately deep recursion; a greenlet that needs more asks for it when it
/// is created. Rust threads get 2 MiB, which would also let transparent huge
/// pages back a stack with 2 MiB of memory. A million greenlets with this
/// default reserve about 252 GiB of address space (264 KiB each with the
/// guard page and the header): far below the 128 TiB of x86_64's user
/// space, and not charged against memory unless `vm.overcommit_memory` is 2.
///
/// ```
/// use greenlet::coroutine::{acquire_stack, DEFAULT_STACK_SIZE};
///
/// assert_eq!(DEFAULT_STACK_SIZE, 256 * 1024);
/// assert!(acquire_stack(DEFAULT_STACK_SIZE)?.size() >= DEFAULT_STACK_SIZE);
/// # Ok::<(), std::io::Error>(())
/// ```
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;

/// The stack size greenlets get when their creator gives none.
pub(super) static DEFAULT_SIZE: AtomicUsize = AtomicUsize::new(DEFAULT_STACK_SIZE);

/// Usable stack bytes of a greenlet created without a stack size
/// ([`Greenlet::new`](crate::Greenlet::new), or a builder without
/// [`stack_size`](crate::GreenletBuilder::stack_size)): [`DEFAULT_STACK_SIZE`]
/// unless [`set_default_stack_size`] changed it.
///
/// ```
/// use greenlet::coroutine::default_stack_size;
///
/// assert!(default_stack_size() > 0);
/// ```
#[inline]
pub fn default_stack_size() -> usize {
    DEFAULT_SIZE.load(Ordering::Relaxed)
}

/// Set the stack size of greenlets created from now on without one, in
/// every thread; returns the previous default. Greenlets already created
/// keep theirs, and a builder's own `stack_size` still wins.
///
/// # Errors
/// [`io::ErrorKind::InvalidInput`] if no stack of `size` bytes could be
/// mapped (beyond the address space); the default is then left unchanged.
/// Sizes below corosensei's minimum are raised to it when a stack is made.
///
/// ```
/// use greenlet::coroutine::{default_stack_size, set_default_stack_size};
///
/// let previous = set_default_stack_size(1024 * 1024)?;
/// assert_eq!(default_stack_size(), 1024 * 1024);
/// // 300 KiB of locals: more than the 256 KiB default, in a greenlet given
/// // no size of its own.
/// let g = greenlet::Greenlet::new(|_| {
///     let buffer = std::hint::black_box([1u8; 300 * 1024]);
///     Ok(buffer.iter().map(|&b| u64::from(b)).sum::<u64>().into())
/// });
/// assert_eq!(g.switch(()).unwrap().downcast::<u64>().unwrap(), 300 * 1024);
/// assert!(set_default_stack_size(usize::MAX).is_err());
/// assert_eq!(default_stack_size(), 1024 * 1024);
/// set_default_stack_size(previous)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn set_default_stack_size(size: usize) -> io::Result<usize> {
    mapping_len(size)?;
    Ok(DEFAULT_SIZE.swap(size, Ordering::Relaxed))
}

/// Length of the slot that holds a stack of at least `size` usable bytes:
/// the guard page plus the usable bytes, the largest stack colour and the
/// header, rounded up to pages.
/// This length is also the pool's size class.
pub(super) fn mapping_len(size: usize) -> io::Result<usize> {
    let page = page_size();
    let above = std::mem::size_of::<Header>() + (STACK_COLOURS as usize - 1) * CACHE_LINE;
    size.max(MIN_STACK_SIZE)
        .checked_add(above + page - 1)
        .map(|bytes| bytes & !(page - 1))
        .and_then(|bytes| bytes.checked_add(page))
        .filter(|&len| len <= isize::MAX as usize)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "greenlet stack size {size} bytes is too large to map; \
                     ask for a size well below the address space (the default is {DEFAULT_STACK_SIZE})"
                ),
            )
        })
}

/// The system's page size (queried once).
pub(super) fn page_size() -> usize {
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    match PAGE.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: sysconf has no preconditions.
            let queried = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            let page = usize::try_from(queried)
                .ok()
                .filter(|p| p.is_power_of_two())
                .unwrap_or(4096);
            PAGE.store(page, Ordering::Relaxed);
            page
        }
        page => page,
    }
}

/// Maps `len` bytes of fresh, private, anonymous read-write memory without
/// reserving swap for it (`MAP_NORESERVE`: pages are committed when first
/// touched); returns its address.
pub(super) fn map_noreserve(len: usize) -> io::Result<usize> {
    // SAFETY: a fresh anonymous private mapping of new address space; no
    // existing memory is affected.
    let start = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if start == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(start as usize)
    }
}
