//! A switch carrying `()` or a small `Copy` value does not allocate, nor
//! does making, running and dropping a greenlet whose closure captures a few
//! words (once the thread has spare records and pooled stacks): counted with
//! a global allocator that tallies allocations per thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use greenlet::{getcurrent, Greenlet, Value};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; the
// thread-local counter is const-initialized and has no destructor, so
// touching it never allocates or recurses.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

#[derive(Clone, Copy, PartialEq, Debug)]
struct Pair(u32, u16);

#[test]
fn switches_with_unit_and_small_copy_values_do_not_allocate() {
    let main = getcurrent();
    let m = main.clone();
    // Echoes whatever it gets back to main, forever.
    let echo = Greenlet::new(move |mut v: Value| loop {
        v = m.switch(v)?;
    });
    echo.switch(()).unwrap(); // started: stack and state exist now

    // The counter does see allocations (a large value is boxed).
    let sanity = allocations();
    drop(Value::new([0u64; 4]));
    assert!(allocations() > sanity);

    let before = allocations();
    for i in 0..1000u64 {
        echo.switch(()).unwrap().downcast::<()>().unwrap();
        assert_eq!(echo.switch(i).unwrap().downcast::<u64>().unwrap(), i);
        let p = Pair(i as u32, 7);
        assert_eq!(
            echo.switch(Value::new(p))
                .unwrap()
                .downcast::<Pair>()
                .unwrap(),
            p
        );
        let bytes = [i as u8; 8];
        assert_eq!(
            echo.switch(Value::new(bytes))
                .unwrap()
                .downcast::<[u8; 8]>()
                .unwrap(),
            bytes
        );
    }
    assert_eq!(
        allocations() - before,
        0,
        "main <-> greenlet switches allocated"
    );

    // Greenlet <-> greenlet ping-pong, measured inside a greenlet.
    let m = main.clone();
    let partner = Greenlet::new(move |first: Value| {
        let back: Greenlet = first.downcast()?;
        let mut v = m.switch(())?; // parked until the driver starts
        loop {
            v = back.switch(v)?;
        }
    });
    let p = partner.clone();
    let driver = Greenlet::new(move |_| {
        p.switch(Value::new(getcurrent()))?; // hand partner our handle; it parks in main
        let start = allocations();
        for i in 0..1000u64 {
            let got = p.switch(i)?.downcast::<u64>()?;
            assert_eq!(got, i);
        }
        Ok(Value::new(allocations() - start))
    });
    // The driver gives the partner its handle; the partner parks in main.
    driver.switch(()).unwrap();
    // Resume the driver by resuming the partner's loop target: switch the
    // partner so it bounces to the driver.
    let count = partner.switch(()).unwrap().downcast::<u64>().unwrap();
    assert_eq!(count, 0, "greenlet <-> greenlet switches allocated");
    drop((echo, partner, driver));
}

#[test]
fn creating_running_and_dropping_a_greenlet_with_a_small_closure_does_not_allocate() {
    let main = getcurrent();
    let shared = std::rc::Rc::new(5u64);
    // Warm up: the thread's spare records and its stack pool fill here.
    for _ in 0..3 {
        let s = std::rc::Rc::clone(&shared);
        Greenlet::new(move |v| Ok(Value::new(v.downcast::<u64>()? + *s)))
            .switch(1u64)
            .unwrap();
    }
    let before = allocations();
    for i in 0..1000u64 {
        // Captures two words (an `Rc` and a number), kept in the record.
        let s = std::rc::Rc::clone(&shared);
        let g = Greenlet::new(move |v| Ok(Value::new(v.downcast::<u64>()? + *s + i)));
        assert_eq!(g.switch(1u64).unwrap().downcast::<u64>().unwrap(), 6 + i);
        assert!(g.is_dead());
        assert_eq!(g.parent(), Some(main.clone()));
    }
    assert_eq!(allocations() - before, 0, "create+run+drop allocated");
    assert_eq!(std::rc::Rc::strong_count(&shared), 1, "closures dropped");
}
