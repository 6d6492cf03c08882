//! The timers on their own, with made-up instants: no clock, no worker.
//! A probe's `park_seq` is a shared counter a test bumps to "resume" it
//! (which makes an entry armed for it stale).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::{Parked, TimerKey, Timers, TICK};

#[derive(Clone)]
struct Probe {
    id: usize,
    seq: Rc<Cell<u64>>,
}

impl Parked for Probe {
    fn park_seq(&self) -> u64 {
        self.seq.get()
    }
}

fn probes(n: usize) -> Vec<Probe> {
    (0..n)
        .map(|id| Probe {
            id,
            seq: Rc::new(Cell::new(0)),
        })
        .collect()
}

/// Timers whose ticks start at `base`.
fn timers(base: Instant) -> Timers<Probe> {
    Timers::starting_at(base)
}

fn ms(base: Instant, n: u64) -> Instant {
    base + Duration::from_millis(n)
}

/// Expire at `now`; the ids woken, in order.
fn fire(t: &mut Timers<Probe>, now: Instant) -> Vec<usize> {
    let mut woken = Vec::new();
    t.expire(now, |p| woken.push(p.id));
    woken
}

#[test]
fn many_timers_in_one_tick_fire_together_at_its_end_in_arming_order() {
    let base = Instant::now();
    let at = ms(base, 10) + Duration::from_micros(300);
    let ps = probes(5_000);
    let mut t = timers(base);
    for p in &ps {
        t.arm(at, p.clone());
    }
    assert_eq!(t.next_deadline(), Some(ms(base, 11)), "the tick's end");
    assert!(fire(&mut t, at).is_empty(), "not before the tick ends");
    assert!(fire(&mut t, ms(base, 11) - Duration::from_nanos(1)).is_empty());
    assert_eq!(fire(&mut t, ms(base, 11)), (0..5_000).collect::<Vec<_>>());
    assert!(t.is_empty());
    assert_eq!(t.next_deadline(), None);
}

#[test]
fn deadlines_within_one_tick_fire_in_deadline_order_ties_first_armed_first() {
    let base = Instant::now();
    let ps = probes(6);
    let mut t = timers(base);
    let us = |n| ms(base, 3) + Duration::from_micros(n);
    // Armed out of order inside the tick 3 ms..4 ms; 1 and 4 tie.
    for (p, at) in ps
        .iter()
        .zip([us(900), us(100), us(500), us(0), us(100), us(999)])
    {
        t.arm(at, p.clone());
    }
    assert_eq!(fire(&mut t, ms(base, 4)), [3, 1, 4, 2, 0, 5]);
}

#[test]
fn out_of_order_deadlines_fire_in_deadline_order_and_never_early() {
    let base = Instant::now();
    let ps = probes(3_000);
    let mut t = timers(base);
    // A scrambled order (a multiplicative permutation of 0..1000, three
    // probes per deadline), each deadline a third of the way into its tick.
    let mut expected: Vec<(u64, usize)> = Vec::new();
    for (i, p) in ps.iter().enumerate() {
        let d = (i as u64 * 7_919) % 1_000;
        t.arm(ms(base, d) + Duration::from_micros(333), p.clone());
        expected.push((d, i));
    }
    expected.sort();
    let mut woken = Vec::new();
    for step in 0..=1_000 {
        let batch = fire(&mut t, ms(base, step));
        // Fired at the end of the tick `step - 1`, never before.
        for id in &batch {
            assert_eq!((ps[*id].id as u64 * 7_919) % 1_000 + 1, step);
        }
        woken.extend(batch);
    }
    let order: Vec<usize> = expected.into_iter().map(|(_, id)| id).collect();
    assert_eq!(woken, order);
    assert!(t.is_empty());
}

