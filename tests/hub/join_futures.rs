//! `JoinHandle` as a `Future`: tokio tasks waiting for green threads
//! without blocking their executor thread, green threads waiting for tokio
//! tasks, and the errors a join returns, through `await`.

use crate::common;

use common::hub::{bounded, rt};

use std::time::Duration;

use greenlet::hub::{self, JoinError};

fn tokio_current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime")
}

#[test]
fn a_tokio_task_awaits_a_green_thread() {
    bounded(60, || {
        let rt = rt(2);
        let tokio_rt = tokio::runtime::Runtime::new().expect("tokio runtime");
        let green = rt.handle().spawn(|| {
            hub::sleep(Duration::from_millis(20));
            "from green"
        });
        let got = tokio_rt.block_on(tokio_rt.spawn(green));
        assert_eq!(got.unwrap().unwrap(), "from green");
    });
}

#[test]
fn awaiting_a_green_thread_leaves_the_executor_thread_free() {
    // On a one-thread tokio runtime: the green thread finishes only after a
    // second tokio task, on that same thread, sends it a value. A join that
    // blocked the executor thread would never let that task run.
    bounded(60, || {
        let rt = rt(1);
        let tokio_rt = tokio_current_thread();
        let (tx, rx) = futures_channel::oneshot::channel::<u32>();
        let green = rt.handle().spawn(move || hub::block_on(rx).unwrap() + 1);
        let got = tokio_rt.block_on(async move {
            let waiter = tokio::spawn(green);
            tokio::time::sleep(Duration::from_millis(20)).await;
            tx.send(41).unwrap();
            waiter.await.unwrap()
        });
        assert_eq!(got.unwrap(), 42);
    });
}

#[test]
fn a_green_thread_awaits_a_tokio_task() {
    bounded(60, || {
        let tokio_rt = tokio::runtime::Runtime::new().expect("tokio runtime");
        let from_tokio = tokio_rt.spawn(async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            7u32
        });
        let rt = rt(2);
        let got = rt
            .block_on(move || hub::block_on(from_tokio).unwrap() * 6)
            .unwrap();
        assert_eq!(got, 42);
    });
}

#[test]
fn a_green_thread_awaits_another_as_a_future() {
    bounded(60, || {
        let got = rt(2)
            .block_on(|| {
                let other = hub::spawn(|| {
                    hub::sleep(Duration::from_millis(5));
                    5
                });
                hub::block_on(other).unwrap()
            })
            .unwrap();
        assert_eq!(got, 5);
    });
}

#[test]
fn awaiting_reports_a_panic_and_a_cancellation() {
    bounded(60, || {
        let rt = rt(1);
        let tokio_rt = tokio_current_thread();
        let panics = rt.handle().spawn(|| -> u32 { panic!("boom in green") });
        let err = tokio_rt.block_on(panics).unwrap_err();
        match &err {
            JoinError::Panicked { message, .. } => assert!(message.contains("boom in green")),
            other => panic!("expected a panic, got {other:?}"),
        }
        let sleeper = rt.handle().spawn(|| hub::sleep(Duration::from_secs(3600)));
        let name = sleeper.name();
        // Polled once (pending), then cancelled by the runtime's shutdown,
        // which wakes the registered waker.
        let waiter = tokio_rt.spawn(sleeper);
        tokio_rt.block_on(async { tokio::time::sleep(Duration::from_millis(20)).await });
        rt.shutdown_timeout(Duration::from_secs(5));
        let err = tokio_rt.block_on(waiter).unwrap().unwrap_err();
        assert!(err.is_cancelled(), "{err}");
        assert!(err.to_string().contains(&name), "{err}");
    });
}

#[test]
fn polling_its_own_handle_is_an_error_not_a_hang() {
    bounded(60, || {
        let (err, name) = rt(1)
            .block_on(|| {
                let (tx, rx) = hub::oneshot::<hub::JoinHandle<()>>();
                let (err_tx, err_rx) = hub::oneshot::<JoinError>();
                let me = hub::spawn(move || {
                    let mine = rx.recv().unwrap();
                    err_tx.send(hub::block_on(mine).unwrap_err()).unwrap();
                });
                let name = me.name();
                tx.send(me).unwrap();
                (err_rx.recv().unwrap(), name)
            })
            .unwrap();
        assert!(matches!(err, JoinError::JoinedSelf { .. }), "{err}");
        assert!(err.to_string().contains(&name), "{err}");
    });
}

#[test]
fn a_finished_green_thread_is_ready_at_the_first_poll() {
    bounded(60, || {
        let rt = rt(1);
        let h = rt.handle().spawn(|| 3);
        while !h.is_finished() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let waker = noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        let mut h = h;
        let polled = std::future::Future::poll(std::pin::Pin::new(&mut h), &mut cx);
        assert!(matches!(polled, std::task::Poll::Ready(Ok(3))));
    });
}

/// A waker that does nothing (the poll above is ready at once).
fn noop_waker() -> std::task::Waker {
    struct Noop;
    impl std::task::Wake for Noop {
        fn wake(self: std::sync::Arc<Self>) {}
    }
    std::task::Waker::from(std::sync::Arc::new(Noop))
}
