//! Guarded, pooled stacks for greenlets.
//!
//! Owns: the memory greenlets run on ([`PooledStack`], whose base and
//! limit addresses any coroutine library can run on), the pool that recycles stacks (a per-thread
//! cache, whose last released stack waits in a thread-local slot of its own
//! for the next acquire, in front of a global free list, capped so that
//! stacks beyond it go back to their region), the counts of the one stack a
//! thread's greenlet state keeps with its coroutine for its next greenlet
//! ([`KeptCount`]), the stack counters
//! ([`stack_stats`]), the valgrind registration of every stack, and
//! stack-overflow reporting: how the fault handler finds the stack the
//! faulting thread runs on (a finder the layer above installs, through
//! [`find_running_with`]: nothing is stored per switch) and the fault handler
//! that turns a guard-page hit into a message naming the greenlet instead of
//! a bare SIGSEGV.
//!
//! Uses: `libc` (signals, sysconf), `parking_lot`, corosensei's minimum
//! stack size and stack-pointer type, the crate's diagnostics. Submodules: `region` (the address space
//! stacks are carved from), `guard` (how a guard page is made), `exhausted`
//! (what to say when memory, mappings or address space run out), `overflow`
//! (the fault handler), `valgrind`.
//!
//! # Layout of one stack
//! ```text
//! low addresses                                                high addresses
//! | guard page | usable stack, grows downwards <-- | colour | Header |
//! ^ limit()    ^ guard_end                         ^ base()
//! ```
//! A greenlet's coroutine keeps its own state in the top 64 bytes below
//! `base()` (`fiber.rs`), so its frames start below them.
//! The colour is 0 to 31 cache lines, different from slot to slot, so that
//! the hot top frames of many stacks do not all fall into the same cache
//! sets (see `coloured_top`).
//! A stack is one slot of a region: many stacks of one size share a
//! `MAP_NORESERVE` mapping (see `region`). The guard page is a guard region
//! (`MADV_GUARD_INSTALL`, Linux 6.13+), which leaves the mapping whole, or
//! on older kernels a `PROT_NONE` page, which costs two kernel mappings per
//! stack: Linux's default `vm.max_map_count` of 65530 then caps a process
//! near 32,700 live stacks (see [`StackGuard`]). The header (size, label,
//! valgrind id) lives at the top of the slot, in the page the coroutine's
//! first frame touches anyway, so it costs no extra memory and travels with
//! the stack through the pool.
//!
//! # Lifetime of a slot
//! Carved (guard installed once per slot, in batches ahead: see `region`)
//! and given a header when no pool has a stack of its size; then handed out
//! and released to the pool, any number of times, keeping its touched pages;
//! given back to its region (header forgotten, pages discarded with
//! `MADV_DONTNEED`, in batches) by
//! [`trim_stack_pool`](crate::coroutine::trim_stack_pool) or when the global pool is full; a region none of
//! whose slots is out is unmapped.

mod batch;
mod exhausted;
mod guard;
mod overflow;
mod region;
#[cfg(test)]
mod tests;
mod valgrind;

pub use self::guard::{set_stack_guard, stack_guard, StackGuard};

