//! What crosses a switch: the [`Payload`] (a value, or an error raised at
//! the receiver), its one-word error [`Raised`], the [`Kind`] of transfer,
//! and the thread's [`Slot`] that holds the payload in flight.
//!
//! Uses only [`Value`] and [`GreenletError`]; the thread state holds a
//! [`Slot`], the switch protocol fills and empties it.

use std::mem::{self, MaybeUninit};
use std::ptr;

use super::error::{GreenletError, GreenletExit};
use super::value::Value;

/// What crosses a switch: a value, or an error raised at the receiver.
pub(crate) type Payload = Result<Value, Raised>;

/// An error in flight, one word wide so that a payload is two words (as a
/// `Value` is): the bare `GreenletExit` of a kill needs no allocation,
/// anything else is boxed.
pub(crate) enum Raised {
    /// The bare `GreenletExit` (no value).
    Exit,
    /// Any other error.
    Error(Box<GreenletError>),
}

impl Raised {
    /// `err` in flight.
    #[inline]
    pub(crate) fn new(err: GreenletError) -> Raised {
        if matches!(err, GreenletError::GreenletExit(None)) {
            // Nothing in it to drop: forgotten rather than passed to the
            // error's out-of-line drop glue (a kill comes through here).
            mem::forget(err);
            return Raised::Exit;
        }
        Raised::Error(Box::new(err))
    }

    /// The error again, at the receiver.
    #[inline]
    pub(crate) fn into_error(self) -> GreenletError {
        match self {
            Raised::Exit => GreenletError::GreenletExit(None),
            Raised::Error(err) => *err,
        }
    }

    /// Whether this is `GreenletExit`.
    pub(crate) fn is_exit(&self) -> bool {
        match self {
            Raised::Exit => true,
            Raised::Error(err) => err.is_exit(),
        }
    }
}

/// What kind of transfer: a switch carrying a value, or a throw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A value.
    Switch,
    /// An error.
    Throw,
}

impl Kind {
    /// The kind of transfer that carries `payload`.
    pub(crate) fn of(payload: &Payload) -> Kind {
        if payload.is_ok() {
            Kind::Switch
        } else {
            Kind::Throw
        }
    }
}

/// The thread's value slot: the payload of the transfer in flight.
///
/// Empty between transfers: every transfer fills it right before its stack
/// switch and the receiving context empties it first thing
/// (`switch::take_and_settle`); the forced unwind, which resumes a greenlet without
/// a transfer, empties it after the fact.
///
/// The payload is stored and loaded one machine word at a time (volatile
/// accesses, which the compiler may not merge): the sender has it in two
/// registers, and a receiver that loaded both words with one 16-byte move
/// would stall on store-to-load forwarding at every switch.
pub(crate) struct Slot {
    full: bool,
    words: [MaybeUninit<usize>; 2],
}

impl Slot {
    /// An empty slot.
    pub(crate) const fn empty() -> Slot {
        Slot {
            full: false,
            words: [MaybeUninit::uninit(); 2],
        }
    }

    /// Put `payload` in the (empty) slot.
    #[inline(always)]
    pub(crate) fn put(&mut self, payload: Payload) {
        debug_assert!(!self.full, "a payload was left in the slot");
        // SAFETY: a payload is two words (`Raised` and `Value` are two words
        // with a non-null niche, checked by a test), and any bit pattern,
        // uninitialized bytes included, is a valid `MaybeUninit<usize>`.
        let words: [MaybeUninit<usize>; 2] = unsafe { mem::transmute(payload) };
        let dst = ptr::addr_of_mut!(self.words).cast::<MaybeUninit<usize>>();
        // SAFETY: `dst` points to the two words of `self.words`. The slot is
        // empty (see `Slot`), so overwriting it loses nothing.
        unsafe {
            ptr::write_volatile(dst, words[0]);
            ptr::write_volatile(dst.add(1), words[1]);
        }
        self.full = true;
    }

    /// Whether a payload is in the slot (a switch by the full protocol, not
    /// `direct`'s, is in flight or just arrived).
    #[inline(always)]
    pub(crate) fn is_full(&self) -> bool {
        self.full
    }

    /// Take the payload out of the slot (a unit value if a forced unwind
    /// left it empty).
    #[inline(always)]
    pub(crate) fn take(&mut self) -> Payload {
        if !self.full {
            return Ok(Value::unit());
        }
        self.full = false;
        let src = ptr::addr_of!(self.words).cast::<MaybeUninit<usize>>();
        // SAFETY: a full slot holds the two words of a payload written by
        // `put`, read back once (the slot is marked empty first), so
        // ownership moves from the slot to the result.
        unsafe {
            let words = [ptr::read_volatile(src), ptr::read_volatile(src.add(1))];
            mem::transmute::<[MaybeUninit<usize>; 2], Payload>(words)
        }
    }
}

/// The value a greenlet's parent receives when it ended with `GreenletExit`.
pub(crate) fn exit_value(value: Option<Value>) -> Value {
    value.unwrap_or_else(|| Value::new(GreenletExit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_is_two_words() {
        assert_eq!(mem::size_of::<Payload>(), 2 * mem::size_of::<usize>());
    }

    #[test]
    fn raised_round_trips() {
        assert!(matches!(Raised::new(GreenletError::exit()), Raised::Exit));
        assert!(Raised::new(GreenletError::exit()).into_error().is_exit());
        let user = Raised::new(GreenletError::user("u"));
        assert!(!user.is_exit());
        assert_eq!(user.into_error().to_string(), "u");
        let valued = Raised::new(GreenletError::GreenletExit(Some(Value::new(1u8))));
        assert!(valued.is_exit());
    }
}
