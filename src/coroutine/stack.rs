//! Greenlet stacks: guard-paged `mmap` stacks from `corosensei`, kept in a
//! pool so that starting a greenlet rarely maps memory.
//!
//! Owns [`PooledStack`], the pool and its [`StackStats`]. Uses corosensei's
//! `DefaultStack` (which registers each stack with valgrind) and nothing else
//! of this crate. The dispatcher tells it which stack is running
//! ([`running`]), so that a fault handler can name the greenlet.

use std::cell::Cell;
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use corosensei::stack::{DefaultStack, Stack, StackPointer};
use parking_lot::Mutex;

/// The default usable size of a greenlet's stack: 256 KiB (plus a guard
/// page). Pages are only touched as the greenlet uses them. Choose another
/// size per greenlet with
/// [`GreenletBuilder::stack_size`](crate::GreenletBuilder::stack_size).
///
/// ```
/// assert_eq!(greenlet::DEFAULT_STACK_SIZE, 256 * 1024);
/// ```
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;

/// Free stacks kept per process; beyond that, released stacks are unmapped.
const POOL_LIMIT: usize = 1024;

/// Stack counters, for leak checks.
///
/// # Example
/// ```
/// let before = greenlet::stack_stats();
/// let g = greenlet::Greenlet::new(|v| Ok(v));
/// g.switch(()).unwrap();
/// drop(g);
/// let after = greenlet::stack_stats();
/// assert!(after.created >= before.created);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackStats {
    /// Stacks in use by greenlets right now.
    pub live: usize,
    /// Free stacks waiting in the pool.
    pub pooled: usize,
    /// Stacks mapped since the process started.
    pub created: u64,
}

static LIVE: AtomicUsize = AtomicUsize::new(0);
static CREATED: AtomicU64 = AtomicU64::new(0);
/// Free stacks with their usable size (and a label buffer to reuse).
static POOL: Mutex<Vec<(usize, DefaultStack, String)>> = Mutex::new(Vec::new());
static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The stack of the greenlet that is running on this thread, if any:
    /// what a stack-overflow handler reads to name the greenlet (this
    /// minimal pool installs no handler; the `stack` branch does).
    static RUNNING: Cell<*const PooledStack> = const { Cell::new(std::ptr::null()) };
}

/// The current stack counters.
///
/// ```
/// let stats = greenlet::stack_stats();
/// assert!(stats.created as usize >= stats.pooled);
/// ```
pub fn stack_stats() -> StackStats {
    StackStats {
        live: LIVE.load(Ordering::Relaxed),
        pooled: POOL.lock().len(),
        created: CREATED.load(Ordering::Relaxed),
    }
}

/// A stack taken from the pool; dropping it gives it back.
pub(crate) struct PooledStack {
    /// Usable bytes (a multiple of the page size).
    size: usize,
    stack: Option<DefaultStack>,
    label: Mutex<String>,
}

/// Take a stack of at least `size` usable bytes from the pool, or map one.
pub(crate) fn acquire(size: usize) -> io::Result<PooledStack> {
    // Far beyond any address space: refuse before the arithmetic overflows.
    if size > isize::MAX as usize / 2 {
        return Err(io::Error::new(
            io::ErrorKind::OutOfMemory,
            "stack size too large",
        ));
    }
    let size = round_up(size.max(corosensei::stack::MIN_STACK_SIZE));
    let reused = {
        let mut pool = POOL.lock();
        let found = pool.iter().rposition(|(usable, _, _)| *usable == size);
        found.map(|i| pool.swap_remove(i))
    };
    let (stack, label) = match reused {
        Some((_, stack, label)) => (stack, label),
        None => {
            let stack = DefaultStack::new(size)?;
            CREATED.fetch_add(1, Ordering::Relaxed);
            (stack, String::new())
        }
    };
    LIVE.fetch_add(1, Ordering::Relaxed);
    Ok(PooledStack {
        size,
        stack: Some(stack),
        label: Mutex::new(label),
    })
}

fn page_size() -> usize {
    let cached = PAGE_SIZE.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let size = usize::try_from(size).unwrap_or(4096);
    PAGE_SIZE.store(size, Ordering::Relaxed);
    size
}

fn round_up(size: usize) -> usize {
    let page = page_size();
    size.div_ceil(page) * page
}

impl PooledStack {
    /// Name the greenlet using this stack (for the overflow message).
    pub(crate) fn set_label(&self, label: &str) {
        let mut own = self.label.lock();
        own.clear();
        own.push_str(label);
    }
}

/// Record which greenlet stack runs on this thread (`None`: the thread's own).
pub(crate) fn running(stack: Option<&PooledStack>) {
    RUNNING.with(|r| r.set(stack.map_or(std::ptr::null(), |s| s as *const PooledStack)));
}

impl Drop for PooledStack {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
        if let Some(stack) = self.stack.take() {
            let mut pool = POOL.lock();
            if pool.len() < POOL_LIMIT {
                pool.push((self.size, stack, std::mem::take(self.label.get_mut())));
            }
        }
    }
}

// SAFETY: delegates to the `DefaultStack` it owns, which satisfies the trait's
// contract (guard page, at least MIN_STACK_SIZE usable bytes); `stack` is only
// `None` after `drop` has started.
unsafe impl Stack for PooledStack {
    fn base(&self) -> StackPointer {
        self.stack.as_ref().map_or(StackPointer::MIN, Stack::base)
    }
    fn limit(&self) -> StackPointer {
        self.stack.as_ref().map_or(StackPointer::MIN, Stack::limit)
    }
}
