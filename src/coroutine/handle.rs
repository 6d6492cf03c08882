//! [`Greenlet`] handles, [`GreenletBuilder`] and [`getcurrent`]: the public
//! face of a greenlet, and where one is created.
//!
//! Owns the handle API (every public method of `Greenlet` and its trait
//! impls; the struct itself is defined with the record, `record.rs`, which
//! holds a parent's handle) and creation: a record taken from the thread's spare list or made
//! and registered, its closure written in place. Uses the thread state (to
//! find it and check ownership, giving it `thread_exit::UPCALLS` where it is
//! created), records, the switch protocol (`switch`, `throw`) and the
//! lifecycle (`kill`, and what a handle's drop does).

use std::fmt;
use std::mem::ManuallyDrop;
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::error::{ErrorKind, GreenletError};
use super::lifecycle;
use super::payload::Kind;
pub(crate) use super::record::Greenlet;
use super::record::{run_finalizers, Flags, Local, Record};
use super::run::Run;
use super::stack::default_stack_size;
use super::switch;
use super::thread_exit::UPCALLS;
use super::thread_state::{self, ThreadState};
use super::value::Value;
use super::weak::WeakGreenlet;

impl Greenlet {
    /// Give a greenlet just made by [`spawn_in`] its closure, written
    /// straight into the record (generic, so not copied through a
    /// non-generic call).
    ///
    /// # Safety
    /// `self` was just returned by `spawn_in` on this thread.
    #[inline(always)]
    unsafe fn install<F>(self, run: F) -> Greenlet
    where
        F: FnOnce(Value) -> Result<Value, GreenletError> + 'static,
    {
        // SAFETY: a record fresh from `spawn_in` belongs to this thread, has
        // an empty `run` (nothing to drop) and has not run, so nothing else
        // accesses its `local` now.
        unsafe { ptr::write(ptr::addr_of_mut!((*self.record.local()).run), Run::new(run)) };
        self
    }

    /// A new greenlet that will run `run` with the value of the first switch
    /// into it. Its parent is the current greenlet; its stack has
    /// [`default_stack_size()`](crate::coroutine::default_stack_size) bytes
    /// (256 KiB unless changed) and is taken when it starts.
    ///
    /// `run` returns the value for the parent's pending switch, or an error
    /// raised there (`GreenletExit` counts as a normal end).
    ///
    /// ```
    /// let g = greenlet::Greenlet::new(|v| Ok((v.downcast::<i32>()? * 2).into()));
    /// assert_eq!(g.switch(21).unwrap().downcast::<i32>().unwrap(), 42);
    /// ```
    pub fn new<F>(run: F) -> Greenlet
    where
        F: FnOnce(Value) -> Result<Value, GreenletError> + 'static,
    {
        match thread_state::existing_state() {
            // SAFETY: `ts` is this thread's live state.
            Some(ts) => unsafe { spawn_default(ts).install(run) },
            None => Greenlet::new_first(run),
        }
    }

    /// [`new`](Self::new) on a thread whose greenlet state is not made yet
    /// (or is gone): made now, unless the thread is exiting. Apart, so
    /// that `new` tests the state it has in one compare.
    #[cold]
    #[inline(never)]
    fn new_first<F>(run: F) -> Greenlet
    where
        F: FnOnce(Value) -> Result<Value, GreenletError> + 'static,
    {
        match thread_state::state(&UPCALLS) {
            // SAFETY: `ts` is this thread's live state.
            Some(ts) => unsafe { spawn_default(ts).install(run) },
            None => dead_on_arrival(None),
        }
    }

    /// Configure a greenlet before creating it.
    ///
    /// ```
    /// let g = greenlet::Greenlet::builder()
    ///     .name("worker")
    ///     .stack_size(64 * 1024)
    ///     .spawn(|v| Ok(v))
    ///     .unwrap();
    /// assert_eq!(g.name(), "worker");
    /// ```
    pub fn builder() -> GreenletBuilder {
        GreenletBuilder {
            parent: None,
            stack_size: default_stack_size(),
            name: None,
        }
    }

