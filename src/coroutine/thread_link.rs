//! [`ThreadLink`]: the part of a thread's greenlet state that other threads
//! may touch (its label for messages, its main greenlet's name, whether it
//! is alive, the inbox of greenlets whose last handle went elsewhere), and
//! the byte every switch of the owner tests, which the inbox's mark shares
//! with the owner's own reasons for the slow path.
//!
//! Every record holds its owner's link. Uses nothing of the coroutine
//! module: the inbox's item type `M` is the record (`Arc<Record>`), named by
//! the files that hold a link.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// The part of a thread's state that other threads may touch: identity,
/// liveness, and the inbox of greenlets (`M`, their records) whose last
/// handle went elsewhere.
pub(crate) struct ThreadLink<M> {
    /// `'name' (ThreadId(n))`, for messages.
    pub(crate) label: String,
    /// The name of the thread's main greenlet: the thread's name, else
    /// `thread <n>` (see [`main_greenlet_name`]).
    pub(crate) main_name: Box<str>,
    /// False once the thread has exited (or for detached greenlets).
    pub(crate) alive: AtomicBool,
    /// [`SLOW`] and [`MAIL`]: non-zero when the sending side of a switch
    /// on the owner thread must take the slow path. Read without the lock
    /// on every switch and greenlet operation of the owner.
    switch_flags: AtomicU8,
    /// Greenlets whose last handle was dropped on another thread, for the
    /// owner to finalize or kill.
    pub(crate) inbox: Mutex<Vec<M>>,
}

impl<M> ThreadLink<M> {
    /// The link of the calling thread.
    pub(crate) fn for_current_thread(alive: bool) -> Arc<ThreadLink<M>> {
        // `thread::current` may refuse late in thread-local teardown.
        let (label, main_name) = std::panic::catch_unwind(|| {
            let thread = std::thread::current();
            let label = format!(
                "'{}' ({:?})",
                thread.name().unwrap_or("<unnamed>"),
                thread.id()
            );
            (label, main_greenlet_name(&thread))
        })
        .unwrap_or_else(|_| ("'<unknown>'".into(), "main".into()));
        Arc::new(ThreadLink {
            label,
            main_name,
            alive: AtomicBool::new(alive),
            switch_flags: AtomicU8::new(0),
            inbox: Mutex::new(Vec::new()),
        })
    }

    /// A link for greenlets made on a thread whose state is already gone.
    pub(crate) fn exited() -> Arc<ThreadLink<M>> {
        Arc::new(ThreadLink {
            label: "<a thread whose greenlet state was torn down>".into(),
            main_name: std::panic::catch_unwind(|| main_greenlet_name(&std::thread::current()))
                .unwrap_or_else(|_| "main".into()),
            alive: AtomicBool::new(false),
            switch_flags: AtomicU8::new(0),
            inbox: Mutex::new(Vec::new()),
        })
    }

    /// Queue a greenlet whose last handle was dropped on another thread.
    /// Returns it back if the owner has exited (nobody will read the inbox).
    pub(crate) fn post(&self, record: M) -> Result<(), M> {
        let mut inbox = self.inbox.lock();
        if !self.alive.load(Ordering::Acquire) {
            return Err(record);
        }
        inbox.push(record);
        self.switch_flags.fetch_or(MAIL, Ordering::Release);
        Ok(())
    }

    /// Whether the inbox has mail; `Acquire` before the inbox is read.
    #[inline(always)]
    pub(crate) fn has_mail(&self, order: Ordering) -> bool {
        self.switch_flags.load(order) & MAIL != 0
    }

    /// Take the inbox's greenlets, clearing the mark.
    pub(crate) fn take_mail(&self) -> Vec<M> {
        let mut inbox = self.inbox.lock();
        self.switch_flags.fetch_and(!MAIL, Ordering::Release);
        std::mem::take(&mut *inbox)
    }

    /// The switch byte: non-zero when a switch on the owner thread must
    /// take the slow path (its own reasons, or mail).
    #[inline(always)]
    pub(crate) fn switch_flags(&self) -> u8 {
        self.switch_flags.load(Ordering::Relaxed)
    }

    /// Set or clear the owner's own reasons for the slow path (called by
    /// the owner thread only; other threads set only [`MAIL`], so a
    /// read-modify-write keeps theirs).
    pub(crate) fn set_slow(&self, slow: bool) {
        if slow {
            self.switch_flags.fetch_or(SLOW, Ordering::Relaxed);
        } else {
            self.switch_flags.fetch_and(!SLOW, Ordering::Relaxed);
        }
    }
}

/// In [`ThreadLink`]'s switch byte: the owner has a trace hook set or a
/// greenlet being force-unwound (written by the owner thread only).
const SLOW: u8 = 1;

/// In [`ThreadLink`]'s switch byte: the inbox is non-empty (set by the
/// posting thread and cleared by the owner, both under the inbox's lock).
const MAIL: u8 = 2;

/// The name of `thread`'s main greenlet: the thread's name (Rust names the
/// process's first thread `main`), else `thread <n>` with the number of its
/// `ThreadId`. greenlet's main greenlets have no name of their own (their
/// `repr` says `main`); naming them after their thread tells one thread's
/// from another's in messages and traces.
fn main_greenlet_name(thread: &std::thread::Thread) -> Box<str> {
    if let Some(name) = thread.name() {
        return name.into();
    }
    let id = format!("{:?}", thread.id());
    let number = id
        .strip_prefix("ThreadId(")
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or(&id);
    format!("thread {number}").into()
}
