//! [`select`]: wait until one of several sources is ready — a channel
//! receiver, a [`JoinHandle`], an [`Event`], a [`Semaphore`], a
//! [`Deadline`], a [`Signals`] receiver, or a socket's [`Readiness`] — or
//! a deadline passes.
//!
//! Owns: [`select`], the [`Selectable`] trait (sealed) and its
//! implementations. Uses each source's watch hook (a wait-list
//! [`Watch`](super::wait::Watch), a join waiter, a signal waker, a poller
//! registration), `park` and the caller's waker.
//!
//! A watch never takes what it watches: the caller takes it after
//! `select` returns (`try_recv`, `join`, `try_acquire`, `try_recv` of a
//! signal, the socket operation), so a source that did not win loses
//! nothing.

use std::time::Instant;

use super::channel::{OneshotReceiver, Receiver};
use super::error::Elapsed;
use super::join::JoinHandle;
use super::net::Readiness;
use super::park::{current_waker, park};
use super::signal::Signals;
use super::sync::{Event, Semaphore};
use super::task_state::Wait;
use super::time::Deadline;

mod sealed {
    pub trait Sealed {}
    /// A registration of [`Watch::watch`](super::Watch::watch): dropping
    /// it ends it.
    pub trait Watching {}
    impl<T> Watching for T {}
}

/// A source [`select`] can wait on. Implemented by [`Receiver`],
/// [`OneshotReceiver`], [`JoinHandle`], [`Event`], [`Semaphore`],
/// [`Deadline`], [`Signals`] and [`Readiness`].
pub trait Selectable: sealed::Sealed {
    /// The watch hooks behind it.
    #[doc(hidden)]
    fn as_watch(&self) -> &dyn Watch;
}

/// What [`select`] needs of a source (not for use outside the crate).
#[doc(hidden)]
pub trait Watch {
    /// Whether taking from it would succeed at once.
    fn ready(&self) -> bool;
    /// Register the caller to be woken when it may have become ready;
    /// dropping the registration ends it (passing a notification on to
    /// the next waiter where the source hands one out).
    fn watch(&self) -> Box<dyn sealed::Watching + '_>;
    /// A time by which the select must look again: a deadline arm's
    /// instant, or a poll interval for a source that cannot wake the
    /// caller.
    fn wake_by(&self) -> Option<Instant> {
        None
    }
}

macro_rules! selectable {
    ($($ty:ty $(, $g:ident)?);* $(;)?) => {$(
        impl$(<$g>)? sealed::Sealed for $ty {}
        impl$(<$g>)? Selectable for $ty {
            fn as_watch(&self) -> &dyn Watch {
                self
            }
        }
    )*};
}

selectable! {
    Receiver<T>, T;
    JoinHandle<T>, T;
    Event;
    Semaphore;
    Deadline;
    Signals;
}

impl<T> sealed::Sealed for OneshotReceiver<T> {}

impl<T> Selectable for OneshotReceiver<T> {
    fn as_watch(&self) -> &dyn Watch {
        self.receiver()
    }
}

impl sealed::Sealed for Readiness<'_> {}

impl Selectable for Readiness<'_> {
    fn as_watch(&self) -> &dyn Watch {
        self
    }
}

/// A channel: ready when a value is queued or every sender is gone.
impl<T> Watch for Receiver<T> {
    fn ready(&self) -> bool {
        self.is_ready()
    }
    fn watch(&self) -> Box<dyn sealed::Watching + '_> {
        Box::new(Receiver::watch(self))
    }
}

/// A green thread: ready when it finished (`join` returns at once). The
/// caller's waker stays among its joiners until it finishes (one per
/// waiter: a repeated select adds none).
impl<T> Watch for JoinHandle<T> {
    fn ready(&self) -> bool {
        self.is_finished()
    }
    fn watch(&self) -> Box<dyn sealed::Watching + '_> {
        self.task.add_join_waiter(current_waker());
        Box::new(())
    }
}

