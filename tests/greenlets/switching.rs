//! Conformance: creating and switching, value passing, the parent chain,
//! dead and unstarted targets, switching to self, panics and errors
//! (in the spirit of greenlet's test_greenlet.py).

use std::cell::RefCell;
use std::rc::Rc;

use greenlet::{getcurrent, ErrorKind, Greenlet, GreenletError, GreenletExit, Value};

fn int(v: Result<Value, GreenletError>) -> i64 {
    v.expect("switch failed")
        .downcast::<i64>()
        .expect("not an i64")
}

#[test]
fn main_greenlet_is_lazy_current_and_stable() {
    let a = getcurrent();
    let b = getcurrent();
    assert_eq!(a, b);
    assert!(a.is_main() && a.is_started() && a.is_active() && !a.is_dead());
    assert!(a.parent().is_none());
    // Named after its thread.
    let thread = std::thread::current();
    assert_eq!(a.name(), thread.name().unwrap_or("main"));
}

#[test]
fn main_greenlets_are_named_after_their_thread() {
    let named = std::thread::Builder::new()
        .name("worker-7".into())
        .spawn(|| getcurrent().name())
        .unwrap();
    assert_eq!(named.join().unwrap(), "worker-7");
    let unnamed = std::thread::spawn(|| getcurrent().name()).join().unwrap();
    let number = unnamed.strip_prefix("thread ").expect(&unnamed);
    assert!(number.parse::<u64>().is_ok(), "{unnamed}");
}

#[test]
fn simple_round_trips_carry_values_both_ways() {
    let main = getcurrent();
    let g = Greenlet::new(move |v| {
        let mut total = v.downcast::<i64>()?;
        for _ in 0..3 {
            total += main.switch(total)?.downcast::<i64>()?;
        }
        Ok(Value::new(total * 100))
    });
    assert!(!g.is_started());
    assert_eq!(int(g.switch(1i64)), 1);
    assert!(g.is_active());
    assert_eq!(int(g.switch(2i64)), 3);
    assert_eq!(int(g.switch(3i64)), 6);
    assert_eq!(int(g.switch(4i64)), 1000);
    assert!(g.is_dead() && !g.is_active() && g.is_started());
}

#[test]
fn events_interleave_in_order() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let main = getcurrent();
    let l = Rc::clone(&log);
    let g = Greenlet::new(move |_| {
        l.borrow_mut().push("g: start");
        main.switch(())?;
        l.borrow_mut().push("g: resumed");
        Ok(().into())
    });
    log.borrow_mut().push("main: before");
    g.switch(()).unwrap();
    log.borrow_mut().push("main: between");
    g.switch(()).unwrap();
    log.borrow_mut().push("main: after");
    assert_eq!(
        *log.borrow(),
        [
            "main: before",
            "g: start",
            "main: between",
            "g: resumed",
            "main: after"
        ]
    );
}

#[test]
fn greenlet_to_greenlet_ping_pong() {
    type Slot = Rc<RefCell<Option<Greenlet>>>;
    let log = Rc::new(RefCell::new(Vec::<String>::new()));
    let ping_slot: Slot = Rc::new(RefCell::new(None));
    let pong_slot: Slot = Rc::new(RefCell::new(None));
    let (l1, l2) = (Rc::clone(&log), Rc::clone(&log));
    let (to_pong, to_ping) = (Rc::clone(&pong_slot), Rc::clone(&ping_slot));
    let ping = Greenlet::new(move |v| {
        let pong = to_pong.borrow().clone().unwrap();
        let mut n = v.downcast::<i64>()?;
        while n < 6 {
            l1.borrow_mut().push(format!("ping {n}"));
            n = pong.switch(n + 1)?.downcast::<i64>()?;
        }
        Ok(Value::new(n))
    });
    let pong = Greenlet::new(move |v| {
        let mut n = v.downcast::<i64>()?;
        loop {
            l2.borrow_mut().push(format!("pong {n}"));
            let ping = to_ping.borrow().clone().unwrap();
            n = ping.switch(n + 1)?.downcast::<i64>()?;
        }
    });
    *ping_slot.borrow_mut() = Some(ping.clone());
    *pong_slot.borrow_mut() = Some(pong.clone());
    // ping finishes with 6 and its parent (main) receives it.
    assert_eq!(int(ping.switch(0i64)), 6);
    assert_eq!(
        *log.borrow(),
        ["ping 0", "pong 1", "ping 2", "pong 3", "ping 4", "pong 5"]
    );
    assert!(ping.is_dead());
    assert!(pong.is_active());
    ping_slot.borrow_mut().take();
    pong_slot.borrow_mut().take();
    pong.kill().unwrap();
    assert!(pong.is_dead());
}

