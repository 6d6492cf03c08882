//! Unit tests of the stack pool, its regions, guards and labels (overflow
//! reporting has `overflow_tests.rs`). Tests that look
//! at pool or region contents use a size class of their own (see
//! `OWN_CLASS_SIZES`), so that tests running in parallel cannot disturb
//! them; process-wide counters are only checked with bounds that other
//! threads cannot break.

use std::cell::RefCell;
use std::io;

use corosensei::stack::{Stack, StackPointer, MIN_STACK_SIZE};
use corosensei::Coroutine;
use parking_lot::Mutex;

use super::pool::{
    class_of, BURST, CACHE, CREATE_BATCH, GLOBAL, GLOBAL_POOL_CAP, LAST_CLASS, THREAD_CACHE_CAP,
};
use super::size::mapping_len;
use super::*;

/// A pooled stack as corosensei's `Stack`, for these tests' raw coroutines.
pub(super) struct OnPool(pub(super) PooledStack);

// SAFETY: `base` is 64-aligned (so to corosensei's 16) and `limit` is the
// start of the guard page below the usable area (`PooledStack::base` and
// `limit`); both stay valid while the `PooledStack` exists.
unsafe impl Stack for OnPool {
    fn base(&self) -> StackPointer {
        StackPointer::new(self.0.base()).expect("a stack's base is not null")
    }
    fn limit(&self) -> StackPointer {
        StackPointer::new(self.0.limit()).expect("a stack's limit is not null")
    }
}

fn page() -> usize {
    page_size()
}

/// Held by the tests that look at the global pool or empty it, so that a
/// trim in one cannot empty what another is about to count.
static GLOBAL_POOL_TESTS: Mutex<()> = Mutex::new(());

/// Sizes of the tests that count or place the stacks of one size class in
/// the global pool or in a region. Each is in a size class (`mapping_len`)
/// that no other test in the process asks for: the lib tests run in
/// parallel, and another thread's first acquire of the class would refill
/// its cache from the global pool with up to `THREAD_CACHE_CAP / 2` of its
/// stacks, or carve from its region, and that thread's exit would give its
/// cached stacks to the global pool. (The pool-cap test once read 992 stacks,
/// one refill short of 1,024, because it used 17 pages and the size-class
/// test's 70,000 bytes fell in the same class.) Checked by
/// `the_tests_that_look_into_a_class_have_it_to_themselves`.
const CARVED_SIDE_BY_SIDE: usize = 43 * 4096;
const GUARDED_AHEAD: usize = 47 * 4096;
const TOPS_POPULATED: usize = 53 * 4096;
const PAGES_TRIMMED: usize = 49 * 4096;
const POOL_CAPPED: usize = 15 * 4096;
const RELEASED_AT_EXIT: usize = 33 * 4096;
const POOLS_TRIMMED: usize = 41 * 4096;
const MADE_IN_A_BURST: usize = 59 * 4096;
const OWN_CLASS_SIZES: [usize; 8] = [
    CARVED_SIDE_BY_SIDE,
    GUARDED_AHEAD,
    TOPS_POPULATED,
    PAGES_TRIMMED,
    POOL_CAPPED,
    RELEASED_AT_EXIT,
    POOLS_TRIMMED,
    MADE_IN_A_BURST,
];
/// Every other size the lib tests ask the pool for: this module's other
/// tests, and the default and 64 KiB stacks of the greenlet and hub tests.
const SHARED_CLASS_SIZES: [usize; 18] = [
    0,
    1,
    4096,
    100_000,
    70_000,
    DEFAULT_STACK_SIZE,
    64 * 1024,
    20 * 4096,
    7 * 4096 + 123,
    9 * 4096,
    11 * 4096,
    13 * 4096,
    19 * 4096,
    23 * 4096,
    29 * 4096,
    31 * 4096,
    37 * 4096,
    5 * 4096 + 321,
];

