//! [`select`]: wait until one of several receivers has something (a value or
//! its end), or a deadline passes.
//!
//! Owns: [`select`] and the [`Selectable`] trait (sealed; implemented by
//! [`Receiver`] and [`OneshotReceiver`]). Uses the receivers' watch hooks and
//! `park`.

use std::time::Instant;

use super::channel::{OneshotReceiver, Receiver};
use super::error::Elapsed;
use super::park::park;
use super::task::Wait;

mod sealed {
    pub trait Sealed {}
}

/// A receiver [`select`] can wait on.
pub trait Selectable: sealed::Sealed {
    /// The channel behind it.
    #[doc(hidden)]
    fn as_watch(&self) -> &dyn Watch;
}

/// What [`select`] needs of a receiver (not for use outside the crate).
#[doc(hidden)]
pub trait Watch {
    /// Whether a receive would return at once.
    fn ready(&self) -> bool;
    /// Register the caller's waker; returns a token for `unwatch`.
    fn watch(&self) -> Box<dyn std::any::Any>;
    /// Undo `watch`; pass a notification on when `pass_on`.
    fn unwatch(&self, token: Box<dyn std::any::Any>, pass_on: bool);
}

impl<T> sealed::Sealed for Receiver<T> {}
impl<T> sealed::Sealed for OneshotReceiver<T> {}

impl<T> Watch for Receiver<T> {
    fn ready(&self) -> bool {
        self.is_ready()
    }
    fn watch(&self) -> Box<dyn std::any::Any> {
        Box::new(Receiver::watch(self))
    }
    fn unwatch(&self, token: Box<dyn std::any::Any>, pass_on: bool) {
        if let Ok(w) = token.downcast::<std::sync::Arc<super::wait::Waiter>>() {
            Receiver::unwatch(self, &w, pass_on);
        }
    }
}

impl<T> Selectable for Receiver<T> {
    fn as_watch(&self) -> &dyn Watch {
        self
    }
}

impl<T> Selectable for OneshotReceiver<T> {
    fn as_watch(&self) -> &dyn Watch {
        self.receiver()
    }
}

/// Park until one of `receivers` is ready (a value is queued, or all its
/// senders are gone) and return its index (the first ready one, in order);
/// then receive from it with `try_recv`. `deadline: None` waits for ever.
/// A parking point.
///
/// # Errors
/// [`Elapsed`] when `deadline` passes first.
///
/// ```
/// use greenlet::hub::{self, Selectable};
/// let (tx_a, rx_a) = hub::unbounded::<&str>();
/// let (tx_b, rx_b) = hub::unbounded::<u32>();
/// tx_b.send(7).unwrap();
/// let ready = hub::select(&[&rx_a as &dyn Selectable, &rx_b], None).unwrap();
/// assert_eq!(ready, 1);
/// assert_eq!(rx_b.try_recv(), Ok(7));
/// let none = hub::select(&[&rx_a as &dyn Selectable], Some(std::time::Instant::now()));
/// assert!(none.is_err());
/// # drop(tx_a);
/// ```
pub fn select(receivers: &[&dyn Selectable], deadline: Option<Instant>) -> Result<usize, Elapsed> {
    loop {
        if let Some(i) = receivers.iter().position(|r| r.as_watch().ready()) {
            return Ok(i);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Elapsed);
        }
        let tokens: Vec<_> = receivers.iter().map(|r| r.as_watch().watch()).collect();
        let guard = Unwatch {
            receivers,
            tokens: Some(tokens),
        };
        if !receivers.iter().any(|r| r.as_watch().ready()) {
            park(Wait::Select, deadline);
        }
        drop(guard);
    }
}

/// Unregisters from every receiver; passes notifications on (the caller
/// receives from at most one of them, and none if it unwinds).
struct Unwatch<'a> {
    receivers: &'a [&'a dyn Selectable],
    tokens: Option<Vec<Box<dyn std::any::Any>>>,
}

impl Drop for Unwatch<'_> {
    fn drop(&mut self) {
        if let Some(tokens) = self.tokens.take() {
            for (r, t) in self.receivers.iter().zip(tokens) {
                r.as_watch().unwatch(t, true);
            }
        }
    }
}
