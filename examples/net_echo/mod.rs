//! The echo handler of the hub's echo servers (`echo_server`, and
//! `net_soak`'s server): one green thread per connection, echoing what it
//! reads until the client closes.
//!
//! Uses `TcpStream::readable` so that a waiting connection holds no read
//! buffer: the handler parks there with none, takes a buffer from its
//! worker thread's spare list when data comes, echoes one read's worth and
//! gives the buffer back. `readable` returns at once while data may be
//! queued (the last read filled its buffer and the kernel did not report
//! the queue empty) and parks once a read drained it, so a message of
//! exactly the buffer's size parks without a buffer too, and the spare
//! list hands the same few, cache-warm buffers round. Green threads never
//! migrate, so a buffer goes back to the thread it came from.

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
        let open = echo_one(&s, &mut buf);
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

/// Echo what one read returns; whether the connection is still open.
fn echo_one(mut s: &TcpStream, buf: &mut [u8]) -> bool {
    match s.read(buf) {
        Ok(0) | Err(_) => false,
        Ok(n) => s.write_all(&buf[..n]).is_ok(),
    }
}
