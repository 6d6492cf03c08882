//! The pool that recycles stacks: a per-thread cache (its last released
//! stack in a thread-local slot of its own, for the next acquire) in front of
//! a global free list, capped so that stacks beyond it go back to their
//! region; acquiring and releasing a stack, making new ones (one at a time,
//! or a batch in a burst: [`BURST`]), the counts of
//! the stack a thread's greenlet state keeps ([`KeptCount`]) and the
//! counters ([`stack_stats`]).
//!
//! Uses the stack types of the parent module, the sizes of `size.rs`, the
//! regions of `region.rs` and the valgrind registration.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::io;
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicIsize, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use corosensei::stack::StackPointer;
use parking_lot::Mutex;

use super::size::{mapping_len, page_size};
use super::{
    overflow, region, valgrind, Header, PooledStack, RawStack, CACHE_LINE, LABEL_CAPACITY,
    STACK_COLOURS,
};

/// Most free stacks of one size a thread keeps for itself. When full, half of
/// them move to the global pool.
pub(super) const THREAD_CACHE_CAP: usize = 64;
/// Most free stacks of one size the global pool keeps; beyond it a released
/// stack goes back to its region, returning its memory to the system.
pub(super) const GLOBAL_POOL_CAP: usize = 1024;

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
pub(super) static GLOBAL: Mutex<Vec<SizeClass>> = Mutex::new(Vec::new());
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
pub(super) struct SizeClass {
    pub(super) map_len: usize,
    pub(super) free: Vec<RawStack>,
}