use std::cell::{Cell, RefCell, UnsafeCell};
use std::fmt;
use std::io;
use std::ptr::{self, NonNull};
use std::sync::atomic::{compiler_fence, AtomicIsize, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use corosensei::stack::{StackPointer, MIN_STACK_SIZE};
use parking_lot::Mutex;

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
static DEFAULT_SIZE: AtomicUsize = AtomicUsize::new(DEFAULT_STACK_SIZE);

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

/// Most bytes of a stack's label kept for the overflow message.
const LABEL_CAPACITY: usize = 96;

/// Colours of stack tops: so many cache lines of offsets below the header
/// (see `coloured_top`). 32 lines (2 KiB) keep a parked hub echo
/// handler (about 1.9 KiB of frames) in the header's page; 48 did not (its
/// idle RSS per connection rose from 5.0 to 6.4 KiB).
const STACK_COLOURS: u64 = 32;
/// Bytes of one cache line, the step between two colours.
const CACHE_LINE: usize = 64;
/// Most free stacks of one size a thread keeps for itself. When full, half of
/// them move to the global pool.
const THREAD_CACHE_CAP: usize = 64;
/// Most free stacks of one size the global pool keeps; beyond it a released
/// stack goes back to its region, returning its memory to the system.
const GLOBAL_POOL_CAP: usize = 1024;

/// Metadata of one stack, stored at the top of its slot.
#[repr(C, align(64))]
struct Header {
    /// Lowest address of the slot: the start of the guard page.
    map_start: usize,
    /// Length of the whole slot (guard page, usable stack, header): the
    /// stack's size class.
    map_len: usize,
    /// Key of the region that holds the slot.
    region: usize,
    /// First address above the guard page: the lowest usable stack byte.
    guard_end: usize,
    /// The initial stack pointer, coloured (see [`coloured_top`]).
    top: StackPointer,
    /// Id valgrind gave the stack when it was registered (0 outside valgrind).
    valgrind_id: usize,
    /// Number of valid bytes in `label`. Written last, after the bytes.
    label_len: AtomicUsize,
    /// UTF-8 label (a greenlet's name or id) for the overflow message.
    label: UnsafeCell<[u8; LABEL_CAPACITY]>,
    /// When `label_len` is 0 and this is not: the stack belongs to the
    /// unnamed greenlet of this id, labelled `'greenlet-<id>' (id <id>)`,
    /// which is spelled out only if the overflow message needs it (a greenlet
    /// start then costs one store instead of writing the label).
    default_id: AtomicU64,
}

impl Header {
    /// Usable bytes above the guard page that every stack of this size
    /// class has: up to the top of the most coloured one (see `coloured_top`),
    /// so that the size, and the overflow message, do not vary by colour.
    fn usable_size(&self) -> usize {
        self as *const Header as usize - self.guard_end - (STACK_COLOURS as usize - 1) * CACHE_LINE
    }

    /// Copies the label into `out` and returns its length.
    fn read_label(&self, out: &mut [u8; LABEL_CAPACITY]) -> usize {
        let len = self.label_len.load(Ordering::Relaxed).min(LABEL_CAPACITY);
        compiler_fence(Ordering::Acquire);
        if len == 0 {
            let id = self.default_id.load(Ordering::Relaxed);
            if id != 0 {
                return default_label(id, out);
            }
        }
        // SAFETY: `label` is inside the header, which is mapped while the
        // stack exists; it is written only by `LabelWriter` on the thread
        // that owns the `PooledStack` (which is not `Sync`), and `len` bytes
        // were complete before `label_len` was stored.
        unsafe { ptr::copy_nonoverlapping(self.label.get().cast::<u8>(), out.as_mut_ptr(), len) };
        len
    }
}

/// A free stack: its header pointer, sendable between threads and pools.
#[derive(Clone, Copy, PartialEq, Eq)]
struct RawStack(NonNull<Header>);

// SAFETY: a free stack is plain memory owned by whichever pool holds the
// pointer; nothing about it is tied to a thread.
unsafe impl Send for RawStack {}

impl RawStack {
    fn header(&self) -> &Header {
        // SAFETY: a RawStack always points to the initialised header of a
        // slot that is out of its region; headers are only forgotten by
        // `retire`, which consumes the RawStack.
        unsafe { self.0.as_ref() }
    }
}

/// A guarded stack from the pool; dropping it returns it to the pool.
///
/// At least [`size`](PooledStack::size) usable bytes lie between
/// [`base`](PooledStack::base) (where frames start, growing down) and a guard
/// page (see [`StackGuard`]) that starts at [`limit`](PooledStack::limit).
/// Another coroutine library can run on it through those two addresses (a
/// wrapper type of the caller's implementing that library's stack trait):
/// the memory between them belongs to the `PooledStack` until it is
/// dropped.
///
/// # Example
/// ```
/// use greenlet::coroutine::{acquire_stack, DEFAULT_STACK_SIZE};
///
/// let stack = acquire_stack(DEFAULT_STACK_SIZE)?;
/// assert!(stack.size() >= DEFAULT_STACK_SIZE);
/// assert!(stack.base() - stack.limit() > stack.size());
/// assert_eq!(stack.base() % 64, 0);
/// drop(stack); // back to the pool
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct PooledStack {
    raw: RawStack,
}

// SAFETY: the stack is memory owned by this value; moving it to another
// thread moves that ownership. It is not `Sync`: `set_label` writes through a
// shared reference.
unsafe impl Send for PooledStack {}

impl PooledStack {
    /// Usable bytes of this stack: at least what was asked of [`acquire`],
    /// rounded up to whole pages with room for the stack's small header and
    /// colour (see the module docs); the same for every stack of one size.
    ///
    /// ```
    /// let stack = greenlet::coroutine::acquire_stack(10_000)?;
    /// assert!(stack.size() >= 10_000);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn size(&self) -> usize {
        self.raw.header().usable_size()
    }

    /// Sets the label the overflow message names: it is printed verbatim
    /// after `greenlet ` (the dispatcher passes e.g. `'worker' (id 7)`),
    /// truncated to 96 bytes at a character boundary. A stack from the pool
    /// starts unlabelled (printed as `<unnamed>`).
    ///
    /// ```
    /// let stack = greenlet::coroutine::acquire_stack(64 * 1024)?;
    /// stack.set_label("'worker' (id 7)");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_label(&self, label: &str) {
        self.write_label(|writer| writer.push(label));
    }

    /// Like [`set_label`](PooledStack::set_label), but formats straight into
    /// the stack's label buffer, without allocating.
    ///
    /// ```
    /// let stack = greenlet::coroutine::acquire_stack(64 * 1024)?;
    /// stack.set_label_fmt(format_args!("greenlet #{}", 42));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_label_fmt(&self, label: fmt::Arguments<'_>) {
        // LabelWriter never fails (it truncates); a failing Display impl in
        // `label` only leaves the label shorter, which is all we can do.
        self.write_label(|writer| {
            let _ = fmt::write(writer, label);
        });
    }

    /// Sets the label to `'name' (id N)`, the way greenlets are named in
    /// messages, without the formatting machinery (this runs each time a
    /// greenlet starts). A long name is cut so that the id always fits.
    ///
    /// ```
    /// let stack = greenlet::coroutine::acquire_stack(64 * 1024)?;
    /// stack.set_greenlet_label("worker", 7); // reported as greenlet 'worker' (id 7)
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_greenlet_label(&self, name: &str, id: u64) {
        // Room for the quotes, " (id ", 20 digits and ")".
        const ID_ROOM: usize = 2 + 5 + 20 + 1;
        self.write_label(|writer| {
            writer.push("'");
            writer.push(truncate(name, LABEL_CAPACITY - ID_ROOM));
            writer.push("' (id ");
            writer.push_decimal(id);
            writer.push(")");
        });
    }

    /// Labels the stack as the one of the unnamed greenlet `id`: the overflow
    /// message then names it `'greenlet-<id>' (id <id>)`, as
    /// [`set_greenlet_label`](PooledStack::set_greenlet_label) would, but the
    /// label is only spelled out if an overflow happens (two stores).
    #[inline]
    pub(crate) fn set_default_greenlet_label(&self, id: u64) {
        let header = self.raw.header();
        header.label_len.store(0, Ordering::Relaxed);
        header.default_id.store(id, Ordering::Relaxed);
    }

    /// Rewrites the label: readers see length 0 until `fill` is done.
    fn write_label(&self, fill: impl FnOnce(&mut LabelWriter<'_>)) {
        let header = self.raw.header();
        header.label_len.store(0, Ordering::Relaxed);
        header.default_id.store(0, Ordering::Relaxed);
        compiler_fence(Ordering::Release);
        let mut writer = LabelWriter { header, len: 0 };
        fill(&mut writer);
        compiler_fence(Ordering::Release);
        header.label_len.store(writer.len, Ordering::Relaxed);
    }
}