#[test]
fn the_tests_that_look_into_a_class_have_it_to_themselves() {
    let class = |size| mapping_len(size).expect("valid size");
    for (index, &own) in OWN_CLASS_SIZES.iter().enumerate() {
        let others = OWN_CLASS_SIZES[index + 1..]
            .iter()
            .chain(&SHARED_CLASS_SIZES);
        for &other in others {
            assert_ne!(class(own), class(other), "sizes {own} and {other}");
        }
    }
}

/// Free stacks of `map_len` in the global pool.
fn global_len(map_len: usize) -> usize {
    GLOBAL
        .lock()
        .iter()
        .find(|c| c.map_len == map_len)
        .map_or(0, |c| c.free.len())
}

#[test]
fn acquire_gives_at_least_the_size_with_sound_bounds() {
    for size in [0, 1, 4096, 100_000, DEFAULT_STACK_SIZE] {
        let stack = acquire(size).expect("acquire");
        let (base, limit) = (stack.base(), stack.limit());
        assert!(
            stack.size() >= size.max(MIN_STACK_SIZE),
            "size {size}: got {}",
            stack.size()
        );
        assert_eq!(base % corosensei::stack::STACK_ALIGNMENT, 0);
        assert_eq!(limit % page(), 0);
        // One guard page below the usable area, and above it the colour
        // that is not part of `size()` (the same for every stack of a size).
        let colour = base - limit - page() - stack.size();
        assert!(
            colour < STACK_COLOURS as usize * CACHE_LINE,
            "colour {colour}"
        );
        // The whole usable area is writable: its lowest and highest bytes.
        let lowest = (limit + page()) as *mut u8;
        let highest = (base - 1) as *mut u8;
        // SAFETY: both addresses are inside the usable area of `stack`,
        // which nothing else uses.
        unsafe {
            lowest.write_volatile(0xa5);
            highest.write_volatile(0x5a);
            assert_eq!(lowest.read_volatile(), 0xa5);
            assert_eq!(highest.read_volatile(), 0x5a);
        }
    }
}

#[test]
fn the_size_class_remembered_per_thread_is_the_one_of_the_size_asked() {
    std::thread::spawn(|| {
        for size in [0, 0, 70_000, 70_000, 1, 70_000, 0] {
            let stack = acquire(size).expect("acquire");
            let map_len = mapping_len(size).expect("valid size");
            assert_eq!(stack.raw.header().map_len, map_len, "size {size}");
            assert_eq!(LAST_CLASS.get(), (size, map_len));
        }
        assert!(
            acquire(usize::MAX).is_err(),
            "an invalid size is never taken as the last"
        );
        assert_eq!(LAST_CLASS.get().0, 0);
    })
    .join()
    .unwrap();
}

/// Whether the byte at `address` can be read, asked of the kernel
/// (`process_vm_readv` on this process fails with EFAULT on a guard page or
/// an unmapped one, without a signal).
fn readable(address: usize) -> bool {
    let mut byte = 0u8;
    let local = libc::iovec {
        iov_base: (&mut byte as *mut u8).cast(),
        iov_len: 1,
    };
    let remote = libc::iovec {
        iov_base: address as *mut libc::c_void,
        iov_len: 1,
    };
    // SAFETY: reads one byte of this process into `byte`, which we own; the
    // kernel checks `address` itself.
    unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) == 1 }
}

/// The number of lines of /proc/self/maps that overlap `[start, end)`.
fn mappings_over(start: usize, end: usize) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
    maps.lines()
        .filter(|line| {
            let range = line.split_whitespace().next().unwrap_or("");
            let (low, high) = range.split_once('-').unwrap_or(("0", "0"));
            let low = usize::from_str_radix(low, 16).unwrap_or(0);
            let high = usize::from_str_radix(high, 16).unwrap_or(0);
            low < end && high > start
        })
        .count()
}

