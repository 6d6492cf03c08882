//! A worker's timers: (deadline, task) entries in a few sorted lanes, the
//! rest in a binary min-heap.
//!
//! Most deadlines are armed in order: `sleep(d)` and `timeout(d, ..)` with
//! the same `d` give deadlines that grow with the clock. So an entry whose
//! deadline is not before the last one of a lane is appended to that lane
//! (a `VecDeque`, sorted by construction: arm and expire are O(1) and walk
//! memory in order); only an entry that fits no lane goes to the heap
//! (O(log n)). A new entry takes the lane whose last deadline is the latest
//! one not after its own (so each recurring duration keeps a lane of its
//! own), else an empty lane, else the heap. Expiry merges the lanes' fronts
//! and the heap's top, so due tasks are woken in deadline order, equal
//! deadlines first armed, first woken, whatever holds them.
//!
//! A heap or a hashed wheel are the other choices: the heap alone sifts
//! ~17 levels of cache-missing memory per expiry with 100,000 sleepers
//! (`cargo bench --bench hub -- sleepers` measures them); a wheel rounds
//! deadlines to its tick and needs a cancellation handle in the task. Here
//! a cancelled timer (its task resumed before the deadline: woken by
//! something else, or its `timeout` scope left) stays where it is and is
//! skipped when it comes due, because its task's `park_seq` has moved on;
//! so that such entries cannot pile up (each holds its task), the timers
//! drop every stale entry whenever their count has doubled since the last
//! sweep (amortised O(1) per arm). The timers are per worker, touched only
//! by its own thread, so they need no lock.
//!
//! Owns: [`Timers`] and the [`Parked`] view of what they hold. Uses the
//! task's `park_seq`.

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::task_header::Task;

/// Sorted lanes beside the heap.
const LANES: usize = 4;

/// No sweep for stale entries below this many.
const SWEEP_MIN: usize = 1024;

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

struct Entry<T> {
    at: Instant,
    /// Arming order: equal deadlines fire first armed, first woken.
    seq: u64,
    /// The park it was armed for (its target's `park_seq` then).
    park_seq: u64,
    target: T,
}

/// The order in which entries fire: deadline, then arming order.
type Key = (Instant, u64);

impl<T: Parked> Entry<T> {
    fn is_stale(&self) -> bool {
        self.target.park_seq() != self.park_seq
    }

    /// The order in which entries fire.
    fn key(&self) -> Key {
        (self.at, self.seq)
    }
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Entry<T> {
    /// Reversed, so the std max-heap pops the earliest deadline.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        other.at.cmp(&self.at).then(other.seq.cmp(&self.seq))
    }
}

/// Where the next entry to fire is.
#[derive(Clone, Copy)]
enum Source {
    Lane(usize),
    Heap,
}

/// One worker's pending deadlines.
pub(crate) struct Timers<T = Arc<Task>> {
    lanes: [VecDeque<Entry<T>>; LANES],
    heap: BinaryHeap<Entry<T>>,
    seq: u64,
    /// Entries held, stale ones included.
    len: usize,
    /// Sweep the stale entries when `len` reaches this.
    sweep_at: usize,
    /// The clock reading of the latest expiry: a time already passed.
    expired_at: Option<Instant>,
    /// Not after the earliest deadline held (`None`: nothing held since
    /// the last expiry): an expiry before it has nothing to do.
    soonest: Option<Instant>,
}

impl<T> Default for Timers<T> {
    fn default() -> Self {
        Timers {
            lanes: Default::default(),
            heap: BinaryHeap::new(),
            seq: 0,
            len: 0,
            sweep_at: SWEEP_MIN,
            expired_at: None,
            soonest: None,
        }
    }
}

impl<T: Parked> Timers<T> {
    /// Wake `target` at `at`, unless it has been resumed meanwhile.
    pub(crate) fn arm(&mut self, at: Instant, target: T) {
        self.seq += 1;
        let entry = Entry {
            at,
            seq: self.seq,
            park_seq: target.park_seq(),
            target,
        };
        match self.lane_for(at) {
            Some(i) => self.lanes[i].push_back(entry),
            None => self.heap.push(entry),
        }
        self.len += 1;
        self.soonest = Some(match self.soonest {
            Some(s) if s <= at => s,
            _ => at,
        });
        if self.len >= self.sweep_at {
            self.sweep();
        }
    }