/// The decimal digits of `value`, written at the end of `buf` without
/// allocating (the overflow handler uses it too).
fn decimal(mut value: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    &buf[at..]
}

/// Writes `'greenlet-<id>' (id <id>)` (at most 57 bytes) into `out`, without
/// allocating (it runs in the overflow handler); returns its length.
fn default_label(id: u64, out: &mut [u8; LABEL_CAPACITY]) -> usize {
    let mut buf = [0u8; 20];
    let digits = decimal(id, &mut buf);
    let mut len = 0;
    for part in [&b"'greenlet-"[..], digits, b"' (id ", digits, b")"] {
        out[len..len + part.len()].copy_from_slice(part);
        len += part.len();
    }
    len
}

/// The longest prefix of `text` of at most `most` bytes that ends at a char
/// boundary.
fn truncate(text: &str, most: usize) -> &str {
    let mut end = text.len().min(most);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Appends text to a header's label, truncating at a char boundary.
struct LabelWriter<'a> {
    header: &'a Header,
    len: usize,
}

impl LabelWriter<'_> {
    fn push(&mut self, text: &str) {
        let take = truncate(text, LABEL_CAPACITY - self.len);
        // SAFETY: `len + take.len() <= LABEL_CAPACITY`, so the copy stays
        // inside the label array of a live header. Only the thread holding
        // the (non-`Sync`) `PooledStack` writes the label, and readers (the
        // overflow handler on this thread) read only `label_len` bytes, which
        // is 0 while this write is in progress.
        unsafe {
            let dest = self.header.label.get().cast::<u8>().add(self.len);
            ptr::copy_nonoverlapping(take.as_ptr(), dest, take.len());
        }
        self.len += take.len();
    }

    fn push_decimal(&mut self, value: u64) {
        let mut buf = [0u8; 20];
        // ASCII digits are valid UTF-8.
        self.push(std::str::from_utf8(decimal(value, &mut buf)).unwrap_or("?"));
    }
}

impl fmt::Write for LabelWriter<'_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.push(text);
        Ok(())
    }
}

impl Drop for PooledStack {
    fn drop(&mut self) {
        release(self.raw);
    }
}

