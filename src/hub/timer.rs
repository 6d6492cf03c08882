//! A worker's timers: a hierarchical timing wheel of (deadline, task)
//! entries.
//!
//! Time is counted in ticks of [`TICK`] (1 ms) from an origin (the
//! timers' creation). The wheel has [`LEVELS`] levels of 64 slots: a slot
//! of level `l` holds the entries whose deadline tick lies in one span of
//! 64^`l` ticks, and the level an entry goes to is the highest base-64
//! digit in which its tick differs from `elapsed`, the tick up to which
//! everything has fired. So arming is O(1) (a few shifts and a push onto a
//! slot's list), and so is expiry per entry: an entry moves down a level
//! at most [`LEVELS`] − 1 times (when the wheel's time reaches its slot,
//! the slot's entries are placed again, one level lower or more) and
//! fires from level 0. The wheel spans 64^6 ticks (about 2.2 years); a
//! farther deadline waits on a list of its own that is placed again each
//! time the wheel's time crosses a multiple of that span, so a deadline
//! up to [`MAX_TICK`] ticks (about 142,000 years) away is kept as it is,
//! and a farther one as one at that distance.
//! A slot's occupancy is a bit in a word per level, so the next slot to
//! visit is found with a `trailing_zeros` per level.
//!
//! Resolution: an entry fires at the first expiry whose clock reading lies
//! in a later tick than its deadline, that is at the first scheduling
//! point at or after the end of the millisecond (counted from the origin)
//! its deadline falls in: never early, late by less than [`TICK`] plus the
//! time to that scheduling point (on an idle worker, its sleep in the
//! poller, whose timeout is in whole milliseconds). `sleep` and `timeout`
//! therefore last at least what they ask. A deadline already passed when
//! it is armed fires at the next expiry.
//!
//! Order: the due entries are woken in deadline order, equal deadlines
//! first armed, first woken. (A slot's list keeps arming order, entries
//! moved down a level keep theirs and come before anything armed into
//! the lower slot afterwards; the entries of the one slot that fires are
//! sorted by deadline, stably, when they are not in order already.)
//!
//! Cancellation: [`Timers::arm`] returns a [`TimerKey`] (the entry's
//! index in the timers' slab and the generation of that slab slot), and
//! the park that armed it hands it to [`Timers::cancel`] when it returns,
//! whatever woke it: O(1), a doubly linked list unlink, and the entry's
//! reference to its task is dropped at once. A fired or cancelled entry's
//! slot gets a new generation, so a key that outlived its entry (the
//! timer fired, or the timers were cleared) cancels nothing. As a second
//! guard, an entry keeps the task's `park_seq` of the park that armed it
//! and wakes nothing if that park is over (it never wakes a later park,
//! nor a task record reused for another green thread: an entry holds a
//! reference to its task, so the task pool cannot reuse the record while
//! an entry lives).
//!
//! The timers are per worker, touched only by its own thread, so they
//! need no lock. Their slab keeps the most entries it has held at once
//! (64 bytes each) until the worker ends.
//!
//! Owns: [`Timers`], [`TimerKey`] and the [`Parked`] view of what they
//! hold. Uses the task's `park_seq`.

use std::num::NonZeroU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::task_header::Task;

/// The wheel's tick: the resolution of every deadline on the hub. A
/// shorter tick makes timers fire closer to their deadlines on a busy
/// worker and moves entries down more levels (more work per entry for
/// the same deadlines); the poller's sleep is in whole milliseconds
/// anyway. Re-measure with `benches/peers/run.sh hub` (the sleepers) and
/// the tests of `tests/hub/time.rs`.
pub(crate) const TICK: Duration = Duration::from_millis(1);

/// Ticks per second (for turning a `Duration` into ticks).
const TICKS_PER_SEC: u64 = 1_000_000_000 / TICK.as_nanos() as u64;
/// The farthest tick kept (2^52 ms, about 142,000 years from the timers'
/// creation): a deadline beyond it is kept as one at it. The clamp keeps
/// every tick's instant representable.
const MAX_TICK: u64 = 1 << 52;

