//! The echo handler of the hub's echo servers (`echo_server`, and
//! `net_soak`'s server): one green thread per connection, echoing what it
//! reads until the client closes.
//!
//! Uses `TcpStream::readable` so that an idle connection holds no read
//! buffer: the handler parks there with none, takes a buffer from its
//! worker thread's spare list when data comes, echoes until a read comes
//! up short (the receive queue is empty), and gives the buffer back before
//! it parks again. Green threads never migrate, so a buffer goes back to
//! the thread it came from.

use std::cell::RefCell;
use std::io::{Read, Write};

use greenlet::hub::net::TcpStream;

/// Spare buffers kept per worker thread at most; more are freed.
const SPARE_MAX: usize = 64;

thread_local! {
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Echo everything `s` sends back to it, reading `buffer` bytes at most at
/// a time, until it closes or an error.
pub(crate) fn echo(s: TcpStream, buffer: usize) {
    let _ = s.set_nodelay(true);
    loop {
        if s.readable().is_err() {
            return;
        }
        let mut buf = SPARE
            .with(|b| b.borrow_mut().pop())
            .filter(|b| b.len() == buffer)
            .unwrap_or_else(|| vec![0u8; buffer]);
        let open = echo_queued(&s, &mut buf);
        SPARE.with(|b| {
            let mut b = b.borrow_mut();
            if b.len() < SPARE_MAX {
                b.push(buf);
            }
        });
        if !open {
            return;
        }
    }
}

/// Echo until a read comes up short; whether the connection is still open.
fn echo_queued(mut s: &TcpStream, buf: &mut [u8]) -> bool {
    loop {
        match s.read(buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => {
                if s.write_all(&buf[..n]).is_err() {
                    return false;
                }
                if n < buf.len() {
                    return true;
                }
            }
        }
    }
}