#[test]
fn the_guard_page_is_inaccessible_and_the_rest_writable() {
    let stack = acquire(20 * 4096).expect("acquire");
    let limit = stack.limit();
    assert!(!readable(limit), "the guard page faults");
    assert!(!readable(limit + page() - 1), "all of it");
    assert!(readable(limit + page()), "the usable area starts above it");
    assert!(readable(stack.base() - 1));
}

#[test]
fn both_guard_strategies_fault_and_only_mprotect_splits_the_mapping() {
    for strategy in [StackGuard::GuardRegion, StackGuard::Mprotect] {
        if strategy == StackGuard::GuardRegion && guard::stack_guard() != StackGuard::GuardRegion {
            continue; // a kernel before 6.13, or GREENLET_STACK_GUARD=mprotect
        }
        let len = 4 * page();
        let start = map_noreserve(len).expect("map");
        assert_eq!(mappings_over(start, start + len), 1);
        guard::install(strategy, start + page())
            .map_err(|(error, _)| error)
            .expect("install the guard");
        assert!(readable(start) && !readable(start + page()) && readable(start + 2 * page()));
        let lines = mappings_over(start, start + len);
        match strategy {
            StackGuard::GuardRegion => assert_eq!(lines, 1, "a guard region splits nothing"),
            _ => assert_eq!(
                lines, 3,
                "a PROT_NONE page in the middle is a mapping of its own"
            ),
        }
        // SAFETY: unmapping the mapping made above, which nothing else uses.
        assert_eq!(unsafe { libc::munmap(start as *mut libc::c_void, len) }, 0);
    }
}

#[test]
fn stacks_of_one_size_are_carved_side_by_side_from_one_region() {
    let size = CARVED_SIDE_BY_SIDE;
    let map_len = mapping_len(size).expect("valid size");
    let stacks: Vec<PooledStack> = (0..region::FIRST_REGION_SLOTS)
        .map(|_| acquire(size).expect("acquire"))
        .collect();
    let first = stacks[0].raw.header();
    for (index, stack) in stacks.iter().enumerate() {
        let header = stack.raw.header();
        assert_eq!(
            header.region, first.region,
            "one region for the first slots"
        );
        assert_eq!(header.map_start, first.map_start + index * map_len);
        assert!(!readable(header.map_start), "each slot has its guard page");
        assert!(readable(header.guard_end));
    }
    if guard::stack_guard() == StackGuard::GuardRegion {
        let end = first.map_start + stacks.len() * map_len;
        assert_eq!(
            mappings_over(first.map_start, end),
            1,
            "{} guarded stacks, one kernel mapping",
            stacks.len()
        );
    }
}

#[test]
fn guard_regions_are_installed_ahead_in_growing_batches() {
    let size = GUARDED_AHEAD;
    let map_len = mapping_len(size).expect("valid size");
    let stacks: Vec<PooledStack> = (0..9).map(|_| acquire(size).expect("acquire")).collect();
    let first = stacks[0].raw.header().map_start;
    for (index, stack) in stacks.iter().enumerate() {
        let start = stack.raw.header().map_start;
        assert_eq!(
            start,
            first + index * map_len,
            "a fresh region's slots in order"
        );
        assert!(
            !readable(start) && readable(start + page()),
            "slot {index}'s guard"
        );
    }
    if guard::stack_guard() != StackGuard::GuardRegion {
        return; // mprotect guards are made one at a time, when carved
    }
    // Carving slot k (k = 0, 1, 2, 4, 8) guards max(k, 1) slots from k on:
    // after nine, slots 0..16 are guarded, the rest of the region is not.
    let guarded = if batch::batching() { 16 } else { 9 };
    for index in 9..guarded {
        assert!(
            !readable(first + index * map_len),
            "slot {index} guarded ahead"
        );
    }
    assert!(
        readable(first + guarded * map_len),
        "slot {guarded} not yet guarded"
    );
}