#[test]
fn deadlines_on_every_level_and_beyond_fire_in_order_never_early() {
    let base = Instant::now();
    // One deadline per level of the wheel and two past its span, armed
    // from the farthest; then the clock jumps in uneven steps.
    let days = |n: u64| n * 24 * 3_600_000;
    let deadlines_ms = [
        days(365 * 100), // far past the wheel's span (about 2.2 years)
        days(365 * 3),
        days(300), // level 5
        days(2),   // level 4
        600_000,   // level 3: 10 min
        5_000,     // level 2
        100,       // level 1
        7,         // level 0
        0,         // already in the first tick
    ];
    let ps = probes(deadlines_ms.len());
    let mut t = timers(base);
    for (p, d) in ps.iter().zip(deadlines_ms) {
        t.arm(ms(base, d) + Duration::from_micros(1), p.clone());
    }
    let mut woken = Vec::new();
    let mut now = 0u64;
    let mut step = 1u64;
    while woken.len() < ps.len() {
        for id in fire(&mut t, ms(base, now)) {
            let at = deadlines_ms[id];
            assert!(now > at, "probe {id} (due {at} ms) woken early at {now} ms");
            assert!(
                now - at <= step,
                "probe {id} (due {at} ms) woken at {now} ms, a step ({step} ms) late"
            );
            woken.push(id);
        }
        // The next reading: never more than a step past a deadline.
        let next_due = deadlines_ms.iter().copied().filter(|&d| d >= now).min();
        step = next_due.map_or(1, |d| (d - now).max(1)).min(step * 3 + 1);
        now += step;
    }
    assert_eq!(woken, (0..ps.len()).rev().collect::<Vec<_>>());
    assert!(t.is_empty());
}

#[test]
fn a_far_future_deadline_waits_behind_near_ones_and_fires_only_when_due() {
    let base = Instant::now();
    let far = base + Duration::from_secs(100 * 365 * 24 * 3600);
    let ps = probes(3);
    let mut t = timers(base);
    t.arm(far, ps[0].clone());
    t.arm(ms(base, 2), ps[1].clone());
    t.arm(ms(base, 1), ps[2].clone());
    assert_eq!(t.next_deadline(), Some(ms(base, 2)));
    assert_eq!(fire(&mut t, ms(base, 10)), [2, 1]);
    let next = t.next_deadline().expect("the far one is armed");
    assert!(next <= far + TICK, "a bound for the far entry, not later");
    assert!(fire(&mut t, far - Duration::from_nanos(1)).is_empty());
    assert!(fire(&mut t, far).is_empty(), "its tick is not over");
    assert!(!t.is_empty());
    assert_eq!(fire(&mut t, far + TICK), [0]);
    assert!(t.is_empty());
}

#[test]
fn a_cancelled_timer_never_wakes_and_its_key_cancels_nothing_later() {
    let base = Instant::now();
    let ps = probes(3);
    let mut t = timers(base);
    let k0 = t.arm(ms(base, 5), ps[0].clone());
    let k1 = t.arm(ms(base, 6), ps[1].clone());
    let back = t.cancel(k0).expect("armed");
    assert_eq!(back.id, 0, "the cancel hands back its target");
    assert!(t.cancel(k0).is_none(), "a second cancel is a no-op");
    // The freed slot is reused by the next arm; the old key misses it.
    let k2 = t.arm(ms(base, 7), ps[2].clone());
    assert_ne!(k0, k2);
    assert!(t.cancel(k0).is_none());
    assert_eq!(fire(&mut t, ms(base, 7)), [1]);
    assert!(t.cancel(k1).is_none(), "fired: nothing to cancel");
    assert_eq!(fire(&mut t, ms(base, 8)), [2]);
    assert!(t.cancel(k2).is_none());
    assert!(t.is_empty());
}

