//! A green thread's value on its way to `join`: small and large values,
//! values that are not `Send` (`spawn_local`), and values nobody joins,
//! each dropped exactly once, on the right thread.

use crate::common;

use common::hub::{rt, until_parked, HANG};

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use greenlet::hub::{self, Wait};

/// Counts its drops and remembers the thread of each.
struct Dropped(Arc<AtomicUsize>, Arc<std::sync::Mutex<Vec<ThreadId>>>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        self.1.lock().unwrap().push(thread::current().id());
    }
}

#[test]
fn small_and_large_values_reach_join_whole() {
    let rt = rt(2);
    let (small, large, text) = rt
        .block_on(|| {
            let small = hub::spawn(|| (3u64, 4u64));
            let large = hub::spawn(|| [9u64; 32]);
            let text = hub::spawn(|| String::from("a green thread's value"));
            (
                small.join().unwrap(),
                large.join().unwrap(),
                text.join().unwrap(),
            )
        })
        .unwrap();
    assert_eq!(small, (3, 4));
    assert_eq!(large, [9; 32]);
    assert_eq!(text, "a green thread's value");
}

#[test]
fn a_value_nobody_joins_is_dropped_once_whoever_goes_first() {
    let rt = rt(1);
    let drops = Arc::new(AtomicUsize::new(0));
    let threads = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (d, t) = (Arc::clone(&drops), Arc::clone(&threads));
    rt.block_on(move || {
        // The handle goes before the task ends: its value is dropped when
        // the body puts it.
        let (d2, t2) = (Arc::clone(&d), Arc::clone(&t));
        let late = hub::spawn(move || {
            hub::sleep(Duration::from_millis(1));
            Dropped(d2, t2)
        });
        until_parked(&late, Wait::Sleep);
        drop(late);
        // The task ends before its handle goes: the handle drops it.
        let (d3, t3) = (Arc::clone(&d), Arc::clone(&t));
        let early = hub::spawn(move || [Dropped(d3, t3)]);
        while !early.is_finished() {
            hub::yield_now();
        }
        assert_eq!(
            d.load(Ordering::SeqCst),
            0,
            "nothing dropped while a handle waits"
        );
        drop(early);
        assert_eq!(d.load(Ordering::SeqCst), 1, "the handle dropped its value");
        let start = Instant::now();
        while d.load(Ordering::SeqCst) < 2 {
            assert!(
                start.elapsed() < HANG,
                "the unjoined sleeper's value was never dropped"
            );
            hub::sleep(Duration::from_millis(1));
        }
        thread::current().id()
    })
    .map(|worker| {
        let threads = threads.lock().unwrap();
        assert!(
            threads.iter().all(|&t| t == worker),
            "dropped on the worker: {threads:?}"
        );
    })
    .unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 2, "each value dropped once");
}

#[test]
fn a_local_value_that_is_not_send_reaches_join_and_is_dropped_on_its_worker() {
    let rt = rt(1);
    let worker_drops = rt
        .block_on(|| {
            let drops = Rc::new(Cell::new(0));
            struct Local(Rc<Cell<u32>>);
            impl Drop for Local {
                fn drop(&mut self) {
                    self.0.set(self.0.get() + 1);
                }
            }
            let d = Rc::clone(&drops);
            let joined = hub::spawn_local(move || Local(d)).join().unwrap();
            assert_eq!(Rc::strong_count(&drops), 2);
            drop(joined);
            // Not joined: the handle (which stays here) drops it.
            let d = Rc::clone(&drops);
            let h = hub::spawn_local(move || Local(d));
            while !h.is_finished() {
                hub::yield_now();
            }
            drop(h);
            assert_eq!(Rc::strong_count(&drops), 1, "no value left anywhere");
            drops.get()
        })
        .unwrap();
    assert_eq!(worker_drops, 2);
}