/// How many of the `pages` pages from `from` (page-aligned, inside a
/// mapped region) are resident.
fn resident_pages(from: usize, pages: usize) -> usize {
    let mut flags = vec![0u8; pages];
    // SAFETY: `from` is page-aligned, the caller keeps the range mapped,
    // and `flags` has one byte per page.
    let done = unsafe {
        libc::mincore(
            from as *mut libc::c_void,
            pages * page(),
            flags.as_mut_ptr(),
        )
    };
    assert_eq!(done, 0, "mincore: {}", io::Error::last_os_error());
    flags.iter().filter(|&&f| f & 1 != 0).count()
}

#[test]
fn the_top_pages_of_slots_guarded_ahead_are_populated_in_the_batch() {
    let size = TOPS_POPULATED;
    let map_len = mapping_len(size).expect("valid size");
    let stacks: Vec<PooledStack> = (0..9).map(|_| acquire(size).expect("acquire")).collect();
    let first = stacks[0].raw.header().map_start;
    let top_of = |slot: usize| first + (slot + 1) * map_len - page();
    for slot in 0..9 {
        assert_eq!(resident_pages(top_of(slot), 1), 1, "slot {slot}'s header");
    }
    if guard::stack_guard() != StackGuard::GuardRegion || !batch::batching() {
        return; // guards (and tops) one at a time, by the first touch
    }
    // As in the guard test above: after nine carves, slots 0..16 are
    // guarded; the uncarved ones among them have their top page already,
    // and nothing below it.
    for slot in 9..16 {
        assert_eq!(resident_pages(top_of(slot), 1), 1, "slot {slot}'s top page");
        assert_eq!(
            resident_pages(top_of(slot) - 8 * page(), 8),
            0,
            "slot {slot}: only the top page"
        );
    }
    assert_eq!(
        resident_pages(top_of(16), 1),
        0,
        "slot 16 is neither guarded nor populated yet"
    );
}

#[test]
fn trimming_discards_the_pages_of_free_stacks_and_unmaps_empty_regions() {
    let _serial = GLOBAL_POOL_TESTS.lock();
    let size = PAGES_TRIMMED;
    let keep = acquire(size).expect("acquire");
    let used = acquire(size).expect("acquire");
    let (start, region_start) = (used.limit(), keep.raw.header().region);
    assert_eq!(used.raw.header().region, region_start, "one region");
    let pages = 16;
    // The region stays mapped while `keep` is out.
    let resident = |from: usize| resident_pages(from, pages);
    let top = used.base() & !(page() - 1);
    let from = top - (pages - 1) * page();
    for at in (from..top + page()).step_by(page()) {
        // SAFETY: inside the usable area of `used`, which nothing else uses.
        unsafe { (at as *mut u8).write_volatile(1) };
    }
    assert_eq!(resident(from), pages, "touched pages are resident");
    drop(used);
    assert_eq!(resident(from), pages, "a pooled stack keeps its pages");
    trim_pool();
    assert_eq!(resident(from), 0, "a trimmed stack gives them back");
    assert!(region::holds(start, mapping_len(size).expect("valid size")));
    drop(keep);
    trim_pool();
    assert!(
        !region::holds(start, mapping_len(size).expect("valid size")),
        "the region is unmapped once none of its stacks is out"
    );
}

#[test]
fn a_released_stack_is_reused_by_its_thread() {
    let size = 7 * 4096 + 123;
    let first = acquire(size).expect("acquire");
    let address = first.limit();
    drop(first);
    let again = acquire(size).expect("acquire");
    assert_eq!(again.limit(), address, "the cached stack comes back");
    let other_class = acquire(9 * 4096).expect("acquire");
    assert_ne!(other_class.limit(), address);
}

/// Stacks of `map_len` in the calling thread's cache.
fn cached_len(map_len: usize) -> usize {
    CACHE.with(|cache| class_of(&mut cache.borrow_mut().classes, map_len).len())
}

