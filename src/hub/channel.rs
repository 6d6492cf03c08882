//! Channels between green threads on any workers and plain threads:
//! multi-producer, multi-consumer [`channel`] (bounded) and [`unbounded`],
//! and [`oneshot`].
//! A receive or a send on a full channel parks a green thread and blocks a
//! plain thread.
//!
//! Owns: the channel state and its ends, their errors, and the hook
//! [`select`](super::select) uses. Uses [`WaitList`] / [`wait_on`] /
//! [`Watch`].
//!
//! Hand-over: a send to an empty channel whose first waiter is a parked
//! receive gives the value to that receive (it returns it without going
//! through the queue); a receive from a full channel moves the first
//! parked sender's value into the room it leaves (that send returns
//! without retrying). Either side takes the channel's lock once; the woken
//! side reads what it was given without taking it again (see
//! [`super::wait`]'s nodes).
//!
//! Closing: when every [`Sender`] is gone, receives return what is queued,
//! then [`RecvError`] (so iteration ends); when every [`Receiver`] is gone,
//! sends fail with the value back. Nothing sent is lost to a receiver that
//! is cancelled (or times out) while parked: a value handed to it goes
//! back to the front of the queue and on to the next receiver.

use std::collections::VecDeque;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::spin_lock::{QuickGuard as MutexGuard, QuickMutex as Mutex};

use super::task_state::Wait;
use super::wait::{wait_on, wait_on_then, wake, wake_all, Site, WaitList, Wakeup, Watch, Woken};

pub(crate) struct State<T> {
    queue: VecDeque<T>,
    capacity: Option<usize>,
    senders: usize,
    /// Live [`Receiver`]s (clones count).
    receivers: usize,
    /// Parked receives (they take a value handed to them) and `select`
    /// watches (they do not). Only while `queue` is empty does a receive
    /// wait un-notified at its front.
    recv: WaitList<T>,
    /// Parked sends, each offering its value.
    send: WaitList<T>,
}

pub(crate) struct Chan<T> {
    state: Mutex<State<T>>,
}

/// A parked receive (it takes a value handed to it), or a `select` watch.
pub(crate) struct RecvSite<T>(PhantomData<fn() -> T>);

impl<T> Site for RecvSite<T> {
    type State = State<T>;
    type Value = T;
    const WAIT: Wait = Wait::Recv;
    const TAKES: bool = true;
    fn list(s: &mut State<T>) -> &mut WaitList<T> {
        &mut s.recv
    }
    fn unwind(s: &mut State<T>, value: Option<T>) -> Option<Wakeup> {
        s.give_back(value)
    }
}

/// A parked send on a full channel.
struct SendSite<T>(PhantomData<fn() -> T>);

impl<T> Site for SendSite<T> {
    type State = State<T>;
    type Value = T;
    const WAIT: Wait = Wait::Send;
    const TAKES: bool = false;
    fn list(s: &mut State<T>) -> &mut WaitList<T> {
        &mut s.send
    }
    /// Notified, its value was either taken (sent) or is still its own
    /// (every receiver went): nothing to pass on.
    fn unwind(_: &mut State<T>, _: Option<T>) -> Option<Wakeup> {
        None
    }
}

impl<T> State<T> {
    /// A receiver notified (and maybe handed `value`) that will not
    /// receive: the value goes back to the front of the queue (it was
    /// handed over only when the queue was empty), and the next waiter is
    /// told there is something.
    fn give_back(&mut self, value: Option<T>) -> Option<Wakeup> {
        if let Some(v) = value {
            self.queue.push_front(v);
        }
        if self.queue.is_empty() {
            return None;
        }
        self.recv.notify_one()
    }

    /// Send `value` if there is room: straight to a receive parked on an
    /// empty queue, else onto the queue. Returns whom to wake. Inlined
    /// into the sends: one frame for a send.
    #[inline(always)]
    fn offer(&mut self, value: T) -> Result<Option<Wakeup>, TrySendError<T>> {
        if self.receivers == 0 {
            return Err(TrySendError::Disconnected(value));
        }
        if self.queue.is_empty() && self.recv.first_takes() {
            return Ok(self.recv.notify_one_with(|slot| *slot = Some(value)));
        }
        if self.capacity.is_some_and(|c| self.queue.len() >= c) {
            return Err(TrySendError::Full(value));
        }
        self.queue.push_back(value);
        Ok(self.recv.notify_one())
    }

