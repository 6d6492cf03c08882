//! A generator built from a greenlet: the producer runs on its own stack and
//! `yield`s by switching to the consumer; the consumer drives it as an
//! `Iterator`. Dropping the iterator early kills the producer, whose
//! destructors run.
//!
//! Run with `cargo run --example generator` (no flags; `--help` says so).

use std::marker::PhantomData;

use clap::Parser;
use greenlet::{getcurrent, Greenlet, GreenletError, Value};

/// What the producer gets to yield values of type `T`.
struct Yield<T> {
    consumer: Greenlet,
    _item: PhantomData<T>,
}

impl<T: 'static> Yield<T> {
    /// Hand `value` to the consumer and wait until it asks for the next one.
    fn give(&self, value: T) -> Result<(), GreenletError> {
        self.consumer.switch(Value::new(Some(value)))?;
        Ok(())
    }
}

/// An iterator over the values a producer closure yields.
struct Generator<T> {
    producer: Greenlet,
    _item: PhantomData<T>,
}

impl<T: 'static> Generator<T> {
    fn new(body: impl FnOnce(&Yield<T>) -> Result<(), GreenletError> + 'static) -> Self {
        let producer = Greenlet::new(move |_| {
            // The consumer is whoever first asked for a value.
            let consumer = getcurrent().parent().expect("a greenlet has a parent");
            body(&Yield {
                consumer,
                _item: PhantomData,
            })?;
            // Exhausted: the parent (the consumer) receives `None`.
            Ok(Value::new(None::<T>))
        });
        Generator {
            producer,
            _item: PhantomData,
        }
    }
}

impl<T: 'static> Iterator for Generator<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if self.producer.is_dead() {
            return None;
        }
        // The producer's parent is the consumer, so the value comes back here.
        match self.producer.switch(()) {
            Ok(value) => value.downcast::<Option<T>>().unwrap_or_else(|err| {
                eprintln!("generator: {err}");
                None
            }),
            Err(err) => {
                eprintln!("generator failed: {err}");
                None
            }
        }
    }
}

/// Says when the producer's stack is unwound.
struct Noisy(&'static str);
impl Drop for Noisy {
    fn drop(&mut self) {
        println!("  ({} cleaned up)", self.0);
    }
}

fn fibonacci(y: &Yield<u64>) -> Result<(), GreenletError> {
    let _guard = Noisy("fibonacci");
    let (mut a, mut b) = (0u64, 1u64);
    loop {
        y.give(a)?;
        (a, b) = (b, a + b);
    }
}

/// Generators built from greenlets: squares, then the first Fibonacci
/// numbers; dropping one early kills its producer. Takes no flags.
#[derive(Parser, Debug)]
#[command(name = "generator")]
struct Cli {}

fn main() {
    Cli::parse();
    let squares = Generator::<u32>::new(|y| {
        for i in 1..=5 {
            y.give(i * i)?;
        }
        Ok(())
    });
    println!("squares: {:?}", squares.collect::<Vec<_>>());

    let fib = Generator::<u64>::new(fibonacci);
    let first: Vec<u64> = fib.take(10).collect();
    println!("fibonacci: {first:?}");
    // `take` dropped the generator: the suspended producer was killed and
    // its guard dropped before this line.
    println!("done");
}
