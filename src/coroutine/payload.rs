//! What crosses a switch: the [`Payload`] (a value, or an error raised at
//! the receiver), the [`Kind`] of transfer,
//! [`NOTHING`] (what a switch that carries no payload points to), and the
//! thread's [`Slot`] that holds a payload for the hub's lean path.
//!
//! Uses only [`Value`] and [`GreenletError`]; the thread state holds a
//! [`Slot`], the switch protocol fills it and it and the hub's lean path
//! (`direct.rs`) empty it.

use std::mem::{self, MaybeUninit};
use std::ptr;

use super::error::{GreenletError, GreenletExit};
use super::value::Value;

/// What crosses a switch: a value, or an error raised at the receiver; two
/// words (a [`GreenletError`] is one, checked in `error.rs`), what the
/// public switch returns as it is.
pub(crate) type Payload = Result<Value, GreenletError>;

/// A [`Payload`] as the two words it is made of. A function returns (and
/// takes) a pair of words in two registers, but a `Payload` (an enum, not a
/// pair to the ABI) through memory: where one crosses a call that is not
/// inlined, the caller keeps it in memory on its fast path too.
pub(crate) type PayloadWords = (MaybeUninit<usize>, MaybeUninit<usize>);

/// `payload` as its two words.
#[inline(always)]
pub(crate) fn into_words(payload: Payload) -> PayloadWords {
    // SAFETY: a `Payload` is two words (checked in `error.rs`, and by
    // `transmute` itself for the size), and any bits, uninitialized ones
    // included, are a valid pair of `MaybeUninit<usize>`.
    unsafe { mem::transmute::<Payload, PayloadWords>(payload) }
}

/// The payload whose words `words` are.
///
/// # Safety
/// `words` came from [`into_words`], and are used once.
#[inline(always)]
pub(crate) unsafe fn from_words(words: PayloadWords) -> Payload {
    // SAFETY: guaranteed by the caller: the words of a payload, moved back.
    unsafe { mem::transmute::<PayloadWords, Payload>(words) }
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

/// A payload as its two machine words, where a switch carries it from (by
/// address: `switch.rs`) or where the thread's [`Slot`] keeps it. Read one
/// word at a time (volatile loads, which the compiler may not merge): the
/// sender has the payload in two registers, and a receiver that loaded both
/// words with one 16-byte move would stall on store-to-load forwarding at
/// every switch; and a payload handled as a whole through memory is copied
/// around the stack in 16-byte pieces. Written one word at a time too, with
/// plain stores: a volatile one also stored the uninitialized storage word
/// of a unit value (one store per switch that carries `()`).
#[derive(Clone, Copy)]
pub(crate) struct Words([MaybeUninit<usize>; 2]);

impl Words {
    /// `payload` as its words (for [`NOTHING`]).
    const fn of(payload: Payload) -> Words {
        // SAFETY: a payload is two words (a `Value` is two words with a
        // non-null niche, the error one word: checked in `error.rs`), and any bit pattern,
        // uninitialized bytes included, is a valid `MaybeUninit<usize>`.
        Words(unsafe { mem::transmute::<Payload, [MaybeUninit<usize>; 2]>(payload) })
    }

    /// Move `payload` to `dst`, one word at a time.
    ///
    /// # Safety
    /// `dst` is valid for writes; what it held is not dropped.
    #[inline(always)]
    pub(crate) unsafe fn write(dst: *mut Words, payload: Payload) {
        let words = Words::of(payload).0;
        let dst = dst.cast::<MaybeUninit<usize>>();
        // SAFETY: guaranteed by the caller; `dst` points to two words.
        unsafe {
            dst.write(words[0]);
            dst.add(1).write(words[1]);
        }
    }

    /// Move the payload at `src` out, one word at a time.
    ///
    /// # Safety
    /// `src` holds a payload written by [`Words::write`] (or is
    /// [`NOTHING`]), not moved out since: ownership moves to the result.
    #[inline(always)]
    pub(crate) unsafe fn read(src: *const Words) -> Payload {
        let src = src.cast::<MaybeUninit<usize>>();
        // SAFETY: guaranteed by the caller; the words are a payload's.
        unsafe {
            let words = [ptr::read_volatile(src), ptr::read_volatile(src.add(1))];
            mem::transmute::<[MaybeUninit<usize>; 2], Payload>(words)
        }
    }
}

/// What a switch that carries no payload (the hub's lean park, resume and
/// start) points to: the unit value, which a receiver expecting a payload
/// reads (a copy: it holds nothing to drop), and which the hub's lean path
/// tells apart by its address (`switch::deposit`).
pub(crate) static NOTHING: Words = Words::of(Ok(Value::UNIT));

/// The thread's value slot: a payload the full protocol brought to a
/// context that switched by the hub's lean path (`direct.rs`).
///
/// A payload crosses a switch by address (`switch.rs`: the sender's
/// [`Words`] stay on its stack, suspended, until the receiver moves the
/// payload out); where the receiver is the hub's lean path, which wants to
/// know whether anything came, the switch protocol puts what came
/// (anything but [`NOTHING`]) here (`switch::deposit`), and the lean path
/// takes it with `switch::take_and_settle`. A greenlet's body end also
/// passes its result through here, from `switch::finish` to
/// `switch::run_bodies`.
pub(crate) struct Slot {
    full: bool,
    words: Words,
}

impl Slot {
    /// An empty slot.
    pub(crate) const fn empty() -> Slot {
        Slot {
            full: false,
            words: Words([MaybeUninit::uninit(); 2]),
        }
    }

    /// Put `payload` in the (empty) slot.
    #[inline(always)]
    pub(crate) fn put(&mut self, payload: Payload) {
        debug_assert!(!self.full, "a payload was left in the slot");
        // SAFETY: the slot is empty (see `Slot`), so overwriting its words
        // loses nothing.
        unsafe { Words::write(&mut self.words, payload) };
        self.full = true;
    }

    /// Whether a payload is in the slot (a switch by the full protocol, not
    /// `direct`'s, just arrived).
    #[cfg(feature = "hub")]
    #[inline(always)]
    pub(crate) fn is_full(&self) -> bool {
        self.full
    }

    /// Take the payload out of the slot (a unit value if it is empty).
    #[inline(always)]
    pub(crate) fn take(&mut self) -> Payload {
        if !self.full {
            return Ok(Value::unit());
        }
        self.full = false;
        // SAFETY: a full slot holds the words of a payload written by `put`,
        // read back once (the slot is marked empty first).
        unsafe { Words::read(&self.words) }
    }
}

/// The value a greenlet's parent receives when it ended with `GreenletExit`.
pub(crate) fn exit_value(value: Option<Value>) -> Value {
    value.unwrap_or_else(|| Value::new(GreenletExit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coroutine::error::ErrorKind;

    #[test]
    fn a_payload_is_two_words() {
        assert_eq!(mem::size_of::<Payload>(), 2 * mem::size_of::<usize>());
    }

    #[test]
    fn an_error_round_trips() {
        let exit = GreenletError::exit();
        assert!(exit.is_bare_exit() && exit.is_exit());
        let user = GreenletError::user("u");
        assert!(!user.is_exit() && !user.is_bare_exit());
        assert_eq!(user.into_kind().to_string(), "u");
        let valued = GreenletError::from(ErrorKind::GreenletExit(Some(Value::new(1u8))));
        assert!(valued.is_exit() && !valued.is_bare_exit());
        let bare = GreenletError::from(ErrorKind::GreenletExit(None));
        assert!(bare.is_bare_exit());
        assert!(matches!(bare.into_kind(), ErrorKind::GreenletExit(None)));
    }
}
