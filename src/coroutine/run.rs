//! [`Run`]: the closure a greenlet runs, stored in its record.
//!
//! Owns the vtable that calls or drops the closure; the closure itself lies
//! in the crate's one closure store ([`Erased`], in place when it fits in
//! [`RUN_WORDS`] words). Uses only [`Value`], [`GreenletError`] (the
//! closure's argument and result types, the error one word) and [`Payload`]
//! (the result as it leaves); knows nothing of records, threads or
//! switching.

use std::marker::PhantomData;
use std::mem;
use std::ptr;

use super::error::GreenletError;
use super::payload::{from_words, into_words, Payload, PayloadWords};
use super::value::Value;
use crate::erased::Erased;

/// Words of closure a greenlet keeps in its record without boxing it: a
/// closure capturing three handles, numbers or `Arc`s fits. Each word more
/// makes every greenlet's record a word larger (`hot_loops create`, with
/// closures of each size, measures the trade).
const RUN_WORDS: usize = 3;

type RunStorage = Erased<RUN_WORDS>;

/// The body of a greenlet: its closure, kept in place when it fits in
/// [`RUN_WORDS`] words (a closure capturing a few handles, numbers or
/// `Arc`s), boxed otherwise, so that making a greenlet with a small closure
/// allocates nothing; or nothing, once it ran or was dropped. Like
/// `Box<dyn FnOnce>`, it is neither `Send` nor `Sync` (the closure may be
/// neither).
pub(crate) struct Run {
    storage: RunStorage,
    /// How to call or drop what `storage` holds; `None`: it holds nothing.
    vtable: Option<&'static RunVtable>,
    _not_send: PhantomData<*const ()>,
}

struct RunVtable {
    /// Moves the closure out of the storage and calls it; its result (a
    /// [`Payload`], two words) comes back as [`PayloadWords`], so in two
    /// registers.
    call: unsafe fn(*mut RunStorage, Value) -> PayloadWords,
    /// Drops the closure in the storage without calling it.
    drop: unsafe fn(*mut RunStorage),
}

/// # Safety
/// `storage` holds an `F` put there, which the call consumes.
unsafe fn call_stored<F>(storage: *mut RunStorage, value: Value) -> PayloadWords
where
    F: FnOnce(Value) -> Result<Value, GreenletError>,
{
    // SAFETY: guaranteed by the caller; the `F` is moved out exactly once,
    // before anything else (the storage is not touched again).
    let run = unsafe { RunStorage::take::<F>(storage) };
    into_words(run(value))
}

impl Run {
    /// No closure.
    pub(crate) const fn none() -> Run {
        Run {
            storage: RunStorage::empty(),
            vtable: None,
            _not_send: PhantomData,
        }
    }

    pub(crate) fn new<F>(run: F) -> Run
    where
        F: FnOnce(Value) -> Result<Value, GreenletError> + 'static,
    {
        let mut storage = RunStorage::empty();
        storage.put(run);
        Run {
            storage,
            vtable: Some(
                const {
                    &RunVtable {
                        call: call_stored::<F>,
                        drop: RunStorage::drop_value::<F>,
                    }
                },
            ),
            _not_send: PhantomData,
        }
    }

    pub(crate) fn is_some(&self) -> bool {
        self.vtable.is_some()
    }

    /// Move the closure out, leaving nothing.
    pub(crate) fn take(&mut self) -> Run {
        mem::replace(self, Run::none())
    }