    /// Switch to this greenlet, sending `value`; returns what the next switch
    /// back to the caller carries (or the error thrown into it).
    ///
    /// Unstarted: runs it with `value`. Suspended: its pending `switch`
    /// returns `value`. Dead: the value goes to its nearest live ancestor.
    /// The current greenlet: returns `value` at once.
    ///
    /// # Errors
    /// Whatever a greenlet raises into the caller (an error or panic of a
    /// child that ends, a `throw`); [`ErrorKind::WrongThread`] /
    /// [`ErrorKind::ThreadExited`] for another thread's greenlet;
    /// [`ErrorKind::StackAllocation`] if it could not start.
    ///
    /// ```
    /// let me = greenlet::getcurrent();
    /// assert_eq!(me.switch(7).unwrap().downcast::<i32>().unwrap(), 7);
    /// ```
    #[inline]
    pub fn switch(&self, value: impl Into<Value>) -> Result<Value, GreenletError> {
        switch::send(&self.record, Ok(value.into()), Kind::Switch, &UPCALLS)
    }

    /// Raise `err` in this greenlet: its pending `switch` returns `Err(err)`.
    ///
    /// Unstarted: it dies without running and `err` goes up its parent
    /// chain (`GreenletExit` as the value it ended with, which its parent's
    /// pending switch returns). Dead: `err` goes to its nearest live
    /// ancestor, `GreenletExit` again as a value (the caller, if that is the
    /// ancestor, gets it back). As in greenlet.
    ///
    /// # Errors
    /// As for [`switch`](Self::switch): whatever comes back to the caller.
    ///
    /// ```
    /// use greenlet::{Greenlet, GreenletError};
    ///
    /// let g = Greenlet::new(|_| {
    ///     let main = greenlet::getcurrent().parent().unwrap();
    ///     match main.switch(()) {
    ///         Err(e) => Ok(format!("caught: {e}").into()),
    ///         Ok(_) => Ok("no error".into()),
    ///     }
    /// });
    /// g.switch(()).unwrap();
    /// let v = g.throw(GreenletError::user("boom")).unwrap();
    /// assert_eq!(v.downcast::<String>().unwrap(), "caught: boom");
    /// ```
    pub fn throw(&self, err: GreenletError) -> Result<Value, GreenletError> {
        switch::send(&self.record, Err(err), Kind::Throw, &UPCALLS)
    }

    /// Kill this greenlet: throw `GreenletExit` into it and let it run to
    /// its end, with control coming back to the caller (not to its parent),
    /// as greenlet's kill of a collected greenlet does: for the throw, the
    /// caller is its parent (inside, [`parent`](Self::parent) is the caller
    /// and a switch to the parent comes back to the caller), and its own
    /// parent is back afterwards. (Killing an ancestor of the caller, which
    /// greenlet never does, leaves the parent as it is: the result still
    /// comes back to the caller.) Unstarted: it dies without running. Dead:
    /// nothing happens. The running greenlet killing itself gets
    /// `Err(GreenletExit)` back at once, as from a throw into itself
    /// (propagate it with `?`). A main greenlet never dies while its thread
    /// runs: killing one only throws `GreenletExit` into it.
    ///
    /// # Errors
    /// [`ErrorKind::KillIgnored`] if it caught the exit and switched
    /// back instead of finishing; the error it ended with if it turned the
    /// exit into another error; an error raised in the caller before it
    /// finished (thrown back by it, or by another greenlet while it was
    /// away: a `GreenletExit` if the caller was killed meanwhile); the
    /// thread errors of [`switch`](Self::switch).
    ///
    /// ```
    /// use std::rc::Rc;
    /// let token = Rc::new(());
    /// let held = Rc::clone(&token);
    /// let g = greenlet::Greenlet::new(move |_| {
    ///     let _keep = held;
    ///     let parent = greenlet::getcurrent().parent().unwrap();
    ///     parent.switch(())?;
    ///     Ok(().into())
    /// });
    /// g.switch(()).unwrap();
    /// assert_eq!(Rc::strong_count(&token), 2);
    /// g.kill().unwrap();
    /// assert!(g.is_dead());
    /// assert_eq!(Rc::strong_count(&token), 1); // its locals were dropped
    /// ```
    pub fn kill(&self) -> Result<(), GreenletError> {
        lifecycle::kill_from_api(&self.record, &UPCALLS)
    }