/// Bits of a slot index: 64 slots per level.
const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;
const SLOT_MASK: u64 = SLOTS as u64 - 1;
/// Levels of the wheel: it spans 64^6 ticks.
const LEVELS: usize = 6;
/// log2 of the ticks the wheel spans.
const SPAN_BITS: u32 = SLOT_BITS * LEVELS as u32;
/// The list of entries whose tick is before `elapsed` (armed with a
/// deadline already passed): they fire at the next expiry.
const OVERDUE: usize = LEVELS * SLOTS;
/// The list of entries beyond the wheel's span from `elapsed`.
const FAR: usize = OVERDUE + 1;
const LISTS: usize = FAR + 1;
/// No entry (an empty list's head, a list's last entry's `next`).
const NIL: u32 = u32::MAX;

/// What a timer wakes: something that counts its parks, so that an entry
/// armed for an older park is known to be stale.
pub(crate) trait Parked {
    /// The current park's number (changes at every resume).
    fn park_seq(&self) -> u64;
}

impl Parked for Arc<Task> {
    #[inline]
    fn park_seq(&self) -> u64 {
        self.park_seq.load(Ordering::Relaxed)
    }
}

/// Names one armed entry, for [`Timers::cancel`]: its slab index (low 32
/// bits) and the generation of that slab slot (high 32 bits), never zero
/// (generations start at 1), so an `Option` of it is one word.
///
/// Generations wrap after 2^32 reuses of a slot. A key is used once, by
/// the park that armed it, when that park ends; its entry ends at most
/// one pass of the worker's ready queue before that (the timer fired and
/// queued the task), and a pass arms far fewer than 2^32 timers, so a key
/// never meets its own generation again on a reused slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TimerKey(NonZeroU64);

impl TimerKey {
    fn new(index: u32, generation: u32) -> Option<TimerKey> {
        NonZeroU64::new(u64::from(generation) << 32 | u64::from(index)).map(TimerKey)
    }

    fn index(self) -> u32 {
        self.0.get() as u32
    }

    fn generation(self) -> u32 {
        (self.0.get() >> 32) as u32
    }
}

/// A slab slot: an armed entry (`target` is `Some`), or a free slot on
/// the free list (linked through `next`).
struct Entry<T> {
    at: Instant,
    /// The tick `at` falls in.
    tick: u64,
    /// The park it was armed for (its target's `park_seq` then).
    park_seq: u64,
    target: Option<T>,
    /// Bumped each time the slot is freed (never 0): keys of older
    /// entries miss.
    generation: u32,
    prev: u32,
    next: u32,
    /// The list it is on.
    list: u16,
}

#[derive(Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    /// Whether its entries are in deadline order (each pushed entry's
    /// deadline not before the last one's).
    sorted: bool,
}

const EMPTY: List = List {
    head: NIL,
    tail: NIL,
    sorted: true,
};

/// One worker's pending deadlines.
pub(crate) struct Timers<T = Arc<Task>> {
    entries: Vec<Entry<T>>,
    /// The free list's head.
    free: u32,
    lists: Box<[List; LISTS]>,
    /// Per level, a bit per non-empty slot.
    occupied: [u64; LEVELS],
    origin: Instant,
    /// Every entry with a tick before this one has fired.
    elapsed: u64,
    /// Entries armed.
    len: usize,
    /// The clock reading of the latest expiry: a time already passed.
    expired_at: Option<Instant>,
    /// Not after the first moment an expiry can fire something (`None`:
    /// nothing armed): an expiry before it has nothing to do.
    soonest: Option<Instant>,
    /// The entries of the slot being fired, when they need sorting (kept
    /// for its allocation).
    due: Vec<u32>,
    /// The last tick an instant was turned into, and its start and end:
    /// deadlines armed close together mostly fall in one tick, and two
    /// comparisons are cheaper than a subtraction of instants.
    recent: (u64, Instant, Instant),
}

impl<T> Default for Timers<T> {
    fn default() -> Self {
        Timers::starting_at(Instant::now())
    }
}