#[test]
fn a_thread_prepares_stacks_one_at_a_time_until_a_burst_then_in_batches() {
    std::thread::spawn(|| {
        let map_len = mapping_len(MADE_IN_A_BURST).expect("valid size");
        let take = || acquire(MADE_IN_A_BURST).expect("acquire");
        let mut held: Vec<PooledStack> = (0..BURST).map(|_| take()).collect();
        assert_eq!(cached_len(map_len), 0, "below a burst, only what is used");
        held.push(take());
        assert_eq!(
            cached_len(map_len),
            CREATE_BATCH - 1,
            "in a burst, the rest of a batch waits in the cache"
        );
        let batch: Vec<usize> = (1..CREATE_BATCH)
            .map(|_| {
                held.push(take());
                held.last().expect("just pushed").limit()
            })
            .collect();
        assert_eq!(cached_len(map_len), 0, "the batch is handed out");
        assert!(
            batch.windows(2).all(|w| w[1] == w[0] + map_len),
            "handed out side by side, in address order"
        );
    })
    .join()
    .expect("the burst thread");
}

#[test]
fn stacks_are_pooled_per_size_class() {
    let small = acquire(11 * 4096).expect("acquire");
    let small_size = small.size();
    drop(small);
    let large = acquire(13 * 4096).expect("acquire");
    assert!(
        large.size() >= 13 * 4096,
        "a larger request never gets a smaller pooled stack"
    );
    let small_again = acquire(11 * 4096).expect("acquire");
    assert_eq!(small_again.size(), small_size);
}

#[test]
fn the_pool_is_capped_and_gives_back_the_excess() {
    let _serial = GLOBAL_POOL_TESTS.lock();
    let size = POOL_CAPPED;
    let map_len = mapping_len(size).expect("valid size");
    let count = THREAD_CACHE_CAP + GLOBAL_POOL_CAP + 20;
    let destroyed_before = stack_stats().destroyed;
    // Acquire and release on a thread of our own, whose cache goes to the
    // global pool when it exits.
    std::thread::spawn(move || {
        let stacks: Vec<PooledStack> = (0..count)
            .map(|_| acquire(size).expect("acquire"))
            .collect();
        drop(stacks);
    })
    .join()
    .expect("thread");
    assert_eq!(
        global_len(map_len),
        GLOBAL_POOL_CAP,
        "the global pool keeps at most its cap"
    );
    let destroyed = stack_stats().destroyed - destroyed_before;
    assert!(
        destroyed >= (count - GLOBAL_POOL_CAP) as u64,
        "only {destroyed} given back"
    );
}

#[test]
fn stats_count_live_created_and_pooled_stacks() {
    let size = 19 * 4096;
    let before = stack_stats();
    let stacks: Vec<PooledStack> = (0..3).map(|_| acquire(size).expect("acquire")).collect();
    let holding = stack_stats();
    assert!(holding.live >= 3, "{holding:?}");
    assert!(
        holding.created >= before.created + 3,
        "a new size class needs new mappings"
    );
    drop(stacks);
    let after = stack_stats();
    assert!(
        after.pooled >= 3,
        "released stacks stay in this thread's cache: {after:?}"
    );
    assert!(after.created >= holding.created);
}

#[test]
fn a_stack_dropped_on_another_thread_is_pooled_there() {
    let stack = acquire(23 * 4096).expect("acquire");
    let address = stack.limit();
    let reused = std::thread::spawn(move || {
        drop(stack);
        acquire(23 * 4096).expect("acquire").limit()
    })
    .join()
    .expect("thread");
    assert_eq!(reused, address);
}