    /// Whether it has finished (or was killed). A main greenlet is dead once
    /// its thread has exited.
    ///
    /// ```
    /// let g = greenlet::Greenlet::new(Ok);
    /// assert!(!g.is_dead());
    /// g.switch(()).unwrap();
    /// assert!(g.is_dead());
    /// ```
    #[inline]
    pub fn is_dead(&self) -> bool {
        self.record.flags().is_dead()
    }

    /// Whether it has been switched into (main greenlets always have).
    ///
    /// ```
    /// let g = greenlet::Greenlet::new(Ok);
    /// assert!(!g.is_started());
    /// g.switch(()).unwrap();
    /// assert!(g.is_started());
    /// ```
    #[inline]
    pub fn is_started(&self) -> bool {
        self.record.flags().is_started()
    }

    /// Started and not dead (Python's `bool(g)`).
    ///
    /// ```
    /// let g = greenlet::Greenlet::new(|v| Ok(v));
    /// assert!(!g.is_active());
    /// g.switch(()).unwrap();
    /// assert!(!g.is_active() && g.is_dead());
    /// ```
    #[inline]
    pub fn is_active(&self) -> bool {
        self.record.flags().is_active()
    }

    /// Whether it is a thread's main greenlet.
    ///
    /// ```
    /// assert!(greenlet::getcurrent().is_main());
    /// ```
    #[inline]
    pub fn is_main(&self) -> bool {
        self.record.flags().is_main()
    }

    /// A process-unique id.
    ///
    /// ```
    /// let (a, b) = (greenlet::Greenlet::new(Ok), greenlet::Greenlet::new(Ok));
    /// assert_ne!(a.id(), b.id());
    /// assert_eq!(a.id(), a.clone().id());
    /// ```
    #[inline]
    pub fn id(&self) -> u64 {
        self.record.id()
    }

    /// A new greenlet of the calling thread for the hub's unnamed green
    /// thread `task`, whose parent is the current greenlet: as
    /// `Greenlet::builder().stack_size(stack_size).spawn(run)`, named
    /// `task-<task>` after that green thread, so that its name, its errors
    /// and its stack-overflow report say what the green thread's own errors
    /// say (no allocation). Its common case, the hub (the thread's main
    /// greenlet) starting it with no mail to read and a spare record, takes
    /// that record as it is (see [`spawn_task_record`]).
    #[cfg(feature = "hub")]
    #[inline]
    pub(crate) fn spawn_for_task<F>(
        stack_size: usize,
        task: u64,
        run: F,
    ) -> Result<Greenlet, GreenletError>
    where
        F: FnOnce(Value) -> Result<Value, GreenletError> + 'static,
    {
        let Some(ts) = thread_state::state(&UPCALLS) else {
            // The thread's state is gone: the builder's error says so.
            return Greenlet::builder().stack_size(stack_size).spawn(run);
        };
        // SAFETY: `ts` is this thread's live state.
        Ok(unsafe { spawn_task_record(ts, stack_size, task).install(run) })
    }

    /// Its name: the one given to the builder; for a main greenlet, its
    /// thread's name (`main` for the process's first thread), or
    /// `thread <n>` for an unnamed thread; for the greenlet of a hub green
    /// thread, that thread's name (`task-<id>` unless named); else
    /// `greenlet-<id>`.
    ///
    /// ```
    /// let g = greenlet::Greenlet::new(Ok);
    /// assert_eq!(g.name(), format!("greenlet-{}", g.id()));
    /// assert_eq!(greenlet::getcurrent().name(), "main");
    /// let worker = std::thread::Builder::new().name("worker".into());
    /// let name = worker.spawn(|| greenlet::getcurrent().name()).unwrap().join().unwrap();
    /// assert_eq!(name, "worker");
    /// let unnamed = std::thread::spawn(|| greenlet::getcurrent().name()).join().unwrap();
    /// assert!(unnamed.starts_with("thread "));
    /// ```
    pub fn name(&self) -> String {
        self.record.name()
    }