impl<T> Timers<T> {
    /// Empty timers counting ticks from `origin`.
    fn starting_at(origin: Instant) -> Self {
        Timers {
            entries: Vec::new(),
            free: NIL,
            lists: Box::new([EMPTY; LISTS]),
            occupied: [0; LEVELS],
            origin,
            elapsed: 0,
            len: 0,
            expired_at: None,
            soonest: None,
            due: Vec::new(),
            recent: (0, origin, origin + TICK),
        }
    }

    /// The tick `at` falls in (0 for an instant before the origin, at
    /// most [`MAX_TICK`]).
    fn tick_of(&self, at: Instant) -> u64 {
        at.checked_duration_since(self.origin).map_or(0, |d| {
            let sub = u64::from(d.subsec_nanos()) / (1_000_000_000 / TICKS_PER_SEC);
            d.as_secs()
                .saturating_mul(TICKS_PER_SEC)
                .saturating_add(sub)
                .min(MAX_TICK)
        })
    }

    /// [`tick_of`](Self::tick_of), through the last tick it found.
    fn tick_of_recent(&mut self, at: Instant) -> u64 {
        let (tick, start, end) = self.recent;
        if start <= at && at < end {
            return tick;
        }
        let tick = self.tick_of(at);
        self.recent = (tick, self.instant_of(tick), self.instant_of(tick + 1));
        tick
    }

    /// The start of tick `tick` (at most [`MAX_TICK`] plus a span, a few
    /// times 10^12 seconds past the origin, which an `Instant` holds; if
    /// it did not, the origin itself: a bound that comes early, never
    /// late).
    fn instant_of(&self, tick: u64) -> Instant {
        let d = Duration::from_secs(tick / TICKS_PER_SEC) + TICK * (tick % TICKS_PER_SEC) as u32;
        self.origin.checked_add(d).unwrap_or(self.origin)
    }

    /// The list an entry of tick `tick` goes to, given `elapsed`.
    fn list_for(&self, tick: u64) -> usize {
        if tick < self.elapsed {
            return OVERDUE;
        }
        // The highest bit in which `tick` differs from `elapsed` picks the
        // level (the low slot bits set, so that a tick in `elapsed`'s own
        // level-0 span lands on level 0).
        let differ = (tick ^ self.elapsed) | SLOT_MASK;
        let level = ((63 - differ.leading_zeros()) / SLOT_BITS) as usize;
        if level >= LEVELS {
            return FAR;
        }
        level * SLOTS + ((tick >> (level as u32 * SLOT_BITS)) & SLOT_MASK) as usize
    }

    fn push_back(&mut self, list: usize, index: u32) {
        let tail = self.lists[list].tail;
        let at = {
            let e = &mut self.entries[index as usize];
            e.prev = tail;
            e.next = NIL;
            e.list = list as u16;
            e.at
        };
        match tail {
            NIL => self.lists[list].head = index,
            t => {
                let last = &mut self.entries[t as usize];
                last.next = index;
                if last.at > at {
                    self.lists[list].sorted = false;
                }
            }
        }
        self.lists[list].tail = index;
        if list < OVERDUE {
            self.occupied[list / SLOTS] |= 1 << (list % SLOTS);
        }
    }

    /// Take `index` off its list.
    fn unlink(&mut self, index: u32) {
        let (prev, next, list) = {
            let e = &self.entries[index as usize];
            (e.prev, e.next, e.list as usize)
        };
        match prev {
            NIL => self.lists[list].head = next,
            p => self.entries[p as usize].next = next,
        }
        match next {
            NIL => self.lists[list].tail = prev,
            n => self.entries[n as usize].prev = prev,
        }
        if self.lists[list].head == NIL && list < OVERDUE {
            self.occupied[list / SLOTS] &= !(1 << (list % SLOTS));
        }
    }

    /// Empty `list`; its first entry (the rest linked through `next`),
    /// and whether they were in deadline order.
    fn take_list(&mut self, list: usize) -> (u32, bool) {
        let List { head, sorted, .. } = self.lists[list];
        self.lists[list] = EMPTY;
        if list < OVERDUE {
            self.occupied[list / SLOTS] &= !(1 << (list % SLOTS));
        }
        (head, sorted)
    }

