//! Times per operation: every system's loop in interleaved batches (the
//! order rotated each round, so that a burst of load from elsewhere falls on
//! all of them), the median of the rounds.
//!
//! Uses the loops of [`crate::systems`] and `std::time::Instant`.

use std::time::Instant;

use crate::systems::{op_loop, Op, System};

/// The median time per operation of each system (`None` where the system
/// has no such operation), in `systems`' order.
pub(crate) fn interleaved(
    systems: &[System],
    op: Op,
    rounds: usize,
) -> Result<Vec<Option<f64>>, String> {
    let loops: Vec<_> = systems.iter().map(|&s| op_loop(s, op).ok()).collect();
    let batch = op.batch();
    // One untimed batch each: page faults of fresh stacks, pools filled.
    for run in loops.iter().flatten() {
        run(batch)?;
    }
    let mut samples = vec![Vec::with_capacity(rounds); systems.len()];
    for round in 0..rounds {
        for i in 0..systems.len() {
            let which = (i + round) % systems.len();
            let Some(run) = loops[which] else { continue };
            let start = Instant::now();
            run(batch)?;
            samples[which].push(start.elapsed().as_nanos() as f64 / batch as f64);
        }
    }
    Ok(samples
        .into_iter()
        .map(|mut times| {
            if times.is_empty() {
                return None;
            }
            times.sort_by(f64::total_cmp);
            Some(times[times.len() / 2])
        })
        .collect())
}