impl fmt::Debug for PooledStack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut label = [0u8; LABEL_CAPACITY];
        let len = self.raw.header().read_label(&mut label);
        f.debug_struct("PooledStack")
            .field("limit", &format_args!("{:#x}", self.raw.header().map_start))
            .field("size", &self.size())
            .field("label", &String::from_utf8_lossy(&label[..len]))
            .finish()
    }
}

/// A stack as the fault handler's finder names it ([`find_running_with`]):
/// its header, opaque above this module; [`Running::NONE`] for none.
#[derive(Clone, Copy)]
pub(crate) struct Running(*const Header);

impl Running {
    /// No stack (main's, or no greenlet running).
    pub(crate) const NONE: Running = Running(ptr::null());
}

impl PooledStack {
    /// The stack's top: the address frames start at, growing down; aligned
    /// to 64 bytes. It is a whole number of cache lines below the slot's
    /// header (its colour, see `coloured_top`), and the slot is
    /// page-aligned with a header whose size is a multiple of its 64-byte
    /// alignment.
    ///
    /// ```
    /// let stack = greenlet::coroutine::acquire_stack(64 * 1024)?;
    /// assert_eq!(stack.base() % 64, 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[inline(always)]
    pub fn base(&self) -> usize {
        self.raw.header().top.get()
    }

    /// The lowest address of the stack's slot: the start of its guard page,
    /// above which at least [`size`](PooledStack::size) usable bytes reach
    /// up to [`base`](PooledStack::base).
    ///
    /// ```
    /// let stack = greenlet::coroutine::acquire_stack(64 * 1024)?;
    /// assert!(stack.base() - stack.limit() >= stack.size());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[inline(always)]
    pub fn limit(&self) -> usize {
        self.raw.header().map_start
    }

    /// This stack, for the fault handler's finder.
    #[inline(always)]
    pub(crate) fn as_running(&self) -> Running {
        Running(self.raw.0.as_ptr())
    }
}

/// The function that tells the fault handler which stack the faulting
/// thread runs on; set once.
static FIND_RUNNING: std::sync::OnceLock<fn() -> Running> = std::sync::OnceLock::new();

/// Tell the fault handler how to find the stack the faulting thread runs on
/// (the first call sets it, later ones change nothing): a fault in that
/// stack's guard page is reported as its greenlet's stack overflow. Found
/// at the fault rather than marked at every switch, so a switch stores
/// nothing for it.
///
/// Contract (the finder's): it runs in the signal handler, on the faulting
/// thread, so it only reads that thread's memory (no allocation, no lock),
/// and the stack it returns stays alive while that thread runs on it.
pub(crate) fn find_running_with(find: fn() -> Running) {
    let _ = FIND_RUNNING.set(find);
}

/// The header of the stack the calling thread runs on, as the finder says,
/// or null (no finder, or no stack).
fn running_header() -> *const Header {
    FIND_RUNNING.get().map_or(ptr::null(), |find| find().0)
}

/// Counters of the stack pool, from [`stack_stats`].
///
/// ```
/// use greenlet::coroutine::{acquire_stack, stack_stats, StackStats};
///
/// let stack = acquire_stack(72 * 1024)?;
/// let StackStats { live, created, .. } = stack_stats();
/// assert!(live >= 1 && created >= 1);
/// # drop(stack);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StackStats {
    /// Stacks handed out and not yet dropped (greenlets holding a stack).
    pub live: usize,
    /// Free stacks kept for reuse (global pool plus every thread's cache).
    pub pooled: usize,
    /// Stacks ever prepared (a slot of a region given its guard page, the
    /// first time, and a header).
    pub created: u64,
    /// Stacks ever given back to their region, their memory returned to the
    /// system (by [`trim_stack_pool`](crate::coroutine::trim_stack_pool), or released beyond the pool's cap).
    pub destroyed: u64,
    /// Regions of address space mapped now, each holding many stacks of one
    /// size (unmapped when none of its stacks is live or pooled).
    pub regions: usize,
}

/// The stack pool's counters now.
///
/// The totals are exact; `live` and `pooled` sum per-thread counts one after
/// the other, so they are exact only while no other thread takes or
/// releases stacks.
///
/// ```
/// use greenlet::coroutine::{acquire_stack, stack_stats};
///
/// let stack = acquire_stack(128 * 1024)?;
/// assert!(stack_stats().live >= 1);
/// drop(stack);
/// assert!(stack_stats().pooled >= 1);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn stack_stats() -> StackStats {
    let registry = REGISTRY.lock();
    let kept = KEPT
        .lock()
        .iter()
        .map(|flag| flag.load(Ordering::Relaxed))
        .sum::<usize>();
    let (pooled, live) = registry.iter().fold(
        (
            GLOBAL_POOLED.load(Ordering::Relaxed) + kept,
            LIVE.load(Ordering::Relaxed).wrapping_sub_unsigned(kept),
        ),
        |(pooled, live), counts| {
            (
                pooled + counts.pooled.load(Ordering::Relaxed),
                live.wrapping_add(counts.live.load(Ordering::Relaxed)),
            )
        },
    );
    drop(registry);
    StackStats {
        live: usize::try_from(live).unwrap_or(0),
        pooled,
        created: CREATED.load(Ordering::Relaxed),
        destroyed: DESTROYED.load(Ordering::Relaxed),
        regions: region::count(),
    }
}

