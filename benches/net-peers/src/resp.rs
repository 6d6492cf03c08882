//! The RESP (Redis serialization protocol) side every RESP server shares:
//! the store and the request handling, bytes in and reply bytes out, so
//! that the hub's, tokio's, may's and monoio's servers differ only in how
//! they read and write.
//!
//! Commands: `PING [message]`, `SET key value`, `GET key`, `INCR key`, as
//! arrays of bulk strings (what clients send) or inline (`PING\r\n`, what
//! `redis-benchmark`'s `PING_INLINE` sends). Every complete command in the
//! buffer is answered, so pipelined commands get their replies in one
//! write. Anything else gets an `-ERR` reply; a malformed request gets one
//! and the connection closes.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::Mutex;

/// The most arguments a command may have (SET has 3 with its name).
const MAX_ARGS: usize = 8;

/// The most bytes one argument may have: a request must fit in the
/// servers' read buffer of [`BUFFER`] bytes.
pub const BUFFER: usize = 16 * 1024;

/// The keys and values, shared by every connection (and every worker) of a
/// server behind one lock, as a small Redis-like server on any of these
/// runtimes keeps them.
#[derive(Default)]
pub struct Store {
    map: Mutex<HashMap<Vec<u8>, Vec<u8>>>,
}

/// What parsing one command found.
enum Parsed<'a> {
    /// A whole command: its arguments and the bytes it took.
    Command(&'a [&'a [u8]], usize),
    /// Not all of it has arrived.
    Partial,
    /// Not RESP: what was wrong.
    Malformed(&'static str),
}

/// The decimal number in `digits`.
fn number(digits: &[u8]) -> Option<i64> {
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// The line at the start of `buf` (without its `\r\n`) and the bytes it
/// takes with it, or `None` while it is incomplete.
fn line(buf: &[u8]) -> Option<(&[u8], usize)> {
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    Some((&buf[..end], end + 2))
}

fn parse<'a>(buf: &'a [u8], args: &'a mut [&'a [u8]; MAX_ARGS]) -> Parsed<'a> {
    if buf.first() != Some(&b'*') {
        // Inline: words separated by spaces, up to the end of the line.
        let Some((text, used)) = line(buf) else {
            return Parsed::Partial;
        };
        let mut n = 0;
        for word in text.split(|&b| b == b' ').filter(|w| !w.is_empty()) {
            if n == MAX_ARGS {
                return Parsed::Malformed("too many arguments");
            }
            args[n] = word;
            n += 1;
        }
        return Parsed::Command(&args[..n], used);
    }
    let Some((head, mut used)) = line(&buf[1..]) else {
        return Parsed::Partial;
    };
    used += 1;
    let count = match number(head) {
        Some(c) if (1..=MAX_ARGS as i64).contains(&c) => c as usize,
        _ => return Parsed::Malformed("bad array length"),
    };
    for slot in args.iter_mut().take(count) {
        let rest = &buf[used..];
        if rest.is_empty() {
            return Parsed::Partial;
        }
        if rest[0] != b'$' {
            return Parsed::Malformed("expected a bulk string");
        }
        let Some((len, took)) = line(&rest[1..]) else {
            return Parsed::Partial;
        };
        let len = match number(len) {
            Some(l) if (0..BUFFER as i64).contains(&l) => l as usize,
            _ => return Parsed::Malformed("bad bulk length"),
        };
        let start = used + 1 + took;
        if buf.len() < start + len + 2 {
            return Parsed::Partial;
        }
        if &buf[start + len..start + len + 2] != b"\r\n" {
            return Parsed::Malformed("a bulk string without its CRLF");
        }
        *slot = &buf[start..start + len];
        used = start + len + 2;
    }
    Parsed::Command(&args[..count], used)
}

