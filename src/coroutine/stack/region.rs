//! The address space greenlet stacks are carved from.
//!
//! Owns: the regions (large `MAP_NORESERVE` mappings, each divided into
//! slots of one stack size), which slots of a region are in use, free or
//! not yet carved, guard installation when a slot is first carved, giving a
//! returned slot's pages back to the kernel, and unmapping a region once
//! none of its slots is out.
//!
//! Uses: `libc` (madvise, munmap, the advice constants), `slab`,
//! `parking_lot`, and from the parent module `map_noreserve`, the guard
//! strategies ([`super::guard`]), the batched advice ([`super::batch`]) and
//! the error messages ([`super::exhausted`]). It knows nothing of stack
//! headers: the parent writes a slot's header when it gets the slot and
//! gives the slot back once it has forgotten it.
//!
//! # Layout of a region
//! ```text
//! low addresses                                               high addresses
//! | guard | stack 0 ... header | guard | stack 1 ... header | ... | not carved |
//! ^ start   slot_len bytes per slot                                          ^ start + len
//! ```
//! A region holds `slots` slots of `slot_len` bytes. Slots below `guarded`
//! have their guard page, slots below `carved` (never above `guarded`) have
//! been handed out at least once; the rest are untouched address space. A
//! free slot (carved, back from the pool) keeps its guard and has no pages.
//! Guard regions are installed ahead, for as many slots as the region has
//! carved (at least one, at most 64) in one batched call, so that a burst
//! of new stacks pays one system call per batch rather than one per stack;
//! `mprotect` guards, which cost kernel mappings, are made one at a time.
//! The top pages of a batch of guarded slots are populated in one call
//! too, so that the stacks' first touches take no page fault.
//! Pages of returned slots are discarded in batches too. Regions of
//! a size class grow geometrically: the first holds 32 slots, each next one
//! as many as the class has already, up to 1 GiB per region, so a million
//! stacks of the default size take about 260 regions (fewer lines in
//! `/proc/self/maps`: the kernel merges adjacent regions).

use std::io;

use parking_lot::Mutex;
use slab::Slab;

use super::exhausted::{self, Step};
use super::guard::{self, StackGuard};
use super::{batch, map_noreserve};

/// Slots in the first region of a size class.
pub(super) const FIRST_REGION_SLOTS: usize = 32;
/// Most bytes of one region (unless one slot is larger).
const REGION_MAX_BYTES: usize = 1 << 30;

/// A slot handed out: the address of its guard page and its region's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Slot {
    /// Lowest address of the slot: the start of its guard page.
    pub(super) start: usize,
    /// Length of the slot (guard page, stack, header): its size class.
    pub(super) len: usize,
    /// Key of the region that holds it.
    pub(super) region: usize,
}

/// One mapping of `slots` slots.
struct Region {
    start: usize,
    slot_len: usize,
    slots: usize,
    /// Slots `0..guarded` have their guard page.
    guarded: usize,
    /// Slots `0..carved` have been handed out (`carved <= guarded`).
    carved: usize,
    /// Carved slots that are not out, by index.
    free: Vec<u32>,
    /// Slots handed out and not given back.
    out: usize,
    /// Whether the region's key is in its class's `with_room`.
    listed: bool,
}

impl Region {
    fn len(&self) -> usize {
        self.slots * self.slot_len
    }

    fn has_room(&self) -> bool {
        !self.free.is_empty() || self.carved < self.slots
    }
}

/// The regions of one slot length.
struct Class {
    slot_len: usize,
    /// Keys of this class's regions that have a free or uncarved slot.
    with_room: Vec<usize>,
    /// Slots of all this class's regions.
    reserved_slots: usize,
}

struct Regions {
    all: Slab<Region>,
    classes: Vec<Class>,
}

impl Regions {
    fn class(&mut self, slot_len: usize) -> &mut Class {
        let index = match self.classes.iter().position(|c| c.slot_len == slot_len) {
            Some(index) => index,
            None => {
                self.classes.push(Class {
                    slot_len,
                    with_room: Vec::new(),
                    reserved_slots: 0,
                });
                self.classes.len() - 1
            }
        };
        &mut self.classes[index]
    }

    /// Forgets region `key` (its slots all back) and returns its mapping.
    fn remove(&mut self, key: usize) -> (usize, usize) {
        let region = self.all.remove(key);
        let class = self.class(region.slot_len);
        class.reserved_slots -= region.slots;
        if region.listed {
            class.with_room.retain(|&k| k != key);
        }
        (region.start, region.len())
    }
}

static REGIONS: Mutex<Regions> = Mutex::new(Regions {
    all: Slab::new(),
    classes: Vec::new(),
});

/// What went wrong while the lock was held, explained once it is released
/// (explaining reads `/proc`).
struct Failed(io::Error, Step);

