//! A worker's ready queue ([`ReadyQueue`]): the green threads to resume,
//! first woken first resumed, with the front kept beside the ring buffer
//! rather than in it.
//!
//! Owns: that queue. Uses `VecDeque` for everything behind the front.
//!
//! The usual queue of a worker holds one or two tasks (a wake and a park
//! in turn: the channel ping-pong leaves it empty, then one task, then
//! empty again; two yielders keep one task in it). With the front in a
//! field of its own, a push onto an empty queue and the pop that empties
//! it are a store and a load: no ring-buffer index arithmetic, no
//! capacity check.

use std::collections::VecDeque;

/// First in, first out, the front outside the ring buffer: `first` is
/// `None` only while `rest` is empty, so the order is `first`, then `rest`
/// from its front.
pub(crate) struct ReadyQueue<T> {
    first: Option<T>,
    rest: VecDeque<T>,
}

impl<T> ReadyQueue<T> {
    /// An empty queue (allocates nothing).
    pub(crate) const fn new() -> ReadyQueue<T> {
        ReadyQueue {
            first: None,
            rest: VecDeque::new(),
        }
    }

    /// Whether nothing is queued.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// How many are queued.
    pub(crate) fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    /// Queue `t` last.
    #[inline]
    pub(crate) fn push_back(&mut self, t: T) {
        if self.first.is_none() {
            self.first = Some(t);
        } else {
            self.push_rest(t);
        }
    }

    /// [`push_back`](Self::push_back) behind the front. Out of line (the
    /// ring buffer's growth is in it): a wake that fills the front stays a
    /// few instructions where it is inlined.
    #[inline(never)]
    fn push_rest(&mut self, t: T) {
        self.rest.push_back(t);
    }

    /// Queue `t` first.
    #[inline]
    pub(crate) fn push_front(&mut self, t: T) {
        if let Some(old) = self.first.replace(t) {
            self.rest.push_front(old);
        }
    }

    /// Take the first one.
    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        let front = self.first.take()?;
        if !self.rest.is_empty() {
            self.first = self.rest.pop_front();
        }
        Some(front)
    }

    /// With exactly one queued, put `t` in its place and return that one
    /// (`t` queued last, then the first taken, in one step); else `Err(t)`.
    #[inline]
    pub(crate) fn replace_single(&mut self, t: T) -> Result<T, T> {
        match &mut self.first {
            Some(first) if self.rest.is_empty() => Ok(std::mem::replace(first, t)),
            _ => Err(t),
        }
    }

    /// Drop everything queued.
    pub(crate) fn clear(&mut self) {
        self.first = None;
        self.rest.clear();
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
        let mut q = ReadyQueue::new();
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
        let mut q = ReadyQueue::new();
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