#[test]
fn default_greenlet_labels_are_spelled_out_when_read() {
    let stack = acquire(37 * 4096).expect("acquire");
    let mut buffer = [0u8; LABEL_CAPACITY];
    stack.set_default_greenlet_label(7);
    let len = stack.raw.header().read_label(&mut buffer);
    assert_eq!(&buffer[..len], b"'greenlet-7' (id 7)");
    let largest = TASK_LABEL - 1;
    stack.set_default_greenlet_label(largest);
    let len = stack.raw.header().read_label(&mut buffer);
    let expected = format!("'greenlet-{0}' (id {0})", largest);
    assert_eq!(&buffer[..len], expected.as_bytes());
    stack.set_default_task_label(largest, u64::MAX);
    let len = stack.raw.header().read_label(&mut buffer);
    let expected = format!("'task-{}' (id {largest})", u64::MAX);
    assert_eq!(&buffer[..len], expected.as_bytes());
    stack.set_default_task_label(12, 5);
    let len = stack.raw.header().read_label(&mut buffer);
    assert_eq!(&buffer[..len], b"'task-5' (id 12)");

    stack.set_greenlet_label("worker", 8);
    let len = stack.raw.header().read_label(&mut buffer);
    assert_eq!(&buffer[..len], b"'worker' (id 8)", "an explicit label wins");
    stack.set_default_greenlet_label(9);
    let len = stack.raw.header().read_label(&mut buffer);
    assert_eq!(
        &buffer[..len],
        b"'greenlet-9' (id 9)",
        "and is replaced again"
    );

    let address = stack.limit();
    drop(stack);
    let again = acquire(37 * 4096).expect("acquire");
    assert_eq!(again.limit(), address);
    assert_eq!(
        again.raw.header().read_label(&mut buffer),
        0,
        "the default label does not outlive its user"
    );
}

#[test]
fn labels_are_truncated_at_a_char_boundary_and_reset_on_release() {
    let stack = acquire(29 * 4096).expect("acquire");
    let mut buffer = [0u8; LABEL_CAPACITY];
    assert_eq!(
        stack.raw.header().read_label(&mut buffer),
        0,
        "a fresh stack is unlabelled"
    );

    stack.set_label_fmt(format_args!("greenlet #{}", 42));
    let len = stack.raw.header().read_label(&mut buffer);
    assert_eq!(&buffer[..len], b"greenlet #42");

    let long = "é".repeat(100); // 200 bytes, each char 2 bytes
    stack.set_label(&long);
    let len = stack.raw.header().read_label(&mut buffer);
    assert_eq!(len, LABEL_CAPACITY, "96 is a char boundary of 2-byte chars");
    let text = std::str::from_utf8(&buffer[..len]).expect("valid UTF-8");
    assert!(long.starts_with(text));

    stack.set_label(&format!("x{}", "é".repeat(100))); // boundaries are now odd
    let len = stack.raw.header().read_label(&mut buffer);
    assert_eq!(len, LABEL_CAPACITY - 1);
    assert!(std::str::from_utf8(&buffer[..len]).is_ok());

    stack.set_greenlet_label("worker", 7);
    let len = stack.raw.header().read_label(&mut buffer);
    assert_eq!(&buffer[..len], b"'worker' (id 7)");
    stack.set_greenlet_label(&"n".repeat(500), u64::MAX);
    let len = stack.raw.header().read_label(&mut buffer);
    let text = std::str::from_utf8(&buffer[..len]).expect("valid UTF-8");
    assert!(
        text.ends_with(&format!("' (id {})", u64::MAX)),
        "the id survives a long name: {text}"
    );

    let address = stack.limit();
    drop(stack);
    let again = acquire(29 * 4096).expect("acquire");
    assert_eq!(again.limit(), address);
    assert_eq!(
        again.raw.header().read_label(&mut buffer),
        0,
        "the label does not outlive its user"
    );
}

#[test]
fn a_coroutine_can_use_nearly_all_of_its_stack() {
    /// Recurses `depth` times with a 1 KiB frame.
    #[inline(never)]
    fn deep(depth: usize) -> usize {
        let frame = std::hint::black_box([depth as u8; 1024]);
        if depth == 0 {
            return frame[0] as usize;
        }
        deep(depth - 1) + frame[1] as usize
    }
    let stack = acquire(256 * 1024).expect("acquire");
    let depth = stack.size() / 1024 * 3 / 4; // 3/4 of the stack, with slack for frame overhead
    let mut coroutine =
        Coroutine::with_stack(OnPool(stack), move |_: &corosensei::Yielder<(), ()>, ()| {
            deep(depth / 2)
        });
    assert!(coroutine.resume(()).as_return().is_some());
}