/// A placeholder for arrays of slots that [`carve_many`] fills.
pub(super) const EMPTY_SLOT: Slot = Slot {
    start: 0,
    len: 0,
    region: 0,
};

/// Takes a slot of `slot_len` bytes (a multiple of the page, its first
/// page becoming the guard), and up to `more.len()` more into `more`, all
/// under one lock of the regions: free ones, else the next uncarved ones of
/// a region with room, else ones of a new region. Returns the first slot
/// and how many more it wrote into `more`, from its start (fewer than
/// asked when a mapping or a guard failed after the first slot).
///
/// # Errors
/// When not even the first slot could be taken: the OS error of the mmap
/// or guard installation that failed, with a message saying which resource
/// ran out and what to change.
pub(super) fn carve_many(slot_len: usize, more: &mut [Slot]) -> io::Result<(Slot, usize)> {
    let guard = guard::stack_guard();
    let mut regions = REGIONS.lock();
    let mut unmapped = None;
    let first = carve_locked(&mut regions, slot_len, guard, &mut unmapped);
    let mut carved = 0;
    if first.is_ok() {
        for slot in more.iter_mut() {
            match carve_locked(&mut regions, slot_len, guard, &mut unmapped) {
                Ok(taken) => *slot = taken,
                Err(_) => break,
            }
            carved += 1;
        }
    }
    drop(regions);
    if let Some((start, len)) = unmapped {
        unmap(start, len);
    }
    match first {
        Ok(first) => Ok((first, carved)),
        Err(Failed(error, step)) => Err(exhausted::explain(error, step, slot_len)),
    }
}

/// [`carve_many`]'s step, under the regions' lock. A region left with no
/// slot out after its guard failed is forgotten and its mapping put in
/// `unmapped`, for the caller to unmap once the lock is released (the
/// step that fails ends the caller's batch, so there is at most one).
fn carve_locked(
    regions: &mut Regions,
    slot_len: usize,
    guard: StackGuard,
    unmapped: &mut Option<(usize, usize)>,
) -> Result<Slot, Failed> {
    let key = match regions.class(slot_len).with_room.last() {
        Some(&key) => key,
        None => reserve(regions, slot_len)?,
    };
    let region = &mut regions.all[key];
    let start = if let Some(index) = region.free.pop() {
        region.start + index as usize * slot_len
    } else {
        let start = region.start + region.carved * slot_len;
        if region.carved == region.guarded {
            // Guard regions ahead, as many as were carved (a region that
            // is used a little pays little); mprotect pages one by one.
            let ahead = match guard {
                StackGuard::GuardRegion => region.carved.max(1),
                StackGuard::Mprotect => 1,
            };
            match guard::install_many(
                guard,
                start,
                slot_len,
                ahead.min(region.slots - region.carved),
            ) {
                Ok(installed) => {
                    populate_tops(start, slot_len, installed);
                    region.guarded += installed;
                }
                Err((error, guard)) => {
                    if region.out == 0 {
                        *unmapped = Some(regions.remove(key));
                    }
                    return Err(Failed(error, Step::Guard(guard)));
                }
            }
        }
        region.carved += 1;
        start
    };
    region.out += 1;
    if !region.has_room() {
        region.listed = false;
        regions.class(slot_len).with_room.retain(|&k| k != key);
    }
    Ok(Slot {
        start,
        len: slot_len,
        region: key,
    })
}

/// Maps a new region for `slot_len` and lists it as having room; halves
/// the region while the kernel refuses it for want of memory, down to one
/// slot.
fn reserve(regions: &mut Regions, slot_len: usize) -> Result<usize, Failed> {
    let class = regions.class(slot_len);
    let most = (REGION_MAX_BYTES / slot_len).max(1);
    let mut slots = class.reserved_slots.max(FIRST_REGION_SLOTS).min(most);
    let start = loop {
        let len = slots * slot_len;
        match map_noreserve(len) {
            Ok(start) => break start,
            Err(error) if slots > 1 && error.raw_os_error() == Some(libc::ENOMEM) => slots /= 2,
            Err(error) => return Err(Failed(error, Step::Reserve { bytes: len })),
        }
    };
    let key = regions.all.insert(Region {
        start,
        slot_len,
        slots,
        guarded: 0,
        carved: 0,
        free: Vec::new(),
        out: 0,
        listed: true,
    });
    let class = regions.class(slot_len);
    class.reserved_slots += slots;
    class.with_room.push(key);
    Ok(key)
}

/// Slots whose pages [`give_back`] discards with one batch at most (their
/// ranges are kept on the stack: a greenlet's small stack may be the one
/// calling); the pool's `retire` hands them over in chunks of this.
pub(super) const GIVE_BACK_MOST: usize = 64;