    /// Call the closure where it is, with `value`, leaving nothing in
    /// `this` (already before the call, which may switch away or panic);
    /// its result, the error boxed. With no closure, `value` is the result.
    ///
    /// # Safety
    /// `this` points to a live `Run` that nothing else accesses during this
    /// call (the closure is moved out of it before it runs, and `this` is
    /// not used after that).
    pub(crate) unsafe fn call_in_place(this: *mut Run, value: Value) -> Payload {
        // SAFETY: guaranteed by the caller.
        unsafe {
            let Some(vtable) = (*this).vtable.take() else {
                return Ok(value);
            };
            // The storage holds what `vtable` expects (set together in
            // `new`); with `vtable` cleared, it is consumed exactly once.
            let words = (vtable.call)(ptr::addr_of_mut!((*this).storage), value);
            // The two words of the payload the call made (`into_words`).
            from_words(words)
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(vtable) = self.vtable {
            // SAFETY: the storage holds what `vtable` expects (set together
            // in `new`), not consumed (consuming clears `vtable`).
            unsafe { (vtable.drop)(&mut self.storage) }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::rc::Rc;

    use super::*;

    /// A closure capturing `captured` (and a counter of its drops), that
    /// returns the value it is called with plus the captured sum.
    fn adder<T: 'static>(
        captured: T,
        sum: fn(&T) -> u64,
        drops: &Rc<()>,
    ) -> impl FnOnce(Value) -> Result<Value, GreenletError> + 'static {
        let held = Rc::clone(drops);
        move |value| {
            let _held = held;
            Ok(Value::new(value.downcast::<u64>()? + sum(&captured)))
        }
    }

    #[test]
    fn small_closures_are_kept_in_place_and_large_or_overaligned_ones_boxed() {
        assert!(RunStorage::in_place::<(u64, u64, u64)>());
        assert!(!RunStorage::in_place::<[u64; 4]>());
        let drops = Rc::new(());
        let runs = [
            Run::new(adder((), |_| 0, &drops)),
            Run::new(adder(5u64, |c| *c, &drops)),
            Run::new(adder([1u64, 2, 3, 4, 5], |c| c.iter().sum(), &drops)),
            Run::new(adder(7u128, |c| *c as u64, &drops)),
        ];
        assert_eq!(Rc::strong_count(&drops), 5);
        let mut results = Vec::new();
        for mut run in runs {
            assert!(run.is_some());
            // SAFETY: `run` is a live local that nothing else touches.
            let result = unsafe { Run::call_in_place(&mut run, Value::new(100u64)) };
            assert!(!run.is_some(), "called: nothing left");
            let Ok(value) = result else {
                panic!("the closure was called and returned Ok");
            };
            results.push(value.downcast::<u64>().unwrap());
            // SAFETY: as above; called again, there is nothing to call.
            let again = unsafe { Run::call_in_place(&mut run, Value::new(1u64)) };
            let Ok(again) = again else {
                panic!("with no closure, the value is the result");
            };
            assert_eq!(again.downcast::<u64>().unwrap(), 1);
        }
        assert_eq!(results, [100, 105, 115, 107]);
        assert_eq!(Rc::strong_count(&drops), 1, "each closure dropped once");
    }

    #[test]
    fn a_closure_error_comes_back_raised_and_a_bare_exit_unboxed() {
        let drops = Rc::new(());
        // `adder` downcasts its argument to `u64`: a string is an error.
        let mut wrong = Run::new(adder(1u64, |c| *c, &drops));
        // SAFETY: `wrong` is a live local that nothing else touches.
        let result = unsafe { Run::call_in_place(&mut wrong, Value::new("not a number")) };
        let Err(err) = result else {
            panic!("a downcast error comes back as an error");
        };
        assert!(
            !err.is_exit() && !err.is_bare_exit(),
            "the closure's own error, not an exit"
        );
        let mut exit = Run::new(|_: Value| Err(GreenletError::exit()));
        // SAFETY: as above.
        let result = unsafe { Run::call_in_place(&mut exit, Value::unit()) };
        assert!(
            matches!(&result, Err(err) if err.is_bare_exit()),
            "a bare exit is not boxed"
        );
        assert_eq!(
            Rc::strong_count(&drops),
            1,
            "the failed closure was dropped"
        );
    }

    #[test]
    fn a_closure_never_called_is_dropped_once_taken_or_not() {
        let drops = Rc::new(());
        let inline = Run::new(adder(1u64, |c| *c, &drops));
        let boxed = Run::new(adder([0u64; 8], |_| 0, &drops));
        let mut taken = Run::new(adder(2u64, |c| *c, &drops));
        let moved = taken.take();
        assert!(!taken.is_some() && moved.is_some());
        assert_eq!(Rc::strong_count(&drops), 4);
        drop((inline, boxed, taken));
        assert_eq!(Rc::strong_count(&drops), 2);
        drop(moved);
        assert_eq!(Rc::strong_count(&drops), 1);
        drop(Run::none());
    }

    #[test]
    fn a_panicking_closure_is_consumed_once() {
        let drops = Rc::new(());
        let held = Rc::clone(&drops);
        let mut run = Run::new(move |_: Value| -> Result<Value, GreenletError> {
            let _held = held;
            panic!("closure panic (expected in this test)");
        });
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: `run` is a live local that nothing else touches.
            drop(unsafe { Run::call_in_place(&mut run, Value::unit()) });
        }));
        assert!(outcome.is_err());
        assert!(!run.is_some());
        drop(run);
        assert_eq!(Rc::strong_count(&drops), 1);
    }
}
