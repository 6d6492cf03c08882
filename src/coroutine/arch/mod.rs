//! The machine side of a greenlet coroutine: the state at the top of its
//! stack ([`Top`]), its first frames ([`start`]) and the stack switch
//! ([`resume_with`], [`suspend`], and [`hand_off`] where it exists), one
//! backend per target.
//!
//! - `x86_64.rs`, on x86_64 Unix with ELF objects (the System V ABI; not
//!   Apple's targets, whose Mach-O objects its trampoline's section and
//!   symbol directives do not fit): the crate's own switch,
//!   end to end: stack initialisation, the root trampoline with its
//!   call-frame information, the switch with the floating-point control
//!   state (MXCSR and the x87 control word) kept per coroutine.
//! - `portable.rs`, everywhere else (and on x86_64 built with
//!   `RUSTFLAGS="--cfg greenlet_portable_switch"`, so that it can be tested
//!   there): corosensei's asymmetric resume and suspend, through its
//!   documented API only; no [`hand_off`] (a greenlet hands control to
//!   another through the dispatcher on main's stack), and the
//!   floating-point control state is the thread's, not each coroutine's.
//!
//! Both give the same contract, which `context.rs` describes to the rest of
//! the crate: a coroutine is started by [`start`] (nothing runs yet), first
//! runs its entry at its first [`resume_with`] or [`hand_off`], with that
//! switch's word and pointer, and its entry never returns (a coroutine not
//! needed any more is left suspended and its stack released: its frames
//! then hold nothing to drop, `fiber.rs`). Owns [`Carried`]; uses nothing else of
//! the crate, and the x86_64 backend no other crate.

/// The pointer a switch carries besides its word: the switch protocol's
/// (where the payload in flight lies, `switch.rs`); only passed on here.
pub(crate) type Carried = *const ();

#[cfg(all(
    target_arch = "x86_64",
    target_family = "unix",
    not(target_vendor = "apple"),
    not(greenlet_portable_switch)
))]
mod x86_64;
#[cfg(all(
    feature = "hub",
    target_os = "linux",
    target_arch = "x86_64",
    not(greenlet_portable_switch)
))]
pub(crate) use self::x86_64::saved_registers;
#[cfg(all(
    target_arch = "x86_64",
    target_family = "unix",
    not(target_vendor = "apple"),
    not(greenlet_portable_switch)
))]
pub(crate) use self::x86_64::{hand_off, inherit_fp_control, resume_with, start, suspend, Top};

#[cfg(not(all(
    target_arch = "x86_64",
    target_family = "unix",
    not(target_vendor = "apple"),
    not(greenlet_portable_switch)
)))]
mod portable;
#[cfg(all(
    feature = "hub",
    target_os = "linux",
    target_arch = "x86_64",
    greenlet_portable_switch
))]
pub(crate) use self::portable::saved_registers;
#[cfg(not(all(
    target_arch = "x86_64",
    target_family = "unix",
    not(target_vendor = "apple"),
    not(greenlet_portable_switch)
)))]
pub(crate) use self::portable::{inherit_fp_control, resume_with, start, suspend, Top};
