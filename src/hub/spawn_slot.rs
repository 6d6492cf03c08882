//! A worker's newest-spawn slot: the task a green thread of the worker
//! spawned last, which the worker starts at its next scheduling point and
//! which other workers leave alone until it has waited too long (the
//! rule is the worker's: `worker::placement`, `Worker::aged_slot`).
//!
//! Owns [`Newest`] and [`Token`]. Uses `std`'s `AtomicPtr` (`loom`'s under
//! `cfg(loom)`, where the unit tests check the rules below over the
//! interleavings of the owner and a thief: `RUSTFLAGS="--cfg loom" cargo
//! test --release --lib hub::spawn_slot`).
//!
//! # The rules
//! - Only the owner puts a token in ([`put`](Newest::put)): one swap,
//!   which hands back the one it displaces (for the owner's stealable
//!   deque).
//! - Anyone takes ([`take`](Newest::take)): a load, and a swap of null if
//!   the slot held a token. A token leaves the slot by exactly one swap
//!   (the owner's put that displaces it, or one taker's), so exactly one
//!   thread gets it, and the swap's `Acquire` sees what its putter wrote.
//! - What is left when the slot goes is dropped with it.

use std::marker::PhantomData;
use std::ptr;

#[cfg(loom)]
use loom::sync::atomic::{AtomicPtr, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicPtr, Ordering};

/// A value the slot holds as one pointer.
pub(crate) trait Token: Sized {
    /// What the pointer points to.
    type Target;

    /// The token as a pointer, never null.
    fn into_raw(self) -> *mut Self::Target;

    /// The token back.
    ///
    /// # Safety
    /// `p` came from [`into_raw`](Self::into_raw), and no token was made
    /// from it since.
    unsafe fn from_raw(p: *mut Self::Target) -> Self;
}

/// One token, put by the owner, taken by anyone: see the module's rules.
pub(crate) struct Newest<P: Token> {
    /// `into_raw` of the token held, or null.
    slot: AtomicPtr<P::Target>,
    /// Owns a `P` (sent to whichever thread takes it): `Send` and `Sync`
    /// as a mutex of `P` is.
    _owns: PhantomData<std::sync::Mutex<P>>,
}

impl<P: Token> Default for Newest<P> {
    fn default() -> Newest<P> {
        Newest {
            slot: AtomicPtr::new(ptr::null_mut()),
            _owns: PhantomData,
        }
    }
}

impl<P: Token> Newest<P> {
    /// Put `token` in (the owner only); the token it displaces, if any.
    #[inline]
    pub(crate) fn put(&self, token: P) -> Option<P> {
        let old = self.slot.swap(token.into_raw(), Ordering::AcqRel);
        // SAFETY: a non-null value of the slot is `into_raw` of a put
        // token, and this swap moved it out: no one else can have it.
        (!old.is_null()).then(|| unsafe { P::from_raw(old) })
    }

    /// Take the token, if there is one.
    #[inline]
    pub(crate) fn take(&self) -> Option<P> {
        if self.slot.load(Ordering::Relaxed).is_null() {
            return None;
        }
        let p = self.slot.swap(ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: as in `put`: this swap moved the token out.
        (!p.is_null()).then(|| unsafe { P::from_raw(p) })
    }

    /// Whether a token is in (a hint: it may be taken or put meanwhile).
    #[inline]
    pub(crate) fn is_occupied(&self) -> bool {
        !self.slot.load(Ordering::Relaxed).is_null()
    }
}

impl<P: Token> Drop for Newest<P> {
    fn drop(&mut self) {
        drop(self.take());
    }
}

#[cfg(all(test, loom))]
mod tests {
    use super::*;

    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;
    use loom::thread;

    /// A token's value that counts its drops.
    struct Counted(usize, Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }

    impl Token for Box<Counted> {
        type Target = Counted;
        fn into_raw(self) -> *mut Counted {
            Box::into_raw(self)
        }
        unsafe fn from_raw(p: *mut Counted) -> Self {
            // SAFETY: `p` came from `into_raw`'s `Box::into_raw` (the
            // caller's contract), once.
            unsafe { Box::from_raw(p) }
        }
    }

    /// The owner puts two tokens and takes once while a thief takes:
    /// every token is had by exactly one of them (the displaced one goes
    /// back to the owner), and none is lost or had twice.
    #[test]
    fn every_token_is_had_once() {
        loom::model(|| {
            let drops = Arc::new(AtomicUsize::new(0));
            let slot = Arc::new(Newest::<Box<Counted>>::default());
            let thief = {
                let slot = Arc::clone(&slot);
                thread::spawn(move || slot.take().map(|t| t.0))
            };
            let token = |n| Box::new(Counted(n, Arc::clone(&drops)));
            let mut had = Vec::new();
            assert!(slot.put(token(1)).is_none());
            had.extend(slot.put(token(2)).map(|t| t.0));
            had.extend(slot.take().map(|t| t.0));
            had.extend(thief.join().unwrap());
            // What nobody took yet (the thief may have looked too early).
            had.extend(slot.take().map(|t| t.0));
            had.sort_unstable();
            assert_eq!(had, [1, 2]);
            assert_eq!(drops.load(Ordering::Relaxed), 2);
        });
    }

    /// A token left in the slot is dropped with it.
    #[test]
    fn a_token_left_goes_with_the_slot() {
        loom::model(|| {
            let drops = Arc::new(AtomicUsize::new(0));
            let slot = Newest::<Box<Counted>>::default();
            assert!(slot.put(Box::new(Counted(1, Arc::clone(&drops)))).is_none());
            drop(slot);
            assert_eq!(drops.load(Ordering::Relaxed), 1);
        });
    }
}