    /// A weak handle to it, which does not keep it alive (see
    /// [`WeakGreenlet`]).
    ///
    /// ```
    /// let g = greenlet::Greenlet::new(|v| Ok(v));
    /// let weak = g.downgrade();
    /// assert!(weak.upgrade().is_some());
    /// drop(g); // its last handle: the greenlet goes
    /// assert!(weak.upgrade().is_none());
    /// ```
    pub fn downgrade(&self) -> WeakGreenlet {
        WeakGreenlet::new(Arc::downgrade(&self.record))
    }

    /// Its parent (`None` for a main greenlet).
    ///
    /// ```
    /// let main = greenlet::getcurrent();
    /// let g = greenlet::Greenlet::new(|v| Ok(v));
    /// assert_eq!(g.parent(), Some(main));
    /// ```
    pub fn parent(&self) -> Option<Greenlet> {
        self.record.parent()
    }

    /// Make `parent` this greenlet's parent (where its result goes).
    ///
    /// # Errors
    /// [`ErrorKind::MainCannotHaveParent`],
    /// [`ErrorKind::ParentCycle`] if `parent` descends from this
    /// greenlet, [`ErrorKind::ParentOnOtherThread`], and the thread
    /// errors when called from another thread than the greenlet's.
    ///
    /// ```
    /// use greenlet::{ErrorKind, Greenlet};
    /// let a = Greenlet::new(|v| Ok(v));
    /// let b = Greenlet::new(|v| Ok(v));
    /// b.set_parent(&a).unwrap();
    /// let err = a.set_parent(&b).unwrap_err();
    /// assert!(matches!(err.kind(), ErrorKind::ParentCycle { .. }));
    /// ```
    pub fn set_parent(&self, parent: &Greenlet) -> Result<(), GreenletError> {
        thread_state::check_owner(&self.record, &UPCALLS)?;
        if self.is_main() {
            return Err(GreenletError::from(ErrorKind::MainCannotHaveParent {
                greenlet: self.record.label(),
            }));
        }
        if !Arc::ptr_eq(&self.record.thread, &parent.record.thread) {
            return Err(parent_thread_error(&self.record, &parent.record));
        }
        let mut ancestor = Some(Arc::clone(&parent.record));
        while let Some(a) = ancestor {
            if Arc::ptr_eq(&a, &self.record) {
                return Err(GreenletError::from(ErrorKind::ParentCycle {
                    greenlet: self.record.label(),
                    parent: parent.record.label(),
                }));
            }
            ancestor = a.parent_record();
        }
        let old = self.record.replace_parent(parent.clone());
        drop(old);
        Ok(())
    }

    /// Run `callback` when this greenlet is finalized, like a Python weakref
    /// callback: when it is dead and its last handle goes, or when its
    /// thread exits while it is still alive (main greenlets: when their
    /// thread exits, through the thread's cleanup queue). Registered on an
    /// already finalized greenlet, `callback` runs at once.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// let ran = Arc::new(AtomicBool::new(false));
    /// let g = greenlet::Greenlet::new(|v| Ok(v));
    /// let flag = Arc::clone(&ran);
    /// g.on_finalize(move || flag.store(true, Ordering::SeqCst));
    /// g.switch(()).unwrap();
    /// assert!(!ran.load(Ordering::SeqCst)); // dead, but a handle remains
    /// drop(g);
    /// assert!(ran.load(Ordering::SeqCst));
    /// ```
    pub fn on_finalize(&self, callback: impl FnOnce() + Send + 'static) {
        if let Err(callback) = self.record.add_finalizer(Box::new(callback)) {
            drop(run_finalizers(vec![callback], || self.record.label()));
        }
    }
}

fn parent_thread_error(child: &Record, parent: &Record) -> GreenletError {
    GreenletError::from(ErrorKind::ParentOnOtherThread {
        greenlet: child.label(),
        thread: child.thread.label.clone(),
        parent: parent.label(),
        parent_thread: parent.thread.label.clone(),
    })
}

impl Clone for Greenlet {
    #[inline]
    fn clone(&self) -> Greenlet {
        Record::new_handle(Arc::clone(&self.record))
    }
}

