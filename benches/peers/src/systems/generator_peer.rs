//! generator 0.8 (the stackful coroutines `may` runs on): a scoped
//! generator sending a `usize` each way. Creating one re-arms a finished
//! generator, which keeps its stack; killing one is its `cancel`, which
//! unwinds the body with a panic (the binary's panic hook keeps those quiet).

use std::hint::black_box;

use generator::{Generator, Gn, Scope};

use super::{Crowd, STACK_BYTES};

/// The stack size in generator's unit (words).
const STACK_WORDS: usize = STACK_BYTES / std::mem::size_of::<usize>();

type Echo = Generator<'static, usize, usize>;

/// The body of an echo generator: yields its input plus one, forever.
fn echo_body(mut scope: Scope<'_, 'static, usize, usize>) -> usize {
    let mut value = scope.get_yield().unwrap_or(0);
    loop {
        value = scope.yield_(value + 1).unwrap_or(0);
    }
}

fn echo() -> Echo {
    Gn::<usize>::new_scoped_opt(STACK_WORDS, echo_body)
}

/// `send`: generator's leanest resume with a value (it panics if the
/// generator finishes, which an echo generator never does).
fn resume(generator: &mut Echo, value: usize) -> Result<usize, String> {
    Ok(generator.send(value))
}

/// One `raw_send` (resume) and one `yield_` per operation.
pub(super) fn round_trip(count: u64) -> Result<(), String> {
    let mut generator = echo();
    black_box(resume(&mut generator, 0)?);
    for _ in 0..count {
        black_box(resume(&mut generator, black_box(1))?);
    }
    Ok(())
}

/// generator only resumes and yields: a loop on the thread's stack resumes
/// A and B in turn, one resume and yield per switch.
pub(super) fn switch(count: u64) -> Result<(), String> {
    let (mut a, mut b) = (echo(), echo());
    let mut value = resume(&mut a, 0)? + resume(&mut b, 0)?;
    for _ in 0..count / 2 {
        value = resume(&mut a, black_box(value))?;
        value = resume(&mut b, black_box(value))?;
    }
    black_box(value);
    Ok(())
}

/// Re-arm one finished generator with a body that returns at once, run it
/// to its end: the stack is the generator's own, reused every time.
pub(super) fn create(count: u64) -> Result<(), String> {
    let mut generator: Echo = Gn::<usize>::new_scoped_opt(STACK_WORDS, |_| 0);
    for _ in 0..count {
        generator.scoped_init(|mut scope: Scope<'_, 'static, usize, usize>| {
            scope.get_yield().unwrap_or(0) + 1
        });
        black_box(generator.raw_send(Some(black_box(1))));
        if !generator.is_done() {
            return Err("the generator did not finish".into());
        }
    }
    Ok(())
}

/// Re-arm one generator with the echo body, resume it (it yields), cancel
/// it (a `Cancel` panic unwinds the body).
pub(super) fn kill(count: u64) -> Result<(), String> {
    let mut generator: Echo = Gn::<usize>::new_scoped_opt(STACK_WORDS, |_| 0);
    for _ in 0..count {
        generator.scoped_init(echo_body);
        black_box(resume(&mut generator, black_box(1))?);
        generator.cancel();
        if !generator.is_done() {
            return Err("the cancelled generator is not done".into());
        }
    }
    Ok(())
}

/// Generators suspended in their first `yield_`.
pub(super) struct Suspended(Vec<Echo>);

impl Suspended {
    pub(super) fn with_capacity(capacity: usize) -> Self {
        Suspended(Vec::with_capacity(capacity))
    }
}

impl Crowd for Suspended {
    fn add(&mut self) -> Result<(), String> {
        // generator panics when it cannot map a stack: that is its failure.
        let made = std::panic::catch_unwind(|| {
            let mut generator = echo();
            resume(&mut generator, 0).map(|_| generator)
        });
        match made {
            Ok(Ok(generator)) => {
                self.0.push(generator);
                Ok(())
            }
            Ok(Err(err)) => Err(err),
            Err(panic) => Err(crate::panic_text(panic.as_ref())),
        }
    }
}
