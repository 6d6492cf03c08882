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
use super::task_state::Wait;

mod sealed {
    pub trait Sealed {}
    /// A registration of [`Watch::watch`](super::Watch::watch): dropping
    /// it ends it.
    pub trait Watching {}
}

impl<W: super::wait::Site> sealed::Watching for super::wait::Watch<'_, W> {}

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
    /// Register the caller to be woken when it becomes ready; dropping
    /// the registration ends it (passing a notification on to the next
    /// receiver).
    fn watch(&self) -> Box<dyn sealed::Watching + '_>;
}

impl<T> sealed::Sealed for Receiver<T> {}
impl<T> sealed::Sealed for OneshotReceiver<T> {}

impl<T> Watch for Receiver<T> {
    fn ready(&self) -> bool {
        self.is_ready()
    }
    fn watch(&self) -> Box<dyn sealed::Watching + '_> {
        Box::new(Receiver::watch(self))
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
        // Dropped after the park, also when it unwinds: each passes a
        // notification on (the caller receives from at most one of them,
        // and none if it unwinds).
        let watches: Vec<_> = receivers.iter().map(|r| r.as_watch().watch()).collect();
        if !receivers.iter().any(|r| r.as_watch().ready()) {
            park(Wait::Select, deadline);
        }
        drop(watches);
    }
}
