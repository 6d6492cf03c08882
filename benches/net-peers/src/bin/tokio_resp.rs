//! The RESP server on tokio: current_thread for one worker, multi_thread
//! otherwise; one task per connection, every task on the one store.

use std::sync::Arc;

use net_peers::resp::{Store, BUFFER};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn resp(mut s: TcpStream, store: Arc<Store>) {
    let _ = s.set_nodelay(true);
    let mut buf = vec![0u8; BUFFER];
    let mut filled = 0;
    let mut out = Vec::with_capacity(4096);
    loop {
        match s.read(&mut buf[filled..]).await {
            Ok(0) | Err(_) => return,
            Ok(n) => filled += n,
        }
        let (used, close) = store.respond(&buf[..filled], &mut out);
        if !out.is_empty() {
            if s.write_all(&out).await.is_err() {
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

fn main() -> std::io::Result<()> {
    let args = net_peers::Args::get();
    let rt = if args.workers == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(args.workers);
        b
    }
    .enable_io()
    .build()?;
    let store = Arc::new(Store::default());
    rt.block_on(async move {
        let l = net_peers::tokio_listener(args.addr)?;
        println!("tokio_resp listening on {}", l.local_addr()?);
        loop {
            let (s, _) = l.accept().await?;
            tokio::spawn(resp(s, Arc::clone(&store)));
        }
    })
}
