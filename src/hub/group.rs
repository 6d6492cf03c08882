//! [`TaskGroup`]: green threads spawned together, joined all at once
//! ([`TaskGroup::join_all`]) or as they finish ([`TaskGroup::join_next`],
//! like gevent's `iwait` or tokio's `JoinSet`), or reaped without waiting
//! ([`TaskGroup::try_join_next`]). Dropping a group cancels what is still
//! running in it.
//!
//! Owns: [`TaskGroup`]. Uses `spawn`, `JoinHandle` and an unbounded channel
//! on which each member reports that it ended.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::panic::Location;

use super::channel::{unbounded, Receiver, Sender};
use super::error::{HubError, JoinError};
use super::join::JoinHandle;
use super::runtime::Handle;

/// Sends the member's index when dropped: at the end of its closure,
/// whether it returned, panicked or was cancelled, or when the closure is
/// dropped unrun.
struct Ended(Sender<usize>, usize);

impl Drop for Ended {
    fn drop(&mut self) {
        let _ = self.0.send(self.1);
    }
}

/// A set of green threads with one result type.
///
/// Dropping the group cancels the members still running (unlike dropping a
/// [`JoinHandle`], which detaches its green thread). A member's result stays
/// in the group until it is joined, so a long-lived group (an accept loop's
/// connections) reaps its finished members with
/// [`try_join_next`](Self::try_join_next) to stay small.
///
/// ```
/// use greenlet::hub::{self, TaskGroup};
/// let firsts = hub::run(|| {
///     let (go, wait) = hub::oneshot::<()>();
///     let mut g = TaskGroup::new();
///     g.spawn(move || { wait.recv().unwrap(); "waits" }).unwrap();
///     g.spawn(|| "at once").unwrap();
///     let first = g.join_next().unwrap().unwrap();
///     go.send(()).unwrap();
///     let rest = g.join_all();
///     (first, rest.len())
/// })
/// .unwrap();
/// assert_eq!(firsts, ("at once", 1));
/// ```
pub struct TaskGroup<T> {
    members: HashMap<usize, JoinHandle<T>>,
    next: usize,
    tx: Sender<usize>,
    rx: Receiver<usize>,
    /// Members whose closure has ended, taken off `rx` but not yet joined:
    /// by `try_join_next` while their result was not yet stored, or by a
    /// `join_next` whose wait for it was cut short.
    ended: VecDeque<usize>,
}

impl<T: Send + 'static> Default for TaskGroup<T> {
    fn default() -> Self {
        TaskGroup::new()
    }
}

