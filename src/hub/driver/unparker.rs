//! The cross-thread wake of a worker's poller ([`Unparker`]): an eventfd
//! that the poller watches, whichever the driver.
//!
//! Owns: the eventfd and its counter's reset. Uses `libc`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// Wakes one worker's poller from any thread: each [`wake`](Self::wake)
/// adds one to an eventfd the poller waits on (registered edge-triggered
/// with epoll, or watched by a multishot poll on the ring), whose wait
/// queue wake-up ends the poller's wait.
#[derive(Debug, Clone)]
pub(crate) struct Unparker {
    fd: Arc<OwnedFd>,
}

impl Unparker {
    pub(crate) fn new() -> io::Result<Unparker> {
        // SAFETY: `eventfd` takes no pointer; a non-negative result is a
        // new descriptor that nothing else owns.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor, owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Unparker { fd: Arc::new(fd) })
    }

    /// Wake the poller. The counter is never read on the waiting side (a
    /// wake is the write's wake-up of the eventfd's wait queue, not the
    /// value): should it ever be full, it is read back to zero here first.
    pub(crate) fn wake(&self) -> io::Result<()> {
        let one: u64 = 1;
        loop {
            // SAFETY: writes the 8 bytes of `one`, alive for the call.
            let rc = unsafe { libc::write(self.raw(), (&one as *const u64).cast(), 8) };
            if rc == 8 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => {
                    let mut sink: u64 = 0;
                    // SAFETY: reads at most 8 bytes into `sink`, alive for
                    // the call.
                    unsafe { libc::read(self.raw(), (&mut sink as *mut u64).cast(), 8) };
                }
                _ => return Err(e),
            }
        }
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
