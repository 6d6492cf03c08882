//! The stacks in a watchdog report of a stalled worker ([`stalled_worker`]):
//! the green thread holding it, from the registers a signal took on its
//! thread (`stall_sample`), and every other started green thread of that
//! worker, each from its saved context (where the stack switch left its
//! registers when it was suspended: `coroutine::direct::saved_registers`),
//! all unwound and named on the watchdog's thread (`stall_unwind`). None of
//! them runs: a green thread blocked in a std lock held by another that
//! parked on the same worker is reported with the holder's stack beside
//! its own.
//!
//! Each stack is read between its stack pointer and the end of its
//! mapping (as `/proc/self/maps` lists it), so no read leaves that stack.
//! If the worker comes back while the stacks are read, they may mix old
//! and new frames; the report then says so.
//!
//! Owns: [`stalled_worker`]. Uses `stall_sample`, `stall_unwind`, the
//! registry, the worker's counters and `stacks`' folding and [`Dump`].

use std::sync::atomic::Ordering;

use crate::coroutine::direct;

use super::frame_fold::{fold_frames, ONLY_RUNTIME};
use super::shared::Shared;
use super::stack_dump::{Dump, TaskStack};
use super::stall_sample::{sample, Regs};
use super::stall_unwind::{read_word, symbolise, StackReader, Walk};
use super::task_info::TaskInfo;
use super::task_state::TaskState;

/// The end of the mapping of this process that holds `addr` (from
/// `/proc/self/maps`), if one does.
fn mapping_end(maps: &str, addr: u64) -> Option<u64> {
    maps.lines().find_map(|line| {
        let range = line.split_whitespace().next()?;
        let (start, end) = range.split_once('-')?;
        let start = u64::from_str_radix(start, 16).ok()?;
        let end = u64::from_str_radix(end, 16).ok()?;
        (start..end).contains(&addr).then_some(end)
    })
}

/// A stack walked (its frames' addresses), or why it was not.
type Walked = Result<Walk, String>;

/// The stack `regs` were taken on, walked.
fn walk(reader: &StackReader, maps: &str, regs: Regs) -> Walked {
    let top = mapping_end(maps, regs.sp).ok_or_else(|| {
        format!(
            "its stack pointer {:#x} is in no mapping: not read",
            regs.sp
        )
    })?;
    Ok(reader.unwind(regs, top))
}

/// The frames of `walked`, named and folded, and a note when there are
/// none or the walk may have missed some.
fn frames_of(walked: Walked) -> (Vec<String>, Option<String>) {
    let walk = match walked {
        Ok(walk) => walk,
        Err(why) => return (Vec::new(), Some(why)),
    };
    let frames = fold_frames(&symbolise(&walk.addresses));
    let note = if !walk.complete {
        Some(
            "the walk stopped before the stack's root: outer frames are missing (code without \
             call-frame information, or a frame pointer the build does not keep)"
                .to_string(),
        )
    } else if frames.is_empty() {
        Some(ONLY_RUNTIME.to_string())
    } else {
        None
    };
    (frames, note)
}

/// The stacks of worker `worker` of `shared`'s runtime, stalled while
/// green thread `running` runs on it: that green thread's first, then the
/// others started on that worker, by id.
pub(crate) fn stalled_worker(shared: &Shared, worker: usize, running: u64) -> Dump {
    let remote = &shared.workers[worker];
    let tick = remote.tick.load(Ordering::Relaxed);
    let tid = remote.counters.thread_id.load(Ordering::Relaxed);
    let tasks: Vec<(TaskInfo, usize)> = shared
        .registry
        .snapshot(|t| (t.info(), t.stack_top.load(Ordering::Relaxed)))
        .into_iter()
        .filter(|(info, _)| info.worker == Some(worker))
        .collect();
    let sampled = if tid == 0 {
        Err("its worker's thread id is not known".to_string())
    } else {
        sample(tid)
    };
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let reader = StackReader::new();
    let mut walked = Vec::new();
    for (info, top) in tasks {
        let w = if info.id == running {
            match sampled {
                Ok(regs) => walk(&reader, &maps, regs),
                Err(ref why) => Err(format!("no stack: {why}")),
            }
        } else {
            match info.state {
                TaskState::Queued | TaskState::Blocking | TaskState::Finished => continue,
                _ if top == 0 => Err("no saved context known: it has not been back in its \
                                      worker's loop since it started"
                    .to_string()),
                _ => match direct::saved_registers(top, |a| read_word(a as u64)) {
                    Some([pc, sp, bp]) => walk(&reader, &maps, Regs { pc, sp, bp }),
                    None => Err("its saved context could not be read".to_string()),
                },
            }
        };
        walked.push((info, w));
    }
    // The stacks are read; naming their frames reads nothing of them.
    let moved = remote.tick.load(Ordering::Relaxed) != tick
        || remote.running.load(Ordering::Relaxed) != running;
    // The green thread holding the worker first.
    walked.sort_by_key(|(info, _)| info.id != running);
    let mut out = Vec::new();
    for (info, w) in walked {
        let (frames, mut note) = frames_of(w);
        if moved {
            note = Some(
                "its worker came back while the stacks were read: frames may be mixed".to_string(),
            );
        }
        out.push(TaskStack::new(info, frames, note));
    }
    Dump {
        tasks: out,
        silent_workers: Vec::new(),
    }
}
