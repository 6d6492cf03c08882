//! The floating-point control state (MXCSR and the x87 control word) is
//! each greenlet's own on x86_64: a rounding mode set in one greenlet is not
//! seen by another greenlet or by main, and is there again when that
//! greenlet is resumed; a new greenlet starts with the modes of the context
//! that starts it; a hub green thread keeps its modes across a park.
//!
//! MXCSR's rounding control is bits 13-14 (01 down, 10 up), the x87 control
//! word's bits 10-11 (the same codes). Rounding up shows in arithmetic: 1/3
//! rounds to a different `f64` than under the default round-to-nearest.
#![cfg(all(
    target_arch = "x86_64",
    target_family = "unix",
    not(target_vendor = "apple"),
    not(greenlet_portable_switch)
))]

use std::cell::Cell;
use std::hint::black_box;
use std::rc::Rc;

use greenlet::{getcurrent, Greenlet, Value};

/// MXCSR's rounding-control bits.
const MXCSR_ROUNDING: u32 = 0x6000;
/// The x87 control word's rounding-control bits.
const X87_ROUNDING: u16 = 0x0C00;

/// The running context's rounding modes: (MXCSR's bits, the x87 word's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Modes {
    mxcsr: u32,
    x87: u16,
}

impl Modes {
    /// Round up (toward +infinity) in both units.
    const UP: Modes = Modes {
        mxcsr: 0x4000,
        x87: 0x0800,
    };
    /// Round down (toward -infinity) in both units.
    const DOWN: Modes = Modes {
        mxcsr: 0x2000,
        x87: 0x0400,
    };
    /// Round to nearest, the default.
    const NEAREST: Modes = Modes { mxcsr: 0, x87: 0 };

    fn current() -> Modes {
        let (mxcsr, x87) = raw();
        Modes {
            mxcsr: mxcsr & MXCSR_ROUNDING,
            x87: x87 & X87_ROUNDING,
        }
    }

    /// Set these rounding modes, leaving the other bits as they are.
    fn set(self) {
        let (mxcsr, x87) = raw();
        let mxcsr = (mxcsr & !MXCSR_ROUNDING) | self.mxcsr;
        let x87 = (x87 & !X87_ROUNDING) | self.x87;
        // SAFETY: loads control words built from the current ones with
        // only their rounding bits changed (valid values).
        unsafe {
            std::arch::asm!(
                "ldmxcsr [{m}]",
                "fldcw [{x}]",
                m = in(reg) &mxcsr,
                x = in(reg) &x87,
                options(nostack, preserves_flags),
            );
        }
    }
}

/// MXCSR and the x87 control word as they are.
fn raw() -> (u32, u16) {
    let mut mxcsr = 0u32;
    let mut x87 = 0u16;
    // SAFETY: stores 4 and 2 bytes into the two locals.
    unsafe {
        std::arch::asm!(
            "stmxcsr [{m}]",
            "fnstcw [{x}]",
            m = in(reg) &mut mxcsr,
            x = in(reg) &mut x87,
            options(nostack, preserves_flags),
        );
    }
    (mxcsr, x87)
}

/// 1/3 computed by the SSE unit under the running context's modes.
fn third() -> f64 {
    black_box(1.0f64) / black_box(3.0f64)
}

/// 1/3 rounded to nearest and rounded up, as bits.
const THIRD_NEAREST: u64 = 0x3FD5_5555_5555_5555;
const THIRD_UP: u64 = 0x3FD5_5555_5555_5556;

/// Restores the test thread's modes when a test ends, pass or fail.
struct Restore(Modes);

impl Drop for Restore {
    fn drop(&mut self) {
        self.0.set();
    }
}

#[test]
fn a_mode_set_in_a_greenlet_is_its_own_and_comes_back_on_resume() {
    let _restore = Restore(Modes::current());
    Modes::NEAREST.set();
    let main = getcurrent();
    let back = main.clone();
    let seen_on_resume = Rc::new(Cell::new(None));
    let seen = Rc::clone(&seen_on_resume);
    let a = Greenlet::new(move |_| {
        Modes::UP.set();
        back.switch(())?;
        seen.set(Some((Modes::current(), third().to_bits())));
        Ok(Value::unit())
    });
    a.switch(()).expect("a parks");
    assert_eq!(Modes::current(), Modes::NEAREST, "main sees a's modes");
    assert_eq!(third().to_bits(), THIRD_NEAREST);
    // A fresh greenlet started by main starts with main's modes, not a's.
    let b = Greenlet::new(|_| Ok(Value::new((Modes::current(), third().to_bits()))));
    let in_b = b.switch(()).expect("b ends").downcast::<(Modes, u64)>();
    assert_eq!(in_b.expect("b's modes"), (Modes::NEAREST, THIRD_NEAREST));
    a.switch(()).expect("a ends");
    assert_eq!(seen_on_resume.get(), Some((Modes::UP, THIRD_UP)));
    assert_eq!(Modes::current(), Modes::NEAREST, "a's modes leaked to main");
    drop(main);
}

