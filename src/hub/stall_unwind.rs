//! Unwinding a stack of this process off the thread that runs on it, from
//! a set of registers, and naming its frames: the watchdog's view of a
//! green thread that holds a stalled worker (its registers sampled by
//! `stall_sample`) and of the green threads suspended on that worker
//! (their saved contexts).
//!
//! # Why this is sound
//! Nothing here dereferences another thread's memory. Every read of the
//! stack and of the loaded objects' unwind tables is a copy made by the
//! kernel with `process_vm_readv(2)` on our own pid, into buffers of our
//! own: a stack the other thread is changing yields stale or mixed words
//! (a wrong frame at worst), never a data race in Rust's sense, and an
//! address that is not mapped fails the read with `EFAULT` (the walk
//! stops there). Reads of a stack are bounded by its known top and the
//! stack pointer the walk started from. The walk follows the objects'
//! `.eh_frame` call-frame information (located through each object's
//! `PT_GNU_EH_FRAME` program header, as `dl_iterate_phdr(3)` lists them),
//! with `framehop`; where an object has none for an address, framehop falls
//! back to the frame pointer, which a build without frame pointers does
//! not keep, so such frames may be missing. Symbols are resolved by the
//! `backtrace` crate's `resolve` on the calling (watchdog) thread.
//!
//! Owns: [`read_word`], [`StackReader`] (the walk), [`symbolise`]. Uses
//! `libc`, framehop and backtrace; nothing of the hub but [`Regs`].

use std::ffi::CStr;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, MayAllocateDuringUnwind, Module, Unwinder};

use super::stall_sample::Regs;

/// The most frames read of one stack: deeper ones are left out (a green
/// thread's own frames are near its top, the innermost ones first).
const MAX_FRAMES: usize = 128;

/// The most bytes of one object's `.eh_frame` copied (its end is not in
/// the program headers: the copy runs to the end of its segment).
const MAX_EH_FRAME: u64 = 64 << 20;

/// Copy `buf.len()` bytes of this process's memory at `addr` into `buf`;
/// whether all were copied.
fn read_own(addr: u64, buf: &mut [u8]) -> bool {
    if buf.is_empty() {
        return true;
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: process_vm_readv(2) on our own pid copies, inside the kernel,
    // from `remote` (any address: an unmapped one fails with EFAULT, and
    // nothing is read through a Rust reference) into `local`, a buffer of
    // ours of that length, writable and borrowed for the call.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    usize::try_from(n).is_ok_and(|n| n == buf.len())
}

/// The 8-byte word of this process's memory at `addr`, if it could be read.
pub(crate) fn read_word(addr: u64) -> Option<u64> {
    let mut word = [0u8; 8];
    read_own(addr, &mut word).then(|| u64::from_ne_bytes(word))
}

/// A copy of `len` bytes at `addr`, if they could all be read.
fn copy(addr: u64, len: u64) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; usize::try_from(len).ok()?];
    read_own(addr, &mut buf).then_some(buf)
}

/// One program header of a loaded object.
struct Segment {
    kind: u32,
    flags: u32,
    vaddr: u64,
    memsz: u64,
}

/// A loaded object as `dl_iterate_phdr` lists it.
struct Object {
    name: String,
    base: u64,
    segments: Vec<Segment>,
}

/// `dl_iterate_phdr`'s callback: appends the object to the `Vec<Object>`
/// behind `data`.
extern "C" fn list_object(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: `data` is the `&mut Vec<Object>` that `objects` passed, alive
    // and not otherwise borrowed during the call; `info` is valid during
    // the callback and its `dlpi_phdr` points at `dlpi_phnum` program
    // headers (dl_iterate_phdr(3)); `dlpi_name` is null or a C string.
    unsafe {
        let out = &mut *data.cast::<Vec<Object>>();
        let info = &*info;
        let name = if info.dlpi_name.is_null() {
            String::new()
        } else {
            CStr::from_ptr(info.dlpi_name)
                .to_string_lossy()
                .into_owned()
        };
        let headers = if info.dlpi_phdr.is_null() {
            &[][..]
        } else {
            std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum))
        };
        out.push(Object {
            name,
            base: info.dlpi_addr,
            segments: headers
                .iter()
                .map(|h| Segment {
                    kind: h.p_type,
                    flags: h.p_flags,
                    vaddr: h.p_vaddr,
                    memsz: h.p_memsz,
                })
                .collect(),
        });
    }
    0
}

/// Every object loaded in the process.
fn objects() -> Vec<Object> {
    let mut out: Vec<Object> = Vec::new();
    // SAFETY: `list_object` matches the callback's signature and uses
    // `data` only as the `Vec<Object>` passed here, which outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(list_object), (&mut out as *mut Vec<Object>).cast()) };
    out
}

