//! [`Value`]: the dynamically typed payload that crosses a switch.
//!
//! Owns the value's methods and trait impls: making one (inline or boxed),
//! the type checks of a downcast and the `Debug` view. The struct and its
//! layout are in `value_repr.rs` (below `error.rs`, whose `GreenletExit`
//! carries a value). Uses [`GreenletError`] for the mismatch error and
//! [`GreenletExit`], shown by `Debug`.

use std::any::TypeId;
use std::fmt;
use std::marker::PhantomData;
use std::mem::{self, ManuallyDrop};
use std::ptr::NonNull;

use super::error::{ErrorKind, GreenletError, GreenletExit};
pub(crate) use super::value_repr::Value;
use super::value_repr::{drop_as, fits, meta_of, Meta, Storage, NEEDS_DROP};

impl Value {
    /// Wrap any `'static` value.
    ///
    /// ```
    /// let v = greenlet::Value::new(vec![1, 2, 3]);
    /// assert_eq!(v.downcast::<Vec<i32>>().unwrap(), vec![1, 2, 3]);
    /// ```
    #[inline]
    pub fn new<T: 'static>(value: T) -> Value {
        let mut storage = Storage::uninit();
        if fits::<T>() {
            // SAFETY: `fits::<T>()` checked that `T` fits in the storage's
            // size and alignment.
            unsafe { storage.as_mut_ptr().cast::<T>().write(value) };
        } else {
            // SAFETY: a `Box<T>` is one pointer, which fits the storage.
            unsafe { storage.as_mut_ptr().cast::<Box<T>>().write(Box::new(value)) };
        }
        let needs_drop = !fits::<T>() || mem::needs_drop::<T>();
        let meta: *const Meta = meta_of::<T>();
        let meta = meta.wrapping_byte_add(if needs_drop { NEEDS_DROP } else { 0 });
        Value {
            storage,
            // SAFETY: a reference's address, word-aligned, plus at most 1,
            // is not null.
            meta: unsafe { NonNull::new_unchecked(meta.cast_mut()) },
            _not_send: PhantomData,
        }
    }

    /// Whether the stored object needs dropping ([`NEEDS_DROP`]).
    #[inline(always)]
    fn needs_drop(&self) -> bool {
        self.meta.as_ptr() as usize & NEEDS_DROP != 0
    }

    /// The value's `Meta`, [`NEEDS_DROP`] cleared.
    #[inline(always)]
    fn meta(&self) -> &'static Meta {
        let tag = if self.needs_drop() { NEEDS_DROP } else { 0 };
        // SAFETY: `meta` is a `&'static Meta` (from `meta_of` or `UNIT`)
        // with at most the `NEEDS_DROP` bit set, taken off here.
        unsafe { &*self.meta.as_ptr().wrapping_byte_sub(tag) }
    }

    /// The unit value `()` (what a bare `switch(())` carries).
    #[inline]
    pub fn unit() -> Value {
        Value::new(())
    }

    /// The unit value as a constant, for a static: what a switch that
    /// carries no payload brings (`payload::NOTHING`).
    pub(crate) const UNIT: Value = Value {
        storage: Storage::uninit(),
        // SAFETY: a reference is not null.
        meta: unsafe {
            NonNull::new_unchecked(
                (&Meta {
                    type_id: TypeId::of::<()>,
                    type_name: std::any::type_name::<()>,
                    drop: drop_as::<()>,
                    boxed: false,
                } as *const Meta)
                    .cast_mut(),
            )
        },
        _not_send: PhantomData,
    };

    /// Whether the value holds a `T`.
    ///
    /// ```
    /// assert!(greenlet::Value::new(1.5f64).is::<f64>());
    /// ```
    #[inline]
    pub fn is<T: 'static>(&self) -> bool {
        (self.meta().type_id)() == TypeId::of::<T>()
    }

    /// The name of the held type, for messages.
    ///
    /// ```
    /// assert_eq!(greenlet::Value::new(7u8).type_name(), "u8");
    /// ```
    pub fn type_name(&self) -> &'static str {
        (self.meta().type_name)()
    }

    /// Whether the value was stored inline (no allocation).
    ///
    /// ```
    /// assert!(greenlet::Value::new(1u64).is_inline());
    /// assert!(!greenlet::Value::new((1u64, 2u64)).is_inline());
    /// ```
    pub fn is_inline(&self) -> bool {
        !self.meta().boxed
    }

    /// Take the value out as a `T`.
    ///
    /// # Errors
    /// [`ErrorKind::TypeMismatch`] naming the expected and the held type
    /// (the value is dropped).
    ///
    /// ```
    /// let v = greenlet::Value::new(String::from("hi"));
    /// assert_eq!(v.downcast::<String>().unwrap(), "hi");
    /// ```
    #[inline]
    pub fn downcast<T: 'static>(self) -> Result<T, GreenletError> {
        self.try_downcast::<T>().map_err(|value| {
            GreenletError::from(ErrorKind::TypeMismatch {
                expected: std::any::type_name::<T>(),
                found: value.type_name(),
            })
        })
    }

    /// Take the value out as a `T`, or get it back unchanged.
    ///
    /// ```
    /// let v = greenlet::Value::new(3i64);
    /// let v = v.try_downcast::<u8>().unwrap_err();
    /// assert_eq!(v.try_downcast::<i64>().unwrap(), 3);
    /// ```
    #[inline]
    pub fn try_downcast<T: 'static>(self) -> Result<T, Value> {
        if !self.is::<T>() {
            return Err(self);
        }
        let this = ManuallyDrop::new(self);
        if this.meta().boxed {
            // SAFETY: the type check passed and `meta.boxed` says the storage
            // holds a `Box<T>`; `ManuallyDrop` keeps it from being dropped twice.
            let boxed = unsafe { this.storage.as_ptr().cast::<Box<T>>().read() };
            Ok(*boxed)
        } else {
            // SAFETY: the type check passed and the storage holds a `T`
            // inline; `ManuallyDrop` keeps it from being dropped twice.
            Ok(unsafe { this.storage.as_ptr().cast::<T>().read() })
        }
    }

    /// Borrow the value as a `T`, if it is one.
    ///
    /// ```
    /// let v = greenlet::Value::new(5u16);
    /// assert_eq!(v.downcast_ref::<u16>(), Some(&5));
    /// assert_eq!(v.downcast_ref::<u32>(), None);
    /// ```
    #[inline]
    pub fn downcast_ref<T: 'static>(&self) -> Option<&T> {
        if !self.is::<T>() {
            return None;
        }
        if self.meta().boxed {
            // SAFETY: the type check passed and the storage holds a `Box<T>`,
            // borrowed for the lifetime of `self`.
            Some(unsafe { &**self.storage.as_ptr().cast::<Box<T>>() })
        } else {
            // SAFETY: the type check passed and the storage holds a `T`.
            Some(unsafe { &*self.storage.as_ptr().cast::<T>() })
        }
    }
}