impl Drop for Greenlet {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: `self.record` is never used again.
        let record = unsafe { ManuallyDrop::take(&mut self.record) };
        // The Acquire pairs with other threads' handle drops (AcqRel), as
        // the `fetch_sub` below does.
        if record.handles() == 1 {
            lifecycle::drop_only_handle(record);
        } else if record.release_handle() {
            lifecycle::last_handle_dropped(record);
        }
    }
}

impl PartialEq for Greenlet {
    fn eq(&self, other: &Greenlet) -> bool {
        Arc::ptr_eq(&self.record, &other.record)
    }
}

impl Eq for Greenlet {}

impl std::hash::Hash for Greenlet {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.record.id().hash(state);
    }
}

impl fmt::Debug for Greenlet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Greenlet")
            .field("id", &self.record.id())
            .field("name", &self.record.name())
            .field("thread", &self.record.thread.label)
            .field("state", &self.record.flags().state_name())
            .finish()
    }
}

/// Options for a new greenlet: see [`Greenlet::builder`].
#[derive(Debug)]
pub struct GreenletBuilder {
    parent: Option<Greenlet>,
    stack_size: usize,
    name: Option<String>,
}

impl GreenletBuilder {
    /// Its parent (default: the current greenlet). Must belong to the
    /// calling thread.
    ///
    /// ```
    /// let p = greenlet::Greenlet::new(Ok);
    /// let g = greenlet::Greenlet::builder().parent(&p).spawn(Ok).unwrap();
    /// assert_eq!(g.parent(), Some(p));
    /// ```
    pub fn parent(mut self, parent: &Greenlet) -> Self {
        self.parent = Some(parent.clone());
        self
    }

    /// Usable stack bytes (default
    /// [`default_stack_size()`](crate::coroutine::default_stack_size)),
    /// rounded up to whole pages, of which the top 64 bytes hold the
    /// greenlet's coroutine state; the stack is taken when the greenlet starts.
    ///
    /// ```
    /// let g = greenlet::Greenlet::builder().stack_size(32 * 1024).spawn(Ok).unwrap();
    /// g.switch(()).unwrap();
    /// ```
    pub fn stack_size(mut self, size: usize) -> Self {
        self.stack_size = size;
        self
    }

    /// Its name, for messages and [`Greenlet::name`].
    ///
    /// ```
    /// let g = greenlet::Greenlet::builder().name("io").spawn(Ok).unwrap();
    /// assert_eq!(g.name(), "io");
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Create the greenlet (it starts at the first switch into it).
    ///
    /// # Errors
    /// [`ErrorKind::ParentOnOtherThread`] if the parent belongs to
    /// another thread; [`ErrorKind::ThreadExited`] if called while the
    /// calling thread's greenlet state is being torn down.
    ///
    /// ```
    /// let main = greenlet::getcurrent();
    /// let outer = greenlet::Greenlet::new(|v| Ok(v));
    /// let g = greenlet::Greenlet::builder().parent(&outer).spawn(|v| Ok(v)).unwrap();
    /// assert_eq!(g.parent(), Some(outer));
    /// # drop(main);
    /// ```
    pub fn spawn<F>(self, run: F) -> Result<Greenlet, GreenletError>
    where
        F: FnOnce(Value) -> Result<Value, GreenletError> + 'static,
    {
        let name = self.name.map(String::into_boxed_str);
        let Some(ts) = thread_state::state(&UPCALLS) else {
            let g = dead_on_arrival(name);
            return Err(GreenletError::from(ErrorKind::ThreadExited {
                target: g.record.label(),
                target_thread: g.record.thread.label.clone(),
            }));
        };
        if let Some(parent) = &self.parent {
            // SAFETY: `ts` is this thread's live state; short read.
            let link = unsafe { Arc::as_ptr(&(*ts).link) };
            if !std::ptr::eq(Arc::as_ptr(&parent.record.thread), link) {
                let g = dead_on_arrival(name.clone());
                return Err(parent_thread_error(&g.record, &parent.record));
            }
        }
        // SAFETY: `ts` is this thread's live state.
        Ok(unsafe { spawn_configured(ts, self.parent, name, self.stack_size).install(run) })
    }
}

