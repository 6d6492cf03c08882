//! Two greenlets hand a ball back and forth, each switching directly to the
//! other (no scheduler in between), then the game ends in the main greenlet.
//!
//! Run with `cargo run --example ping_pong` (no flags; `--help` says so).

use std::cell::RefCell;
use std::rc::Rc;

use clap::Parser;

use greenlet::{Greenlet, GreenletError, Value};

const RALLIES: u32 = 5;

/// Two greenlets hand a ball back and forth, each switching directly to the
/// other, then the game ends in the main greenlet. Takes no flags.
#[derive(Parser, Debug)]
#[command(name = "ping_pong")]
struct Cli {}

fn main() -> Result<(), GreenletError> {
    Cli::parse();
    // Each player needs the other's handle; fill the slots after creating both.
    let ping_slot: Rc<RefCell<Option<Greenlet>>> = Rc::default();
    let pong_slot: Rc<RefCell<Option<Greenlet>>> = Rc::default();

    let to_pong = Rc::clone(&pong_slot);
    let ping = Greenlet::builder().name("ping").spawn(move |ball: Value| {
        let pong = to_pong
            .borrow()
            .clone()
            .expect("pong is set before the game");
        let mut hits = ball.downcast::<u32>()?;
        while hits < 2 * RALLIES {
            println!("ping  (hit {hits})");
            hits = pong.switch(hits + 1)?.downcast::<u32>()?;
        }
        // Finishing sends the result to the parent: the main greenlet.
        Ok(Value::new(format!("game over after {hits} hits")))
    })?;

    let to_ping = Rc::clone(&ping_slot);
    let pong = Greenlet::builder().name("pong").spawn(move |ball: Value| {
        let ping = to_ping
            .borrow()
            .clone()
            .expect("ping is set before the game");
        let mut hits = ball.downcast::<u32>()?;
        loop {
            println!("  pong (hit {hits})");
            hits = ping.switch(hits + 1)?.downcast::<u32>()?;
        }
    })?;

    *ping_slot.borrow_mut() = Some(ping.clone());
    *pong_slot.borrow_mut() = Some(pong.clone());

    let result = ping.switch(0u32)?.downcast::<String>()?;
    println!("{result}");

    // pong is still suspended in its loop: break the handle cycle, then
    // killing it unwinds it (`?` propagates the GreenletExit).
    ping_slot.borrow_mut().take();
    pong_slot.borrow_mut().take();
    pong.kill()?;
    println!(
        "ping dead: {}, pong dead: {}",
        ping.is_dead(),
        pong.is_dead()
    );
    Ok(())
}
