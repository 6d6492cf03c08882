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

use super::shared::Shared;
use super::stacks::{fold_frames, Dump, TaskStack, ONLY_RUNTIME};
use super::stall_sample::{sample, Regs};
use super::stall_unwind::{read_word, symbolise, StackReader};
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

/// The frames of the stack `regs` were taken on, folded, and a note when
/// the walk may have missed some.
fn frames_of(reader: &StackReader, maps: &str, regs: Regs) -> (Vec<String>, Option<String>) {
    let Some(top) = mapping_end(maps, regs.sp) else {
        return (
            Vec::new(),
            Some(format!(
                "its stack pointer {:#x} is in no mapping: not read",
                regs.sp
            )),
        );
    };
    let walk = reader.unwind(regs, top);
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
    let mut out = Vec::new();
    for (info, top) in tasks {
        let (frames, note) = if info.id == running {
            match sampled {
                Ok(regs) => frames_of(&reader, &maps, regs),
                Err(ref why) => (Vec::new(), Some(format!("no stack: {why}"))),
            }
        } else {
            match info.state {
                TaskState::Queued | TaskState::Blocking | TaskState::Finished => continue,
                _ if top == 0 => (
                    Vec::new(),
                    Some(
                        "no saved context known: it has not been back in its worker's loop since \
                         it started"
                            .to_string(),
                    ),
                ),
                _ => match direct::saved_registers(top, |a| read_word(a as u64)) {
                    Some([pc, sp, bp]) => frames_of(&reader, &maps, Regs { pc, sp, bp }),
                    None => (
                        Vec::new(),
                        Some("its saved context could not be read".to_string()),
                    ),
                },
            }
        };
        out.push(TaskStack::new(info, frames, note));
    }
    // The green thread holding the worker first.
    out.sort_by_key(|t| t.info.id != running);
    if remote.tick.load(Ordering::Relaxed) != tick
        || remote.running.load(Ordering::Relaxed) != running
    {
        for t in &mut out {
            t.note = Some(
                "its worker came back while the stacks were read: frames may be mixed".to_string(),
            );
        }
    }
    Dump {
        tasks: out,
        silent_workers: Vec::new(),
    }
}