impl<T: Send + 'static> TaskGroup<T> {
    /// An empty group.
    ///
    /// ```
    /// let g = greenlet::hub::TaskGroup::<()>::new();
    /// assert!(g.is_empty());
    /// ```
    pub fn new() -> TaskGroup<T> {
        let (tx, rx) = unbounded();
        TaskGroup {
            members: HashMap::new(),
            next: 0,
            tx,
            rx,
            ended: VecDeque::new(),
        }
    }

    /// Spawn `f` into the group on the current runtime.
    ///
    /// # Errors
    /// [`HubError::NoRuntime`] outside a runtime.
    ///
    /// ```
    /// let mut g = greenlet::hub::TaskGroup::new();
    /// assert!(g.spawn(|| 1).is_err()); // no runtime here
    /// ```
    #[track_caller]
    pub fn spawn<F>(&mut self, f: F) -> Result<u64, HubError>
    where
        F: FnOnce() -> T + Send + 'static,
    {
        let site = Location::caller();
        let handle = Handle::current()?;
        let index = self.next;
        self.next += 1;
        let ended = Ended(self.tx.clone(), index);
        let h = handle.shared.spawn_at(
            move || {
                let _ended = ended;
                f()
            },
            None,
            None,
            site,
        );
        let id = h.id();
        self.members.insert(index, h);
        Ok(id)
    }

    /// How many members have not been joined.
    ///
    /// ```
    /// assert_eq!(greenlet::hub::TaskGroup::<u8>::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether every member has been joined.
    ///
    /// ```
    /// assert!(greenlet::hub::TaskGroup::<u8>::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The result of the first member to finish (parking until one does);
    /// `None` when none is left. A parking point.
    ///
    /// ```
    /// greenlet::hub::run(|| {
    ///     let mut g = greenlet::hub::TaskGroup::new();
    ///     g.spawn(|| 3).unwrap();
    ///     assert_eq!(g.join_next().unwrap().unwrap(), 3);
    ///     assert!(g.join_next().is_none());
    /// })
    /// .unwrap();
    /// ```
    pub fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        while !self.members.is_empty() {
            let index = match self.ended.front() {
                Some(&index) => index,
                None => match self.rx.recv() {
                    Ok(index) => {
                        self.ended.push_back(index);
                        index
                    }
                    Err(_) => break,
                },
            };
            let Some(h) = self.members.get(&index) else {
                self.ended.pop_front();
                continue;
            };
            // Its closure has ended; its result may still be on its way
            // into the task. The member and its place in `ended` stay
            // until it is there, so a cancel or timeout of this wait loses
            // nothing: the next call finds them.
            if let Err(e) = h.wait_done() {
                return Some(Err(e));
            }
            self.ended.pop_front();
            let h = self.members.remove(&index)?;
            return Some(h.join());
        }
        None
    }

    /// The result of a member that has finished, without waiting; `None`
    /// when none has (or none is left). Not a parking point: an accept
    /// loop calls it between accepts so that its group holds only the
    /// connections still open.
    ///
    /// ```
    /// use greenlet::hub::{self, TaskGroup};
    /// hub::run(|| {
    ///     let mut g = TaskGroup::new();
    ///     let (go, wait) = hub::oneshot::<()>();
    ///     g.spawn(move || wait.recv().map(|()| "waited").unwrap()).unwrap();
    ///     g.spawn(|| "at once").unwrap();
    ///     while g.len() == 2 {
    ///         match g.try_join_next() {
    ///             Some(r) => assert_eq!(r.unwrap(), "at once"),
    ///             None => hub::yield_now(),
    ///         }
    ///     }
    ///     assert!(g.try_join_next().is_none()); // the other still waits
    ///     go.send(()).unwrap();
    ///     assert_eq!(g.join_next().unwrap().unwrap(), "waited");
    /// })
    /// .unwrap();
    /// ```
    pub fn try_join_next(&mut self) -> Option<Result<T, JoinError>> {
        while let Ok(index) = self.rx.try_recv() {
            self.ended.push_back(index);
        }
        // A member's closure ends (and reports) just before its result is
        // stored: one whose handle is not finished yet stays queued.
        let members = &self.members;
        self.ended.retain(|i| members.contains_key(i));
        let pos = self.ended.iter().position(|i| members[i].is_finished())?;
        let index = self.ended.remove(pos)?;
        let h = self.members.remove(&index)?;
        Some(h.join())
    }

    /// Every member's result, in the order they were spawned. A parking
    /// point.
    ///
    /// ```
    /// let v = greenlet::hub::run(|| {
    ///     let mut g = greenlet::hub::TaskGroup::new();
    ///     for i in 0..3 {
    ///         g.spawn(move || i).unwrap();
    ///     }
    ///     g.join_all().into_iter().map(Result::unwrap).collect::<Vec<_>>()
    /// })
    /// .unwrap();
    /// assert_eq!(v, [0, 1, 2]);
    /// ```
    pub fn join_all(mut self) -> Vec<Result<T, JoinError>> {
        let mut members: Vec<_> = self.members.drain().collect();
        members.sort_by_key(|(i, _)| *i);
        members.into_iter().map(|(_, h)| h.join()).collect()
    }

    /// Cancel every member still running.
    ///
    /// ```
    /// greenlet::hub::run(|| {
    ///     let mut g = greenlet::hub::TaskGroup::new();
    ///     g.spawn(|| greenlet::hub::sleep(std::time::Duration::from_secs(3600))).unwrap();
    ///     g.cancel_all();
    ///     assert!(g.join_next().unwrap().unwrap_err().is_cancelled());
    /// })
    /// .unwrap();
    /// ```
    pub fn cancel_all(&self) {
        for h in self.members.values() {
            h.cancel();
        }
    }
}

impl<T> Drop for TaskGroup<T> {
    fn drop(&mut self) {
        for h in self.members.values() {
            h.cancel();
        }
    }
}

impl<T> fmt::Debug for TaskGroup<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskGroup")
            .field("members", &self.members.len())
            .finish()
    }
}
