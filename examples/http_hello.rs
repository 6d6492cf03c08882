//! A small HTTP/1.1 keep-alive server on the hub, parsing with `httparse`
//! over the hub's `TcpStream` through the plain `std::io` traits: the
//! parser is blocking-style code that neither knows nor cares that reads
//! park a green thread. Answers every request with `Hello, world!`.
//!
//! ```text
//! cargo run --release --example http_hello -- --addr 127.0.0.1:8080 --workers 1
//! wrk -t1 -c50 -d5s http://127.0.0.1:8080/
//! ```

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::ExitCode;

use clap::Parser;
use greenlet::hub::net::{serve, TcpListener, TcpStream};
use greenlet::hub::Runtime;

/// Serve "Hello, world!" over HTTP/1.1 with keep-alive (127.0.0.1 only).
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Address to listen on (loopback only).
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Worker OS threads.
    #[arg(long, default_value_t = 1)]
    workers: usize,
}

const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, world!";
const BAD_REQUEST: &[u8] =
    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/// Serve one connection's requests (pipelined ones too) until it closes.
fn http(mut s: TcpStream) {
    let mut buf = vec![0u8; 8192];
    let mut filled = 0;
    let mut out = Vec::with_capacity(4096);
    loop {
        match s.read(&mut buf[filled..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => filled += n,
        }
        let mut start = 0;
        let mut close = false;
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&buf[start..filled]) {
                Ok(httparse::Status::Complete(len)) => {
                    close = req.headers.iter().any(|h| {
                        h.name.eq_ignore_ascii_case("connection")
                            && h.value.eq_ignore_ascii_case(b"close")
                    });
                    out.extend_from_slice(RESPONSE);
                    start += len;
                    if close {
                        break;
                    }
                }
                Ok(httparse::Status::Partial) => break,
                Err(_) => {
                    out.extend_from_slice(BAD_REQUEST);
                    close = true;
                    break;
                }
            }
        }
        if !out.is_empty() {
            if s.write_all(&out).is_err() {
                return;
            }
            out.clear();
        }
        if close {
            return;
        }
        buf.copy_within(start..filled, 0);
        filled -= start;
        if filled == buf.len() {
            let _ = s.write_all(BAD_REQUEST);
            return;
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !args.addr.ip().is_loopback() {
        eprintln!(
            "http_hello: --addr must be a loopback address (127.0.0.1), not {}",
            args.addr
        );
        return ExitCode::from(2);
    }
    let rt = match Runtime::builder()
        .worker_threads(args.workers)
        .stack_size(64 * 1024)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("http_hello: {e}");
            return ExitCode::from(2);
        }
    };
    let addr = args.addr;
    let out = rt.block_on(move || {
        let l = TcpListener::bind(addr)?;
        println!("http_hello listening on {}", l.local_addr()?);
        serve(l, http)
    });
    match out {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("http_hello: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("http_hello: {e}");
            ExitCode::FAILURE
        }
    }
}
