//! The two system calls of a stream transfer, `recvfrom` and `sendto`,
//! made through `syscall(2)` instead of libc's `recv`/`send`.
//!
//! Owns [`recv`] and [`send`]. Uses `libc` and `mio`'s stream (for its
//! descriptor; elsewhere than Linux, for its std calls).
//!
//! libc's `recv` and `send` are thread-cancellation points: in a process
//! with more than one thread (a hub always has its worker threads beside
//! the caller of `block_on`) each call brackets the system call with
//! enabling and disabling asynchronous cancellation, about 60 instructions
//! per echoed message that Rust, which never cancels threads, does not
//! need. `syscall(2)` is no cancellation point.

use std::io;

use mio::net::TcpStream;

/// Receive into `buf` from the connected socket `s` (non-blocking:
/// `WouldBlock` when nothing is queued).
#[cfg(target_os = "linux")]
pub(crate) fn recv(s: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let none: libc::c_long = 0;
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the
    // duration of the call, and `s` keeps the descriptor open; the two
    // address arguments are null (no source address wanted), which
    // recvfrom(2) accepts.
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            libc::c_long::from(s.as_raw_fd()),
            buf.as_mut_ptr(),
            buf.len(),
            none,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    };
    result(n)
}

/// Send `buf` on the connected socket `s` (non-blocking; no `SIGPIPE`
/// when the peer has gone, `EPIPE` instead, as std's `send` does).
#[cfg(target_os = "linux")]
pub(crate) fn send(s: &TcpStream, buf: &[u8]) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let none: libc::c_long = 0;
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the
    // duration of the call, and `s` keeps the descriptor open; a null
    // destination of length 0 is what send(2) itself passes to sendto(2).
    let n = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            libc::c_long::from(s.as_raw_fd()),
            buf.as_ptr(),
            buf.len(),
            libc::c_long::from(libc::MSG_NOSIGNAL),
            std::ptr::null::<libc::sockaddr>(),
            none,
        )
    };
    result(n)
}

/// A byte count, or the error `errno` holds for a negative return.
#[cfg(target_os = "linux")]
fn result(n: libc::c_long) -> io::Result<usize> {
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// [`recv`] elsewhere than Linux: std's.
#[cfg(not(target_os = "linux"))]
pub(crate) fn recv(mut s: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    std::io::Read::read(&mut s, buf)
}

/// [`send`] elsewhere than Linux: std's.
#[cfg(not(target_os = "linux"))]
pub(crate) fn send(mut s: &TcpStream, buf: &[u8]) -> io::Result<usize> {
    std::io::Write::write(&mut s, buf)
}