/// [`spawn_in`] for [`Greenlet::new`]: no parent given (the current
/// greenlet), no name, the default stack size. Its common case, main
/// creating a greenlet with no mail to read and a spare record (whose
/// parent is main's handle), takes that record as it is and calls nothing
/// (so it saves no register); anything else goes through
/// [`spawn_configured`].
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline(never)]
unsafe fn spawn_default(ts: *mut ThreadState) -> Greenlet {
    // SAFETY: `ts` is live (caller).
    unsafe {
        if let Some((record, id)) = main_spare(ts) {
            // SAFETY: `record` came from `spare` (a reset record of this
            // thread, referred to by `record` and the registry only, as
            // `reuse` needs). It has main's parent handle, which main's
            // new greenlet gets: nothing replaced.
            let spare = &mut *Arc::as_ptr(&record).cast_mut();
            spare.reuse_unnamed(id, default_stack_size());
            return Greenlet {
                record: ManuallyDrop::new(record),
            };
        }
        spawn_configured(ts, None, None, default_stack_size())
    }
}

/// The common case of a spawn with no parent given: main creating a
/// greenlet with no mail to read, and a spare record (whose parent is
/// main's handle) to take. That record, counted, and the new greenlet's
/// id; `None` in any other case.
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline(always)]
unsafe fn main_spare(ts: *mut ThreadState) -> Option<(Arc<Record>, u64)> {
    // SAFETY: `ts` is live (caller); the accesses below are short and run
    // no user code. `current` is main's record, alive.
    unsafe {
        let plain = !ThreadState::link(ts).has_mail(Ordering::Relaxed)
            && ptr::eq((*ts).current, (*ts).main_ptr);
        if !plain {
            return None;
        }
        let record = (*ts).spare.pop()?;
        (*ts).records.add(1);
        Some((record, (*ts).ids.take()))
    }
}

/// [`spawn_in`] for [`Greenlet::spawn_for_task`]: no parent given (the
/// current greenlet), no name (named after `task`). Its common case, main
/// with no mail to read and a spare record (whose parent is main's handle),
/// takes that record as it is, as [`spawn_default`] does.
///
/// # Safety
/// `ts` is the calling thread's live state.
#[cfg(feature = "hub")]
#[inline(never)]
unsafe fn spawn_task_record(ts: *mut ThreadState, stack_size: usize, task: u64) -> Greenlet {
    // SAFETY: `ts` is live (caller).
    unsafe {
        if let Some((record, id)) = main_spare(ts) {
            // SAFETY: as in `spawn_default`: a reset record of this
            // thread, referred to by `record` and the registry only, with
            // main's parent handle, which the new greenlet gets.
            let spare = &mut *Arc::as_ptr(&record).cast_mut();
            spare.reuse_for_task(id, stack_size, task);
            return Greenlet {
                record: ManuallyDrop::new(record),
            };
        }
        let g = spawn_configured(ts, None, None, stack_size);
        g.record.name_after_task(task);
        g
    }
}

/// Create a greenlet in `ts`'s thread, without its closure (see
/// [`Greenlet::install`]).
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline(always)]
unsafe fn spawn_in(
    ts: *mut ThreadState,
    parent: Option<Greenlet>,
    name: Option<Box<str>>,
    stack_size: usize,
) -> Greenlet {
    // SAFETY: `ts` is live; the accesses below are short and run no user code.
    unsafe {
        thread_state::check_mail(ts);
        (*ts).records.add(1);
        let id = (*ts).ids.take();
        let record = match (*ts).spare.pop() {
            // Still registered, under the key its `local` holds.
            Some(record) => {
                let old_parent = reuse(ts, &record, id, name, parent, stack_size);
                // Only ever the main greenlet's handle: no user code runs.
                drop(old_parent);
                record
            }
            None => new_record(ts, id, name, parent, stack_size),
        };
        Greenlet {
            record: ManuallyDrop::new(record),
        }
    }
}

