//! Panics that name their green thread: a panic hook, installed once per
//! process by the first runtime built, that prints which green thread
//! panicked (its name, id and spawn site) before the hook that was
//! installed before it runs (the standard one prints the OS thread's name,
//! a worker's `hub-worker-N`, and the message).
//!
//! The hook chains: a hook the program installed before the first runtime
//! was built still runs, after the identity line. A hook installed later
//! replaces this one (as any `std::panic::set_hook` does); it can chain to
//! it through `std::panic::take_hook`. A panic outside a green thread (on
//! a worker's hub, or any other thread) prints nothing more. Unwinds that
//! are not panics (a cancellation, an elapsed `timeout`) never reach a
//! panic hook.
//!
//! Owns: the hook and its one install. Uses the worker's current green
//! thread.

use std::sync::Once;

use super::worker::with_current_task;

/// Install the hook, once per process. Does nothing while the calling
/// thread panics (the standard library refuses to change the hook then);
/// a later call installs it.
pub(crate) fn install() {
    static INSTALL: Once = Once::new();
    if std::thread::panicking() {
        return;
    }
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let who = with_current_task(|_, t| {
                format!(
                    "green thread '{}' (id {}, spawned at {}) panicked",
                    t.name(),
                    t.id,
                    t.site
                )
            });
            if let Some(who) = who {
                let location = info
                    .location()
                    .map_or_else(String::new, |l| format!(" at {l}"));
                // Through `eprintln!`, as the standard hook writes: a test
                // harness that captures a test's output captures this too.
                eprintln!("{who}{location}:");
            }
            previous(info);
        }));
    });
}