    /// Free the (unlinked) entry `index`; its target.
    fn release(&mut self, index: u32) -> Option<T> {
        let e = &mut self.entries[index as usize];
        e.generation = e.generation.checked_add(1).unwrap_or(1);
        e.next = self.free;
        self.free = index;
        self.len -= 1;
        e.target.take()
    }

    /// The next list to visit and the tick at which it starts: the
    /// earliest slot of any level, or the far list. (No two start at one
    /// tick: a slot of a higher level starts past the whole span of the
    /// lower level's slots in use, which share `elapsed`'s digits above
    /// theirs.)
    fn next_list(&self) -> Option<(usize, u64)> {
        let mut best: Option<(usize, u64)> = None;
        for level in 0..LEVELS {
            let shift = level as u32 * SLOT_BITS;
            let digit = (self.elapsed >> shift) & SLOT_MASK;
            let occupied = self.occupied[level] & (u64::MAX << digit);
            if occupied == 0 {
                continue;
            }
            let slot = u64::from(occupied.trailing_zeros());
            let above = shift + SLOT_BITS;
            let start = ((self.elapsed >> above) << above) | (slot << shift);
            if best.is_none_or(|(_, b)| start < b) {
                best = Some((level * SLOTS + slot as usize, start));
            }
        }
        if self.lists[FAR].head != NIL {
            let start = ((self.elapsed >> SPAN_BITS) + 1).saturating_mul(1 << SPAN_BITS);
            if best.is_none_or(|(_, b)| start < b) {
                best = Some((FAR, start));
            }
        }
        best
    }

    /// The first moment an expiry can fire something: the end of the
    /// earliest non-empty slot's first tick (exact for level 0; for a
    /// higher level or the far list, a bound before its entries' own).
    fn first_due(&self) -> Option<Instant> {
        if self.lists[OVERDUE].head != NIL {
            return Some(self.origin);
        }
        self.next_list()
            .map(|(_, start)| self.instant_of(start.saturating_add(1)))
    }
}

impl<T: Parked> Timers<T> {
    /// Wake `target` at `at` (at the end of `at`'s tick, see the module
    /// doc), unless it has been resumed meanwhile or the entry is
    /// [cancelled](Self::cancel) first.
    pub(crate) fn arm(&mut self, at: Instant, target: T) -> TimerKey {
        let tick = self.tick_of_recent(at);
        let entry = Entry {
            at,
            tick,
            park_seq: target.park_seq(),
            target: Some(target),
            generation: 1,
            prev: NIL,
            next: NIL,
            list: 0,
        };
        let index = match self.free {
            NIL => {
                // At most one entry per parked green thread, each with a
                // stack of its own: far fewer than `NIL` fit in memory.
                let index = self.entries.len() as u32;
                self.entries.push(entry);
                index
            }
            index => {
                let slot = &mut self.entries[index as usize];
                self.free = slot.next;
                let generation = slot.generation;
                *slot = Entry {
                    generation,
                    ..entry
                };
                index
            }
        };
        let list = self.list_for(tick);
        self.push_back(list, index);
        self.len += 1;
        // It fires at the end of its tick, not before `at`: nothing to
        // lower when the soonest is not after `at` (the usual case).
        match self.soonest {
            Some(s) if s <= at => {}
            _ => {
                let fires = self.instant_of(tick + 1);
                self.soonest = Some(self.soonest.map_or(fires, |s| s.min(fires)));
            }
        }
        let generation = self.entries[index as usize].generation;
        // Generations are never 0, so the key is some.
        TimerKey::new(index, generation).unwrap_or(TimerKey(NonZeroU64::MIN))
    }

    /// Drop the entry `key` names, if it is still armed (it has not fired
    /// and the timers were not cleared since): O(1). Its target, to be
    /// dropped by the caller once the timers are no longer borrowed.
    pub(crate) fn cancel(&mut self, key: TimerKey) -> Option<T> {
        let index = key.index();
        let e = self.entries.get(index as usize)?;
        if e.generation != key.generation() || e.target.is_none() {
            return None;
        }
        self.unlink(index);
        if self.len == 1 {
            self.soonest = None;
        }
        self.release(index)
    }

