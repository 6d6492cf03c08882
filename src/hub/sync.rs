//! Synchronisation for green threads (and plain threads, which block):
//! [`Event`], [`Mutex`], [`Semaphore`]. Waiting on any of them is a parking
//! point.
//!
//! Owns: the three types and their guards (a [`Semaphore`]'s permit borrowed
//! or, through an `Arc`, owned). Uses [`WaitList`] / [`wait_on_then`].

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::spin_lock::QuickMutex as Lock;

use super::error::{Elapsed, HubError};
use super::task_state::Wait;
use super::wait::{wait_on_then, wake, wake_all, Site, WaitList, Wakeup, Watch, Woken};

pub(crate) struct EventState {
    set: bool,
    waiters: WaitList<()>,
}

/// Waiting for an event: `set` wakes every waiter, so a waiter that
/// unwinds has nothing to pass on.
pub(crate) struct EventSite;

impl Site for EventSite {
    type State = EventState;
    type Value = ();
    const WAIT: Wait = Wait::Event;
    const TAKES: bool = false;
    fn list(s: &mut EventState) -> &mut WaitList<()> {
        &mut s.waiters
    }
    fn unwind(_: &mut EventState, _: Option<()>) -> Option<Wakeup> {
        None
    }
}

/// A flag green threads can wait for (gevent's `Event`): `set` wakes every
/// waiter and lets later waits through until `clear`.
///
/// ```
/// use std::sync::Arc;
/// use greenlet::hub::{self, Event};
/// hub::run(|| {
///     let ev = Arc::new(Event::new());
///     let e = Arc::clone(&ev);
///     let waiter = hub::spawn(move || e.wait());
///     ev.set();
///     waiter.join().unwrap();
///     assert!(ev.is_set());
/// })
/// .unwrap();
/// ```
pub struct Event {
    state: Lock<EventState>,
}

impl Default for Event {
    fn default() -> Self {
        Event::new()
    }
}

impl Event {
    /// A cleared event.
    ///
    /// ```
    /// assert!(!greenlet::hub::Event::new().is_set());
    /// ```
    pub fn new() -> Event {
        Event {
            state: Lock::new(EventState {
                set: false,
                waiters: WaitList::default(),
            }),
        }
    }

    /// Set it and wake every waiter.
    ///
    /// ```
    /// let e = greenlet::hub::Event::new();
    /// e.set();
    /// e.wait(); // returns at once
    /// ```
    pub fn set(&self) {
        let mut st = self.state.lock();
        st.set = true;
        let w = st.waiters.notify_all();
        drop(st);
        wake_all(w);
    }

    /// Clear it.
    ///
    /// ```
    /// let e = greenlet::hub::Event::new();
    /// e.set();
    /// e.clear();
    /// assert!(!e.is_set());
    /// ```
    pub fn clear(&self) {
        self.state.lock().set = false;
    }

    /// Whether it is set.
    ///
    /// ```
    /// assert!(!greenlet::hub::Event::default().is_set());
    /// ```
    pub fn is_set(&self) -> bool {
        self.state.lock().set
    }

    /// Watch it for [`select`](super::select): the caller is woken when
    /// it is set.
    pub(crate) fn watch(&self) -> Watch<'_, EventSite> {
        Watch::new(&self.state)
    }

    /// Park until it is set.
    ///
    /// ```
    /// let e = greenlet::hub::Event::new();
    /// e.set();
    /// e.wait();
    /// ```
    pub fn wait(&self) {
        let _ = self.wait_until(None);
    }

    /// Park until it is set or `d` passes.
    ///
    /// # Errors
    /// [`Elapsed`] if `d` passed first.
    ///
    /// ```
    /// let e = greenlet::hub::Event::new();
    /// assert!(e.wait_timeout(std::time::Duration::from_millis(1)).is_err());
    /// ```
    pub fn wait_timeout(&self, d: Duration) -> Result<(), Elapsed> {
        self.wait_until(Instant::now().checked_add(d))
    }

    fn wait_until(&self, deadline: Option<Instant>) -> Result<(), Elapsed> {
        let mut st = self.state.lock();
        loop {
            if st.set {
                return Ok(());
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(Elapsed);
            }
            st = wait_on_then::<EventSite, _>(&self.state, st, None, deadline, Woken::relock);
        }
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("set", &self.is_set())
            .finish()
    }
}

struct LockState {
    locked: bool,
    waiters: WaitList<()>,
}

/// Waiting for a lock: a waiter that unwinds after an unlock notified it
/// passes the notification on while the lock is still free.
struct LockSite;

