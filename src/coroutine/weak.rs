//! [`WeakGreenlet`]: a handle that observes a greenlet without keeping it
//! alive, like Python's `weakref.ref` to a greenlet.
//!
//! Owns the weak handle. Uses records (a weak reference to one, and its
//! handle count, through which an upgrade makes a handle, and the
//! [`Greenlet`] handle's struct it upgrades to); [`Greenlet::downgrade`]
//! (in `handle.rs`, above) makes one.

use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::Weak;

use super::record::Greenlet;
use super::record::Record;

/// A weak handle: it does not count as a handle, so it does not keep the
/// greenlet alive and does not delay its kill when its last [`Greenlet`]
/// handle is dropped. [`upgrade`](Self::upgrade) gives a handle back while
/// the greenlet still has one somewhere. `Send + Sync`, like a handle.
///
/// # Example
/// ```
/// let g = greenlet::Greenlet::new(|v| Ok(v));
/// let weak = g.downgrade();
/// assert_eq!(weak.upgrade(), Some(g.clone()));
/// drop(g);
/// assert!(weak.upgrade().is_none());
/// ```
#[derive(Clone)]
pub struct WeakGreenlet {
    record: Weak<Record>,
}

impl WeakGreenlet {
    /// A weak handle to `record` (see [`Greenlet::downgrade`]).
    pub(crate) fn new(record: Weak<Record>) -> WeakGreenlet {
        WeakGreenlet { record }
    }

    /// A handle to the greenlet, if it still has one (a greenlet whose last
    /// handle went is being killed or finalized, or is gone, and cannot be
    /// reached from here any more). A main greenlet is reachable as long as
    /// its record exists (its thread keeps it until it exits).
    ///
    /// ```
    /// let weak = greenlet::getcurrent().downgrade();
    /// assert!(weak.upgrade().is_some_and(|g| g.is_main()));
    /// ```
    pub fn upgrade(&self) -> Option<Greenlet> {
        let record = self.record.upgrade()?;
        if record.flags().is_main() {
            return Some(Record::new_handle(record));
        }
        record.add_handle_if_any().then(|| Greenlet {
            record: ManuallyDrop::new(record),
        })
    }
}

impl fmt::Debug for WeakGreenlet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.upgrade() {
            Some(g) => f.debug_tuple("WeakGreenlet").field(&g).finish(),
            None => f.write_str("WeakGreenlet(<gone>)"),
        }
    }
}