#[test]
fn result_goes_to_parent_not_to_the_switcher() {
    let main = getcurrent();
    let parent = Greenlet::new(|v| {
        // Receives the child's result as its first value.
        Ok(Value::new(format!("parent got {}", v.downcast::<i64>()?)))
    });
    let parent_for_child = parent.clone();
    let child = Greenlet::builder()
        .parent(&parent_for_child)
        .spawn(|_| Ok(Value::new(7i64)))
        .unwrap();
    // main starts child; child finishes; its unstarted parent starts with 7;
    // the parent finishes and its parent (main) gets the string.
    let got = child.switch(()).unwrap().downcast::<String>().unwrap();
    assert_eq!(got, "parent got 7");
    assert!(child.is_dead() && parent.is_dead());
    assert_eq!(parent.parent(), Some(main));
}

#[test]
fn dead_ancestors_are_skipped() {
    let main = getcurrent();
    let grand = Greenlet::new(Ok);
    grand.switch(()).unwrap();
    assert!(grand.is_dead());
    let child = Greenlet::builder()
        .parent(&grand)
        .spawn(|_| Ok(Value::new(5i64)))
        .unwrap();
    // grand is dead: the result goes to grand's parent, main.
    assert_eq!(int(child.switch(())), 5);
    assert_eq!(grand.parent(), Some(main));
}