impl Drop for Value {
    #[inline]
    fn drop(&mut self) {
        if self.needs_drop() {
            // SAFETY: the storage holds the object described by `meta`
            // (inline `T` or `Box<T>`), initialized in `new` and not moved
            // out (the downcasts wrap `self` in `ManuallyDrop`); the value
            // is being dropped, so its word is not used again.
            unsafe { (self.meta().drop)(self.storage) }
        }
    }
}

impl Default for Value {
    fn default() -> Self {
        Value::unit()
    }
}

/// `Value { type: "i64", value: 42 }` for the common types (integers,
/// floats, `bool`, `char`, `&str`, `String`, `()` and [`GreenletExit`]),
/// `Value { type: "..", .. }` for the others.
///
/// ```
/// use greenlet::Value;
/// assert_eq!(format!("{:?}", Value::new(42i64)), r#"Value { type: "i64", value: 42 }"#);
/// assert_eq!(format!("{:?}", Value::from("hi")), r#"Value { type: "&str", value: "hi" }"#);
/// assert_eq!(format!("{:?}", Value::new(vec![1u8])), r#"Value { type: "alloc::vec::Vec<u8>", .. }"#);
/// ```
impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("Value");
        out.field("type", &self.type_name());
        match self.common_debug() {
            Some(value) => out.field("value", value).finish(),
            None => out.finish_non_exhaustive(),
        }
    }
}