/// Takes back `slots` (out and no longer used by anyone): gives their pages
/// back to the kernel, makes them free, and unmaps the regions none of whose
/// slots is out any more.
pub(super) fn give_back(slots: &mut [Slot]) {
    // Sorted, adjacent slots make one range: one discard (and one TLB
    // flush) for the run, batched or not.
    if !slots.is_sorted_by_key(|slot| slot.start) {
        slots.sort_unstable_by_key(|slot| slot.start);
    }
    for chunk in slots.chunks(GIVE_BACK_MOST) {
        discard_slots(chunk);
    }
    let mut empty = Vec::new();
    {
        let mut regions = REGIONS.lock();
        for slot in slots.iter() {
            let region = &mut regions.all[slot.region];
            let index = (slot.start - region.start) / slot.len;
            region.free.push(index as u32);
            region.out -= 1;
            if region.out == 0 {
                empty.push(regions.remove(slot.region));
            } else if !region.listed {
                region.listed = true;
                regions.class(slot.len).with_room.push(slot.region);
            }
        }
    }
    for (start, len) in empty {
        unmap(start, len);
    }
}

/// Discards the pages of `slots` (sorted, at most [`GIVE_BACK_MOST`]):
/// adjacent slots of one region are one range, and the ranges are discarded
/// in batches (guard regions survive `MADV_DONTNEED`, and `PROT_NONE` pages
/// have nothing to discard).
fn discard_slots(slots: &[Slot]) {
    let mut runs = [(0, 0); GIVE_BACK_MOST];
    let mut count: usize = 0;
    for slot in slots.iter().take(GIVE_BACK_MOST) {
        match count.checked_sub(1).map(|last| &mut runs[last]) {
            Some((first, len)) if *first + *len == slot.start => *len += slot.len,
            _ => {
                runs[count] = (slot.start, slot.len);
                count += 1;
            }
        }
    }
    let runs = &runs[..count];
    // SAFETY: the ranges are whole slots handed back, which nothing uses.
    let batched = unsafe { batch::advise(runs, libc::MADV_DONTNEED) };
    for &(start, len) in &runs[batched..] {
        discard(start, len);
    }
}

/// Makes the top page of each of the `count` slots from `start` (guarded
/// ahead, not handed out yet) resident in one batched
/// `MADV_POPULATE_WRITE`, where the kernel batches advice; each stack's
/// header and first frames live there, so its first touch then takes no
/// page fault (a trap per stack otherwise: 100,000 sleepers took 100,000
/// faults under `stack::create` in the hub's sleepers bench). The pages
/// are zeroed as a fault would; at most one batch
/// of them (63 pages) waits per size class, in its newest region, the only
/// one with uncarved slots. A refusal (memory short, or no batching) costs
/// nothing: the first touch then faults as before.
fn populate_tops(start: usize, slot_len: usize, count: usize) {
    const MOST: usize = 64;
    // One range, or no batching: the call below would advise nothing.
    if count < 2 || !batch::batching() {
        return;
    }
    let page = super::page_size();
    let mut tops = [(0, 0); MOST];
    let count = count.min(MOST);
    for (i, range) in tops.iter_mut().take(count).enumerate() {
        *range = (start + (i + 1) * slot_len - page, page);
    }
    // SAFETY: the top pages of slots that are carved next and hold nothing
    // yet (not handed out); populating writes no content (zeroed pages, as
    // the first touch would fault in) and touches no other memory.
    unsafe { batch::advise(&tops[..count], libc::MADV_POPULATE_WRITE) };
}

/// Regions mapped now.
pub(super) fn count() -> usize {
    REGIONS.lock().all.len()
}

/// Gives the pages of the `len` bytes at `start` (inside a region, unused)
/// back to the kernel; they read as zero when touched again.
fn discard(start: usize, len: usize) {
    // SAFETY: the range covers slots that were handed back and that nothing
    // uses; discarding their pages affects nothing else.
    let result = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED) };
    debug_assert_eq!(result, 0, "MADV_DONTNEED of free greenlet stacks failed");
}

/// Unmaps a region that has been forgotten. At the mapping limit the
/// kernel can refuse (unmapping part of a larger mapping splits it): the
/// address space then stays reserved, unused.
fn unmap(start: usize, len: usize) {
    // SAFETY: the region was removed from `REGIONS` with no slot out, so
    // nothing refers to its memory; the range is exactly its mapping.
    if unsafe { libc::munmap(start as *mut libc::c_void, len) } != 0 {
        crate::diag::diag_warn!(
            "could not unmap a region of greenlet stacks ({len} bytes at {start:#x}): {}; its \
             address space stays reserved",
            io::Error::last_os_error()
        );
    }
}

/// Whether a region of slots of `slot_len` bytes covers `address` (for the
/// tests: a size class of their own tells their region from others').
#[cfg(test)]
pub(super) fn holds(address: usize, slot_len: usize) -> bool {
    REGIONS
        .lock()
        .all
        .iter()
        .any(|(_, r)| r.slot_len == slot_len && (r.start..r.start + r.len()).contains(&address))
}
