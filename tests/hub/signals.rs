//! `hub::signal`: a receiver parks until its signal comes, every receiver
//! sees it, `ctrl_c` wakes on SIGINT, and signals that cannot be received
//! are refused. The signals are sent to this test process, whose handlers
//! the receivers installed (SIGINT then no longer ends it).

use crate::common;

use common::hub::{bounded, rt, until_parked};
use greenlet::hub::signal::{self, SignalError, Signals};
use greenlet::hub::{self, Wait};

fn send(sig: i32) {
    // SAFETY: kill(2) on this process with a signal whose handler the
    // test installed first.
    assert_eq!(unsafe { libc::kill(libc::getpid(), sig) }, 0);
}

/// Deliver `sig` to the calling thread: its handler has run when this
/// returns (raise(3)).
fn raise(sig: i32) {
    // SAFETY: raise(3) with a signal whose handler the test installed.
    assert_eq!(unsafe { libc::raise(sig) }, 0);
}

/// A green thread parks in `recv` (the worker runs others), wakes when the
/// signal is sent from another thread, and gets its number.
#[test]
fn recv_parks_until_the_signal_comes() {
    let got = bounded(30, || {
        rt(1)
            .block_on(|| {
                let mut s = Signals::new(&[libc::SIGUSR1, libc::SIGHUP]).unwrap();
                let waiter = hub::spawn(move || s.recv());
                until_parked(&waiter, Wait::Future);
                // The worker is free while the receiver waits.
                assert_eq!(hub::spawn(|| 1 + 1).join().unwrap(), 2);
                std::thread::spawn(|| send(libc::SIGHUP)).join().unwrap();
                waiter.join().unwrap()
            })
            .unwrap()
    });
    assert_eq!(got, libc::SIGHUP);
}

/// Two receivers of one signal (on two workers) both get one delivery; a
/// receiver of another signal does not.
#[test]
fn every_receiver_sees_a_delivery() {
    let (a, b, other) = bounded(30, || {
        rt(2)
            .block_on(|| {
                let mut r1 = Signals::new(&[libc::SIGUSR2]).unwrap();
                let mut r2 = Signals::new(&[libc::SIGUSR2]).unwrap();
                let mut unrelated = Signals::new(&[libc::SIGWINCH]).unwrap();
                let h1 = hub::spawn(move || r1.recv());
                let h2 = hub::spawn(move || r2.recv());
                until_parked(&h1, Wait::Future);
                until_parked(&h2, Wait::Future);
                send(libc::SIGUSR2);
                (h1.join().unwrap(), h2.join().unwrap(), unrelated.try_recv())
            })
            .unwrap()
    });
    assert_eq!((a, b, other), (libc::SIGUSR2, libc::SIGUSR2, None));
}

/// A delivery between making the receiver and calling `recv` is not lost;
/// `try_recv` sees it once.
#[test]
fn a_delivery_before_recv_is_kept() {
    let mut s = Signals::new(&[libc::SIGURG]).unwrap();
    assert_eq!(s.try_recv(), None);
    raise(libc::SIGURG);
    assert_eq!(s.try_recv(), Some(libc::SIGURG));
    assert_eq!(s.try_recv(), None);
    send(libc::SIGURG);
    assert_eq!(bounded(30, move || s.recv()), libc::SIGURG);
}

/// `ctrl_c` parks until SIGINT, and the process survives it.
#[test]
fn ctrl_c_wakes_on_sigint() {
    bounded(30, || {
        rt(1)
            .block_on(|| {
                let waiter = hub::spawn(|| signal::ctrl_c().unwrap());
                until_parked(&waiter, Wait::Future);
                send(libc::SIGINT);
                waiter.join().unwrap();
            })
            .unwrap()
    });
}

/// Bad input: no signal, an out-of-range number, uncatchable and fault
/// signals; the messages say why.
#[test]
fn signals_that_cannot_be_received_are_refused() {
    assert!(matches!(Signals::new(&[]), Err(SignalError::Empty)));
    for bad in [0, -3, 10_000] {
        let err = Signals::new(&[bad]).unwrap_err();
        assert!(
            matches!(err, SignalError::OutOfRange { signal, .. } if signal == bad),
            "{err}"
        );
        assert!(err.to_string().contains("not a signal number"), "{err}");
    }
    for (sig, name) in [
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGSTOP, "SIGSTOP"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGBUS, "SIGBUS"),
    ] {
        let err = Signals::new(&[libc::SIGUSR1, sig]).unwrap_err();
        assert!(
            matches!(err, SignalError::Forbidden { name: n, .. } if n == name),
            "{err}"
        );
        assert!(err.to_string().contains(name), "{err}");
    }
    let io: std::io::Error = SignalError::Empty.into();
    assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);
}

/// A green thread parked in `recv` is a cancellation point: `cancel` ends
/// it with `Cancelled`, and a later delivery still reaches another
/// receiver.
#[test]
fn recv_is_a_cancellation_point() {
    let (cancelled, got) = bounded(30, || {
        rt(1)
            .block_on(|| {
                let mut doomed = Signals::new(&[libc::SIGPWR]).unwrap();
                let mut kept = Signals::new(&[libc::SIGPWR]).unwrap();
                let h = hub::spawn(move || doomed.recv());
                until_parked(&h, Wait::Future);
                h.cancel();
                let cancelled = h.join().unwrap_err().is_cancelled();
                let waiter = hub::spawn(move || kept.recv());
                until_parked(&waiter, Wait::Future);
                send(libc::SIGPWR);
                (cancelled, waiter.join().unwrap())
            })
            .unwrap()
    });
    assert!(cancelled);
    assert_eq!(got, libc::SIGPWR);
}