/// An event: ready while it is set.
impl Watch for Event {
    fn ready(&self) -> bool {
        self.is_set()
    }
    fn watch(&self) -> Box<dyn sealed::Watching + '_> {
        Box::new(Event::watch(self))
    }
}

/// A semaphore: ready while a permit is free (`try_acquire` takes it).
impl Watch for Semaphore {
    fn ready(&self) -> bool {
        self.available() > 0
    }
    fn watch(&self) -> Box<dyn sealed::Watching + '_> {
        Box::new(Semaphore::watch(self))
    }
}

/// A point in time: ready once it passed.
impl Watch for Deadline {
    fn ready(&self) -> bool {
        self.is_elapsed()
    }
    fn watch(&self) -> Box<dyn sealed::Watching + '_> {
        Box::new(())
    }
    fn wake_by(&self) -> Option<Instant> {
        Some(self.instant())
    }
}

/// Signals: ready when one of them came since the last `try_recv`/`recv`.
impl Watch for Signals {
    fn ready(&self) -> bool {
        self.is_ready()
    }
    fn watch(&self) -> Box<dyn sealed::Watching + '_> {
        Box::new(Signals::watch(self, current_waker()))
    }
}

/// A socket's readiness: ready when an operation in its direction would
/// not block.
impl Watch for Readiness<'_> {
    fn ready(&self) -> bool {
        self.is_ready()
    }
    fn watch(&self) -> Box<dyn sealed::Watching + '_> {
        Box::new(Readiness::watch(self))
    }
    fn wake_by(&self) -> Option<Instant> {
        // Registered with a poller only on a green thread: elsewhere, look
        // again after a while (decided at each look: cheap, no syscall).
        match super::worker::with_current_task(|_, _| ()) {
            Some(()) => None,
            None => Some(Instant::now() + Readiness::PLAIN_THREAD_POLL),
        }
    }
}

/// Park until one of `sources` is ready and return its index (the first
/// ready one, in order); then take from it without waiting (`try_recv`,
/// `join`, `try_acquire`, the socket operation...). `deadline: None`
/// waits for ever; an empty `sources` waits for the deadline alone (with
/// `None`, until the green thread is cancelled). A parking point.
///
/// | arm | ready when | then |
/// |---|---|---|
/// | [`Receiver`], [`OneshotReceiver`] | a value is queued, or every sender is gone | `try_recv` |
/// | [`JoinHandle`] | the green thread finished | `join` (returns at once) |
/// | [`Event`] | it is set | — |
/// | [`Semaphore`] | a permit is free | `try_acquire` |
/// | [`Deadline`] | its instant passed | — |
/// | [`Signals`] | one of its signals came | `try_recv` |
/// | [`Readiness`] (`select_readable` / `select_writable` of a [`net`](super::net) type) | the operation would not block | the operation |
///
/// Nothing is taken from a source by the select itself, so a source that
/// did not win keeps its value, permit or signal. Between the return and
/// the take another green thread may take it first (a value from a shared
/// receiver, a permit): the `try_` call then finds nothing, and the caller
/// selects again.
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
pub fn select(sources: &[&dyn Selectable], deadline: Option<Instant>) -> Result<usize, Elapsed> {
    loop {
        if let Some(i) = sources.iter().position(|r| r.as_watch().ready()) {
            return Ok(i);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Elapsed);
        }
        // Dropped after the park, also when it unwinds: each passes a
        // notification on (the caller takes from at most one of them,
        // and none if it unwinds).
        let watches: Vec<_> = sources.iter().map(|r| r.as_watch().watch()).collect();
        if !sources.iter().any(|r| r.as_watch().ready()) {
            let wake_by = sources
                .iter()
                .filter_map(|r| r.as_watch().wake_by())
                .chain(deadline)
                .min();
            park(Wait::Select, wake_by);
        }
        drop(watches);
    }
}