#[test]
fn a_too_large_size_is_an_invalid_input_error() {
    let error = acquire(usize::MAX - 10).expect_err("cannot map");
    assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    assert!(error.to_string().contains("too large"), "{error}");
}

#[test]
fn stacks_used_during_thread_exit_end_in_the_global_pool() {
    let _serial = GLOBAL_POOL_TESTS.lock();
    const SIZE: usize = RELEASED_AT_EXIT;
    /// Acquires and releases a stack from its destructor, which runs while
    /// the thread's other thread-locals (the stack cache among them) are
    /// being destroyed.
    struct AtExit(std::sync::mpsc::Sender<io::Result<usize>>);
    impl Drop for AtExit {
        fn drop(&mut self) {
            let result = acquire(SIZE).map(|stack| stack.limit());
            let _ = self.0.send(result);
        }
    }
    thread_local! {
        static AT_EXIT: RefCell<Option<AtExit>> = const { RefCell::new(None) };
    }
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        AT_EXIT.with(|slot| *slot.borrow_mut() = Some(AtExit(sender)));
        drop(acquire(SIZE).expect("acquire")); // creates the cache after AT_EXIT
    })
    .join()
    .expect("thread");
    let limit = receiver
        .recv()
        .expect("destructor ran")
        .expect("acquire at exit");
    let map_len = mapping_len(SIZE).expect("valid size");
    let global = GLOBAL.lock();
    let class = global.iter().find(|c| c.map_len == map_len).expect("class");
    assert_eq!(
        class.free.len(),
        1,
        "one stack of this size, not lost, not doubled"
    );
    assert_eq!(class.free[0].header().map_start, limit);
}

#[test]
fn trimming_gives_back_this_threads_cache_and_the_global_pool() {
    let _serial = GLOBAL_POOL_TESTS.lock();
    let size = POOLS_TRIMMED;
    let map_len = mapping_len(size).expect("valid size");
    let destroyed_before = stack_stats().destroyed;
    // Three stacks into this thread's cache, two into the global pool
    // (released on a thread that exits). Taken before the thread's are
    // released, so that this thread's cache cannot refill from those.
    let stacks: Vec<PooledStack> = (0..3).map(|_| acquire(size).expect("acquire")).collect();
    std::thread::spawn(move || {
        let stacks: Vec<PooledStack> = (0..2).map(|_| acquire(size).expect("acquire")).collect();
        drop(stacks);
    })
    .join()
    .expect("thread");
    drop(stacks);
    assert_eq!(global_len(map_len), 2);
    assert!(trim_pool() >= 5);
    assert_eq!(global_len(map_len), 0);
    let local = CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        class_of(&mut cache.classes, map_len).len()
    });
    assert_eq!(local, 0);
    assert!(stack_stats().destroyed >= destroyed_before + 5);
}

#[test]
fn stack_tops_are_coloured_within_the_header_page() {
    // Not a whole number of pages, rounded up to the next size class.
    let size = 5 * 4096 + 321;
    let stacks: Vec<PooledStack> = (0..256).map(|_| acquire(size).expect("acquire")).collect();
    let mut offsets = std::collections::BTreeSet::new();
    for stack in &stacks {
        let (base, header) = (stack.base(), stack.raw.0.as_ptr() as usize);
        assert!(stack.size() >= size);
        assert_eq!(
            stack.size(),
            stacks[0].size(),
            "one size for one size class"
        );
        assert_eq!(base % CACHE_LINE, 0);
        assert!(header - base < STACK_COLOURS as usize * CACHE_LINE);
        offsets.insert(base % page());
    }
    // 256 stacks over 32 colours: a hash that spreads them hits most.
    assert!(
        offsets.len() >= 16,
        "only {} distinct stack tops within their page",
        offsets.len()
    );
}