/// Gives every free stack in the global pool and in the calling thread's
/// cache back to its region and returns how many it gave back: the pool's
/// part of [`trim_stack_pool`](crate::coroutine::trim_stack_pool), which
/// first releases the coroutine and stack the thread's greenlet state keeps
/// (`coroutine::kept`).
pub(crate) fn trim_pool() -> usize {
    let mut free: Vec<RawStack> = Vec::new();
    let _ = CACHE.try_with(|cache| {
        if let Ok(mut cache) = cache.try_borrow_mut() {
            cool_hot(&mut cache);
            for class in &mut cache.classes {
                free.append(&mut class.free);
            }
            cache.counts.pooled.store(0, Ordering::Relaxed);
        }
    });
    {
        let mut global = GLOBAL.lock();
        for class in global.iter_mut() {
            GLOBAL_POOLED.fetch_sub(class.free.len(), Ordering::Relaxed);
            free.append(&mut class.free);
        }
    }
    let given_back = free.len();
    retire(free);
    given_back
}

/// Stacks handed out and not yet released by threads without a cache, plus
/// the final `live` counts of the caches that were dropped.
static LIVE: AtomicIsize = AtomicIsize::new(0);
/// Stacks ever prepared / given back to their region.
static CREATED: AtomicU64 = AtomicU64::new(0);
static DESTROYED: AtomicU64 = AtomicU64::new(0);
/// Stacks in the global pool (changed under its lock, read by stats).
static GLOBAL_POOLED: AtomicUsize = AtomicUsize::new(0);
/// The global pool: free stacks by mapping length.
static GLOBAL: Mutex<Vec<SizeClass>> = Mutex::new(Vec::new());
/// The counters of each thread cache, for `stack_stats`.
static REGISTRY: Mutex<Vec<Arc<CacheCounts>>> = Mutex::new(Vec::new());

/// One thread cache's counters, written only by its thread (a load and a
/// store, no shared atomic operation) and summed by `stack_stats`.
#[derive(Default)]
struct CacheCounts {
    /// Free stacks in the cache.
    pooled: AtomicUsize,
    /// Stacks this thread took minus those it released (negative when it
    /// released stacks other threads took).
    live: AtomicIsize,
}

/// Free stacks of one mapping length.
struct SizeClass {
    map_len: usize,
    free: Vec<RawStack>,
}

/// Returns the free list for `map_len` in `classes`, creating it if needed.
fn class_of(classes: &mut Vec<SizeClass>, map_len: usize) -> &mut Vec<RawStack> {
    let index = match classes.iter().position(|class| class.map_len == map_len) {
        Some(index) => index,
        None => {
            classes.push(SizeClass {
                map_len,
                free: Vec::new(),
            });
            classes.len() - 1
        }
    };
    &mut classes[index].free
}

/// A thread's private free stacks, in front of the global pool.
struct ThreadCache {
    classes: Vec<SizeClass>,
    /// `pooled`: the number of stacks in `classes`, plus the thread's hot
    /// stack (`HOT`) if it has one.
    counts: Arc<CacheCounts>,
    /// Dropped last: the alternate signal stack this thread got from us.
    _alt_stack: overflow::AltStack,
}