impl Site for LockSite {
    type State = LockState;
    type Value = ();
    const WAIT: Wait = Wait::Mutex;
    const TAKES: bool = false;
    fn list(s: &mut LockState) -> &mut WaitList<()> {
        &mut s.waiters
    }
    fn unwind(s: &mut LockState, _: Option<()>) -> Option<Wakeup> {
        if s.locked {
            None
        } else {
            s.waiters.notify_one()
        }
    }
}

/// A mutual-exclusion lock whose `lock` parks a green thread (instead of
/// blocking its worker) while another holds it.
///
/// ```
/// use std::sync::Arc;
/// use greenlet::hub::{self, Mutex};
/// let n = hub::run(|| {
///     let m = Arc::new(Mutex::new(0));
///     let hs: Vec<_> = (0..10)
///         .map(|_| {
///             let m = Arc::clone(&m);
///             hub::spawn(move || {
///                 let mut g = m.lock();
///                 hub::yield_now(); // parks while holding it
///                 *g += 1;
///             })
///         })
///         .collect();
///     hs.into_iter().for_each(|h| h.join().unwrap());
///     let v = *m.lock();
///     v
/// })
/// .unwrap();
/// assert_eq!(n, 10);
/// ```
pub struct Mutex<T: ?Sized> {
    state: Lock<LockState>,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through a guard, and `lock` hands out
// one guard at a time (the `locked` flag under `state`'s lock), so sharing
// the Mutex shares `T` exclusively, as std's Mutex does: `T: Send` is
// enough.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}
// SAFETY: moving the Mutex moves `T`.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}

/// Access to a [`Mutex`]'s value; unlocks when dropped.
pub struct MutexGuard<'a, T: ?Sized> {
    mutex: &'a Mutex<T>,
    /// Shared across threads only where `&mut T` may be (`T: Sync`).
    _value: PhantomData<&'a mut T>,
}

impl<T> Mutex<T> {
    /// An unlocked mutex holding `value`.
    ///
    /// ```
    /// let m = greenlet::hub::Mutex::new(5);
    /// assert_eq!(*m.lock(), 5);
    /// ```
    pub fn new(value: T) -> Mutex<T> {
        Mutex {
            state: Lock::new(LockState {
                locked: false,
                waiters: WaitList::default(),
            }),
            value: UnsafeCell::new(value),
        }
    }

    /// The value, consuming the mutex.
    ///
    /// ```
    /// assert_eq!(greenlet::hub::Mutex::new(3).into_inner(), 3);
    /// ```
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Lock it, parking while another holds it. A parking point.
    ///
    /// ```
    /// let m = greenlet::hub::Mutex::new(vec![1]);
    /// m.lock().push(2);
    /// assert_eq!(*m.lock(), [1, 2]);
    /// ```
    pub fn lock(&self) -> MutexGuard<'_, T> {
        let mut st = self.state.lock();
        loop {
            if !st.locked {
                st.locked = true;
                return MutexGuard {
                    mutex: self,
                    _value: PhantomData,
                };
            }
            st = wait_on_then::<LockSite, _>(&self.state, st, None, None, Woken::relock);
        }
    }

    /// Lock it if it is free.
    ///
    /// ```
    /// let m = greenlet::hub::Mutex::new(());
    /// let g = m.try_lock().unwrap();
    /// assert!(m.try_lock().is_none());
    /// drop(g);
    /// ```
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        let mut st = self.state.lock();
        if st.locked {
            return None;
        }
        st.locked = true;
        Some(MutexGuard {
            mutex: self,
            _value: PhantomData,
        })
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (see `Mutex`'s Sync impl).
        unsafe { &*self.mutex.value.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard is the only one, and `&mut self` is unique.
        unsafe { &mut *self.mutex.value.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        let mut st = self.mutex.state.lock();
        st.locked = false;
        let w = st.waiters.notify_one();
        drop(st);
        wake(w);
    }
}

impl<T: ?Sized> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mutex")
            .field("locked", &self.state.lock().locked)
            .finish_non_exhaustive()
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

pub(crate) struct SemState {
    /// Free permits.
    permits: usize,
    /// Free permits plus those held: at most [`Semaphore::MAX_PERMITS`],
    /// so a held permit's return never overflows `permits`.
    total: usize,
    waiters: WaitList<()>,
}

/// Waiting for a permit: a waiter that unwinds after `add_permits`
/// notified it passes the notification on while a permit is free.
pub(crate) struct PermitSite;

impl Site for PermitSite {
    type State = SemState;
    type Value = ();
    const WAIT: Wait = Wait::Semaphore;
    const TAKES: bool = false;
    fn list(s: &mut SemState) -> &mut WaitList<()> {
        &mut s.waiters
    }
    fn unwind(s: &mut SemState, _: Option<()>) -> Option<Wakeup> {
        match s.permits {
            0 => None,
            _ => s.waiters.notify_one(),
        }
    }
}

/// A counting semaphore: `acquire` parks while no permit is left.
///
/// ```
/// use greenlet::hub::Semaphore;
/// let s = Semaphore::new(1);
/// let p = s.acquire();
/// assert!(s.try_acquire().is_none());
/// drop(p);
/// assert!(s.try_acquire().is_some());
/// ```
pub struct Semaphore {
    state: Lock<SemState>,
}

/// One permit of a [`Semaphore`], given back when dropped.
pub struct SemaphorePermit<'a> {
    sem: &'a Semaphore,
}

