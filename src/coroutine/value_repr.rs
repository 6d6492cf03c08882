//! What a [`Value`] is in memory: one word of storage (the object inline,
//! or its box) and a pointer to its type's [`Meta`] table, whose low bit says
//! whether the object needs dropping.
//!
//! Owns the struct and its layout: the storage word, the meta table and
//! which types are stored inline. Uses nothing of the module. Below the
//! error (`error.rs`), whose `GreenletExit` carries a `Value`; the value's
//! methods (`value.rs`, above the error: a downcast fails with one) read
//! and write these fields.

use std::any::TypeId;
use std::marker::PhantomData;
use std::mem::{self, MaybeUninit};
use std::ptr::NonNull;

/// The inline storage of a [`Value`]: one machine word. Values that fit
/// (size and alignment at most a word's) are stored in it, others are boxed
/// and the box is stored in it.
///
/// One word, not more: a `Value` is then two words (this and the meta
/// pointer), which the compiler passes and returns in registers. At three
/// words it travels through memory, copied by mixed-width moves that stall
/// store-to-load forwarding on every switch (measured: a round trip went
/// from ~12 to ~31 ns in a model of the switch path).
pub(super) type Storage = MaybeUninit<usize>;

/// What a value is: its type, and how to drop and unbox it.
pub(super) struct Meta {
    pub(super) type_id: fn() -> TypeId,
    pub(super) type_name: fn() -> &'static str,
    /// Drops the stored object (the inline `T`, or the `Box<T>`), taking
    /// the storage word by value so that a value kept in registers is not
    /// written to memory for its drop. Called only when the value's meta
    /// pointer has [`NEEDS_DROP`] set.
    pub(super) drop: unsafe fn(Storage),
    /// The storage holds a `Box<T>` rather than a `T`.
    pub(super) boxed: bool,
}

/// The low bit of a [`Value`]'s meta pointer (a `Meta` is word-aligned, so
/// the bit is free): set when the stored object needs dropping. A value's
/// drop then tests the word it already holds in a register, not a field
/// loaded through it.
pub(super) const NEEDS_DROP: usize = 1;

const _: () = assert!(mem::align_of::<Meta>() > NEEDS_DROP);

pub(super) fn fits<T>() -> bool {
    mem::size_of::<T>() <= mem::size_of::<Storage>()
        && mem::align_of::<T>() <= mem::align_of::<Storage>()
}

/// # Safety
/// `storage` must hold an initialized `S`, which is dropped; the caller's
/// copy of the word must not be used as an `S` again.
pub(super) unsafe fn drop_as<S>(storage: Storage) {
    // SAFETY: the caller guarantees the storage holds an initialized `S`
    // (at most a word, word-aligned: `fits` or a `Box`) and gives up its
    // own copy, so the `S` read here is the only owner and is dropped once.
    drop(unsafe { storage.as_ptr().cast::<S>().read() })
}

pub(super) fn meta_of<T: 'static>() -> &'static Meta {
    if fits::<T>() {
        const {
            &Meta {
                type_id: TypeId::of::<T>,
                type_name: std::any::type_name::<T>,
                drop: drop_as::<T>,
                boxed: false,
            }
        }
    } else {
        const {
            &Meta {
                type_id: TypeId::of::<T>,
                type_name: std::any::type_name::<T>,
                drop: drop_as::<Box<T>>,
                boxed: true,
            }
        }
    }
}

/// A dynamically typed value carried by a switch: any `'static` value.
///
/// Values of at most one machine word (`()`, `bool`, `char`, integers up to
/// 64 bits, `f64`, `Box<T>`, `Rc<T>`, `Arc<T>`, a [`Greenlet`](crate::Greenlet)
/// handle, `&'static T` of a sized `T`) are stored inline, so passing them
/// never allocates; larger values (a `String`, a `Vec`, a `&'static str`, a
/// pair of words) are boxed. The receiver asks for the type it expects with
/// [`Value::downcast`] and gets [`ErrorKind::TypeMismatch`](crate::ErrorKind::TypeMismatch), naming both
/// types, when it guessed wrong.
///
/// A `Value` stays on the thread where it was made (it may hold `Rc`s), like
/// the greenlets that pass it around.
///
/// # Example
/// ```
/// use greenlet::Value;
///
/// let v = Value::new(42u32);
/// assert!(v.is::<u32>());
/// assert_eq!(v.downcast::<u32>().unwrap(), 42);
///
/// let err = Value::from("text").downcast::<u32>().unwrap_err();
/// assert!(err.to_string().contains("u32"));
/// ```
pub struct Value {
    pub(super) storage: Storage,
    /// A `&'static Meta`, with [`NEEDS_DROP`] set when the stored object
    /// needs dropping (non-null: a payload's `Err` is its null).
    pub(super) meta: NonNull<Meta>,
    /// Values may hold thread-bound data such as `Rc`.
    pub(super) _not_send: PhantomData<*const ()>,
}