#[test]
fn cancelling_every_entry_empties_the_timers_and_drops_the_targets() {
    let base = Instant::now();
    let ps = probes(1_000);
    let mut t = timers(base);
    // Deadlines on several levels, cancelled in an order unrelated to them.
    let keys: Vec<TimerKey> = ps
        .iter()
        .enumerate()
        .map(|(i, p)| t.arm(ms(base, (i as u64 * 7_919) % 100_000), p.clone()))
        .collect();
    for i in (0..keys.len()).map(|i| (i * 389) % keys.len()) {
        assert_eq!(t.cancel(keys[i]).map(|p| p.id), Some(i));
    }
    assert!(t.is_empty());
    assert_eq!(
        t.next_deadline(),
        None,
        "nothing armed, nothing to wake for"
    );
    assert!(t.occupied.iter().all(|&bits| bits == 0));
    assert!(ps.iter().all(|p| Rc::strong_count(&p.seq) == 1));
    assert!(fire(&mut t, ms(base, 200_000)).is_empty());
}

#[test]
fn arming_and_cancelling_over_and_over_keeps_one_slot() {
    // A `timeout` scope entered and left early, again and again.
    let base = Instant::now();
    let p = probes(1).remove(0);
    let mut t = timers(base);
    for i in 0..100_000u64 {
        let k = t.arm(ms(base, 3_600_000 + i), p.clone());
        assert!(t.cancel(k).is_some());
    }
    assert_eq!(t.entries.len(), 1, "the slab reused its one slot");
    assert_eq!(Rc::strong_count(&p.seq), 1);
    assert!(t.is_empty());
}

#[test]
fn an_entry_for_a_park_that_is_over_wakes_nothing() {
    let base = Instant::now();
    let ps = probes(2);
    let mut t = timers(base);
    t.arm(ms(base, 5), ps[0].clone());
    t.arm(ms(base, 6), ps[1].clone());
    // Probe 0 resumed by something else and parked again with a later
    // deadline, its first entry not cancelled: only the new one wakes it.
    ps[0].seq.set(1);
    t.arm(ms(base, 8), ps[0].clone());
    // Probe 1 resumed and not parked again.
    ps[1].seq.set(1);
    assert!(fire(&mut t, ms(base, 8)).is_empty());
    assert_eq!(fire(&mut t, ms(base, 9)), [0]);
    assert!(t.is_empty());
}

#[test]
fn a_deadline_already_passed_fires_at_the_next_expiry() {
    let base = Instant::now();
    let ps = probes(2);
    let mut t = timers(base);
    t.arm(ms(base, 50), ps[0].clone());
    assert!(fire(&mut t, ms(base, 20)).is_empty());
    // Armed for 10 ms once the wheel's time is at 20 ms.
    t.arm(ms(base, 10), ps[1].clone());
    assert!(!t.none_due(|| ms(base, 20)));
    assert_eq!(fire(&mut t, ms(base, 20)), [1]);
    assert_eq!(fire(&mut t, ms(base, 51)), [0]);
}

#[test]
fn none_due_reads_the_clock_only_while_armed_and_compares_with_the_soonest() {
    let base = Instant::now();
    let ps = probes(2);
    let mut t = timers(base);
    let no_clock = || -> Instant { panic!("the clock was read with nothing armed") };
    assert!(t.none_due(no_clock));
    t.arm(ms(base, 9), ps[0].clone());
    t.arm(ms(base, 4), ps[1].clone());
    assert!(t.none_due(|| ms(base, 5) - Duration::from_nanos(1)));
    assert!(!t.none_due(|| ms(base, 5)), "due at the end of its tick");
    assert_eq!(fire(&mut t, ms(base, 5)), [1]);
    assert!(t.none_due(|| ms(base, 9)), "the next fires at 10 ms");
    assert!(!t.none_due(|| ms(base, 10)));
    assert_eq!(fire(&mut t, ms(base, 10)), [0]);
    assert!(t.none_due(no_clock), "nothing armed after the last expiry");
}