/// One permit of a [`Semaphore`] shared through an [`Arc`], given back
/// when dropped: `Send` and `'static`, so it moves into another green
/// thread or a [`spawn_blocking`](super::spawn_blocking) call and bounds
/// the work itself rather than the wait for it (see
/// [`Semaphore::acquire_owned`]).
pub struct OwnedSemaphorePermit {
    sem: Arc<Semaphore>,
}

impl Semaphore {
    /// The most permits a semaphore counts, free and held together. A
    /// count past it is a mistake (no program holds that many), and the
    /// cap leaves room for every held permit to come back without the
    /// count overflowing.
    pub const MAX_PERMITS: usize = usize::MAX / 2;

    /// A semaphore with `permits` permits; more than
    /// [`MAX_PERMITS`](Self::MAX_PERMITS) are capped to it (reported
    /// through the log facade).
    ///
    /// ```
    /// use greenlet::hub::Semaphore;
    /// assert_eq!(Semaphore::new(3).available(), 3);
    /// assert_eq!(Semaphore::new(usize::MAX).available(), Semaphore::MAX_PERMITS);
    /// ```
    pub fn new(permits: usize) -> Semaphore {
        let capped = permits.min(Semaphore::MAX_PERMITS);
        if capped < permits {
            crate::diag::diag_warn!(
                "hub::Semaphore::new({permits}): capped to Semaphore::MAX_PERMITS ({capped})"
            );
        }
        Semaphore {
            state: Lock::new(SemState {
                permits: capped,
                total: capped,
                waiters: WaitList::default(),
            }),
        }
    }