#[test]
fn a_new_greenlet_starts_with_its_starters_modes_and_leaves_them_alone() {
    let _restore = Restore(Modes::current());
    Modes::DOWN.set();
    let g = Greenlet::new(|_| {
        let at_start = Modes::current();
        Modes::UP.set();
        Ok(Value::new(at_start))
    });
    let at_start = g.switch(()).expect("g ends").downcast::<Modes>();
    assert_eq!(at_start.expect("g's modes"), Modes::DOWN);
    assert_eq!(Modes::current(), Modes::DOWN, "g's modes leaked to main");
}

#[test]
fn a_finished_greenlets_modes_do_not_pass_to_the_next_on_its_stack() {
    let _restore = Restore(Modes::current());
    Modes::NEAREST.set();
    for round in 0..4 {
        // Each greenlet runs on the coroutine the previous one left parked
        // (the thread keeps it for the next start of the same stack size).
        let g = Greenlet::new(|_| {
            let at_start = Modes::current();
            Modes::UP.set();
            Ok(Value::new(at_start))
        });
        let at_start = g.switch(()).expect("g ends").downcast::<Modes>();
        assert_eq!(
            at_start.expect("g's modes"),
            Modes::NEAREST,
            "round {round}"
        );
        assert_eq!(Modes::current(), Modes::NEAREST, "round {round}");
    }
}

#[test]
fn a_switch_between_two_greenlets_swaps_their_modes() {
    let _restore = Restore(Modes::current());
    Modes::NEAREST.set();
    // `up` and `down` hand control to each other directly, each checking
    // its own modes after every switch back.
    let rounds = 100;
    let down_slot: Rc<Cell<Option<Greenlet>>> = Rc::default();
    let peer = Rc::clone(&down_slot);
    let up = Greenlet::new(move |_| {
        Modes::UP.set();
        let down = peer.take().expect("down");
        let mut kept = 0usize;
        for _ in 0..rounds {
            down.switch(())?;
            kept += usize::from(Modes::current() == Modes::UP && third().to_bits() == THIRD_UP);
        }
        Ok(Value::new(kept))
    });
    let up_handle = up.clone();
    let down = Greenlet::new(move |_| {
        Modes::DOWN.set();
        let mut kept = 0usize;
        loop {
            up_handle.switch(())?;
            kept += usize::from(Modes::current() == Modes::DOWN);
            if kept == rounds {
                break;
            }
        }
        Ok(Value::new(kept))
    });
    down_slot.set(Some(down.clone()));
    // Start `down` first (it switches to `up`, which starts), so that both
    // run: the last switch from `down` finishes `up`, whose count comes
    // back to main (`up`'s parent).
    let kept_by_up = down.switch(()).expect("up ends").downcast::<usize>();
    assert_eq!(kept_by_up.expect("up's count"), rounds);
    assert_eq!(
        Modes::current(),
        Modes::NEAREST,
        "a greenlet's modes leaked to main"
    );
}

#[cfg(feature = "hub")]
#[test]
fn a_hub_green_thread_keeps_its_modes_across_a_sleep_and_a_channel_wait() {
    use std::time::Duration;

    use crate::common::hub::{bounded, rt};
    use greenlet::hub;

    bounded(60, || {
        let rt = rt(1);
        let (modes_in_other, modes_after_sleep, modes_after_recv, modes_in_root) = rt
            .block_on(|| {
                let (tx, rx) = hub::channel::<()>(1);
                let setter = hub::spawn(move || {
                    Modes::UP.set();
                    hub::sleep(Duration::from_millis(20));
                    let after_sleep = (Modes::current(), third().to_bits());
                    rx.recv().expect("the other green thread sends");
                    (after_sleep, (Modes::current(), third().to_bits()))
                });
                let other = hub::spawn(move || {
                    // Runs while the setter sleeps (one worker).
                    let seen = (Modes::current(), third().to_bits());
                    hub::sleep(Duration::from_millis(40));
                    tx.send(()).expect("the setter waits");
                    seen
                });
                let seen = other.join().expect("other");
                let (after_sleep, after_recv) = setter.join().expect("setter");
                (seen, after_sleep, after_recv, Modes::current())
            })
            .expect("the runtime");
        assert_eq!(modes_in_other, (Modes::NEAREST, THIRD_NEAREST));
        assert_eq!(modes_after_sleep, (Modes::UP, THIRD_UP));
        assert_eq!(modes_after_recv, (Modes::UP, THIRD_UP));
        assert_eq!(modes_in_root, Modes::NEAREST);
    });
}