    /// Whether no entry is armed.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Not after the first moment at which an expiry can fire an entry, if
    /// any is armed (a bound that may come early: after a cancellation, or
    /// for entries still on a higher level; the caller then wakes once too
    /// early, never too late).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.soonest
    }

    /// Whether no entry can be due at `now()` (called only while an entry
    /// is armed: nothing armed, no clock read). `false` can be a false
    /// alarm (the expiry then finds nothing to wake), never a miss.
    #[inline]
    pub(crate) fn none_due(&self, now: impl FnOnce() -> Instant) -> bool {
        self.soonest.is_none_or(|at| at > now())
    }

    /// Whether `at` is known to have passed: not after the clock reading of
    /// the latest expiry (so a task its timer woke need not read the clock
    /// again). `false` says nothing.
    pub(crate) fn has_passed(&self, at: Instant) -> bool {
        self.expired_at.is_some_and(|t| t >= at)
    }

    /// Remove every entry due at `now` (its tick before `now`'s), in
    /// firing order, and hand `wake` the targets still parked in the park
    /// that armed them.
    pub(crate) fn expire(&mut self, now: Instant, mut wake: impl FnMut(T)) {
        self.expired_at = Some(now);
        match self.soonest {
            Some(at) if at <= now => {}
            _ => return,
        }
        let overdue = self.take_list(OVERDUE);
        self.fire(overdue, &mut wake);
        let now_tick = self.tick_of(now);
        while let Some((list, start)) = self.next_list() {
            // A slot of level 0 fires once its tick is over; a higher one
            // (or the far list) is placed again as soon as its span begins.
            let is_level_0 = list < SLOTS;
            if start > now_tick || (is_level_0 && start == now_tick) {
                break;
            }
            self.elapsed = start;
            let taken = self.take_list(list);
            if is_level_0 {
                self.fire(taken, &mut wake);
            } else {
                self.place_again(taken.0);
            }
        }
        self.elapsed = self.elapsed.max(now_tick);
        self.soonest = if self.len == 0 {
            None
        } else {
            self.first_due()
        };
    }

    /// Wake the entries of the list starting at `head` (taken off it),
    /// in deadline order, ties in list order (sorted here when they are
    /// not `sorted` already).
    fn fire(&mut self, (head, sorted): (u32, bool), wake: &mut impl FnMut(T)) {
        if sorted {
            let mut i = head;
            while i != NIL {
                let next = self.entries[i as usize].next;
                self.wake_one(i, wake);
                i = next;
            }
            return;
        }
        let mut due = std::mem::take(&mut self.due);
        let mut i = head;
        while i != NIL {
            due.push(i);
            i = self.entries[i as usize].next;
        }
        let entries = &self.entries;
        due.sort_by_key(|&i| entries[i as usize].at);
        for &i in &due {
            self.wake_one(i, wake);
        }
        due.clear();
        self.due = due;
    }

    /// Free the (unlinked) entry `index` and wake its target if it is
    /// still in the park that armed it.
    #[inline]
    fn wake_one(&mut self, index: u32, wake: &mut impl FnMut(T)) {
        let park_seq = self.entries[index as usize].park_seq;
        if let Some(target) = self.release(index) {
            if target.park_seq() == park_seq {
                wake(target);
            }
        }
    }

    /// Put the entries of the list starting at `head` (taken off it) on
    /// the lists their ticks now call for, in order.
    fn place_again(&mut self, head: u32) {
        let mut i = head;
        while i != NIL {
            let Entry { next, tick, .. } = self.entries[i as usize];
            let list = self.list_for(tick);
            self.push_back(list, i);
            i = next;
        }
    }

    /// Drop every entry (at shutdown); keys armed before cancel nothing.
    pub(crate) fn clear(&mut self) {
        for list in 0..LISTS {
            let (mut i, _) = self.take_list(list);
            while i != NIL {
                let next = self.entries[i as usize].next;
                drop(self.release(i));
                i = next;
            }
        }
        self.soonest = None;
    }
}

#[cfg(test)]
mod tests;
