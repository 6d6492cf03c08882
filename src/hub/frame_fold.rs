//! How a captured stack reads in a dump: a backtrace's frames, innermost
//! first, each run of the runtime's own frames (the hub, the coroutine
//! layer, std's panic and backtrace machinery) folded into its outermost
//! one, the call the green thread's own code made; the run at the green
//! thread's start dropped.
//!
//! Owns: [`fold`], [`fold_frames`], [`ONLY_RUNTIME`]. Uses nothing of the
//! hub: `stacks` (captures on the worker) and `stall_stacks` (stacks read
//! off a stalled worker's thread) both fold through it.

/// Why a stack has no frames when every frame is the runtime's.
pub(crate) const ONLY_RUNTIME: &str = "only runtime frames: its own code was inlined into them \
     (mark a function #[inline(never)] to see it)";

/// Whether `name` is a frame of the runtime or of the backtrace machinery.
fn is_runtime(name: &str) -> bool {
    const PREFIXES: [&str; 12] = [
        "greenlet::hub::",
        "greenlet::coroutine::",
        "std::backtrace",
        "std::panicking::",
        "std::panic::",
        "core::panicking::",
        "core::ops::function::",
        "__rust_try",
        "alloc::boxed::",
        "std::sys::",
        "std::thread::local::",
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
    let mut out = Vec::new();
    let mut i = 0;
    while i < frames.len() {
        if is_runtime(&frames[i].0) {
            let mut j = i;
            while j + 1 < frames.len() && is_runtime(&frames[j + 1].0) {
                j += 1;
            }
            // A run at the outer end is the green thread's start: dropped.
            if j + 1 < frames.len() {
                out.push(render(&frames[j]));
            }
            i = j + 1;
        } else {
            out.push(render(&frames[i]));
            i += 1;
        }
    }
    out
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
}