    /// Take the next queued value; a parked sender's value fills the room
    /// it leaves. Returns it and whom to wake.
    fn take(&mut self) -> Option<(T, Option<Wakeup>)> {
        let v = self.queue.pop_front()?;
        let queue = &mut self.queue;
        let sender = self.send.notify_one_with(|slot| queue.extend(slot.take()));
        Some((v, sender))
    }
}

/// A receive with a deadline or without: its errors. The untimed one's
/// error is the size of nothing, so its result comes back in registers.
trait RecvMode {
    /// Why it returned no value.
    type Error;
    /// Whether it may have a deadline.
    const TIMED: bool;
    /// Every sender is gone and nothing is queued.
    const DISCONNECTED: Self::Error;
    /// The deadline passed (an untimed receive has none to pass).
    const TIMEOUT: Self::Error;
}

/// [`Receiver::recv`]'s.
struct Untimed;

impl RecvMode for Untimed {
    type Error = RecvError;
    const TIMED: bool = false;
    const DISCONNECTED: RecvError = RecvError;
    const TIMEOUT: RecvError = RecvError;
}

/// [`Receiver::recv_timeout`]'s and [`Receiver::recv_deadline`]'s.
struct Timed;

impl RecvMode for Timed {
    type Error = RecvTimeoutError;
    const TIMED: bool = true;
    const DISCONNECTED: RecvTimeoutError = RecvTimeoutError::Disconnected;
    const TIMEOUT: RecvTimeoutError = RecvTimeoutError::Timeout;
}

/// The sending end of a channel; clone it for more producers.
///
/// ```
/// let (tx, rx) = greenlet::hub::unbounded();
/// let tx2 = tx.clone();
/// tx.send(1).unwrap();
/// tx2.send(2).unwrap();
/// assert_eq!(rx.try_recv(), Ok(1));
/// ```
pub struct Sender<T> {
    chan: Arc<Chan<T>>,
}

/// The receiving end of a channel. Cloning it makes another consumer of
/// the same queue: each value goes to one receive, the longest parked
/// first; sends fail once every clone is gone.
///
/// ```
/// let (tx, rx) = greenlet::hub::channel(4);
/// tx.send("a").unwrap();
/// drop(tx);
/// assert_eq!(rx.into_iter().collect::<Vec<_>>(), ["a"]);
///
/// // A work queue: two consumers share one channel.
/// greenlet::hub::run(|| {
///     let (tx, rx) = greenlet::hub::unbounded::<u32>();
///     let workers: Vec<_> = (0..2)
///         .map(|_| {
///             let rx = rx.clone();
///             greenlet::hub::spawn(move || rx.iter().sum::<u32>())
///         })
///         .collect();
///     drop(rx);
///     for n in 1..=10 {
///         tx.send(n).unwrap();
///     }
///     drop(tx);
///     let total: u32 = workers.into_iter().map(|w| w.join().unwrap()).sum();
///     assert_eq!(total, 55);
/// })
/// .unwrap();
/// ```
pub struct Receiver<T> {
    chan: Arc<Chan<T>>,
}

fn new_chan<T>(capacity: Option<usize>) -> (Sender<T>, Receiver<T>) {
    let chan = Arc::new(Chan {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            capacity,
            senders: 1,
            receivers: 1,
            recv: WaitList::default(),
            send: WaitList::default(),
        }),
    });
    (
        Sender {
            chan: Arc::clone(&chan),
        },
        Receiver { chan },
    )
}

/// A channel holding at most `capacity` values (0 is taken as 1): a send on
/// a full channel parks until there is room.
///
/// ```
/// use greenlet::hub;
/// let got = hub::run(|| {
///     let (tx, rx) = hub::channel(2);
///     let producer = hub::spawn(move || (0..5).for_each(|i| tx.send(i).unwrap()));
///     let all: Vec<i32> = rx.iter().collect(); // ends when tx is dropped
///     producer.join().unwrap();
///     all
/// })
/// .unwrap();
/// assert_eq!(got, [0, 1, 2, 3, 4]);
/// ```
pub fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    new_chan(Some(capacity.max(1)))
}

/// A channel without a bound: sends never park.
///
/// ```
/// let (tx, rx) = greenlet::hub::unbounded();
/// tx.send(1).unwrap();
/// drop(tx);
/// assert_eq!(rx.recv(), Ok(1));
/// assert!(rx.recv().is_err());
/// ```
pub fn unbounded<T>() -> (Sender<T>, Receiver<T>) {
    new_chan(None)
}