#[test]
fn errors_and_panics_go_up_the_chain() {
    let g = Greenlet::new(|_| Err(GreenletError::user("broken pipe")));
    match g.switch(()).map_err(GreenletError::into_kind) {
        Err(ErrorKind::User(e)) => assert_eq!(e.to_string(), "broken pipe"),
        other => panic!("unexpected {other:?}"),
    }
    assert!(g.is_dead());

    let p = Greenlet::builder()
        .name("panicky")
        .spawn(|_| -> Result<Value, GreenletError> { panic!("kaboom {}", 42) })
        .unwrap();
    match p.switch(()).map_err(GreenletError::into_kind) {
        Err(ErrorKind::Panic { greenlet, message }) => {
            assert!(greenlet.contains("panicky"), "{greenlet}");
            assert_eq!(message, "kaboom 42");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(p.is_dead());
    // The message quotes the name once: `greenlet 'panicky' (id N) panicked`.
    let p = Greenlet::builder()
        .name("panicky")
        .spawn(|_| -> Result<Value, GreenletError> { panic!("kaboom") })
        .unwrap();
    let msg = p.switch(()).unwrap_err().to_string();
    let expected = format!("greenlet 'panicky' (id {}) panicked: kaboom", p.id());
    assert_eq!(msg, expected);

    // An error going through an unstarted ancestor kills it without running.
    let ran = Rc::new(RefCell::new(false));
    let r = Rc::clone(&ran);
    let ancestor = Greenlet::new(move |v| {
        *r.borrow_mut() = true;
        Ok(v)
    });
    let child = Greenlet::builder()
        .parent(&ancestor)
        .spawn(|_| Err(GreenletError::user("up")))
        .unwrap();
    let err = child.switch(()).unwrap_err();
    assert_eq!(err.to_string(), "up");
    assert!(ancestor.is_dead());
    assert!(!ancestor.is_started());
    assert!(!*ran.borrow());
}

#[test]
fn greenlet_exit_is_a_normal_result() {
    let g = Greenlet::new(|_| Err(GreenletError::exit()));
    assert!(g.switch(()).unwrap().is::<GreenletExit>());
    let g = Greenlet::new(|_| Err(ErrorKind::GreenletExit(Some(Value::new(9i64))).into()));
    assert_eq!(int(g.switch(())), 9);
}

#[test]
fn switching_to_a_dead_greenlet_goes_to_its_live_ancestor() {
    let g = Greenlet::new(Ok);
    g.switch(()).unwrap();
    assert!(g.is_dead());
    // Its parent is main, the caller itself: the value comes straight back.
    assert_eq!(int(g.switch(11i64)), 11);

    // From another greenlet, switching to a dead one lands in main.
    let dead = g.clone();
    let h = Greenlet::new(move |_| {
        dead.switch(12i64)?; // goes to main
        Ok(().into())
    });
    assert_eq!(int(h.switch(())), 12);
    assert!(h.is_active());
}

#[test]
fn switching_to_self_returns_at_once() {
    assert_eq!(int(getcurrent().switch(3i64)), 3);
    let g = Greenlet::new(|v| {
        let me = getcurrent();
        let back = me.switch(v)?;
        Ok(Value::new(back.downcast::<i64>()? + 1))
    });
    assert_eq!(int(g.switch(41i64)), 42);
}

#[test]
fn values_of_many_types_and_mismatch_errors() {
    let g = Greenlet::new(|v| {
        let s = v.downcast::<String>()?;
        let main = getcurrent().parent().unwrap();
        let n = main.switch(s.len())?.downcast::<Vec<u8>>()?;
        Ok(Value::new(n.iter().map(|&b| u64::from(b)).sum::<u64>()))
    });
    assert_eq!(
        g.switch(String::from("hello"))
            .unwrap()
            .downcast::<usize>()
            .unwrap(),
        5
    );
    assert_eq!(
        g.switch(vec![1u8, 2, 3])
            .unwrap()
            .downcast::<u64>()
            .unwrap(),
        6
    );

    let h = Greenlet::new(|v| Ok(Value::new(v.downcast::<u32>()?)));
    let err = h.switch("not a number").unwrap_err();
    assert_eq!(
        err.to_string(),
        "expected a value of type u32, found a value of type &str; downcast to the type that was sent"
    );
    match err.into_kind() {
        ErrorKind::TypeMismatch { expected, found } => {
            assert_eq!(expected, "u32");
            assert_eq!(found, "&str");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn rc_values_cross_switches() {
    let shared = Rc::new(RefCell::new(0));
    let g = Greenlet::new(|v| {
        let cell = v.downcast::<Rc<RefCell<i32>>>()?;
        *cell.borrow_mut() += 1;
        Ok(Value::new(cell))
    });
    let back = g.switch(Value::new(Rc::clone(&shared))).unwrap();
    let back = back.downcast::<Rc<RefCell<i32>>>().unwrap();
    assert!(Rc::ptr_eq(&back, &shared));
    assert_eq!(*shared.borrow(), 1);
}

#[test]
fn nested_creation_and_default_parent() {
    let outer = Greenlet::new(|_| {
        let me = getcurrent();
        let inner = Greenlet::new(|v| Ok(Value::new(v.downcast::<i64>()? * 2)));
        assert_eq!(inner.parent(), Some(me));
        // inner finishes into its parent (outer), i.e. back here.
        let r = inner.switch(21i64)?;
        Ok(r)
    });
    assert_eq!(int(outer.switch(())), 42);
}

#[test]
fn deep_recursion_inside_a_greenlet_with_a_bigger_stack() {
    fn depth(n: u64) -> u64 {
        let pad = std::hint::black_box([n; 16]);
        if n == 0 {
            pad[0]
        } else {
            1 + depth(n - 1) + pad[1] - n
        }
    }
    let g = Greenlet::builder()
        .stack_size(4 << 20)
        .spawn(|_| Ok(Value::new(depth(10_000))))
        .unwrap();
    assert_eq!(g.switch(()).unwrap().downcast::<u64>().unwrap(), 10_000);
}

#[test]
fn names_ids_and_debug() {
    let a = Greenlet::builder().name("alpha").spawn(Ok).unwrap();
    let b = Greenlet::new(Ok);
    assert_eq!(a.name(), "alpha");
    assert_eq!(b.name(), format!("greenlet-{}", b.id()));
    assert_ne!(a.id(), b.id());
    let dbg = format!("{a:?}");
    assert!(dbg.contains("alpha") && dbg.contains("unstarted"), "{dbg}");
    assert_ne!(a, b);
    assert_eq!(a, a.clone());
}

#[test]
fn a_stack_that_cannot_be_mapped_is_an_error_not_a_crash() {
    let g = Greenlet::builder()
        .name("huge")
        .stack_size(1 << 50)
        .spawn(Ok)
        .unwrap();
    match g.switch(()).map_err(GreenletError::into_kind) {
        Err(e @ ErrorKind::StackAllocation { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains("huge") && msg.contains(&(1usize << 50).to_string()),
                "{msg}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    // It could not start, so it died without running.
    assert!(g.is_dead() && !g.is_started());
    let absurd = Greenlet::builder()
        .stack_size(usize::MAX)
        .spawn(Ok)
        .unwrap();
    assert!(matches!(
        absurd.switch(()).map_err(GreenletError::into_kind),
        Err(ErrorKind::StackAllocation { .. })
    ));
    // Everything else still works.
    let h = Greenlet::new(Ok);
    assert_eq!(h.switch(3).unwrap().downcast::<i32>().unwrap(), 3);
}

/// A suspended greenlet that is not the main greenlet, parked in its first
/// switch to main; when resumed it finishes with what it received, or with
/// the error it was raised, spelled out as a string.
fn parked_receiver() -> Greenlet {
    let p = Greenlet::builder()
        .name("receiver")
        .spawn(|_| {
            let main = getcurrent().parent().unwrap();
            Ok(Value::new(match main.switch("parked") {
                Ok(v) => format!("receiver got {}", v.downcast::<i64>()?),
                Err(e) => format!("receiver raised {e}"),
            }))
        })
        .unwrap();
    assert_eq!(p.switch(()).unwrap().downcast::<&str>().unwrap(), "parked");
    p
}

/// Two dead greenlets chained under `p`: returns the lower one.
fn dead_chain_under(p: &Greenlet) -> Greenlet {
    let upper = Greenlet::new(Ok);
    upper.switch(()).unwrap();
    upper.set_parent(p).unwrap();
    let lower = Greenlet::new(Ok);
    lower.switch(()).unwrap();
    lower.set_parent(&upper).unwrap();
    assert!(upper.is_dead() && lower.is_dead());
    lower
}

/// The walk over dead ancestors goes up the whole chain to the nearest live
/// one, here a suspended greenlet that is neither main nor the switcher: a
/// shortcut to main (or back to the caller) would hand the value to main.
#[test]
fn dead_chains_lead_to_the_nearest_live_ancestor_not_to_main() {
    // A child finishing under two dead ancestors.
    let p = parked_receiver();
    let dead = dead_chain_under(&p);
    let child = Greenlet::new(|_| Ok(Value::new(7i64)));
    child.set_parent(&dead).unwrap();
    let got = child.switch(()).unwrap().downcast::<String>().unwrap();
    assert_eq!(got, "receiver got 7");
    assert!(child.is_dead() && p.is_dead());

    // A switch to a dead greenlet.
    let p = parked_receiver();
    let dead = dead_chain_under(&p);
    let got = dead.switch(8i64).unwrap().downcast::<String>().unwrap();
    assert_eq!(got, "receiver got 8");

    // A throw into a dead greenlet (not GreenletExit).
    let p = parked_receiver();
    let dead = dead_chain_under(&p);
    let got = dead
        .throw(GreenletError::user("late"))
        .unwrap()
        .downcast::<String>()
        .unwrap();
    assert_eq!(got, "receiver raised late");
}
