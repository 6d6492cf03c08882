//! [`WeakGreenlet`]: observes a greenlet without keeping it alive, like
//! `weakref.ref` to a greenlet in Python.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use greenlet::{getcurrent, Greenlet, Value, WeakGreenlet};

/// Counts its drops.
struct Guard(Arc<AtomicUsize>);
impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn upgrade_gives_the_same_greenlet_while_it_has_a_handle() {
    let g = Greenlet::new(Ok);
    let weak = g.downgrade();
    let again = weak.upgrade().expect("alive");
    assert_eq!(again, g);
    drop(g);
    assert!(weak.upgrade().is_some(), "the upgraded handle keeps it");
    drop(again);
    assert!(weak.upgrade().is_none());
    assert_eq!(format!("{weak:?}"), "WeakGreenlet(<gone>)");
}

#[test]
fn a_weak_handle_does_not_keep_a_suspended_greenlet_from_its_kill_on_drop() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let guard = Guard(Arc::clone(&dropped));
    let main = getcurrent();
    let g = Greenlet::new(move |_| {
        let _guard = guard;
        main.switch(())?;
        Ok(Value::unit())
    });
    g.switch(()).unwrap();
    let weak = g.downgrade();
    drop(g);
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "killed: its locals dropped"
    );
    assert!(weak.upgrade().is_none());
}

#[test]
fn a_dead_greenlet_with_a_weak_handle_is_not_reused_for_the_next_one() {
    let g = Greenlet::new(Ok);
    g.switch(()).unwrap();
    let weak = g.downgrade();
    drop(g);
    // The thread reuses finished records; not one a weak handle refers to.
    let next: Vec<Greenlet> = (0..4).map(|_| Greenlet::new(Ok)).collect();
    assert!(weak.upgrade().is_none());
    drop(next);
}

#[test]
fn another_thread_upgrades_while_the_owner_holds_a_handle() {
    let g = Greenlet::new(Ok);
    let weak: WeakGreenlet = g.downgrade();
    let id = g.id();
    let seen = std::thread::spawn(move || weak.upgrade().map(|h| (h.id(), h.is_started())))
        .join()
        .unwrap();
    assert_eq!(seen, Some((id, false)));
    // The other thread's handle went: the owner's is the only one again.
    let weak = g.downgrade();
    drop(g);
    assert!(weak.upgrade().is_none());
}
