//! Task-local storage: a value per green thread, kept across parks while
//! other green threads of the same worker use their own, dropped on the
//! worker when the green thread ends (returned, panicked or cancelled);
//! a plain thread's value is the thread's.

use crate::common;

use common::hub::{bounded, rt, until_parked};

use std::cell::{Cell, RefCell};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::Duration;

use greenlet::hub::{self, Event, Wait};

greenlet::task_local! {
    static VALUE: Cell<u32> = Cell::new(0);
    static NAME: RefCell<String> = RefCell::new(String::new());
}

#[test]
fn each_green_thread_reads_back_its_own_value_across_parks_on_one_worker() {
    bounded(60, || {
        let (a, b) = rt(1)
            .block_on(|| {
                let a_stored = Arc::new(Event::new());
                let b_stored = Arc::new(Event::new());
                let a = {
                    let (a_stored, b_stored) = (Arc::clone(&a_stored), Arc::clone(&b_stored));
                    hub::spawn(move || {
                        VALUE.with(|v| v.set(1));
                        NAME.with(|n| n.borrow_mut().push_str("task a"));
                        a_stored.set();
                        b_stored.wait(); // parks while B stores its own
                        hub::sleep(Duration::from_millis(2));
                        (VALUE.with(Cell::get), NAME.with(|n| n.borrow().clone()))
                    })
                };
                let b = hub::spawn(move || {
                    a_stored.wait();
                    assert_eq!(VALUE.with(Cell::get), 0, "B starts with a fresh value");
                    VALUE.with(|v| v.set(2));
                    NAME.with(|n| n.borrow_mut().push_str("task b"));
                    b_stored.set();
                    hub::sleep(Duration::from_millis(2));
                    (VALUE.with(Cell::get), NAME.with(|n| n.borrow().clone()))
                });
                (a.join().unwrap(), b.join().unwrap())
            })
            .unwrap();
        assert_eq!(a, (1, "task a".to_string()));
        assert_eq!(b, (2, "task b".to_string()));
    });
}

/// Records the thread its drop runs on.
struct DropsOn(Arc<Mutex<Vec<ThreadId>>>);

impl Drop for DropsOn {
    fn drop(&mut self) {
        self.0.lock().unwrap().push(thread::current().id());
    }
}

greenlet::task_local! {
    static DROPS: RefCell<Option<DropsOn>> = RefCell::new(None);
}

#[test]
fn values_are_dropped_on_the_worker_when_the_green_thread_ends_however_it_ends() {
    bounded(60, || {
        let rt = rt(2);
        for how in ["returns", "panics", "is cancelled"] {
            let drops = Arc::new(Mutex::new(Vec::new()));
            let d = Arc::clone(&drops);
            let (worker, result_is_ok) = rt
                .block_on(move || {
                    let (tx, rx) = hub::oneshot::<ThreadId>();
                    let h = hub::spawn(move || {
                        DROPS.with(|s| *s.borrow_mut() = Some(DropsOn(d)));
                        tx.send(thread::current().id()).unwrap();
                        match how {
                            "returns" => {}
                            "panics" => panic!("ends by a panic"),
                            _ => hub::sleep(Duration::from_secs(3600)),
                        }
                    });
                    let worker = rx.recv().unwrap();
                    if how == "is cancelled" {
                        until_parked(&h, Wait::Sleep);
                        h.cancel();
                    }
                    (worker, h.join().is_ok())
                })
                .unwrap();
            assert_eq!(result_is_ok, how == "returns");
            assert_eq!(
                *drops.lock().unwrap(),
                [worker],
                "when the green thread {how}: dropped once, on its worker, before join returned"
            );
        }
    });
}

#[test]
fn a_reused_task_starts_with_fresh_values() {
    bounded(60, || {
        let seen = rt(1)
            .block_on(|| {
                (0..200u32)
                    .map(|i| {
                        hub::spawn(move || {
                            let before = VALUE.with(Cell::get);
                            VALUE.with(|v| v.set(i + 1));
                            before
                        })
                        .join()
                        .unwrap()
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap();
        assert!(seen.iter().all(|&v| v == 0), "{seen:?}");
    });
}

#[test]
fn on_a_plain_thread_the_value_is_the_threads() {
    VALUE.with(|v| v.set(7));
    let other = thread::spawn(|| {
        let before = VALUE.with(Cell::get);
        VALUE.with(|v| v.set(9));
        before
    })
    .join()
    .unwrap();
    assert_eq!(other, 0);
    assert_eq!(VALUE.with(Cell::get), 7);
}

greenlet::task_local! {
    static COUNTER: Cell<u32> = Cell::new(VALUE.with(Cell::get) + 100);
    static USES_OTHER_ON_DROP: RefCell<Option<UsesOther>> = RefCell::new(None);
}

/// A value whose destructor uses another key.
struct UsesOther(Arc<Mutex<Option<u32>>>);

impl Drop for UsesOther {
    fn drop(&mut self) {
        *self.0.lock().unwrap() = Some(COUNTER.with(Cell::get));
    }
}

#[test]
fn initialisers_and_destructors_may_use_other_keys() {
    bounded(60, || {
        let saw = Arc::new(Mutex::new(None));
        let s = Arc::clone(&saw);
        let init = rt(1)
            .block_on(move || {
                hub::spawn(move || {
                    VALUE.with(|v| v.set(5));
                    USES_OTHER_ON_DROP.with(|u| *u.borrow_mut() = Some(UsesOther(s)));
                    COUNTER.with(Cell::get)
                })
                .join()
                .unwrap()
            })
            .unwrap();
        assert_eq!(init, 105, "the initialiser read this green thread's VALUE");
        // The destructor ran after the table was taken out: it saw a new
        // COUNTER, made from a new VALUE.
        assert_eq!(*saw.lock().unwrap(), Some(100));
    });
}

hub::task_local! {
    static THROUGH_HUB: Cell<u8> = Cell::new(3);
}

#[test]
fn the_macro_is_reachable_through_hub_too() {
    let v = rt(1)
        .block_on(|| hub::spawn(|| THROUGH_HUB.with(Cell::get)).join().unwrap())
        .unwrap();
    assert_eq!(v, 3);
}
