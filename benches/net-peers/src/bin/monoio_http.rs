//! The HTTP/1.1 hello server on monoio (io_uring, thread per core) +
//! httparse: one task per connection.

use monoio::buf::IoBufMut;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;

async fn http(mut s: TcpStream) {
    let mut buf = Vec::with_capacity(8192);
    let mut out = Vec::with_capacity(4096);
    loop {
        let filled = buf.len();
        let (res, b) = s.read(buf.slice_mut(filled..)).await;
        buf = b.into_inner();
        match res {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let (used, close) = net_peers::respond(&buf, &mut out);
        if !out.is_empty() {
            let (res, o) = s.write_all(out).await;
            out = o;
            if res.is_err() {
                return;
            }
            out.clear();
        }
        if close {
            return;
        }
        buf.drain(..used);
        if buf.len() == buf.capacity() {
            return;
        }
    }
}

fn main() -> std::io::Result<()> {
    let args = net_peers::Args::get();
    net_peers::monoio_cores::serve("monoio_http", args.addr, args.workers, http)
}