    /// The lane an entry due at `at` keeps sorted: the one whose last
    /// deadline is the latest not after `at`, else an empty one.
    fn lane_for(&self, at: Instant) -> Option<usize> {
        let mut best: Option<(usize, Instant)> = None;
        let mut empty = None;
        for (i, lane) in self.lanes.iter().enumerate() {
            match lane.back() {
                None => {
                    empty.get_or_insert(i);
                }
                Some(last) if last.at <= at => match best {
                    Some((_, b)) if b >= last.at => {}
                    _ => best = Some((i, last.at)),
                },
                Some(_) => {}
            }
        }
        best.map(|(i, _)| i).or(empty)
    }

    /// Whether no entry is held (stale ones count as held).
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The earliest deadline held, if any (it may be a stale entry's: the
    /// caller wakes at most once too early, never too late).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.next().map(|(_, (at, _))| at)
    }

    /// The source of the entry that fires next, and its key.
    fn next(&self) -> Option<(Source, Key)> {
        let mut best = self.heap.peek().map(|e| (Source::Heap, e.key()));
        for (i, lane) in self.lanes.iter().enumerate() {
            let Some(e) = lane.front() else { continue };
            if best.is_none_or(|(_, k)| e.key() < k) {
                best = Some((Source::Lane(i), e.key()));
            }
        }
        best
    }

    fn pop(&mut self, source: Source) -> Option<Entry<T>> {
        match source {
            Source::Lane(i) => self.lanes[i].pop_front(),
            Source::Heap => self.heap.pop(),
        }
    }

    /// Whether no entry can be due at `now()` (called only while an entry
    /// is held: nothing armed, no clock read). An entry may be stale and
    /// its deadline an early bound (`soonest`), so `false` can be a false
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

    /// Remove every entry due at `now`, in firing order, and hand `wake`
    /// the targets still parked in the park that armed them.
    pub(crate) fn expire(&mut self, now: Instant, mut wake: impl FnMut(T)) {
        self.expired_at = Some(now);
        match self.soonest {
            Some(at) if at <= now => {}
            _ => return,
        }
        self.soonest = loop {
            let Some((source, (at, _))) = self.next() else {
                break None;
            };
            if at > now {
                break Some(at);
            }
            let Some(entry) = self.pop(source) else {
                break None;
            };
            self.len -= 1;
            if !entry.is_stale() {
                wake(entry.target);
            }
        };
        // After the timers have shrunk, the next sweep comes at twice what
        // they hold now, not twice what they held at the last sweep.
        if self.len < self.sweep_at / 4 && self.sweep_at > SWEEP_MIN {
            self.sweep_at = (self.len * 2).max(SWEEP_MIN);
        }
    }

    /// Drop every stale entry; the next sweep comes when the count has
    /// doubled.
    fn sweep(&mut self) {
        for lane in &mut self.lanes {
            lane.retain(|e| !e.is_stale());
        }
        self.heap.retain(|e| !e.is_stale());
        self.len = self.heap.len() + self.lanes.iter().map(VecDeque::len).sum::<usize>();
        self.sweep_at = (self.len * 2).max(SWEEP_MIN);
    }

    /// Drop every entry (at shutdown).
    pub(crate) fn clear(&mut self) {
        for lane in &mut self.lanes {
            lane.clear();
        }
        self.heap.clear();
        self.len = 0;
        self.soonest = None;
        self.sweep_at = SWEEP_MIN;
    }
}

#[cfg(test)]
mod tests {
    //! The timers on their own, with made-up instants: no clock, no
    //! worker. A probe's `park_seq` is a shared counter the test bumps to
    //! "resume" it (which makes its armed entries stale).

    use std::cell::Cell;
    use std::rc::Rc;
    use std::time::{Duration, Instant};

    use super::{Parked, Timers, SWEEP_MIN};

    #[derive(Clone)]
    struct Probe {
        id: usize,
        seq: Rc<Cell<u64>>,
    }

    impl Parked for Probe {
        fn park_seq(&self) -> u64 {
            self.seq.get()
        }
    }

    fn probes(n: usize) -> Vec<Probe> {
        (0..n)
            .map(|id| Probe {
                id,
                seq: Rc::new(Cell::new(0)),
            })
            .collect()
    }

    fn ms(base: Instant, n: u64) -> Instant {
        base + Duration::from_millis(n)
    }

