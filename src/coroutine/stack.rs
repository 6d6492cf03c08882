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
//! stack size and stack-pointer type, the crate's diagnostics. This file holds the stack
//! types ([`PooledStack`], its header and labels, and the running-stack finder);
//! submodules: `size` (the default size, slot lengths, page size and
//! mapping), `pool` (the caches and global pool, acquire and release, the
//! counters), `region` (the address space
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
//! and given a header when no pool has a stack of its size (in a burst of
//! new stacks, 16 at a time, the rest waiting in the thread's cache); then handed out
//! and released to the pool, any number of times, keeping its touched pages;
//! given back to its region (header forgotten, pages discarded with
//! `MADV_DONTNEED`, in batches) by
//! [`trim_stack_pool`](crate::coroutine::trim_stack_pool) or when the global pool is full; a region none of
//! whose slots is out is unmapped.

mod batch;
mod exhausted;
mod guard;
mod overflow;
#[cfg(test)]
mod overflow_tests;
mod pool;
mod region;
mod size;
#[cfg(test)]
mod tests;
mod valgrind;
#[cfg(feature = "hub")]
pub(crate) use self::valgrind::running as running_on_valgrind;

pub use self::guard::{set_stack_guard, stack_guard, StackGuard};
pub use self::pool::{acquire, stack_stats, StackStats};
pub(crate) use self::pool::{trim_pool, KeptCount};
pub use self::size::{default_stack_size, set_default_stack_size, DEFAULT_STACK_SIZE};

use self::pool::release;
use self::size::{map_noreserve, page_size};

use std::cell::UnsafeCell;
use std::fmt;
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};
use std::sync::atomic::{compiler_fence, AtomicU64, AtomicUsize, Ordering};

use corosensei::stack::StackPointer;

/// Most bytes of a stack's label kept for the overflow message.
const LABEL_CAPACITY: usize = 96;

/// Colours of stack tops: so many cache lines of offsets below the header
/// (see `coloured_top`). 32 lines (2 KiB) keep a parked hub echo
/// handler (about 1.9 KiB of frames) in the header's page; 48 did not (its
/// idle RSS per connection rose from 5.0 to 6.4 KiB).
const STACK_COLOURS: u64 = 32;
/// Bytes of one cache line, the step between two colours.
const CACHE_LINE: usize = 64;

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
    /// The initial stack pointer, coloured (see `coloured_top` in `pool.rs`).
    top: StackPointer,
    /// Id valgrind gave the stack when it was registered (0 outside valgrind).
    valgrind_id: usize,
    /// Number of valid bytes in `label`. Written last, after the bytes.
    label_len: AtomicUsize,
    /// UTF-8 label (a greenlet's name or id) for the overflow message: its
    /// first `label_len` bytes are written, the rest is never read, so a
    /// new header leaves it unwritten (no zeroing of it per stack).
    label: UnsafeCell<[MaybeUninit<u8>; LABEL_CAPACITY]>,
    /// When `label_len` is 0 and this is not: the stack belongs to the
    /// greenlet of this id (without [`TASK_LABEL`]), labelled
    /// `'greenlet-<id>' (id <id>)`, or, with [`TASK_LABEL`] set, the one of
    /// the hub's green thread `default_task`, labelled
    /// `'task-<task>' (id <id>)`. The label is spelled out only if the
    /// overflow message needs it (a greenlet start then costs two or three
    /// stores instead of writing the label).
    default_id: AtomicU64,
    /// The green thread's id when `default_id` has [`TASK_LABEL`]; read
    /// only then.
    default_task: AtomicU64,
}

/// The bit of `Header::default_id` that marks a hub green thread's stack
/// (greenlet ids are counted from 1 and never reach it).
const TASK_LABEL: u64 = 1 << 63;

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
            if id & TASK_LABEL != 0 {
                let task = self.default_task.load(Ordering::Relaxed);
                return default_label(b"'task-", task, id & !TASK_LABEL, out);
            }
            if id != 0 {
                return default_label(b"'greenlet-", id, id, out);
            }
        }
        // SAFETY: `label` is inside the header, which is mapped while the
        // stack exists; it is written only by `LabelWriter` on the thread
        // that owns the `PooledStack` (which is not `Sync`), and `len` bytes
        // were complete before `label_len` was stored, so the bytes copied
        // are initialised.
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
        debug_assert!(id & TASK_LABEL == 0, "greenlet ids stay below 2^63");
        let header = self.raw.header();
        header.label_len.store(0, Ordering::Relaxed);
        header.default_id.store(id, Ordering::Relaxed);
    }

    /// Labels the stack as the one of greenlet `id`, which runs the hub's
    /// unnamed green thread `task`: the overflow message then names it
    /// `'task-<task>' (id <id>)`, as the greenlet's own name reads, spelled
    /// out only if an overflow happens (three stores).
    #[inline]
    pub(crate) fn set_default_task_label(&self, id: u64, task: u64) {
        let header = self.raw.header();
        header.label_len.store(0, Ordering::Relaxed);
        header.default_task.store(task, Ordering::Relaxed);
        header.default_id.store(id | TASK_LABEL, Ordering::Relaxed);
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

/// Writes `<prefix><number>' (id <id>)` (at most 57 bytes for the prefixes
/// `'greenlet-` and `'task-`) into `out`, without allocating (it runs in the
/// overflow handler); returns its length.
fn default_label(prefix: &[u8], number: u64, id: u64, out: &mut [u8; LABEL_CAPACITY]) -> usize {
    let (mut number_buf, mut id_buf) = ([0u8; 20], [0u8; 20]);
    let number = decimal(number, &mut number_buf);
    let id = decimal(id, &mut id_buf);
    let mut len = 0;
    for part in [prefix, number, b"' (id ", id, b")"] {
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
