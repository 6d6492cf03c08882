//! Library diagnostics: one way for every module to report a problem that
//! is not an error of the caller's (a greenlet that refused to die, a
//! finalizer that panicked, a schedule that failed).
//!
//! Reports go through the [`log`] facade with a target under `greenlet`, so
//! a program routes them to its own logger. A program that configured no
//! logger still sees them: while `log`'s maximum level is
//! [`log::LevelFilter::Off`] (its value until a logger is set up), a report
//! is written to stderr instead, as the message alone. Call
//! [`set_stderr_fallback`]`(false)` to drop them there.
//!
//! Uses nothing of the crate; every other module may use it.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

static STDERR_FALLBACK: AtomicBool = AtomicBool::new(true);

/// Whether the library's diagnostics reach stderr while no logger is
/// configured (the default: yes). Returns the previous setting.
///
/// The crate reports problems that are not the caller's errors (a greenlet
/// that refused to die, a finalizer that panicked, a schedule that failed)
/// through the [`log`] facade, with targets under `greenlet`. While `log`'s
/// maximum level is [`log::LevelFilter::Off`] (no logger set up), a report
/// is written to stderr instead, as the message alone, unless this is off.
///
/// # Example
/// ```
/// let before = greenlet::set_stderr_fallback(false);
/// assert!(before);
/// greenlet::set_stderr_fallback(before);
/// ```
pub fn set_stderr_fallback(on: bool) -> bool {
    STDERR_FALLBACK.swap(on, Ordering::Relaxed)
}

/// One structured field of a report, passed to the logger as a `log`
/// key-value (`event`, `greenlet`, `id`, `error`, ...), so that a program
/// can act on a report without parsing its message.
#[derive(Clone, Copy)]
pub(crate) struct Field<'a>(pub(crate) &'static str, pub(crate) &'a dyn fmt::Display);

impl fmt::Debug for Field<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.0, self.1)
    }
}

/// Sends one report: through `log` when a logger is configured, else to
/// stderr (unless the fallback is off). `target` is the `log` target, a
/// module path of this crate.
pub(crate) fn emit(level: log::Level, target: &'static str, args: fmt::Arguments<'_>) {
    emit_with(level, target, &[], args);
}

/// [`emit`] with structured fields, which only a logger sees (the stderr
/// fallback writes the message alone).
pub(crate) fn emit_with(
    level: log::Level,
    target: &'static str,
    fields: &[Field<'_>],
    args: fmt::Arguments<'_>,
) {
    if log::max_level() != log::LevelFilter::Off {
        if level <= log::max_level() {
            let kvs: Vec<(&str, log::kv::Value<'_>)> = fields
                .iter()
                .map(|field| (field.0, log::kv::Value::from_dyn_display(field.1)))
                .collect();
            log::logger().log(
                &log::Record::builder()
                    .level(level)
                    .target(target)
                    .module_path_static(Some(target))
                    .key_values(&kvs)
                    .args(args)
                    .build(),
            );
        }
    } else if STDERR_FALLBACK.load(Ordering::Relaxed) {
        eprintln!("{args}");
    }
}

#[allow(unused_macros)]
/// Reports a problem at `warn` level through [`emit`], with the calling
/// module as the target; `diag_warn!(kv: [Field(..), ..]; "...", ..)` adds
/// structured fields ([`emit_with`]).
macro_rules! diag_warn {
    (kv: $fields:expr; $($arg:tt)+) => {
        $crate::diag::emit_with(::log::Level::Warn, module_path!(), &$fields, format_args!($($arg)+))
    };
    ($($arg:tt)+) => {
        $crate::diag::emit(::log::Level::Warn, module_path!(), format_args!($($arg)+))
    };
}

/// Reports at `error` level through [`emit`], with the calling module as the
/// target.
#[allow(unused_macros)]
macro_rules! diag_error {
    ($($arg:tt)+) => {
        $crate::diag::emit(::log::Level::Error, module_path!(), format_args!($($arg)+))
    };
}

#[allow(unused_imports)]
pub(crate) use {diag_error, diag_warn};