    /// The ids of (deadline, id) pairs in the order they must fire: by
    /// deadline, then by id (the arming order in these tests).
    fn in_firing_order(mut pairs: Vec<(u64, usize)>) -> Vec<usize> {
        pairs.sort();
        pairs.into_iter().map(|(_, id)| id).collect()
    }

    /// Expire at `now`; the ids woken, in order.
    fn fire(t: &mut Timers<Probe>, now: Instant) -> Vec<usize> {
        let mut woken = Vec::new();
        t.expire(now, |p| woken.push(p.id));
        woken
    }

    #[test]
    fn many_timers_at_one_deadline_fire_together_in_arming_order_never_early() {
        let base = Instant::now();
        let at = ms(base, 10);
        let ps = probes(5_000);
        let mut t = Timers::default();
        for p in &ps {
            t.arm(at, p.clone());
        }
        assert_eq!(t.next_deadline(), Some(at));
        assert!(fire(&mut t, at - Duration::from_nanos(1)).is_empty());
        assert_eq!(fire(&mut t, at), (0..5_000).collect::<Vec<_>>());
        assert!(t.is_empty());
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn out_of_order_deadlines_fire_in_deadline_order_ties_first_armed_first() {
        let base = Instant::now();
        let ps = probes(3_000);
        let mut t = Timers::default();
        // A scrambled order (a multiplicative permutation of 0..1000, three
        // probes per deadline) with runs that fit lanes and many that do not.
        let mut expected: Vec<(u64, usize)> = Vec::new();
        for (i, p) in ps.iter().enumerate() {
            let d = (i as u64 * 7_919) % 1_000;
            t.arm(ms(base, d), p.clone());
            expected.push((d, i));
        }
        assert!(!t.heap.is_empty(), "the scrambled order used the heap too");
        let mut woken = Vec::new();
        for step in 0..1_000 {
            assert_eq!(t.next_deadline(), Some(ms(base, step)));
            let now = ms(base, step);
            let batch = fire(&mut t, now);
            assert_eq!(batch.len(), 3, "three probes share each deadline");
            woken.extend(batch);
        }
        assert_eq!(woken, in_firing_order(expected));
        assert!(t.is_empty());
    }

    #[test]
    fn recurring_durations_keep_lanes_and_the_heap_stays_empty() {
        // Three sleep lengths interleaved, armed as the clock moves: each
        // gets a lane; nothing goes to the heap.
        let base = Instant::now();
        let ps = probes(900);
        let mut t = Timers::default();
        for (i, p) in ps.iter().enumerate() {
            let now = i as u64;
            let d = [5_000, 10, 300][i % 3];
            t.arm(ms(base, now + d), p.clone());
        }
        assert!(t.heap.is_empty());
        let woken = fire(&mut t, ms(base, 100_000));
        let expected = (0..900)
            .map(|i| (i as u64 + [5_000, 10, 300][i % 3], i))
            .collect();
        assert_eq!(woken, in_firing_order(expected));
    }

    #[test]
    fn a_far_future_deadline_waits_behind_near_ones_and_fires_only_when_due() {
        let base = Instant::now();
        let far = base + Duration::from_secs(100 * 365 * 24 * 3600);
        let ps = probes(3);
        let mut t = Timers::default();
        t.arm(far, ps[0].clone());
        t.arm(ms(base, 2), ps[1].clone());
        t.arm(ms(base, 1), ps[2].clone());
        assert_eq!(t.next_deadline(), Some(ms(base, 1)));
        assert_eq!(fire(&mut t, ms(base, 10)), [2, 1]);
        assert_eq!(t.next_deadline(), Some(far));
        assert!(fire(&mut t, far - Duration::from_nanos(1)).is_empty());
        assert!(!t.is_empty());
        assert_eq!(fire(&mut t, far), [0]);
        assert!(t.is_empty());
    }

    #[test]
    fn a_cancelled_timer_never_wakes_and_a_rearmed_one_wakes_once() {
        let base = Instant::now();
        let ps = probes(2);
        let mut t = Timers::default();
        t.arm(ms(base, 5), ps[0].clone());
        t.arm(ms(base, 6), ps[1].clone());
        // Probe 0 resumed by something else, then parked again with a
        // later deadline: only the new entry may wake it.
        ps[0].seq.set(1);
        t.arm(ms(base, 8), ps[0].clone());
        // Probe 1 resumed and not parked again: its entry is dead.
        ps[1].seq.set(1);
        assert!(fire(&mut t, ms(base, 7)).is_empty());
        assert_eq!(fire(&mut t, ms(base, 8)), [0]);
        assert!(t.is_empty());
    }

    #[test]
    fn stale_entries_are_swept_and_do_not_pile_up() {
        // One target armed over and over with far deadlines, resumed each
        // time before they come due (a `timeout` scope left early, again
        // and again): what the timers hold stays bounded.
        let base = Instant::now();
        let p = probes(1).remove(0);
        let mut t = Timers::default();
        let mut most = 0;
        for i in 0..100_000u64 {
            t.arm(ms(base, 3_600_000 + i), p.clone());
            p.seq.set(p.seq.get() + 1);
            most = most.max(t.len);
        }
        assert!(most <= SWEEP_MIN, "held {most} stale entries at once");
        assert_eq!(Rc::strong_count(&p.seq) - 1, t.len);
        assert!(fire(&mut t, ms(base, 4_000_000)).is_empty());
        assert!(t.is_empty());
    }

    #[test]
    fn live_entries_survive_a_sweep_in_order() {
        let base = Instant::now();
        let ps = probes(2 * SWEEP_MIN);
        let mut t = Timers::default();
        for (i, p) in ps.iter().enumerate() {
            t.arm(ms(base, (i % 7) as u64), p.clone());
            if i % 2 == 1 {
                p.seq.set(1);
            }
        }
        let expected = (0..ps.len())
            .filter(|i| i % 2 == 0)
            .map(|i| ((i % 7) as u64, i))
            .collect();
        assert_eq!(fire(&mut t, ms(base, 7)), in_firing_order(expected));
        assert!(t.is_empty());
    }

    #[test]
    fn none_due_reads_the_clock_only_while_armed_and_compares_with_the_soonest() {
        let base = Instant::now();
        let ps = probes(2);
        let mut t = Timers::default();
        let no_clock = || -> Instant { panic!("the clock was read with nothing armed") };
        assert!(t.none_due(no_clock));
        t.arm(ms(base, 9), ps[0].clone());
        t.arm(ms(base, 4), ps[1].clone());
        assert!(t.none_due(|| ms(base, 4) - Duration::from_nanos(1)));
        assert!(!t.none_due(|| ms(base, 4)), "due at its deadline");
        assert!(!t.none_due(|| ms(base, 100)));
        assert_eq!(fire(&mut t, ms(base, 4)), [1]);
        assert!(t.none_due(|| ms(base, 8)), "the next is at 9 ms");
        assert!(!t.none_due(|| ms(base, 9)));
        assert_eq!(fire(&mut t, ms(base, 9)), [0]);
        assert!(t.none_due(no_clock), "nothing held after the last expiry");
    }

    #[test]
    fn none_due_may_raise_a_false_alarm_for_a_stale_entry_never_miss_a_live_one() {
        let base = Instant::now();
        let ps = probes(2);
        let mut t = Timers::default();
        t.arm(ms(base, 2), ps[0].clone());
        t.arm(ms(base, 5), ps[1].clone());
        // Probe 0 resumed early: its entry is stale but still held.
        ps[0].seq.set(1);
        assert!(!t.none_due(|| ms(base, 3)), "a stale entry still counts");
        assert!(fire(&mut t, ms(base, 3)).is_empty(), "and wakes nobody");
        assert!(t.none_due(|| ms(base, 3)), "the expiry dropped it");
        assert!(!t.none_due(|| ms(base, 5)), "the live one is due at 5 ms");
    }

    #[test]
    fn has_passed_is_the_latest_expiry_reading_and_clear_drops_all() {
        let base = Instant::now();
        let ps = probes(2);
        let mut t = Timers::default();
        assert!(!t.has_passed(base));
        t.arm(ms(base, 1), ps[0].clone());
        t.arm(ms(base, 9), ps[1].clone());
        assert_eq!(fire(&mut t, ms(base, 4)), [0]);
        assert!(t.has_passed(ms(base, 4)));
        assert!(!t.has_passed(ms(base, 5)));
        t.clear();
        assert!(t.is_empty());
        assert_eq!(t.next_deadline(), None);
        assert_eq!(Rc::strong_count(&ps[1].seq), 1);
    }
}