impl<T> Sender<T> {
    /// Send `value`, parking while a bounded channel is full. A parking
    /// point: a send cancelled (or whose `timeout` elapses) while parked
    /// did not happen, its value dropped with it, unless a receive had
    /// already moved the value into the channel, in which case it did.
    ///
    /// # Errors
    /// [`SendError`] with the value when every receiver is gone.
    ///
    /// ```
    /// let (tx, rx) = greenlet::hub::channel(1);
    /// drop(rx);
    /// assert_eq!(tx.send(5).unwrap_err().0, 5);
    /// ```
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        let mut st = self.chan.state.lock();
        match st.offer(value) {
            Ok(w) => {
                drop(st);
                wake(w);
                Ok(())
            }
            Err(TrySendError::Disconnected(v)) => Err(SendError(v)),
            Err(TrySendError::Full(v)) => self.send_parked(st, v),
        }
    }

    /// [`send`](Self::send) on a full channel: park until a receive takes
    /// the value or makes room. Out of line: a send with room keeps a
    /// small frame.
    #[inline(never)]
    fn send_parked<'a>(
        &'a self,
        mut st: MutexGuard<'a, State<T>>,
        mut value: T,
    ) -> Result<(), SendError<T>> {
        loop {
            let mut woken = wait_on::<SendSite<T>>(&self.chan.state, st, Some(value), None);
            match woken.take_value() {
                // A receive took it.
                None => return Ok(()),
                // Every receiver went: retry (it fails).
                Some(v) => value = v,
            }
            st = woken.relock();
            match st.offer(value) {
                Ok(w) => {
                    drop(st);
                    wake(w);
                    return Ok(());
                }
                Err(TrySendError::Disconnected(v)) => return Err(SendError(v)),
                Err(TrySendError::Full(v)) => value = v,
            }
        }
    }

    /// Send without parking.
    ///
    /// # Errors
    /// [`TrySendError::Full`] or [`TrySendError::Disconnected`], with the
    /// value.
    ///
    /// ```
    /// use greenlet::hub::TrySendError;
    /// let (tx, _rx) = greenlet::hub::channel(1);
    /// tx.try_send(1).unwrap();
    /// assert!(matches!(tx.try_send(2), Err(TrySendError::Full(2))));
    /// ```
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        let mut st = self.chan.state.lock();
        let w = st.offer(value)?;
        drop(st);
        wake(w);
        Ok(())
    }

    /// Whether every receiver (each clone) is gone.
    ///
    /// ```
    /// let (tx, rx) = greenlet::hub::unbounded::<()>();
    /// assert!(!tx.is_closed());
    /// drop(rx);
    /// assert!(tx.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.chan.state.lock().receivers == 0
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.chan.state.lock().senders += 1;
        Sender {
            chan: Arc::clone(&self.chan),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut st = self.chan.state.lock();
        st.senders -= 1;
        let wakers = if st.senders == 0 {
            st.recv.notify_all()
        } else {
            Vec::new()
        };
        drop(st);
        wake_all(wakers);
    }
}

impl<T> Receiver<T> {
    /// Receive the next value, parking while the channel is empty.
    ///
    /// # Errors
    /// [`RecvError`] once every sender is gone and the queue is empty.
    ///
    /// ```
    /// let (tx, rx) = greenlet::hub::unbounded();
    /// std::thread::spawn(move || tx.send("from a plain thread").unwrap());
    /// assert_eq!(rx.recv().unwrap(), "from a plain thread");
    /// ```
    pub fn recv(&self) -> Result<T, RecvError> {
        self.recv_until::<Untimed>(None)
    }

    /// [`recv`](Self::recv), giving up after `d`.
    ///
    /// # Errors
    /// [`RecvTimeoutError::Timeout`] or [`RecvTimeoutError::Disconnected`].
    ///
    /// ```
    /// use greenlet::hub::RecvTimeoutError;
    /// let (_tx, rx) = greenlet::hub::unbounded::<u8>();
    /// let r = rx.recv_timeout(std::time::Duration::from_millis(1));
    /// assert_eq!(r, Err(RecvTimeoutError::Timeout));
    /// ```
    pub fn recv_timeout(&self, d: Duration) -> Result<T, RecvTimeoutError> {
        self.recv_until::<Timed>(Instant::now().checked_add(d))
    }

