//! The echo server on tokio: current_thread for one worker, multi_thread
//! otherwise; one task per connection.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
        println!("tokio_echo listening on {}", l.local_addr()?);
        loop {
            let (mut s, _) = l.accept().await?;
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    })
}
