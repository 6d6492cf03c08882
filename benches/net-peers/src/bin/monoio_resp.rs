//! The RESP server on monoio (io_uring, thread per core): one task per
//! connection, every worker on the one store.

use std::sync::Arc;

use monoio::buf::IoBufMut;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use net_peers::resp::{Store, BUFFER};

async fn resp(mut s: TcpStream, store: Arc<Store>) {
    let _ = s.set_nodelay(true);
    let mut buf = Vec::with_capacity(BUFFER);
    let mut out = Vec::with_capacity(4096);
    loop {
        let filled = buf.len();
        let (res, b) = s.read(buf.slice_mut(filled..)).await;
        buf = b.into_inner();
        match res {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let (used, close) = store.respond(&buf, &mut out);
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
    let store = Arc::new(Store::default());
    net_peers::monoio_cores::serve("monoio_resp", args.addr, args.workers, move |s| {
        resp(s, Arc::clone(&store))
    })
}