/// Returns the free list for `map_len` in `classes`, creating it if needed.
pub(super) fn class_of(classes: &mut Vec<SizeClass>, map_len: usize) -> &mut Vec<RawStack> {
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
pub(super) struct ThreadCache {
    pub(super) classes: Vec<SizeClass>,
    /// `pooled`: the number of stacks in `classes`, plus the thread's hot
    /// stack (`HOT`) if it has one.
    counts: Arc<CacheCounts>,
    /// Stacks prepared since a stack last came back to the cache (released
    /// into it, or refilled from the global pool): see [`BURST`].
    made_in_a_row: usize,
    /// Dropped last: the alternate signal stack this thread got from us.
    _alt_stack: overflow::AltStack,
}

thread_local! {
    pub(super) static CACHE: RefCell<ThreadCache> = RefCell::new(ThreadCache::new());
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
    pub(super) static LAST_CLASS: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
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
    /// Add to the count of free stacks in the cache (only its thread writes
    /// it: a load and a store).
    #[inline]
    fn add_pooled(&self, delta: isize) {
        let now = self.pooled.load(Ordering::Relaxed);
        self.pooled
            .store(now.wrapping_add_signed(delta), Ordering::Relaxed);
    }

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
            made_in_a_row: 0,
            _alt_stack: overflow::AltStack::ensure(),
        }
    }

    fn add_live(&self, delta: isize) {
        self.counts.add(0, delta);
    }

    /// A free stack of `map_len` from the cache, refilled from the global
    /// pool when empty, else a new one (with a few more kept in a burst, see
    /// [`BURST`]); counted live.
    fn take_or_create(&mut self, map_len: usize) -> io::Result<RawStack> {
        let free = class_of(&mut self.classes, map_len);
        if free.is_empty() {
            refill_from_global(map_len, free, THREAD_CACHE_CAP / 2);
            let refilled = free.len();
            if refilled > 0 {
                self.made_in_a_row = 0;
            }
            self.counts.add_pooled(refilled as isize);
        }
        let raw = match free.pop() {
            Some(raw) => {
                self.counts.add_pooled(-1);
                raw
            }
            None => {
                let more = if self.made_in_a_row >= BURST {
                    CREATE_BATCH - 1
                } else {
                    0
                };
                let (raw, extra) = create(map_len, more, free)?;
                self.made_in_a_row += 1 + extra;
                self.counts.add_pooled(extra as isize);
                raw
            }
        };
        self.add_live(1);
        Ok(raw)
    }

    fn put(&mut self, raw: RawStack) {
        self.made_in_a_row = 0;
        let map_len = raw.header().map_len;
        let free = class_of(&mut self.classes, map_len);
        if free.len() >= THREAD_CACHE_CAP {
            give_to_global(map_len, free.drain(..THREAD_CACHE_CAP / 2));
            self.counts.add_pooled(-((THREAD_CACHE_CAP / 2) as isize));
        }
        free.push(raw);
        self.counts.add_pooled(1);
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
/// beyond its cap back to their region. Out of line: a release spills
/// once in [`THREAD_CACHE_CAP`] / 2.
#[inline(never)]
fn give_to_global(map_len: usize, stacks: impl IntoIterator<Item = RawStack>) {
    let mut stacks = stacks.into_iter();
    {
        let mut global = GLOBAL.lock();
        let free = class_of(&mut global, map_len);
        let before = free.len();
        free.extend(stacks.by_ref().take(GLOBAL_POOL_CAP.saturating_sub(before)));
        GLOBAL_POOLED.fetch_add(free.len() - before, Ordering::Relaxed);
    }
    retire(stacks);
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
/// kernel mappings (with [`StackGuard::Mprotect`](super::StackGuard::Mprotect) each stack is two), the
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
        Ok(mut cache) => Some(cache.take_or_create(map_len)),
        Err(_) => None,
    });
    let raw = match cached {
        Ok(Some(raw)) => raw?,
        // The thread is exiting (its cache is gone) or, impossibly, its
        // cache is in use: go to the global pool directly.
        Ok(None) | Err(_) => {
            overflow::install_handler();
            let mut from_global = Vec::with_capacity(1);
            refill_from_global(map_len, &mut from_global, 1);
            let raw = match from_global.pop() {
                Some(raw) => raw,
                None => {
                    let (raw, extra) = create(map_len, 0, &mut from_global)?;
                    // No cache to keep the others in: back to the pool.
                    if extra > 0 {
                        give_to_global(map_len, from_global);
                    }
                    raw
                }
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
pub(super) fn release(raw: RawStack) {
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
        give_to_global(raw.header().map_len, [raw]);
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

/// Stacks prepared together in a burst (see [`BURST`]): one lock of the
/// regions and one look for the size's region serve them all, and the rest
/// wait in the thread's cache for its next acquires (a burst of new green
/// threads takes a stack each). More keeps more prepared stacks unused
/// after a burst (their address space, and the top page the region
/// populated for each); fewer pays the look and the lock more often
/// (`hub_hot_loops --op sleepers`: 74 instructions per sleeper under
/// callgrind with 16 against 1). Re-measure after changing it: instructions
/// per sleeper of that op under callgrind (`cgh.sh`).
pub(super) const CREATE_BATCH: usize = 16;

/// Stacks a thread prepares one at a time, its cache and the global pool
/// having none, before it prepares [`CREATE_BATCH`] at once: a thread that
/// starts a few greenlets at a time makes exactly the stacks it uses, one
/// that starts more in a row than this is in a burst.
pub(super) const BURST: usize = 64;

/// Prepares a new stack in a slot of `map_len` bytes (guard page, usable
/// area, header) and returns it, with up to `more` (at most
/// [`CREATE_BATCH`] - 1) more pushed onto `spare` (the lowest address last,
/// so that a list popped from its end hands them out in address order);
/// how many it pushed.
fn create(map_len: usize, more: usize, spare: &mut Vec<RawStack>) -> io::Result<(RawStack, usize)> {
    let mut slots = [region::EMPTY_SLOT; CREATE_BATCH - 1];
    let more = more.min(slots.len());
    let (first, extra) = region::carve_many(map_len, &mut slots[..more])?;
    let more = &slots[..extra];
    spare.extend(more.iter().rev().map(|&slot| header_of(slot)));
    Ok((header_of(first), extra))
}

/// Writes the header of a slot just carved, whose pages hold nothing yet.
fn header_of(slot: region::Slot) -> RawStack {
    let start = slot.start;
    let map_len = slot.len;
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
            label: UnsafeCell::new([MaybeUninit::uninit(); LABEL_CAPACITY]),
            default_id: AtomicU64::new(0),
            default_task: AtomicU64::new(0),
        });
    }
    CREATED.fetch_add(1, Ordering::Relaxed);
    RawStack(NonNull::new(header).expect("slot addresses are not null"))
}

/// Gives free stacks back to their regions (which discard their pages), in
/// chunks of [`region::GIVE_BACK_MOST`] (without allocating).
fn retire(stacks: impl IntoIterator<Item = RawStack>) {
    let mut slots = [region::EMPTY_SLOT; region::GIVE_BACK_MOST];
    let mut count = 0;
    for raw in stacks {
        let header = raw.header();
        valgrind::deregister(header.valgrind_id);
        slots[count] = region::Slot {
            start: header.map_start,
            len: header.map_len,
            region: header.region,
        };
        count += 1;
        if count == slots.len() {
            give_back(&mut slots[..count]);
            count = 0;
        }
    }
    if count > 0 {
        give_back(&mut slots[..count]);
    }
}

/// [`region::give_back`], counted. The headers are forgotten from here on:
/// the stacks were free (owned by the caller, which gave them up), so no
/// coroutine runs on them.
fn give_back(slots: &mut [region::Slot]) {
    region::give_back(slots);
    DESTROYED.fetch_add(slots.len() as u64, Ordering::Relaxed);
}