/// [`spawn_in`] for [`GreenletBuilder::spawn`], out of line (not generic).
///
/// # Safety
/// `ts` is the calling thread's live state.
#[inline(never)]
unsafe fn spawn_configured(
    ts: *mut ThreadState,
    parent: Option<Greenlet>,
    name: Option<Box<str>>,
    stack_size: usize,
) -> Greenlet {
    // SAFETY: guaranteed by the caller.
    unsafe { spawn_in(ts, parent, name, stack_size) }
}

/// A new registered record, when the thread has no spare one (kept out of
/// `spawn_in`, whose common case is a reused record).
///
/// # Safety
/// `ts` is the calling thread's live state.
#[cold]
#[inline(never)]
unsafe fn new_record(
    ts: *mut ThreadState,
    id: u64,
    name: Option<Box<str>>,
    parent: Option<Greenlet>,
    stack_size: usize,
) -> Arc<Record> {
    // SAFETY: guaranteed by the caller; short accesses, no user code.
    unsafe {
        let key = (*ts).registry.vacant_key();
        let parent = match parent {
            Some(p) => p,
            None => Record::new_handle((*ts).current_arc()),
        };
        let local = Local::registered(key, stack_size);
        let record = Arc::new(Record::new(
            id,
            name,
            Flags::UNSTARTED,
            1,
            Arc::clone(&(*ts).link),
            Some(parent),
            local,
        ));
        let inserted = (*ts).registry.insert(Arc::clone(&record));
        debug_assert_eq!(inserted, key, "the registry changed meanwhile");
        record
    }
}

/// Make a spare record (see `ThreadState::recycle`) the record of a new greenlet with
/// one handle; returns the parent handle it replaced, if any.
///
/// # Safety
/// `ts` is the calling thread's live state and `record` came from its `spare`
/// list (a reset record of this thread, referred to by `record` and the
/// registry only).
unsafe fn reuse(
    ts: *mut ThreadState,
    record: &Arc<Record>,
    id: u64,
    name: Option<Box<str>>,
    parent: Option<Greenlet>,
    stack_size: usize,
) -> Option<Greenlet> {
    // SAFETY: the caller guarantees `ts`; the current greenlet is alive.
    let current_is_main = unsafe { std::ptr::eq((*ts).current, Arc::as_ptr(&(*ts).main)) };
    // SAFETY: `record` and the registry's entry (not used meanwhile) are the
    // only references to the record (see `ThreadState::recycle`), so nothing
    // else reads or writes it while `spare` lives.
    let spare = unsafe { &mut *Arc::as_ptr(record).cast_mut() };
    // The new parent handle, unless the record's own (main's) will do.
    let parent = match parent {
        Some(p) => Some(p),
        None if current_is_main => None,
        // SAFETY: as above; the current greenlet is another record.
        None => Some(Record::new_handle(unsafe { (*ts).current_arc() })),
    };
    spare.reuse(id, name, stack_size, parent)
}

/// A greenlet created where no thread state exists any more: it can never
/// run, so it is born dead and its closure is never kept.
fn dead_on_arrival(name: Option<Box<str>>) -> Greenlet {
    Greenlet {
        record: ManuallyDrop::new(Record::new_dead(name)),
    }
}

/// The greenlet running on the calling thread, created (with the thread's
/// greenlet state) on first use.
///
/// Called from a thread-local destructor after the thread's greenlet state
/// was torn down, it returns a dead stand-in main greenlet.
///
/// # Example
/// ```
/// let main = greenlet::getcurrent();
/// assert!(main.is_main() && main.is_active());
/// let g = greenlet::Greenlet::new(|_| Ok(greenlet::Value::new(greenlet::getcurrent().id())));
/// let id = g.switch(()).unwrap().downcast::<u64>().unwrap();
/// assert_eq!(id, g.id());
/// ```
pub fn getcurrent() -> Greenlet {
    match thread_state::state(&UPCALLS) {
        Some(ts) => {
            // SAFETY: `ts` is this thread's live state.
            unsafe {
                thread_state::check_mail(ts);
                Record::new_handle((*ts).current_arc())
            }
        }
        None => Record::new_handle(thread_state::detached_main()),
    }
}
