//! [`ThreadLink`]: the part of a thread's greenlet state that other threads
//! may touch (its label for messages, its main greenlet's name, whether it
//! is alive, and the inbox of
//! greenlets whose last handle went elsewhere).
//!
//! Every record holds its owner's link. Uses the record only as the type in
//! the inbox.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::record::Record;

/// The part of a thread's state that other threads may touch: identity,
/// liveness, and the inbox of greenlets whose last handle went elsewhere.
pub(crate) struct ThreadLink {
    /// `'name' (ThreadId(n))`, for messages.
    pub(crate) label: String,
    /// The name of the thread's main greenlet: the thread's name, else
    /// `thread <n>` (see [`main_greenlet_name`]).
    pub(crate) main_name: Box<str>,
    /// False once the thread has exited (or for detached greenlets).
    pub(crate) alive: AtomicBool,
    /// Set when `inbox` is non-empty; read without the lock on every
    /// greenlet operation of the owner.
    pub(crate) has_mail: AtomicBool,
    /// Greenlets whose last handle was dropped on another thread, for the
    /// owner to finalize or kill.
    pub(crate) inbox: Mutex<Vec<Arc<Record>>>,
}

impl ThreadLink {
    /// The link of the calling thread.
    pub(crate) fn for_current_thread(alive: bool) -> Arc<ThreadLink> {
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
            has_mail: AtomicBool::new(false),
            inbox: Mutex::new(Vec::new()),
        })
    }

    /// A link for greenlets made on a thread whose state is already gone.
    pub(crate) fn exited() -> Arc<ThreadLink> {
        Arc::new(ThreadLink {
            label: "<a thread whose greenlet state was torn down>".into(),
            main_name: std::panic::catch_unwind(|| main_greenlet_name(&std::thread::current()))
                .unwrap_or_else(|_| "main".into()),
            alive: AtomicBool::new(false),
            has_mail: AtomicBool::new(false),
            inbox: Mutex::new(Vec::new()),
        })
    }

    /// Queue a greenlet whose last handle was dropped on another thread.
    /// Returns it back if the owner has exited (nobody will read the inbox).
    pub(crate) fn post(&self, record: Arc<Record>) -> Result<(), Arc<Record>> {
        let mut inbox = self.inbox.lock();
        if !self.alive.load(Ordering::Acquire) {
            return Err(record);
        }
        inbox.push(record);
        self.has_mail.store(true, Ordering::Release);
        Ok(())
    }
}

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