impl Value {
    /// The held value as `Debug`, if it is of a common type.
    fn common_debug(&self) -> Option<&dyn fmt::Debug> {
        macro_rules! first_of {
            ($($t:ty),* $(,)?) => {
                $(
                    if let Some(value) = self.downcast_ref::<$t>() {
                        return Some(value);
                    }
                )*
            };
        }
        first_of!(
            i64,
            (),
            bool,
            &'static str,
            String,
            GreenletExit,
            i32,
            u64,
            u32,
            usize,
            isize,
            i8,
            i16,
            i128,
            u8,
            u16,
            u128,
            f64,
            f32,
            char,
        );
        None
    }
}

macro_rules! value_from {
    ($($t:ty),* $(,)?) => {
        $(
            impl From<$t> for Value {
                #[inline]
                fn from(value: $t) -> Value {
                    Value::new(value)
                }
            }
        )*
    };
}

value_from!(
    (),
    bool,
    char,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    f32,
    f64,
    String,
    &'static str,
);

impl<T: 'static> From<Vec<T>> for Value {
    fn from(value: Vec<T>) -> Value {
        Value::new(value)
    }
}

impl<T: 'static> From<Box<T>> for Value {
    fn from(value: Box<T>) -> Value {
        Value::new(value)
    }
}

impl<T: 'static> From<Option<T>> for Value {
    fn from(value: Option<T>) -> Value {
        Value::new(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn inline_and_boxed_round_trip() {
        assert!(Value::new(()).is_inline());
        assert!(Value::new(7usize).is_inline());
        assert!(Value::new(std::rc::Rc::new(1u8)).is_inline());
        assert!(!Value::new((1u64, 2u64)).is_inline()); // two words
        assert!(!Value::new(1u128).is_inline());
        let big = [7u64; 4];
        let v = Value::new(big);
        assert!(!v.is_inline());
        assert_eq!(v.downcast::<[u64; 4]>().unwrap(), big);
    }

    #[test]
    fn drops_exactly_once() {
        let rc = Rc::new(());
        let v = Value::new(Rc::clone(&rc));
        assert_eq!(Rc::strong_count(&rc), 2);
        drop(v);
        assert_eq!(Rc::strong_count(&rc), 1);
        let v = Value::new((Rc::clone(&rc), [0u64; 8]));
        let back = v.downcast::<(Rc<()>, [u64; 8])>().unwrap();
        assert_eq!(Rc::strong_count(&rc), 2);
        drop(back);
        assert_eq!(Rc::strong_count(&rc), 1);
    }

    #[test]
    fn the_drop_bit_marks_what_needs_dropping() {
        assert!(!Value::unit().needs_drop() && !Value::UNIT.needs_drop());
        assert!(!Value::new(7u64).needs_drop());
        assert!(!Value::new((1u64, 2u64)).is_inline());
        assert!(Value::new((1u64, 2u64)).needs_drop()); // a box
        let v = Value::new(Rc::new(3u8));
        assert!(v.needs_drop() && v.is_inline());
        assert_eq!(v.type_name(), "alloc::rc::Rc<u8>");
        assert_eq!(*v.downcast::<Rc<u8>>().unwrap(), 3);
    }

    #[test]
    fn mismatch_names_both_types() {
        let err = Value::new(1u8).downcast::<String>().unwrap_err();
        match err.into_kind() {
            ErrorKind::TypeMismatch { expected, found } => {
                assert_eq!(expected, "alloc::string::String");
                assert_eq!(found, "u8");
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