    /// Take a permit, parking while there is none. A parking point.
    ///
    /// ```
    /// let s = greenlet::hub::Semaphore::new(1);
    /// let _p = s.acquire();
    /// assert_eq!(s.available(), 0);
    /// ```
    pub fn acquire(&self) -> SemaphorePermit<'_> {
        self.take();
        SemaphorePermit { sem: self }
    }

    /// Take a permit if one is free.
    ///
    /// ```
    /// assert!(greenlet::hub::Semaphore::new(0).try_acquire().is_none());
    /// ```
    pub fn try_acquire(&self) -> Option<SemaphorePermit<'_>> {
        self.try_take().then_some(SemaphorePermit { sem: self })
    }

    /// Take a permit that holds its own reference to the semaphore,
    /// parking while there is none. A parking point.
    ///
    /// Move it into the work it bounds. A permit held by a green thread
    /// that waits for a [`spawn_blocking`](super::spawn_blocking) call
    /// comes back when that green thread stops waiting (a
    /// [`timeout`](super::timeout), a cancellation), while the call runs
    /// on; a permit moved into the call comes back when the call ends, so
    /// no more calls run at once than there are permits.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use greenlet::hub::{self, Semaphore};
    /// hub::run(|| {
    ///     let cpu = Arc::new(Semaphore::new(1));
    ///     let permit = cpu.acquire_owned();
    ///     let job = hub::spawn_blocking(move || {
    ///         let _permit = permit; // held until the call ends
    ///         std::thread::sleep(Duration::from_millis(50));
    ///     });
    ///     // The caller gives up waiting; the call still holds the permit.
    ///     let waited = hub::timeout(Duration::from_millis(1), || job.join());
    ///     assert!(waited.is_err());
    ///     assert_eq!(cpu.available(), 0);
    ///     drop(cpu.acquire_owned()); // parks until the call ends
    /// })
    /// .unwrap();
    /// ```
    pub fn acquire_owned(self: &Arc<Self>) -> OwnedSemaphorePermit {
        self.take();
        OwnedSemaphorePermit {
            sem: Arc::clone(self),
        }
    }

    /// Take a permit that holds its own reference to the semaphore, if
    /// one is free (see [`acquire_owned`](Self::acquire_owned)).
    ///
    /// ```
    /// use std::sync::Arc;
    /// let s = Arc::new(greenlet::hub::Semaphore::new(1));
    /// let p = s.try_acquire_owned().unwrap();
    /// assert!(s.try_acquire_owned().is_none());
    /// std::thread::spawn(move || drop(p)).join().unwrap();
    /// assert_eq!(s.available(), 1);
    /// ```
    pub fn try_acquire_owned(self: &Arc<Self>) -> Option<OwnedSemaphorePermit> {
        self.try_take().then(|| OwnedSemaphorePermit {
            sem: Arc::clone(self),
        })
    }

    /// Take a free permit off the count, parking while there is none.
    fn take(&self) {
        let mut st = self.state.lock();
        while st.permits == 0 {
            st = wait_on_then::<PermitSite, _>(&self.state, st, None, None, Woken::relock);
        }
        st.permits -= 1;
    }

    /// Take a free permit off the count if there is one.
    fn try_take(&self) -> bool {
        let mut st = self.state.lock();
        if st.permits == 0 {
            return false;
        }
        st.permits -= 1;
        true
    }

    /// Give a held permit back, waking a waiter.
    fn give_back(&self) {
        // A held permit is counted in `total`, which is at most
        // `MAX_PERMITS`: `permits` stays below it.
        let mut st = self.state.lock();
        let wakers = Semaphore::release(&mut st, 1);
        drop(st);
        wake_all(wakers);
    }

    /// Add `n` permits (waking as many waiters). Stops at
    /// [`MAX_PERMITS`](Self::MAX_PERMITS) free and held together, and
    /// reports the permits it could not add through the log facade; use
    /// [`try_add_permits`](Self::try_add_permits) to be told.
    ///
    /// ```
    /// use greenlet::hub::Semaphore;
    /// let s = Semaphore::new(0);
    /// s.add_permits(2);
    /// assert_eq!(s.available(), 2);
    /// s.add_permits(usize::MAX);
    /// assert_eq!(s.available(), Semaphore::MAX_PERMITS);
    /// ```
    pub fn add_permits(&self, n: usize) {
        if let Err(e) = self.try_add_permits(n) {
            crate::diag::diag_warn!("hub::Semaphore::add_permits: {e}");
        }
    }

    /// Add `n` permits (waking as many waiters), or as many as fit under
    /// [`MAX_PERMITS`](Self::MAX_PERMITS) free and held together.
    ///
    /// # Errors
    /// [`HubError::TooManyPermits`] when not all `n` fit, saying how many
    /// were added.
    ///
    /// ```
    /// use greenlet::hub::Semaphore;
    /// let s = Semaphore::new(Semaphore::MAX_PERMITS - 1);
    /// assert!(s.try_add_permits(1).is_ok());
    /// assert!(s.try_add_permits(1).is_err());
    /// assert_eq!(s.available(), Semaphore::MAX_PERMITS);
    /// ```
    pub fn try_add_permits(&self, n: usize) -> Result<(), HubError> {
        let mut st = self.state.lock();
        let added = n.min(Semaphore::MAX_PERMITS - st.total);
        st.total += added;
        let wakers = Semaphore::release(&mut st, added);
        drop(st);
        wake_all(wakers);
        if added < n {
            return Err(HubError::TooManyPermits {
                asked: n,
                added,
                max: Semaphore::MAX_PERMITS,
            });
        }
        Ok(())
    }

    /// Make `n` permits free (new ones, or held ones coming back) and take
    /// as many waiters off the list.
    fn release(st: &mut SemState, n: usize) -> Vec<Wakeup> {
        st.permits += n;
        let mut wakers = Vec::new();
        for _ in 0..n {
            match st.waiters.notify_one() {
                Some(w) => wakers.push(w),
                None => break,
            }
        }
        wakers
    }

    /// Free permits now.
    ///
    /// ```
    /// assert_eq!(greenlet::hub::Semaphore::new(2).available(), 2);
    /// ```
    pub fn available(&self) -> usize {
        self.state.lock().permits
    }

    /// Watch it for [`select`](super::select): the caller is woken when a
    /// permit is freed (a watcher that goes without taking it passes the
    /// notification on while a permit is free).
    pub(crate) fn watch(&self) -> Watch<'_, PermitSite> {
        Watch::new(&self.state)
    }
}

impl Drop for SemaphorePermit<'_> {
    fn drop(&mut self) {
        self.sem.give_back();
    }
}

impl Drop for OwnedSemaphorePermit {
    fn drop(&mut self) {
        self.sem.give_back();
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("available", &self.available())
            .finish()
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SemaphorePermit")
    }
}

impl fmt::Debug for OwnedSemaphorePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OwnedSemaphorePermit")
    }
}