fn bulk(out: &mut Vec<u8>, value: &[u8]) {
    out.push(b'$');
    out.extend_from_slice(value.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

impl Store {
    /// Run one command, its reply into `out`.
    fn run(&self, args: &[&[u8]], out: &mut Vec<u8>) {
        let Some(name) = args.first() else {
            return;
        };
        let is = |cmd: &str| name.eq_ignore_ascii_case(cmd.as_bytes());
        match args.len() {
            1 if is("PING") => out.extend_from_slice(b"+PONG\r\n"),
            2 if is("PING") => bulk(out, args[1]),
            3 if is("SET") => {
                self.map
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .insert(args[1].to_vec(), args[2].to_vec());
                out.extend_from_slice(b"+OK\r\n");
            }
            2 if is("GET") => {
                let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
                match map.get(args[1]) {
                    Some(value) => bulk(out, value),
                    None => out.extend_from_slice(b"$-1\r\n"),
                }
            }
            2 if is("INCR") => {
                let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
                let value = map.entry(args[1].to_vec()).or_insert_with(|| b"0".to_vec());
                match number(value).and_then(|n| n.checked_add(1)) {
                    Some(n) => {
                        *value = n.to_string().into_bytes();
                        out.push(b':');
                        out.extend_from_slice(value);
                        out.extend_from_slice(b"\r\n");
                    }
                    None => {
                        out.extend_from_slice(b"-ERR value is not an integer or out of range\r\n")
                    }
                }
            }
            _ => out.extend_from_slice(b"-ERR unknown command or wrong number of arguments\r\n"),
        }
    }

    /// Answer every complete command in `buf` into `out`; returns the bytes
    /// consumed and whether to close the connection (a malformed request).
    pub fn respond(&self, buf: &[u8], out: &mut Vec<u8>) -> (usize, bool) {
        let mut start = 0;
        loop {
            let mut args: [&[u8]; MAX_ARGS] = [&[]; MAX_ARGS];
            match parse(&buf[start..], &mut args) {
                Parsed::Command(cmd, used) => {
                    self.run(cmd, out);
                    start += used;
                }
                Parsed::Partial => return (start, false),
                Parsed::Malformed(why) => {
                    out.extend_from_slice(b"-ERR Protocol error: ");
                    out.extend_from_slice(why.as_bytes());
                    out.extend_from_slice(b"\r\n");
                    return (start, true);
                }
            }
        }
    }
}

/// One connection served with blocking-style reads and writes (the hub's
/// and may's streams, which park a green thread or coroutine inside them),
/// until it closes or sends a malformed request.
pub fn serve_blocking<S: Read + Write>(mut s: S, store: &Store) {
    let mut buf = vec![0u8; BUFFER];
    let mut filled = 0;
    let mut out = Vec::with_capacity(4096);
    loop {
        match s.read(&mut buf[filled..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => filled += n,
        }
        let (used, close) = store.respond(&buf[..filled], &mut out);
        if !out.is_empty() {
            if s.write_all(&out).is_err() {
                return;
            }
            out.clear();
        }
        if close {
            return;
        }
        buf.copy_within(used..filled, 0);
        filled -= used;
        if filled == buf.len() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Store;

    fn reply(store: &Store, input: &[u8]) -> (Vec<u8>, usize, bool) {
        let mut out = Vec::new();
        let (used, close) = store.respond(input, &mut out);
        (out, used, close)
    }

    #[test]
    fn commands_pipelined_and_inline() {
        let s = Store::default();
        let input = b"*1\r\n$4\r\nPING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nabc\r\n\
                      *2\r\n$3\r\nGET\r\n$1\r\nk\r\n*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n\
                      *2\r\n$4\r\nincr\r\n$1\r\nn\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nz\r\n";
        let (out, used, close) = reply(&s, input);
        assert_eq!(
            String::from_utf8_lossy(&out),
            "+PONG\r\n+OK\r\n$3\r\nabc\r\n:1\r\n:2\r\n+PONG\r\n$-1\r\n"
        );
        assert_eq!((used, close), (input.len(), false));
    }

    #[test]
    fn partial_waits_and_malformed_closes() {
        let s = Store::default();
        let (out, used, close) = reply(&s, b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r");
        assert_eq!(
            (out.as_slice(), used, close),
            (&b"+PONG\r\n"[..], 14, false)
        );
        let (out, _, close) = reply(&s, b"*x\r\n");
        assert!(out.starts_with(b"-ERR Protocol error") && close);
        let (out, _, close) = reply(&s, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nxy\r\n");
        assert!(out.starts_with(b"-ERR Protocol error") && close);
    }

    #[test]
    fn incr_of_a_non_number_is_an_error() {
        let s = Store::default();
        reply(&s, b"SET k v\r\n");
        let (out, _, close) = reply(&s, b"INCR k\r\n");
        assert!(out.starts_with(b"-ERR value is not an integer") && !close);
    }
}
