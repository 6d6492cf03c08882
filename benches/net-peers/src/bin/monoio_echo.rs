//! The echo server on monoio (io_uring, thread per core): one task per
//! connection, the buffer handed to the kernel and back (monoio's owned
//! buffers).

use monoio::buf::IoBuf;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;

async fn echo(mut s: TcpStream) {
    let _ = s.set_nodelay(true);
    let mut buf = vec![0u8; 4096];
    loop {
        let (res, b) = s.read(buf).await;
        buf = b;
        let n = match res {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let (res, b) = s.write_all(buf.slice(..n)).await;
        buf = b.into_inner();
        if res.is_err() {
            return;
        }
    }
}

fn main() -> std::io::Result<()> {
    let args = net_peers::Args::get();
    net_peers::monoio_cores::serve("monoio_echo", args.addr, args.workers, echo)
}