#[test]
fn has_passed_is_the_latest_expiry_reading_and_clear_drops_all() {
    let base = Instant::now();
    let ps = probes(2);
    let mut t = timers(base);
    assert!(!t.has_passed(base));
    t.arm(ms(base, 1), ps[0].clone());
    let k = t.arm(ms(base, 9), ps[1].clone());
    assert_eq!(fire(&mut t, ms(base, 4)), [0]);
    assert!(t.has_passed(ms(base, 4)));
    assert!(!t.has_passed(ms(base, 5)));
    t.clear();
    assert!(t.is_empty());
    assert_eq!(t.next_deadline(), None);
    assert_eq!(Rc::strong_count(&ps[1].seq), 1);
    assert!(t.cancel(k).is_none(), "a key from before the clear");
}

/// A small deterministic generator (no dependency, the same run each time).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

#[test]
fn random_arms_cancels_and_expiries_agree_with_a_sorted_model() {
    // The model: every armed entry by (deadline, arming number). At each
    // expiry the wheel must wake exactly the model's entries whose tick is
    // over, in the model's order.
    let base = Instant::now();
    let mut rng = Lcg(0x9e37_79b9_7f4a_7c15);
    let ps = probes(4_000);
    let mut t = timers(base);
    let mut model: BTreeMap<(Instant, usize), TimerKey> = BTreeMap::new();
    let mut armed_at: Vec<Option<Instant>> = vec![None; ps.len()];
    let mut armed_when: Vec<Instant> = vec![base; ps.len()];
    let mut now = base;
    let spans = [1, 64, 4_096, 262_144, 16_777_216, 1 << 30, 1 << 40];
    let (mut woken_far, mut cancelled, mut most) = (0, 0, 0);
    for round in 0..20_000 {
        match rng.below(10) {
            0..=5 => {
                let id = rng.below(ps.len() as u64) as usize;
                if armed_at[id].is_some() {
                    continue;
                }
                let span = spans[rng.below(spans.len() as u64) as usize];
                let at = now + Duration::from_micros(rng.below(span * 1_000));
                let key = t.arm(at, ps[id].clone());
                model.insert((at, round * ps.len() + id), key);
                armed_at[id] = Some(at);
                armed_when[id] = now;
            }
            6 => {
                let Some((&k, &key)) = model
                    .iter()
                    .nth(rng.below(model.len().max(1) as u64) as usize)
                else {
                    continue;
                };
                model.remove(&k);
                let id = k.1 % ps.len();
                assert_eq!(t.cancel(key).map(|p| p.id), Some(id));
                armed_at[id] = None;
                cancelled += 1;
            }
            _ => {
                let step = match rng.below(100) {
                    0 => 400_000_000,
                    1..=5 => 5_000,
                    n => [0, 1, 3, 70][n as usize % 4],
                };
                now += Duration::from_micros(rng.below(step * 1_000 + 1));
                let tick_end = |at: Instant| {
                    let ticks = (at - base).as_millis() as u64 + 1;
                    ms(base, ticks)
                };
                let due: Vec<(Instant, usize)> = model
                    .keys()
                    .copied()
                    .take_while(|&(at, _)| tick_end(at) <= now)
                    .collect();
                let expected: Vec<usize> = due.iter().map(|&(_, n)| n % ps.len()).collect();
                assert_eq!(fire(&mut t, now), expected, "round {round}");
                for (at, n) in due {
                    assert!(at <= now, "woken early");
                    model.remove(&(at, n));
                    let waited = at - armed_when[n % ps.len()];
                    woken_far += usize::from(waited > Duration::from_millis(4_096));
                    armed_at[n % ps.len()] = None;
                }
            }
        }
        assert_eq!(t.len, model.len());
        most = most.max(model.len());
    }
    assert!(
        woken_far > 1_000 && cancelled > 1_000 && most > 300,
        "the run exercised the wheel: {woken_far} woken from level 2 or above, \
         {cancelled} cancelled, at most {most} armed"
    );
}
