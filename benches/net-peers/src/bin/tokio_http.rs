//! The HTTP/1.1 hello server on tokio + httparse: one task per connection.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn http(mut s: TcpStream) {
    let mut buf = vec![0u8; 8192];
    let mut filled = 0;
    let mut out = Vec::with_capacity(4096);
    loop {
        match s.read(&mut buf[filled..]).await {
            Ok(0) | Err(_) => return,
            Ok(n) => filled += n,
        }
        let (used, close) = net_peers::respond(&buf[..filled], &mut out);
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
    rt.block_on(async move {
        let l = net_peers::tokio_listener(args.addr)?;
        println!("tokio_http listening on {}", l.local_addr()?);
        loop {
            let (s, _) = l.accept().await?;
            tokio::spawn(http(s));
        }
    })
}
