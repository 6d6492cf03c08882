//! This crate's greenlets: the operations as `benches/drivers/hot_loops.rs` runs
//! them, with every check of greenlet's semantics in place.
//!
//! Uses only the crate's public API.

use std::hint::black_box;

use greenlet::{getcurrent, Greenlet, GreenletError, Value};

use super::Crowd;

fn text(err: GreenletError) -> String {
    err.to_string()
}

/// `g.switch` from main into a greenlet that switches straight back.
pub(super) fn round_trip(count: u64) -> Result<(), String> {
    let main = getcurrent();
    let g = Greenlet::new(move |mut value: Value| loop {
        value = main.switch(value)?;
    });
    g.switch(0usize).map_err(text)?;
    for _ in 0..count {
        black_box(g.switch(black_box(1usize)).map_err(text)?);
    }
    g.kill().map_err(text)
}

/// A switches to B, B back to A: `count` switches in all.
pub(super) fn switch(count: u64) -> Result<(), String> {
    let main = getcurrent();
    let rounds = count / 2;
    let a = Greenlet::new(move |first: Value| {
        let b = first.downcast::<Greenlet>()?;
        main.switch(())?;
        for _ in 0..rounds {
            b.switch(())?;
        }
        Ok(Value::unit())
    });
    let a_handle = a.clone();
    let b = Greenlet::new(move |_| loop {
        a_handle.switch(())?;
    });
    a.switch(Value::new(b.clone())).map_err(text)?;
    a.switch(()).map_err(text)?;
    b.kill().map_err(text)
}

/// Create a greenlet, switch into it, it returns, drop its only handle.
pub(super) fn create(count: u64) -> Result<(), String> {
    for _ in 0..count {
        let g = Greenlet::new(|value: Value| Ok(value));
        black_box(g.switch(black_box(1usize)).map_err(text)?);
    }
    Ok(())
}

/// Create a greenlet, switch into it (it suspends back to main), kill it
/// (`GreenletExit` raised in its pending switch), drop it.
pub(super) fn kill(count: u64) -> Result<(), String> {
    let main = getcurrent();
    for _ in 0..count {
        let main = main.clone();
        let g = Greenlet::new(move |_| {
            main.switch(())?;
            Ok(Value::unit())
        });
        g.switch(()).map_err(text)?;
        g.kill().map_err(text)?;
    }
    Ok(())
}

/// Greenlets suspended in a switch back to main.
pub(super) struct Suspended {
    main: Greenlet,
    alive: Vec<Greenlet>,
}

impl Suspended {
    pub(super) fn with_capacity(capacity: usize) -> Self {
        Suspended {
            main: getcurrent(),
            alive: Vec::with_capacity(capacity),
        }
    }
}

impl Crowd for Suspended {
    fn add(&mut self) -> Result<(), String> {
        let main = self.main.clone();
        let g = Greenlet::new(move |_| {
            main.switch(())?;
            Ok(Value::unit())
        });
        g.switch(()).map_err(text)?;
        self.alive.push(g);
        Ok(())
    }
}
