//! [`Erased`]: storage for one value whose type is known to its user but not
//! to the storage, kept in place when it fits in `WORDS` machine words and
//! boxed otherwise.
//!
//! It is the one closure-and-value store of the crate: a greenlet's closure
//! (`coroutine::run`), a hub task's unstarted closure (`hub`'s body) and a
//! finished task's value (`hub`'s output) each keep what they hold in one,
//! with a function pointer of their own that remembers the type (a vtable
//! or a drop function). Small closures and values therefore cost no
//! allocation of their own.
//!
//! The storage itself knows nothing of what it holds: it never drops it, and
//! every read names the type. The rules are the caller's, written on each
//! unsafe function: what was put as `T` is taken or dropped as `T`, exactly
//! once. Uses nothing else of the crate.

use std::mem::{self, MaybeUninit};
use std::ptr;

/// `WORDS` words that hold one value of some type `T`: the value itself when
/// [`Erased::in_place`] says it fits, a `Box<T>` otherwise. It has no
/// destructor: whoever put a value takes or drops it (see the module doc).
pub(crate) struct Erased<const WORDS: usize> {
    words: MaybeUninit<[usize; WORDS]>,
}

impl<const WORDS: usize> Erased<WORDS> {
    /// Storage holding nothing.
    pub(crate) const fn empty() -> Self {
        Erased {
            words: MaybeUninit::uninit(),
        }
    }

    /// Whether a `T` is kept in the words themselves (its size and alignment
    /// fit); otherwise it is boxed. A constant for each `T`, so the branch on
    /// it folds away.
    pub(crate) const fn in_place<T>() -> bool {
        mem::size_of::<T>() <= mem::size_of::<[usize; WORDS]>()
            && mem::align_of::<T>() <= mem::align_of::<[usize; WORDS]>()
    }

    /// Store `value`, in place or boxed. Whatever the storage held before is
    /// forgotten, not dropped: the caller puts into storage it emptied.
    pub(crate) fn put<T>(&mut self, value: T) {
        if Self::in_place::<T>() {
            // SAFETY: a `T` fits the words' size and alignment (tested just
            // now), and the words are ours to overwrite.
            unsafe { self.words.as_mut_ptr().cast::<T>().write(value) };
        } else {
            const { assert!(Self::in_place::<Box<()>>(), "storage below one word") };
            // SAFETY: a `Box` of a sized type is one pointer, which fits
            // (asserted above).
            unsafe {
                self.words
                    .as_mut_ptr()
                    .cast::<Box<T>>()
                    .write(Box::new(value))
            };
        }
    }

    /// Move the value out, leaving the storage empty.
    ///
    /// # Safety
    /// `this` points to live storage that holds a `T` put by
    /// [`put::<T>`](Self::put) and not taken or dropped since, and nothing
    /// else reads or writes it during this call.
    pub(crate) unsafe fn take<T>(this: *mut Self) -> T {
        // SAFETY: the storage holds a `T`, in place or boxed as `in_place`
        // says (the caller's contract); it is read once, here.
        unsafe {
            let words = ptr::addr_of_mut!((*this).words).cast::<u8>();
            if Self::in_place::<T>() {
                ptr::read(words.cast::<T>())
            } else {
                *ptr::read(words.cast::<Box<T>>())
            }
        }
    }

    /// Drop the value where it lies, leaving the storage empty. Its
    /// signature makes it a drop function for a caller's vtable.
    ///
    /// # Safety
    /// As for [`take`](Self::take).
    pub(crate) unsafe fn drop_value<T>(this: *mut Self) {
        // SAFETY: guaranteed by the caller.
        drop(unsafe { Self::take::<T>(this) });
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::*;

    #[test]
    fn small_values_lie_in_place_and_large_or_overaligned_ones_are_boxed() {
        assert!(Erased::<3>::in_place::<(u64, u64, u64)>());
        assert!(!Erased::<3>::in_place::<[u64; 4]>());
        assert!(Erased::<2>::in_place::<(u64, u64)>());
        assert!(!Erased::<2>::in_place::<[u64; 3]>());
        assert!(
            !Erased::<2>::in_place::<u128>(),
            "16-byte alignment is boxed"
        );
        assert!(Erased::<1>::in_place::<Box<[u64; 100]>>());
    }

    #[test]
    fn what_is_put_is_taken_back_whole_in_place_or_boxed() {
        let mut small = Erased::<2>::empty();
        small.put((1u64, 2u64));
        // SAFETY: it holds a `(u64, u64)`, taken once.
        assert_eq!(unsafe { Erased::take::<(u64, u64)>(&mut small) }, (1, 2));
        let mut large = Erased::<2>::empty();
        large.put([7u64; 5]);
        // SAFETY: it holds a `[u64; 5]`, taken once.
        assert_eq!(unsafe { Erased::take::<[u64; 5]>(&mut large) }, [7; 5]);
        let mut aligned = Erased::<2>::empty();
        aligned.put(u128::MAX - 1);
        // SAFETY: it holds a `u128`, taken once.
        assert_eq!(unsafe { Erased::take::<u128>(&mut aligned) }, u128::MAX - 1);
    }

    #[test]
    fn a_dropped_value_is_dropped_once_and_a_taken_one_by_its_taker() {
        let drops = Rc::new(());
        let mut inline = Erased::<3>::empty();
        inline.put(Rc::clone(&drops));
        let mut boxed = Erased::<1>::empty();
        boxed.put((Rc::clone(&drops), [0u64; 4]));
        let mut taken = Erased::<3>::empty();
        taken.put(Rc::clone(&drops));
        assert_eq!(Rc::strong_count(&drops), 4);
        // SAFETY: each holds the type named, dropped or taken once.
        unsafe {
            Erased::drop_value::<Rc<()>>(&mut inline);
            Erased::drop_value::<(Rc<()>, [u64; 4])>(&mut boxed);
            assert_eq!(Rc::strong_count(&drops), 2);
            let held = Erased::take::<Rc<()>>(&mut taken);
            assert_eq!(Rc::strong_count(&drops), 2, "taking moves, not drops");
            drop(held);
        }
        assert_eq!(Rc::strong_count(&drops), 1);
    }
}
