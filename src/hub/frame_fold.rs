//! How a captured stack reads in a dump: a backtrace's frames, innermost
//! first, each run of the runtime's own frames (the hub, the coroutine
//! layer, std's panic and backtrace machinery) folded into its outermost
//! one, the call the green thread's own code made; the run at the green
//! thread's start dropped. Frames of `core`, `std` and `alloc` that the
//! runtime calls through (an `Option::map`, a closure adaptor, inlined into
//! the runtime's frames when the build has line tables) belong to the run
//! they sit in; the same frames called by the green thread's own code are
//! kept.
//!
//! Owns: [`fold`], [`fold_frames`], [`ONLY_RUNTIME`]. Uses nothing of the
//! hub: `stacks` (captures on the worker) and `stall_stacks` (stacks read
//! off a stalled worker's thread) both fold through it.

/// Why a stack has no frames when every frame is the runtime's.
pub(crate) const ONLY_RUNTIME: &str = "only runtime frames: its own code was inlined into them \
     (mark a function #[inline(never)] to see it)";

/// Whether `name` is a frame of the runtime itself (the hub, the coroutine
/// layer, the switch's entry). The standard library's frames, the
/// backtrace and panic machinery's included, go with their caller (see
/// [`fold_frames`]).
fn is_runtime(name: &str) -> bool {
    const PREFIXES: [&str; 4] = [
        "greenlet::hub::",
        "greenlet::coroutine::",
        "__rust_try",
        "greenlet_coroutine_root",
    ];
    let bare = name.trim_start_matches('<');
    PREFIXES.iter().any(|p| bare.starts_with(p))
}

/// The frames of a backtrace's text (`N: function` lines, each followed by
/// an `at file:line:column` line where known), innermost first, each run
/// of runtime frames folded into its outermost one (see [`fold_frames`]).
pub(crate) fn fold(text: &str) -> Vec<String> {
    let mut frames: Vec<(String, Option<String>)> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(at) = t.strip_prefix("at ") {
            if let Some(last) = frames.last_mut() {
                if last.1.is_none() {
                    last.1 = Some(at.to_string());
                }
            }
        } else if let Some((n, name)) = t.split_once(": ") {
            if n.chars().all(|c| c.is_ascii_digit()) {
                frames.push((name.to_string(), None));
            }
        }
    }
    fold_frames(&frames)
}

/// `frames` (function and `file:line:column` where known, innermost
/// first), each run of runtime frames folded into its outermost one (the
/// call the green thread's code made), a run at the outer end (the green
/// thread's start) dropped; each rendered as `function at file:line:column`.
pub(crate) fn fold_frames(frames: &[(String, Option<String>)]) -> Vec<String> {
    // Whose each frame is: a standard-library frame is its caller's, the
    // next frame outward that is not the standard library's (the runtime's
    // when there is none: the green thread's start).
    let mut owned_by_runtime = vec![true; frames.len()];
    let mut caller_is_runtime = true;
    for (k, (name, _)) in frames.iter().enumerate().rev() {
        if !is_std(name) {
            caller_is_runtime = is_runtime(name);
        }
        owned_by_runtime[k] = caller_is_runtime;
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < frames.len() {
        if !owned_by_runtime[i] {
            out.push(render(&frames[i]));
            i += 1;
            continue;
        }
        let mut end = i;
        while end < frames.len() && owned_by_runtime[end] {
            end += 1;
        }
        if end == frames.len() {
            // A run at the outer end is the green thread's start: dropped.
            break;
        }
        // The run's outermost frame of the runtime itself: the call the
        // green thread's code made.
        if let Some(call) = frames[i..end].iter().rev().find(|f| is_runtime(&f.0)) {
            out.push(render(call));
        }
        i = end;
    }
    out
}

/// Whether `name` is a frame of the standard library (neither the runtime's
/// nor the green thread's own code).
fn is_std(name: &str) -> bool {
    let bare = name.trim_start_matches('<');
    ["core::", "std::", "alloc::"]
        .iter()
        .any(|p| bare.starts_with(p))
}

fn render((name, at): &(String, Option<String>)) -> String {
    match at {
        Some(at) => format!("{name} at {at}"),
        None => name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_runs_fold_into_their_outermost_frame_and_the_start_is_dropped() {
        let text = "   0: std::backtrace::Backtrace::force_capture\n\
                    \x20            at /x/backtrace.rs:1:1\n\
                    \x20  1: greenlet::hub::park::park_then\n\
                    \x20  2: greenlet::hub::channel::Receiver<T>::recv\n\
                    \x20            at src/hub/channel.rs:9:5\n\
                    \x20  3: app::waits_here\n\
                    \x20            at src/main.rs:3:5\n\
                    \x20  4: app::main::{{closure}}\n\
                    \x20  5: greenlet::hub::spawning::NewTask::build\n\
                    \x20  6: std::panicking::try\n";
        assert_eq!(
            fold(text),
            vec![
                "greenlet::hub::channel::Receiver<T>::recv at src/hub/channel.rs:9:5",
                "app::waits_here at src/main.rs:3:5",
                "app::main::{{closure}}",
            ]
        );
    }

    #[test]
    fn standard_library_frames_inside_a_run_fold_with_it_and_the_users_own_stay() {
        let frames: Vec<(String, Option<String>)> = [
            "greenlet::hub::worker::current::with_current_task::{{closure}}",
            "core::option::Option<T>::map",
            "core::ops::function::FnOnce::call_once",
            "<core::panic::unwind_safe::AssertUnwindSafe<F> as core::ops::function::FnOnce<()>>::call_once",
            "greenlet::hub::net::serve::serve",
            "app::main::{{closure}}::{{closure}}",
            "core::option::Option<T>::map",
            "app::main::{{closure}}",
            "<core::panic::unwind_safe::AssertUnwindSafe<F> as core::ops::function::FnOnce<()>>::call_once",
            "greenlet::coroutine::switch::root::{{closure}}",
            "<core::panic::unwind_safe::AssertUnwindSafe<F> as core::ops::function::FnOnce<()>>::call_once",
        ]
        .iter()
        .map(|f| (f.to_string(), None))
        .collect();
        assert_eq!(
            fold_frames(&frames),
            vec![
                "greenlet::hub::net::serve::serve",
                "app::main::{{closure}}::{{closure}}",
                "core::option::Option<T>::map",
                "app::main::{{closure}}",
            ]
        );
    }
}