/// Decode the `.eh_frame_hdr`'s pointer to `.eh_frame` (encoded as its
/// byte 1 says, at byte 4, whose address is `field_svma`).
fn eh_frame_pointer(hdr: &[u8], field_svma: u64) -> Option<u64> {
    const PCREL: u8 = 0x10;
    let (&version, &enc) = (hdr.first()?, hdr.get(1)?);
    if version != 1 || enc & !(PCREL | 0x0f) != 0 {
        return None;
    }
    let raw = hdr.get(4..)?;
    let value = match enc & 0x0f {
        0x00 | 0x04 => u64::from_ne_bytes(raw.get(..8)?.try_into().ok()?),
        0x0c => i64::from_ne_bytes(raw.get(..8)?.try_into().ok()?) as u64,
        0x03 => u64::from(u32::from_ne_bytes(raw.get(..4)?.try_into().ok()?)),
        0x0b => i64::from(i32::from_ne_bytes(raw.get(..4)?.try_into().ok()?)) as u64,
        _ => return None,
    };
    Some(if enc & PCREL != 0 {
        field_svma.wrapping_add(value)
    } else {
        value
    })
}

/// The unwind module of `object`: its address range, its text and a copy
/// of its `.eh_frame_hdr` and `.eh_frame`; `None` without them.
fn module(object: &Object) -> Option<Module<Vec<u8>>> {
    let loads: Vec<&Segment> = object
        .segments
        .iter()
        .filter(|s| s.kind == libc::PT_LOAD)
        .collect();
    let start = loads.iter().map(|s| s.vaddr).min()?;
    let end = loads.iter().map(|s| s.vaddr + s.memsz).max()?;
    let text = loads
        .iter()
        .find(|s| s.flags & libc::PF_X != 0)
        .map(|s| s.vaddr..s.vaddr + s.memsz)?;
    let hdr_seg = object
        .segments
        .iter()
        .find(|s| s.kind == libc::PT_GNU_EH_FRAME)?;
    let hdr_svma = hdr_seg.vaddr..hdr_seg.vaddr + hdr_seg.memsz;
    let hdr = copy(object.base.wrapping_add(hdr_svma.start), hdr_seg.memsz)?;
    let eh_start = eh_frame_pointer(&hdr, hdr_svma.start + 4)?;
    let holder = loads
        .iter()
        .find(|s| (s.vaddr..s.vaddr + s.memsz).contains(&eh_start))?;
    let eh_len = (holder.vaddr + holder.memsz - eh_start).min(MAX_EH_FRAME);
    let eh_frame = copy(object.base.wrapping_add(eh_start), eh_len)?;
    let info = ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma: Some(text),
        eh_frame_svma: Some(eh_start..eh_start + eh_len),
        eh_frame: Some(eh_frame),
        eh_frame_hdr_svma: Some(hdr_svma),
        eh_frame_hdr: Some(hdr),
        ..ExplicitModuleSectionInfo::default()
    };
    Some(Module::new(
        object.name.clone(),
        object.base.wrapping_add(start)..object.base.wrapping_add(end),
        object.base,
        info,
    ))
}

/// An unwinder that knows every object loaded in the process now.
pub(crate) struct StackReader {
    unwinder: UnwinderX86_64<Vec<u8>, MayAllocateDuringUnwind>,
}

/// A walked stack: the addresses of its frames, innermost first (each one
/// inside its call: the instruction pointer, then return addresses less
/// one), and whether the walk reached the stack's root.
pub(crate) struct Walk {
    pub(crate) addresses: Vec<u64>,
    pub(crate) complete: bool,
}

impl StackReader {
    /// The unwind tables of every loaded object, copied.
    pub(crate) fn new() -> StackReader {
        let mut unwinder = UnwinderX86_64::new();
        for object in objects() {
            if let Some(m) = module(&object) {
                unwinder.add_module(m);
            }
        }
        StackReader { unwinder }
    }

    /// Walk the stack that `regs` were taken on, reading only between
    /// `regs.sp` and `top` (the end of that stack).
    pub(crate) fn unwind(&self, regs: Regs, top: u64) -> Walk {
        let mut cache = CacheX86_64::<MayAllocateDuringUnwind>::new();
        let floor = regs.sp;
        let mut read = |addr: u64| {
            if addr < floor || !matches!(addr.checked_add(8), Some(end) if end <= top) {
                return Err(());
            }
            read_word(addr).ok_or(())
        };
        let mut frames = self.unwinder.iter_frames(
            regs.pc,
            UnwindRegsX86_64::new(regs.pc, regs.sp, regs.bp),
            &mut cache,
            &mut read,
        );
        let mut addresses = Vec::new();
        loop {
            match frames.next() {
                Ok(Some(frame)) => {
                    addresses.push(frame.address_for_lookup());
                    if addresses.len() == MAX_FRAMES {
                        return Walk {
                            addresses,
                            complete: false,
                        };
                    }
                }
                Ok(None) => {
                    return Walk {
                        addresses,
                        complete: true,
                    }
                }
                Err(_) => {
                    return Walk {
                        addresses,
                        complete: false,
                    }
                }
            }
        }
    }
}