thread_local! {
    static CACHE: RefCell<ThreadCache> = RefCell::new(ThreadCache::new());
    /// The counters of this thread's cache while it exists, else null.
    /// Const-initialised and without destructor, like `HOT`, so that the
    /// common release-then-acquire of one stack touches neither the lazily
    /// initialised `CACHE` nor its `RefCell`.
    static COUNTS: Cell<*const CacheCounts> = const { Cell::new(ptr::null()) };
    /// This thread's last released stack when it is free and kept for the
    /// next `acquire` of its size, else null. Part of the thread's cache
    /// (counted in its `pooled`); only set while `COUNTS` is not null, and
    /// moved into the cache's lists when the cache is dropped or trimmed.
    static HOT: Cell<*mut Header> = const { Cell::new(ptr::null_mut()) };
    /// The last size this thread asked [`acquire`] for and its mapping
    /// length (`(0, 0)` before the first): greenlets of a thread mostly ask
    /// for one size, whose class is then not worked out again.
    static LAST_CLASS: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// [`mapping_len`] of `size`, remembered for the thread's next call with
/// the same size.
#[inline]
fn size_class(size: usize) -> io::Result<usize> {
    match LAST_CLASS.get() {
        (asked, map_len) if asked == size && map_len != 0 => Ok(map_len),
        _ => size_class_cold(size),
    }
}

/// [`size_class`] for a size other than the last one.
#[inline(never)]
fn size_class_cold(size: usize) -> io::Result<usize> {
    let map_len = mapping_len(size)?;
    LAST_CLASS.set((size, map_len));
    Ok(map_len)
}

/// The counters of this thread's cache, if it exists.
#[inline]
fn thread_counts<'a>() -> Option<&'a CacheCounts> {
    let counts = COUNTS.get();
    // SAFETY: `COUNTS` points into the `Arc` held by this thread's
    // `ThreadCache`, and is reset to null before that is dropped, so a
    // non-null value is alive; the reference is only used within the
    // caller's statement (acquire or release), never across the drop.
    unsafe { counts.as_ref() }
}

impl CacheCounts {
    /// Add to the counts (only their thread writes them: a load and a store).
    #[inline]
    fn add(&self, pooled: isize, live: isize) {
        let now = self.pooled.load(Ordering::Relaxed);
        self.pooled
            .store(now.wrapping_add_signed(pooled), Ordering::Relaxed);
        let now = self.live.load(Ordering::Relaxed);
        self.live.store(now.wrapping_add(live), Ordering::Relaxed);
    }
}

/// Take this thread's hot stack (see `HOT`) if it has this mapping length.
#[inline]
fn take_hot(map_len: usize) -> Option<RawStack> {
    let counts = thread_counts()?;
    let raw = RawStack(NonNull::new(HOT.get())?);
    if raw.header().map_len != map_len {
        return None;
    }
    HOT.set(ptr::null_mut());
    counts.add(-1, 1);
    Some(raw)
}

/// Move this thread's hot stack, if any, into `cache`'s lists.
fn cool_hot(cache: &mut ThreadCache) {
    if let Some(hot) = NonNull::new(HOT.replace(ptr::null_mut())) {
        let raw = RawStack(hot);
        // Already counted in `pooled`.
        class_of(&mut cache.classes, raw.header().map_len).push(raw);
    }
}

impl ThreadCache {
    fn new() -> Self {
        overflow::install_handler();
        let counts = Arc::new(CacheCounts::default());
        REGISTRY.lock().push(Arc::clone(&counts));
        COUNTS.set(Arc::as_ptr(&counts));
        ThreadCache {
            classes: Vec::new(),
            counts,
            _alt_stack: overflow::AltStack::ensure(),
        }
    }

    fn add_count(&self, delta: isize) {
        // Only this thread writes the counts, so a load and a store suffice.
        let pooled = &self.counts.pooled;
        let now = pooled.load(Ordering::Relaxed);
        pooled.store(now.wrapping_add_signed(delta), Ordering::Relaxed);
    }

    fn add_live(&self, delta: isize) {
        self.counts.add(0, delta);
    }

    fn take(&mut self, map_len: usize) -> Option<RawStack> {
        let free = class_of(&mut self.classes, map_len);
        if free.is_empty() {
            refill_from_global(map_len, free, THREAD_CACHE_CAP / 2);
            let refilled = free.len();
            self.add_count(refilled as isize);
        }
        let free = class_of(&mut self.classes, map_len);
        let raw = free.pop()?;
        self.add_count(-1);
        Some(raw)
    }

    fn put(&mut self, raw: RawStack) {
        let map_len = raw.header().map_len;
        let free = class_of(&mut self.classes, map_len);
        if free.len() >= THREAD_CACHE_CAP {
            let spill: Vec<RawStack> = free.drain(..THREAD_CACHE_CAP / 2).collect();
            let spilled = spill.len();
            self.add_count(-(spilled as isize));
            give_to_global(map_len, spill);
        }
        class_of(&mut self.classes, map_len).push(raw);
        self.add_count(1);
    }
}

impl Drop for ThreadCache {
    fn drop(&mut self) {
        COUNTS.set(ptr::null());
        cool_hot(self);
        {
            // Folded under the lock, so that `stack_stats` sees the stacks
            // this thread took either in its count or in the global one.
            let mut registry = REGISTRY.lock();
            registry.retain(|counts| !Arc::ptr_eq(counts, &self.counts));
            self.counts.pooled.store(0, Ordering::Relaxed);
            LIVE.fetch_add(
                self.counts.live.swap(0, Ordering::Relaxed),
                Ordering::Relaxed,
            );
        }
        for class in self.classes.drain(..) {
            give_to_global(class.map_len, class.free);
        }
    }
}

/// Moves up to `most` free stacks of `map_len` from the global pool to `into`.
fn refill_from_global(map_len: usize, into: &mut Vec<RawStack>, most: usize) {
    let mut global = GLOBAL.lock();
    let free = class_of(&mut global, map_len);
    let take = free.len().min(most);
    let start = free.len() - take;
    into.extend(free.drain(start..));
    GLOBAL_POOLED.fetch_sub(take, Ordering::Relaxed);
}

/// Puts `stacks` (all of `map_len`) into the global pool and gives those
/// beyond its cap back to their region.
fn give_to_global(map_len: usize, mut stacks: Vec<RawStack>) {
    {
        let mut global = GLOBAL.lock();
        let free = class_of(&mut global, map_len);
        let room = GLOBAL_POOL_CAP.saturating_sub(free.len()).min(stacks.len());
        let keep = stacks.len() - room;
        free.extend(stacks.drain(keep..));
        GLOBAL_POOLED.fetch_add(room, Ordering::Relaxed);
    }
    retire(stacks);
}

/// Length of the slot that holds a stack of at least `size` usable bytes:
/// the guard page plus the usable bytes, the largest stack colour and the
/// header, rounded up to pages.
/// This length is also the pool's size class.
fn mapping_len(size: usize) -> io::Result<usize> {
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
fn page_size() -> usize {
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
fn map_noreserve(len: usize) -> io::Result<usize> {
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

/// Takes a stack of at least `size` usable bytes from the pool, or prepares
/// a new one in a region of address space (reserving a region when none has
/// room). `size` is rounded up to whole pages (with room for a small
/// header); stacks are pooled per rounded size. The first call on a thread
/// also prepares it to report overflows (see [`PooledStack`]).
///
/// # Errors
/// `InvalidInput` if `size` cannot be mapped at all; the OS error of mmap,
/// madvise or mprotect (typically `ENOMEM`) with a message saying which
/// resource ran out and what to change: the `vm.max_map_count` limit of
/// kernel mappings (with [`StackGuard::Mprotect`] each stack is two), the
/// address-space limit (`ulimit -v`), the commit limit
/// (`vm.overcommit_memory = 2`), or virtual address space. The pool and the
/// stacks already handed out are unaffected. Memory itself is committed
/// when a stack's pages are first touched, so a process that touches more
/// than the machine has meets the kernel's OOM killer there, as with any
/// lazily committed memory; `acquire` cannot see that coming.
///
/// ```
/// let stack = greenlet::coroutine::acquire_stack(100_000)?;
/// assert!(stack.size() >= 100_000);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn acquire(size: usize) -> io::Result<PooledStack> {
    let map_len = size_class(size)?;
    if let Some(raw) = take_hot(map_len) {
        return Ok(PooledStack { raw });
    }
    acquire_cold(map_len)
}

/// [`acquire`] when the hot stack does not fit.
#[inline(never)]
fn acquire_cold(map_len: usize) -> io::Result<PooledStack> {
    // Counted live in the cache when it hands the stack out.
    let cached = CACHE.try_with(|cache| match cache.try_borrow_mut() {
        Ok(mut cache) => {
            let raw = cache.take(map_len);
            if raw.is_some() {
                cache.add_live(1);
            }
            Some(raw)
        }
        Err(_) => None,
    });
    let raw = match cached {
        Ok(Some(Some(raw))) => raw,
        // The thread's cache and the global pool have none of this size.
        Ok(Some(None)) => {
            let raw = create(map_len)?;
            count_live(1);
            raw
        }
        // The thread is exiting (its cache is gone) or, impossibly, its
        // cache is in use: go to the global pool directly.
        Ok(None) | Err(_) => {
            overflow::install_handler();
            let mut from_global = Vec::with_capacity(1);
            refill_from_global(map_len, &mut from_global, 1);
            let raw = match from_global.pop() {
                Some(raw) => raw,
                None => create(map_len)?,
            };
            count_live(1);
            raw
        }
    };
    Ok(PooledStack { raw })
}

/// Count stacks taken (`delta > 0`) or released: in this thread's cache
/// when it is there, else in the global count.
fn count_live(delta: isize) {
    let counted = CACHE.try_with(|cache| match cache.try_borrow() {
        Ok(cache) => {
            cache.add_live(delta);
            true
        }
        Err(_) => false,
    });
    if counted != Ok(true) {
        LIVE.fetch_add(delta, Ordering::Relaxed);
    }
}

/// Returns a released stack to this thread's cache (or, while the thread is
/// exiting, to the global pool).
fn release(raw: RawStack) {
    let header = raw.header();
    header.label_len.store(0, Ordering::Relaxed);
    header.default_id.store(0, Ordering::Relaxed);
    if let Some(counts) = thread_counts() {
        if HOT.get().is_null() {
            HOT.set(raw.0.as_ptr());
            counts.add(1, -1);
            return;
        }
    }
    release_cold(raw);
}

/// [`release`] when the hot place is taken (or the cache is gone).
#[inline(never)]
fn release_cold(raw: RawStack) {
    let mut spare = Some(raw);
    let _ = CACHE.try_with(|cache| {
        if let (Ok(mut cache), Some(raw)) = (cache.try_borrow_mut(), spare.take()) {
            cache.put(raw);
            cache.add_live(-1);
        }
    });
    if let Some(raw) = spare {
        LIVE.fetch_sub(1, Ordering::Relaxed);
        give_to_global(raw.header().map_len, vec![raw]);
    }
}

/// Whether a thread's greenlet state keeps a stack with its parked
/// coroutine for its next greenlet start (see `coroutine::kept`): 1 while
/// it does, else 0. That stack was taken and not released, so it counts as
/// live where it was taken (a thread cache's count, or the global one);
/// [`stack_stats`] counts it as pooled instead. One store per keep and per
/// take through the state's own pointer (no thread-local look-up), and
/// independent of the thread's stack cache, which may go first at thread
/// exit.
pub(crate) struct KeptCount(Arc<AtomicUsize>);

/// Every thread's [`KeptCount`], for [`stack_stats`].
static KEPT: Mutex<Vec<Arc<AtomicUsize>>> = Mutex::new(Vec::new());

impl KeptCount {
    /// A new flag (0: nothing kept), counted by [`stack_stats`] until it is
    /// dropped.
    pub(crate) fn register() -> KeptCount {
        let flag = Arc::new(AtomicUsize::new(0));
        KEPT.lock().push(Arc::clone(&flag));
        KeptCount(flag)
    }

    /// A stack is kept (`true`) or no longer (`false`); only the owning
    /// thread writes it.
    #[inline(always)]
    pub(crate) fn set(&self, kept: bool) {
        self.0.store(usize::from(kept), Ordering::Relaxed);
    }
}

impl Drop for KeptCount {
    fn drop(&mut self) {
        debug_assert_eq!(
            self.0.load(Ordering::Relaxed),
            0,
            "a kept stack is released first"
        );
        KEPT.lock().retain(|flag| !Arc::ptr_eq(flag, &self.0));
    }
}

/// The initial stack pointer of the stack whose header is at `header`:
/// its colour, 0 to [`STACK_COLOURS`] - 1 cache lines that vary from slot to
/// slot, below the header. Without it every stack's top frames sit at the
/// same offset within their page, so in the same few sets of a cache indexed
/// by that offset: with the L2 simulated so
/// (`benches/net-peers/cachesim.sh`, `LL=1310720,320,64`), an echo server's
/// 500 connections missed it 16 times per request (tokio's 0.2), with the
/// colour about 0. The colour is a Fibonacci hash of the header's address
/// over 4 KiB, so consecutive slots get unrelated colours. Computed once,
/// when the slot's header is made (`Header::top`): corosensei asks for the
/// base on every resume (it keeps the link to the resumer there).
fn coloured_top(header: usize) -> StackPointer {
    let hash = ((header >> 12) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let colour = ((hash >> 32) * STACK_COLOURS) >> 32;
    StackPointer::new(header - colour as usize * CACHE_LINE).expect("stack tops are not null")
}

/// Prepares a new stack in a slot of `map_len` bytes: guard page, usable
/// area, header.
fn create(map_len: usize) -> io::Result<RawStack> {
    let slot = region::carve(map_len)?;
    let start = slot.start;
    let guard_end = start + page_size();
    let header = (start + map_len - std::mem::size_of::<Header>()) as *mut Header;
    let valgrind_id = valgrind::register(guard_end, start + map_len - 1);
    // SAFETY: `header` is inside the writable part of the slot, aligned to
    // 64 (the slot is page-aligned, its length a multiple of the page and
    // the header's size a multiple of 64), and nothing else refers to it yet.
    unsafe {
        header.write(Header {
            map_start: start,
            map_len,
            region: slot.region,
            guard_end,
            top: coloured_top(header as usize),
            valgrind_id,
            label_len: AtomicUsize::new(0),
            label: UnsafeCell::new([0; LABEL_CAPACITY]),
            default_id: AtomicU64::new(0),
        });
    }
    CREATED.fetch_add(1, Ordering::Relaxed);
    Ok(RawStack(
        NonNull::new(header).expect("slot addresses are not null"),
    ))
}

/// Gives free stacks back to their regions (which discard their pages).
fn retire(stacks: Vec<RawStack>) {
    if stacks.is_empty() {
        return;
    }
    let count = stacks.len();
    let mut slots: Vec<region::Slot> = stacks
        .into_iter()
        .map(|raw| {
            let header = raw.header();
            valgrind::deregister(header.valgrind_id);
            region::Slot {
                start: header.map_start,
                len: header.map_len,
                region: header.region,
            }
        })
        .collect();
    // The headers are forgotten from here on: the stacks were free (owned
    // by the caller, which gave them up), so no coroutine runs on them.
    region::give_back(&mut slots);
    DESTROYED.fetch_add(count as u64, Ordering::Relaxed);
}
