//! Task-local storage: a value per green thread for each key declared with
//! [`task_local!`](crate::task_local), made on the green thread's first
//! access and dropped on its worker when the green thread ends.
//!
//! Owns: [`LocalKey`], the macro, and a plain thread's value table. Uses
//! the current task (`worker::with_current_task`) and its value table
//! (`local_table`), which the body of a spawned task (`spawning`) clears
//! when its closure has returned or unwound.
//!
//! Nothing here runs on a switch: a green thread's table is a pointer in
//! its header, null until it first uses a key, and an access finds it
//! through the running task the worker already knows.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::local_table::Locals;
use super::worker;

/// The next key's index into the tables (keys take one each, at their
/// first use).
static NEXT_INDEX: AtomicUsize = AtomicUsize::new(0);

/// A key of task-local storage, declared with
/// [`task_local!`](crate::task_local): each green thread that uses it has
/// its own value, made by the key's initialiser at its first
/// [`with`](LocalKey::with) and dropped, on its worker, when the green
/// thread ends (returns, panics or is cancelled), before its
/// [`JoinHandle`](super::JoinHandle) sees it finished.
///
/// Outside a green thread (a plain thread, a [`spawn_blocking`]
/// call, a pending call run by a worker's hub), the value belongs to the
/// OS thread, as a `thread_local!`'s does, and is dropped when the thread
/// exits.
///
/// [`spawn_blocking`]: super::spawn_blocking
///
/// # Example
/// ```
/// use std::cell::Cell;
/// use greenlet::hub;
///
/// greenlet::task_local! {
///     static REQUEST_ID: Cell<u64> = Cell::new(0);
/// }
///
/// hub::run(|| {
///     let handles: Vec<_> = (1..=3u64)
///         .map(|id| {
///             hub::spawn(move || {
///                 REQUEST_ID.with(|r| r.set(id));
///                 hub::yield_now(); // the others run and set theirs
///                 REQUEST_ID.with(Cell::get)
///             })
///         })
///         .collect();
///     let seen: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
///     assert_eq!(seen, [1, 2, 3]);
/// })
/// .unwrap();
/// ```
pub struct LocalKey<T: 'static> {
    init: fn() -> T,
    /// Its index in the tables plus one; 0 until its first use.
    index: AtomicUsize,
}

impl<T: 'static> LocalKey<T> {
    /// A key whose values `init` makes (used by
    /// [`task_local!`](crate::task_local)).
    #[doc(hidden)]
    pub const fn __new(init: fn() -> T) -> LocalKey<T> {
        LocalKey {
            init,
            index: AtomicUsize::new(0),
        }
    }

    /// Its index in the tables, taken at its first use.
    fn index(&self) -> usize {
        let known = self.index.load(Ordering::Acquire);
        if known != 0 {
            return known - 1;
        }
        let mine = NEXT_INDEX.fetch_add(1, Ordering::Relaxed) + 1;
        match self
            .index
            .compare_exchange(0, mine, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => mine - 1,
            Err(other) => other - 1,
        }
    }

    /// Run `f` with the calling green thread's value, made first if this
    /// is its first use of the key (on a plain thread, the thread's value).
    /// `f` may park: the value stays the caller's.
    ///
    /// During a plain thread's own thread-local destruction (a
    /// `thread_local!` destructor that uses a task-local key) `f` gets a
    /// new value, dropped when `f` returns.
    ///
    /// ```
    /// use std::cell::RefCell;
    /// greenlet::task_local! {
    ///     static LOG: RefCell<Vec<&'static str>> = RefCell::new(Vec::new());
    /// }
    /// greenlet::hub::run(|| {
    ///     LOG.with(|l| l.borrow_mut().push("start"));
    ///     assert_eq!(LOG.with(|l| l.borrow().len()), 1);
    /// })
    /// .unwrap();
    /// ```
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        let index = self.index();
        // Taken by whichever holder runs it.
        let mut f = Some(f);
        let green = worker::with_current_task(|_, task| {
            let f = f.take()?;
            Some(f(task.locals.get_or_init(index, self.init)))
        });
        if let Some(out) = green.flatten() {
            return out;
        }
        let Some(f) = f else {
            unreachable!(
                "task-local: a green thread's access took the closure and returned nothing"
            )
        };
        let mut f = Some(f);
        let plain = PLAIN.try_with(|locals| {
            let f = f.take()?;
            Some(f(locals.0.get_or_init(index, self.init)))
        });
        match (plain, f) {
            (Ok(Some(out)), _) => out,
            (_, Some(f)) => f(&(self.init)()),
            (_, None) => unreachable!(
                "task-local: a plain thread's access took the closure and returned nothing"
            ),
        }
    }
}

impl<T: 'static> fmt::Debug for LocalKey<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalKey").finish_non_exhaustive()
    }
}

/// Declare task-local keys ([`hub::LocalKey`](crate::hub::LocalKey)): a
/// value per green thread, as `thread_local!` declares a value per OS
/// thread. The initialiser runs at a green thread's first use of the key.
///
/// ```
/// use std::cell::Cell;
/// greenlet::task_local! {
///     /// How many items this green thread handled.
///     pub static HANDLED: Cell<u32> = Cell::new(0);
///     static NAME: String = String::from("worker");
/// }
/// greenlet::hub::run(|| {
///     HANDLED.with(|h| h.set(h.get() + 1));
///     let other = greenlet::hub::spawn(|| HANDLED.with(Cell::get));
///     assert_eq!(other.join().unwrap(), 0);
///     assert_eq!(HANDLED.with(Cell::get), 1);
///     assert_eq!(NAME.with(|n| n.len()), 6);
/// })
/// .unwrap();
/// ```
#[macro_export]
macro_rules! task_local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr; $($rest:tt)*) => {
        $(#[$attr])*
        $vis static $name: $crate::hub::LocalKey<$t> = {
            fn __init() -> $t {
                $init
            }
            $crate::hub::LocalKey::__new(__init)
        };
        $crate::task_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr) => {
        $crate::task_local!($(#[$attr])* $vis static $name: $t = $init;);
    };
}

/// A plain thread's table, cleared when the thread exits.
struct ThreadLocals(Locals);

impl Drop for ThreadLocals {
    fn drop(&mut self) {
        self.0.clear();
    }
}

thread_local! {
    static PLAIN: ThreadLocals = const { ThreadLocals(Locals::new()) };
}