    /// [`recv`](Self::recv), giving up at `deadline`.
    ///
    /// # Errors
    /// [`RecvTimeoutError::Timeout`] or [`RecvTimeoutError::Disconnected`].
    ///
    /// ```
    /// let (_tx, rx) = greenlet::hub::unbounded::<u8>();
    /// assert!(rx.recv_deadline(std::time::Instant::now()).is_err());
    /// ```
    pub fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        self.recv_until::<Timed>(Some(deadline))
    }

    /// A receive, parking until `deadline` if any. `M`: whether it may
    /// have one, and its errors (the untimed receive is its own copy, with
    /// no deadline to test).
    fn recv_until<M: RecvMode>(&self, deadline: Option<Instant>) -> Result<T, M::Error> {
        let deadline = deadline.filter(|_| M::TIMED);
        let mut st = self.chan.state.lock();
        loop {
            if let Some((v, w)) = st.take() {
                drop(st);
                wake(w);
                return Ok(v);
            }
            if st.senders == 0 {
                return Err(M::DISCONNECTED);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(M::TIMEOUT);
            }
            // Handed over by a send (read without locking again): the queue
            // was empty, no sender waits for room.
            let lock = &self.chan.state;
            let woken =
                wait_on_then::<RecvSite<T>, _>(lock, st, None, deadline, |woken| match woken {
                    Woken::Notified(_, Some(v)) | Woken::Relocked(_, Some(v)) => Ok(v),
                    woken => Err(woken.relock()),
                });
            match woken {
                Ok(v) => return Ok(v),
                Err(guard) => st = guard,
            }
        }
    }

    /// Receive without parking.
    ///
    /// # Errors
    /// [`TryRecvError::Empty`] or [`TryRecvError::Disconnected`].
    ///
    /// ```
    /// use greenlet::hub::TryRecvError;
    /// let (tx, rx) = greenlet::hub::unbounded::<u8>();
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    /// drop(tx);
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    /// ```
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut st = self.chan.state.lock();
        match st.take() {
            Some((v, w)) => {
                drop(st);
                wake(w);
                Ok(v)
            }
            None if st.senders == 0 => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    /// How many values are queued.
    ///
    /// ```
    /// let (tx, rx) = greenlet::hub::unbounded();
    /// tx.send(1).unwrap();
    /// assert_eq!(rx.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.chan.state.lock().queue.len()
    }

    /// Whether no value is queued.
    ///
    /// ```
    /// let (_tx, rx) = greenlet::hub::unbounded::<u8>();
    /// assert!(rx.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Values until every sender is gone (parking between them).
    ///
    /// ```
    /// let (tx, rx) = greenlet::hub::unbounded();
    /// tx.send(1).unwrap();
    /// tx.send(2).unwrap();
    /// drop(tx);
    /// assert_eq!(rx.iter().sum::<i32>(), 3);
    /// ```
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { rx: self }
    }

    /// Whether a receive would return now (a value, or the end).
    pub(crate) fn is_ready(&self) -> bool {
        let st = self.chan.state.lock();
        !st.queue.is_empty() || st.senders == 0
    }

    /// Watch it for `select`: the caller is woken when a value comes or
    /// the last sender goes; dropping the watch passes a notification on.
    pub(crate) fn watch(&self) -> Watch<'_, RecvSite<T>> {
        Watch::new(&self.chan.state)
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        self.chan.state.lock().receivers += 1;
        Receiver {
            chan: Arc::clone(&self.chan),
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut st = self.chan.state.lock();
        st.receivers -= 1;
        if st.receivers > 0 {
            return;
        }
        let queued = std::mem::take(&mut st.queue);
        let wakers = st.send.notify_all();
        drop(st);
        drop(queued);
        wake_all(wakers);
    }
}

/// Iterator over received values: see [`Receiver::iter`].
pub struct Iter<'a, T> {
    rx: &'a Receiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

/// Owning iterator over received values.
pub struct IntoIter<T> {
    rx: Receiver<T>,
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<T> IntoIterator for Receiver<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;
    fn into_iter(self) -> IntoIter<T> {
        IntoIter { rx: self }
    }
}

/// The sending half of a [`oneshot`] channel.
pub struct OneshotSender<T> {
    tx: Sender<T>,
}

/// The receiving half of a [`oneshot`] channel.
pub struct OneshotReceiver<T> {
    rx: Receiver<T>,
}

