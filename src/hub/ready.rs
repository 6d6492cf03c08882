//! A worker's ready queue ([`ReadyQueue`]): the green threads to resume,
//! first woken first resumed, with the front kept beside the ring buffer
//! rather than in it.
//!
//! Owns: that queue. Uses `VecDeque` for everything behind the front.
//! Its methods take `&self` (see [`ReadyQueue`]): a wake and a hand-off
//! reach the front slot with no borrow flag to set and clear.
//!
//! The usual queue of a worker holds one or two tasks (a wake and a park
//! in turn: the channel ping-pong leaves it empty, then one task, then
//! empty again; two yielders keep one task in it). With the front in a
//! field of its own, a push onto an empty queue and the pop that empties
//! it are a store and a load: no ring-buffer index arithmetic, no
//! capacity check.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

/// First in, first out, the front outside the ring buffer: `first` is
/// `None` only while `rest` is empty, so the order is `first`, then `rest`
/// from its front. Changed through `&self` (a worker's thread alone
/// reaches it): the front is a [`Cell`], so a push onto an empty queue and
/// the pop that empties it test no borrow flag; `rest`, behind a
/// `RefCell`, is borrowed only on the paths that reach it, and `more`
/// says whether it holds any without a borrow. No method drops a queued
/// value while it works on the queue ([`clear`](Self::clear) drops them
/// after), so no destructor can reach the queue half-changed.
pub(crate) struct ReadyQueue<T> {
    first: Cell<Option<T>>,
    rest: RefCell<VecDeque<T>>,
    /// Whether `rest` holds any.
    more: Cell<bool>,
}

impl<T> ReadyQueue<T> {
    /// An empty queue (allocates nothing).
    pub(crate) const fn new() -> ReadyQueue<T> {
        ReadyQueue {
            first: Cell::new(None),
            rest: RefCell::new(VecDeque::new()),
            more: Cell::new(false),
        }
    }

    /// Whether something is in the front slot.
    #[inline]
    fn has_first(&self) -> bool {
        // SAFETY: a `Cell` hands out no reference to what it holds, and
        // this read ends before anything else runs (the queue is not
        // `Sync`): nothing writes it meanwhile.
        unsafe { (*self.first.as_ptr()).is_some() }
    }

    /// `f` of the first one, if more than one is queued (it sees the
    /// front in place).
    #[inline]
    pub(crate) fn with_front_of_many<R>(&self, f: impl FnOnce(&T) -> R) -> Option<R> {
        if !self.more.get() {
            return None;
        }
        // SAFETY: a `Cell` hands out no reference to what it holds, and
        // this borrow ends with `f`, which gets a shared reference only:
        // the queue is not `Sync` and `f` cannot reach it through `&T`
        // mutably, so nothing writes the slot meanwhile.
        unsafe { (*self.first.as_ptr()).as_ref().map(f) }
    }

    /// Whether nothing is queued.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        !self.has_first()
    }

    /// How many are queued.
    pub(crate) fn len(&self) -> usize {
        usize::from(self.has_first()) + self.rest.try_borrow().map_or(0, |rest| rest.len())
    }

    /// Queue `t` last.
    #[inline]
    pub(crate) fn push_back(&self, t: T) {
        if self.has_first() {
            self.push_rest(t);
        } else {
            self.first.set(Some(t));
        }
    }

    /// [`push_back`](Self::push_back) behind the front. Out of line (the
    /// ring buffer's growth is in it): a wake that fills the front stays a
    /// few instructions where it is inlined.
    #[inline(never)]
    fn push_rest(&self, t: T) {
        self.rest.borrow_mut().push_back(t);
        self.more.set(true);
    }

    /// Queue `t` first.
    #[inline]
    pub(crate) fn push_front(&self, t: T) {
        if let Some(old) = self.first.replace(Some(t)) {
            self.rest.borrow_mut().push_front(old);
            self.more.set(true);
        }
    }

    /// Take the first one.
    #[inline]
    pub(crate) fn pop_front(&self) -> Option<T> {
        let front = self.first.take()?;
        if self.more.get() {
            self.refill();
        }
        Some(front)
    }

    /// [`pop_front`](Self::pop_front), then `f` of the new first one if
    /// more than one is left (as [`with_front_of_many`](Self::with_front_of_many)
    /// would see it): with one queued or none, one test in all.
    #[inline]
    pub(crate) fn pop_front_seeing(&self, f: impl FnOnce(&T)) -> Option<T> {
        let front = self.first.take()?;
        if self.more.get() {
            self.refill();
            self.with_front_of_many(f);
        }
        Some(front)
    }

    /// Move the front of `rest` into the empty front slot (out of line:
    /// the usual queue holds one or two).
    #[inline(never)]
    fn refill(&self) {
        let mut rest = self.rest.borrow_mut();
        let next = rest.pop_front();
        self.more.set(!rest.is_empty());
        drop(rest);
        // The front slot is empty (the caller took it): nothing dropped.
        self.first.set(next);
    }

    /// With exactly one queued, put `t` in its place and return that one
    /// (`t` queued last, then the first taken, in one step); else `Err(t)`.
    #[inline]
    pub(crate) fn replace_single(&self, t: T) -> Result<T, T> {
        if self.more.get() {
            return Err(t);
        }
        match self.first.take() {
            Some(front) => {
                self.first.set(Some(t));
                Ok(front)
            }
            None => Err(t),
        }
    }

    /// Drop everything queued (after the queue is empty again).
    pub(crate) fn clear(&self) {
        let first = self.first.take();
        let rest = std::mem::take(&mut *self.rest.borrow_mut());
        self.more.set(false);
        drop(first);
        drop(rest);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::ReadyQueue;

    /// A small deterministic generator (xorshift), for the operation mix.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn every_operation_keeps_the_order_of_a_plain_deque() {
        let q = ReadyQueue::new();
        let mut model = VecDeque::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15;
        for i in 0..20_000u32 {
            match next(&mut seed) % 7 {
                0 | 1 => {
                    q.push_back(i);
                    model.push_back(i);
                }
                2 => {
                    q.push_front(i);
                    model.push_front(i);
                }
                3 | 4 => assert_eq!(q.pop_front(), model.pop_front()),
                5 => {
                    let replaced = q.replace_single(i);
                    if model.len() == 1 {
                        model.push_back(i);
                        assert_eq!(replaced, Ok(model.pop_front().expect("one queued")));
                    } else {
                        assert_eq!(replaced, Err(i));
                    }
                }
                _ => {
                    for t in [i, i + 1, i + 2] {
                        q.push_back(t);
                        model.push_back(t);
                    }
                }
            }
            assert_eq!(q.is_empty(), model.is_empty());
        }
        while let Some(t) = model.pop_front() {
            assert_eq!(q.pop_front(), Some(t));
        }
        assert_eq!(q.pop_front(), None);
    }

    #[test]
    fn clear_empties_it_and_a_push_onto_an_empty_queue_fills_the_front() {
        let q = ReadyQueue::new();
        for t in [1, 2, 3] {
            q.push_back(t);
        }
        assert_eq!(q.pop_front(), Some(1));
        q.clear();
        assert!(q.is_empty());
        assert_eq!(q.pop_front(), None);
        q.push_back(4);
        assert_eq!(q.replace_single(5), Ok(4));
        assert_eq!(q.pop_front(), Some(5));
        assert!(q.is_empty());
    }
}
