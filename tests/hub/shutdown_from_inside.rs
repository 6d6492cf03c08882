//! Stopping a runtime from inside: `Handle::shutdown` from a green thread,
//! `net::serve` ending with `Ok(())` when the runtime stops, and a spawn
//! after the shutdown saying the runtime has shut down.

use crate::common;

use std::time::Duration;

use common::hub::{bounded, rt};
use greenlet::hub::{self, net, Handle};

/// A green thread stops the runtime: the serve loop returns `Ok(())`, the
/// `block_on` green thread is cancelled, and the owner's shutdown finishes
/// with nothing refused.
#[test]
fn a_green_thread_stops_the_runtime_and_serve_returns_ok() {
    bounded(60, || {
        let rt = rt(2);
        let (tx, rx) = std::sync::mpsc::channel();
        let out = rt.block_on(move || {
            let l = net::TcpListener::bind("127.0.0.1:0").unwrap();
            let server = hub::spawn(move || {
                let served = net::serve(l, |_| ());
                // The caller runs on after `serve` returns (until its next
                // parking point, where the shutdown cancels it).
                tx.send(served.is_ok()).unwrap();
                hub::sleep(Duration::from_secs(3600));
            });
            hub::sleep(Duration::from_millis(20));
            hub::spawn(|| Handle::current().unwrap().shutdown(Duration::from_secs(5)));
            let joined = server.join();
            hub::sleep(Duration::from_secs(3600));
            joined
        });
        assert!(
            out.unwrap_err().is_cancelled(),
            "block_on's green thread is cancelled"
        );
        assert!(rt.handle().is_shutting_down());
        let report = rt.shutdown_timeout(Duration::from_secs(5));
        assert!(report.refused.is_empty(), "{:?}", report.refused);
        assert_eq!(report.workers_detached, 0);
        assert!(
            rx.recv_timeout(Duration::from_secs(5)).unwrap(),
            "serve returned Ok(()) when the runtime stopped"
        );
    });
}

/// A serve loop cancelled through its handle (not a shutdown) still ends
/// as cancelled.
#[test]
fn serve_cancelled_by_its_handle_is_cancelled() {
    let rt = rt(1);
    let joined = rt
        .block_on(|| {
            let l = net::TcpListener::bind("127.0.0.1:0").unwrap();
            let server = hub::spawn(move || net::serve(l, |_| ()));
            hub::sleep(Duration::from_millis(10));
            server.cancel();
            server.join()
        })
        .unwrap();
    assert!(joined.unwrap_err().is_cancelled());
}

/// `Handle::spawn` once the runtime is gone: the error says it has shut
/// down, not that the green thread was cancelled.
#[test]
fn spawn_after_the_runtime_is_gone_says_it_has_shut_down() {
    let rt = rt(1);
    let handle = rt.handle().clone();
    rt.shutdown_timeout(Duration::from_secs(5));
    let err = handle.spawn(|| 1).join().unwrap_err();
    assert!(err.is_runtime_shut_down(), "{err:?}");
    assert!(!err.is_cancelled());
    assert!(err.to_string().contains("has shut down"), "{err}");
}

/// `Handle::shutdown` called twice, and before the owner's own shutdown
/// with a longer timeout: the earlier deadline holds.
#[test]
fn the_earlier_deadline_holds() {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    bounded(60, || {
        let rt = rt(1);
        rt.handle().spawn(|| loop {
            let _ = catch_unwind(AssertUnwindSafe(|| hub::sleep(Duration::from_secs(10))));
        });
        std::thread::sleep(Duration::from_millis(20));
        rt.handle().shutdown(Duration::from_millis(300));
        rt.handle().shutdown(Duration::from_secs(3600));
        let start = std::time::Instant::now();
        let report = rt.shutdown_timeout(Duration::from_secs(3600));
        let took = start.elapsed();
        assert!(took < Duration::from_secs(20), "{took:?}");
        assert_eq!(report.refused.len(), 1);
    });
}

/// The graceful-shutdown example stops on its timer as on Ctrl-C: `serve`
/// returned `Ok(())`, every open connection got its goodbye (its handler's
/// destructors ran), nothing was refused.
#[test]
fn the_graceful_shutdown_example_says_goodbye_to_every_client() {
    // Built (or found built) before the clock starts: a build under load is
    // not the example's time.
    let example = common::example("graceful_shutdown");
    let out = bounded(120, move || {
        std::process::Command::new(example)
            .args(["--stop-after-ms", "300", "--clients", "3", "--workers", "2"])
            .output()
            .unwrap()
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result = stdout.lines().last().unwrap_or_default();
    assert_eq!(
        result, "RESULT served=3 goodbyes=3 clients_ok=3 refused=0 serve_ok=true",
        "{stdout}"
    );
}