/// A channel for exactly one value.
///
/// ```
/// let (tx, rx) = greenlet::hub::oneshot();
/// std::thread::spawn(move || tx.send(9).unwrap());
/// assert_eq!(rx.recv(), Ok(9));
/// ```
pub fn oneshot<T>() -> (OneshotSender<T>, OneshotReceiver<T>) {
    let (tx, rx) = new_chan(Some(1));
    (OneshotSender { tx }, OneshotReceiver { rx })
}

impl<T> OneshotSender<T> {
    /// Send the value (never parks).
    ///
    /// # Errors
    /// The value back, when the receiver is gone.
    ///
    /// ```
    /// let (tx, rx) = greenlet::hub::oneshot();
    /// drop(rx);
    /// assert_eq!(tx.send(1), Err(1));
    /// ```
    pub fn send(self, value: T) -> Result<(), T> {
        self.tx.try_send(value).map_err(TrySendError::into_inner)
    }
}

impl<T> OneshotReceiver<T> {
    /// Wait for the value.
    ///
    /// # Errors
    /// [`RecvError`] when the sender was dropped without sending.
    ///
    /// ```
    /// let (tx, rx) = greenlet::hub::oneshot::<u8>();
    /// drop(tx);
    /// assert!(rx.recv().is_err());
    /// ```
    pub fn recv(self) -> Result<T, RecvError> {
        self.rx.recv()
    }

    /// Take the value if it has come.
    ///
    /// # Errors
    /// [`TryRecvError::Empty`] or [`TryRecvError::Disconnected`].
    ///
    /// ```
    /// let (tx, rx) = greenlet::hub::oneshot();
    /// tx.send(3).unwrap();
    /// assert_eq!(rx.try_recv(), Ok(3));
    /// ```
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        self.rx.try_recv()
    }

    /// [`recv`](Self::recv), giving up after `d`.
    ///
    /// # Errors
    /// [`RecvTimeoutError::Timeout`] or [`RecvTimeoutError::Disconnected`].
    ///
    /// ```
    /// let (_tx, rx) = greenlet::hub::oneshot::<u8>();
    /// assert!(rx.recv_timeout(std::time::Duration::from_millis(1)).is_err());
    /// ```
    pub fn recv_timeout(&self, d: Duration) -> Result<T, RecvTimeoutError> {
        self.rx.recv_timeout(d)
    }

    pub(crate) fn receiver(&self) -> &Receiver<T> {
        &self.rx
    }
}

macro_rules! opaque_debug {
    ($($t:ident),*) => {$(
        impl<T> fmt::Debug for $t<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(concat!(stringify!($t), " { .. }"))
            }
        }
    )*};
}
opaque_debug!(Sender, Receiver, OneshotSender, OneshotReceiver, IntoIter);

impl<T> fmt::Debug for Iter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Iter { .. }")
    }
}

/// A send failed because the receiver is gone; holds the value.
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}
impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a channel whose receivers were all dropped")
    }
}
impl<T> std::error::Error for SendError<T> {}

/// Why [`Sender::try_send`] did not send; holds the value.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TrySendError<T> {
    /// The bounded channel is full.
    Full(T),
    /// Every receiver is gone.
    Disconnected(T),
}

impl<T> TrySendError<T> {
    /// The value that was not sent.
    ///
    /// ```
    /// assert_eq!(greenlet::hub::TrySendError::Full(4).into_inner(), 4);
    /// ```
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(v) | TrySendError::Disconnected(v) => v,
        }
    }
}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}
impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("the channel is full"),
            TrySendError::Disconnected(_) => {
                f.write_str("sending on a channel whose receivers were all dropped")
            }
        }
    }
}
impl<T> std::error::Error for TrySendError<T> {}

/// Every sender is gone and the channel is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("receiving on a channel whose senders were all dropped, with nothing queued")]
pub struct RecvError;

/// Why [`Receiver::try_recv`] returned no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TryRecvError {
    /// Nothing is queued now.
    #[error("the channel is empty")]
    Empty,
    /// Every sender is gone and nothing is queued.
    #[error("receiving on a channel whose senders were all dropped, with nothing queued")]
    Disconnected,
}

/// Why a receive with a deadline returned no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecvTimeoutError {
    /// The deadline passed.
    #[error("the deadline passed with nothing received")]
    Timeout,
    /// Every sender is gone and nothing is queued.
    #[error("receiving on a channel whose senders were all dropped, with nothing queued")]
    Disconnected,
}