impl Default for StackReader {
    fn default() -> StackReader {
        StackReader::new()
    }
}

/// The exported symbol `addr` lies in (what `dladdr(3)` finds in the
/// objects' dynamic symbol tables: the only ones the vDSO has), as
/// `name in object`.
fn dynamic_symbol(addr: u64) -> Option<String> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr(3) with any address and a writable `Dl_info`; on
    // success its strings are null or C strings owned by the loader,
    // valid while the object is loaded, and copied here at once.
    unsafe {
        if libc::dladdr(addr as usize as *const libc::c_void, info.as_mut_ptr()) == 0 {
            return None;
        }
        let info = info.assume_init();
        if info.dli_sname.is_null() {
            return None;
        }
        let name = CStr::from_ptr(info.dli_sname).to_string_lossy();
        let object = if info.dli_fname.is_null() {
            "?".into()
        } else {
            CStr::from_ptr(info.dli_fname).to_string_lossy()
        };
        Some(format!("{name} in {object}"))
    }
}

/// The frames at `addresses`, innermost first, each as a function name and
/// its `file:line:column` where known (an address inlined into others
/// gives one frame per function, innermost first; an unknown one its
/// address).
pub(crate) fn symbolise(addresses: &[u64]) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for &addr in addresses {
        let before = out.len();
        backtrace::resolve(addr as usize as *mut libc::c_void, |symbol| {
            let name = symbol
                .name()
                .map_or_else(|| format!("{addr:#x}"), |n| format!("{n:#}"));
            let at = symbol.filename().map(|file| {
                let mut at = file.display().to_string();
                if let Some(line) = symbol.lineno() {
                    at.push_str(&format!(":{line}"));
                    if let Some(col) = symbol.colno() {
                        at.push_str(&format!(":{col}"));
                    }
                }
                at
            });
            out.push((name, at));
        });
        if out.len() == before {
            out.push((
                dynamic_symbol(addr).unwrap_or_else(|| format!("{addr:#x}")),
                None,
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eh_frame_pointer_is_decoded_pc_relative_or_absolute() {
        // version 1, pcrel|sdata4, then the table's encodings, then -0x10.
        let mut hdr = vec![1, 0x1b, 0x03, 0x3b];
        hdr.extend_from_slice(&(-0x10i32).to_ne_bytes());
        assert_eq!(eh_frame_pointer(&hdr, 0x1004), Some(0xff4));
        // absptr (8 bytes).
        let mut hdr = vec![1, 0x00, 0x03, 0x3b];
        hdr.extend_from_slice(&0x4000u64.to_ne_bytes());
        assert_eq!(eh_frame_pointer(&hdr, 0x1004), Some(0x4000));
        // An unknown version or encoding: none.
        assert_eq!(eh_frame_pointer(&[2, 0x1b, 0, 0, 0, 0, 0, 0], 4), None);
        assert_eq!(eh_frame_pointer(&[1, 0x80, 0, 0, 0, 0, 0, 0], 4), None);
    }

    #[test]
    fn a_word_is_read_where_mapped_and_refused_where_not() {
        let here = 0x1122_3344_5566_7788u64;
        assert_eq!(read_word(&here as *const u64 as u64), Some(here));
        assert_eq!(read_word(8), None, "page zero is never mapped");
    }

    #[test]
    fn this_threads_own_stack_unwinds_to_this_test() {
        #[inline(never)]
        fn walk_from_here() -> Vec<String> {
            let (pc, sp, bp): (u64, u64, u64);
            // SAFETY: reads the instruction, stack and frame pointers.
            unsafe {
                std::arch::asm!(
                    "lea {pc}, [rip]",
                    "mov {sp}, rsp",
                    "mov {bp}, rbp",
                    pc = out(reg) pc,
                    sp = out(reg) sp,
                    bp = out(reg) bp,
                );
            }
            let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
            let top = maps
                .lines()
                .find_map(|l| {
                    let (a, b) = l.split_whitespace().next()?.split_once('-')?;
                    let (a, b) = (
                        u64::from_str_radix(a, 16).ok()?,
                        u64::from_str_radix(b, 16).ok()?,
                    );
                    (a..b).contains(&sp).then_some(b)
                })
                .unwrap();
            let walk = StackReader::new().unwind(Regs { pc, sp, bp }, top);
            symbolise(&walk.addresses)
                .into_iter()
                .map(|(name, _)| name)
                .collect()
        }
        let names = walk_from_here();
        assert!(
            names.iter().any(|n| n.contains("walk_from_here")),
            "{names:?}"
        );
        assert!(
            names
                .iter()
                .any(|n| n.contains("this_threads_own_stack_unwinds_to_this_test")),
            "{names:?}"
        );
    }
}
