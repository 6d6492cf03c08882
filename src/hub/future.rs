//! [`block_on`]: run a future to completion from a green thread, parking it
//! (not its worker) while the future is pending. The future's waker is the
//! green thread's, so any runtime-agnostic future works: a wake from any
//! thread puts the green thread back on its hub's ready queue. On a plain
//! thread it blocks the thread.
//!
//! Owns: [`block_on`]. Uses `park` and `current_waker`.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll};

use super::park::{current_waker, park};
use super::task_state::Wait;

/// Poll `future` until it is ready, parking between polls. A parking point
/// (a cancellation drops the future).
///
/// ```
/// greenlet::hub::run(|| {
///     let (tx, rx) = futures_channel::oneshot::channel::<u32>();
///     std::thread::spawn(move || tx.send(5).unwrap());
///     assert_eq!(greenlet::hub::block_on(rx), Ok(5));
/// })
/// .unwrap();
/// ```
pub fn block_on<F: Future>(future: F) -> F::Output {
    let waker = current_waker();
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        park(Wait::Future, None);
    }
}
