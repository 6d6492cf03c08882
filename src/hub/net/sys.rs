//! The system calls of a stream transfer, `recvfrom`, `recvmsg` and
//! `sendto`, made through `syscall(2)` instead of libc's `recv`/`send`,
//! and the `TCP_INQ` option the `recvmsg` form reads.
//!
//! Owns [`recv`], [`recv_inq`], [`set_inq`] and [`send`]. Uses `libc`
//! and `mio`'s stream (for its descriptor; elsewhere than Linux, for its
//! std calls).
//!
//! With `TCP_INQ` on (Linux 4.18 and later), every `recvmsg` on the socket
//! carries a control message with the number of bytes still queued after
//! it: a read that filled its whole buffer then tells whether the queue is
//! empty, which otherwise takes one more, futile, call.
//!
//! libc's `recv` and `send` are thread-cancellation points: in a process
//! with more than one thread (a hub always has its worker threads beside
//! the caller of `block_on`) each call brackets the system call with
//! enabling and disabling asynchronous cancellation, work per echoed
//! message that Rust, which never cancels threads, does not
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

/// Ask the kernel to report, with every [`recv_inq`] on `s`, how many bytes
/// are still queued (`TCP_INQ`), or (`on` false) to stop.
#[cfg(target_os = "linux")]
pub(crate) fn set_inq(s: &TcpStream, on: bool) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let on = libc::c_int::from(on);
    // SAFETY: `on` is a valid c_int for the duration of the call, and the
    // length passed is its size; `s` keeps the descriptor open.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INQ,
            std::ptr::from_ref(&on).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// [`recv`] through `recvmsg`, on a socket with [`set_inq`] on: the
/// bytes received, and whether the kernel reported nothing left queued
/// after them (`false` when it sent no report).
#[cfg(target_os = "linux")]
pub(crate) fn recv_inq(s: &TcpStream, buf: &mut [u8]) -> io::Result<(usize, bool)> {
    use std::os::fd::AsRawFd;
    // Room for one control message holding a c_int, aligned as cmsghdr.
    let mut control = [0u64; 4];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is a plain C struct for which all zeroes is valid
    // (no name, no iovecs, no control buffer).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    let none: libc::c_long = 0;
    // SAFETY: `msg` points at one iovec for `buf`, valid for writes of
    // `buf.len()` bytes, and at `control`, valid for writes of its size;
    // all live for the duration of the call; `s` keeps the descriptor
    // open.
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvmsg,
            libc::c_long::from(s.as_raw_fd()),
            std::ptr::from_mut(&mut msg),
            none,
        )
    };
    let n = result(n)?;
    // SAFETY: the kernel wrote `msg_controllen` bytes of well-formed
    // control messages into `control`; CMSG_FIRSTHDR bounds-checks against
    // it and returns null when there is none.
    let cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    // SAFETY: a non-null `cmsg` points at a whole cmsghdr inside
    // `control` (CMSG_FIRSTHDR checked its size).
    let Some(c) = (unsafe { cmsg.as_ref() }) else {
        return Ok((n, false));
    };
    // SAFETY: CMSG_LEN is arithmetic on its argument; it reads no memory.
    let inq_len = unsafe { libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) };
    if c.cmsg_level != libc::IPPROTO_TCP
        || c.cmsg_type != libc::TCP_CM_INQ
        || (c.cmsg_len as u64) < u64::from(inq_len)
    {
        return Ok((n, false));
    }
    // SAFETY: the message is TCP_CM_INQ with room for a c_int after its
    // header (checked above), inside `control`; it may be unaligned for a
    // c_int, hence the unaligned read.
    let queued = unsafe { libc::CMSG_DATA(cmsg).cast::<libc::c_int>().read_unaligned() };
    Ok((n, queued == 0))
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

/// [`set_inq`] elsewhere than Linux: not available.
#[cfg(not(target_os = "linux"))]
pub(crate) fn set_inq(_s: &TcpStream, _on: bool) -> io::Result<()> {
    Err(io::ErrorKind::Unsupported.into())
}

/// [`recv_inq`] elsewhere than Linux: [`recv`], without a report.
#[cfg(not(target_os = "linux"))]
pub(crate) fn recv_inq(s: &TcpStream, buf: &mut [u8]) -> io::Result<(usize, bool)> {
    recv(s, buf).map(|n| (n, false))
}

/// [`send`] elsewhere than Linux: std's.
#[cfg(not(target_os = "linux"))]
pub(crate) fn send(mut s: &TcpStream, buf: &[u8]) -> io::Result<usize> {
    std::io::Write::write(&mut s, buf)
}
