//! monoio's servers as its users write them: thread per core, each worker
//! thread a runtime of its own on the io_uring driver with a listener of
//! its own on the same address (`SO_REUSEPORT`, monoio's default, so the
//! kernel spreads new connections over the workers), nothing shared
//! between workers but what the server itself shares.
//!
//! The workers are not pinned to a CPU each: the comparison script pins
//! the whole server (`taskset`), as it does the other systems' servers.

use std::future::Future;
use std::net::SocketAddr;

use monoio::net::{ListenerOpts, TcpListener, TcpStream};
use monoio::{IoUringDriver, RuntimeBuilder};

/// Run `workers` io_uring runtimes, each accepting on its own listener on
/// `addr` and spawning `handle` for every connection; returns when one of
/// them fails (a bind, a ring set-up or an accept error).
pub fn serve<F, Fut>(name: &str, addr: SocketAddr, workers: usize, handle: F) -> std::io::Result<()>
where
    F: Fn(TcpStream) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let mut threads = Vec::with_capacity(workers);
    for worker in 0..workers {
        let handle = handle.clone();
        let name = name.to_string();
        threads.push(std::thread::spawn(move || -> std::io::Result<()> {
            let mut rt = RuntimeBuilder::<IoUringDriver>::new().build()?;
            rt.block_on(async move {
                let l = TcpListener::bind_with_config(addr, &ListenerOpts::new())?;
                if worker == 0 {
                    println!("{name} listening on {}", l.local_addr()?);
                }
                loop {
                    let (s, _) = l.accept().await?;
                    monoio::spawn(handle(s));
                }
            })
        }));
    }
    for thread in threads {
        thread
            .join()
            .map_err(|_| std::io::Error::other("a monoio worker panicked"))??;
    }
    Ok(())
}
