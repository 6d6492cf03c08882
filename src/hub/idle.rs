//! A worker's idle policy: whether a worker that found nothing to do spins
//! a moment on `spin_loop`, watching for work, before it sleeps in its
//! poller.
//!
//! Owns: [`Idle`] (the per-worker state of the policy, part of the worker's
//! `Remote`: the `spinning` flag and the CPU that other workers read, the
//! [`Backoff`] and the hold-off that only its own worker touches), [`Plan`],
//! [`Spun`], the machine's crowding ([`crowded`]) and the policy's
//! constants. Uses `libc::sched_getcpu` (through glibc's `rseq` area, no
//! system call), `/proc/loadavg` and `std::hint::spin_loop`. The worker's
//! loop (`worker::scheduler`) asks for a [`Plan`], runs the spin with its own look for
//! work, and then, if nothing came, goes through its sleep handshake
//! (`Remote::sleeping`), which this policy does not touch: a spin is only a
//! look before it, so it cannot lose a wake-up.
//!
//! # Why spin
//! On a virtual machine a vCPU whose thread sleeps is halted, and waking it
//! (the eventfd write, the host's inter-processor interrupt, the
//! `epoll_wait` return) costs about 20 µs when the machine is quiet: a
//! ping-pong between two workers paid that for every message. A worker that
//! keeps its CPU for a moment watching its remote queue sees a reply a few
//! hundred nanoseconds after it was pushed, and the waker, finding the
//! `sleeping` flag clear, writes no eventfd.
//!
//! # When not to
//! Spinning holds a CPU, so a worker spins only when that can pay:
//! - **Backoff.** A spin that found nothing makes the worker skip spinning
//!   for the next 1, 3, 7, … up to [`MAX_SKIP`] idles (it grows while spins
//!   keep missing); a spin that found work ends the backoff. A worker woken
//!   only by timers or I/O thus spins once every [`MAX_SKIP`] + 1 idles,
//!   and a runtime with nothing to do spins once per wake, [`SPIN_WINDOW`]
//!   at most, then sleeps.
//! - **One spinner.** A worker does not spin while another worker spins
//!   with nothing found yet (one watcher is enough to catch the next wake;
//!   the others sleep). A spin says so only after its first look (a
//!   microsecond or two): one that ends sooner leaves the other workers'
//!   cache lines alone.
//! - **A busy peer on this CPU.** When another worker is busy (neither
//!   spinning nor sleeping) and was last seen on the CPU this worker runs
//!   on, it is runnable but waiting for this very CPU: a spin would hold it
//!   off until the window ends. The worker sleeps at once instead, which
//!   hands the CPU over.
//! - **Preempted.** A spin that lost its CPU (two looks at the clock far
//!   apart) means other threads want it: no spin for [`HOLD_OFF`].
//! - **A crowded machine.** Not while the machine has more runnable
//!   threads than this process has CPUs (counted from `/proc/loadavg`
//!   every [`COUNT_EVERY`] at most, see [`crowded`]), and never on one CPU.
//!   There a spinning thread is one more of the crowd, and the scheduler
//!   runs it only in its turn, while a sleeping one is run as soon as it is
//!   woken: with two CPU hogs beside the two-worker ping-pong, spinning was
//!   measured slower than not (`cargo bench --bench hub -- "ping-pong, 2
//!   workers"` with two `yes > /dev/null` running beside it).
//!
//! Where the policy does not spin, the worker gives its CPU away
//! (`sched_yield`) up to [`YIELDS`] times watching its remote queue, then
//! sleeps: on a machine crowded with short-lived work (compilers) that was
//! measured faster than sleeping at once, as a yield often runs the other
//! worker on this CPU. But a yield on a CPU shared with a CPU-bound process
//! may hand it a whole time slice (with two hogs beside the ping-pong,
//! yields made runs up to 100 times slower than sleeping at once, in the
//! same measurement): a yield that comes back later than
//! [`YIELD_LATE`] stops the yields for [`HOLD_OFF`].
//!
//! Shutdown, pending calls and unstarted work end a spin the same way a
//! wake does (the worker's look for work sees them), and a spin never runs
//! past the next timer's deadline.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The longest an idle worker spins before it sleeps: longer catches
/// slower replies without the sleep and wake (about 20 µs on a virtual
/// machine), shorter wastes less CPU on a miss. A round trip between two
/// spinning workers takes about 1.2 µs on a 2-vCPU virtual machine; 50 µs
/// covers a reply that does some work, and is what a miss costs.
/// Re-measure with `cargo bench --bench hub -- "ping-pong, 2 workers"`
/// (the round trip) and the CPU time of an idle runtime.
pub(crate) const SPIN_WINDOW: Duration = Duration::from_micros(50);
/// `spin_loop` rounds between two looks at the clock and at the work of the
/// whole runtime (the remote queue is read every round).
const ROUNDS_PER_LOOK: u32 = 32;
/// A gap between two looks at the clock that means the spinning thread
/// was descheduled for another thread's time slice (the looks are 1–2 µs
/// apart). Not less: on a quiet virtual machine interrupts and the host
/// stall a spinning vCPU for tens of microseconds now and then; at 10 µs
/// those stalls held spinning off for most of a ping-pong, 8.2 µs per
/// round trip instead of 2.5 µs (`cargo bench --bench hub -- "ping-pong, 2
/// workers"`).
const PREEMPTED: Duration = Duration::from_micros(250);
/// How long a worker whose spin was preempted does not spin, and one whose
/// yield came back late does not yield: on a CPU that other threads want,
/// a spinning or yielding thread is one more of them, and waits for its
/// turn (a time slice of theirs, milliseconds) where a sleeping one is run
/// as soon as it is woken.
const HOLD_OFF: Duration = Duration::from_millis(50);
/// Times a worker that does not spin yields its CPU before it sleeps.
const YIELDS: u32 = 2;
/// A yield that came back later than this ran another process for a time
/// slice (a yield to nobody takes about a microsecond, to the other worker
/// a few).
const YIELD_LATE: Duration = Duration::from_micros(100);
/// How old the machine's count of runnable threads may be (see
/// [`crowded`]): reading it costs a few microseconds.
const COUNT_EVERY: Duration = Duration::from_millis(5);
/// [`COUNT_EVERY`] in nanoseconds.
const COUNT_EVERY_NS: u64 = COUNT_EVERY.as_nanos() as u64;
/// Idles skipped at most after spins that found nothing (a power of two,
/// minus one).
const MAX_SKIP: u32 = 63;

/// A CPU number that matches none (unknown, or `sched_getcpu` failed).
const NO_CPU: u32 = u32::MAX;

/// What an idle worker does before its sleep handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Spin until work comes or the window (or the next timer) ends.
    Spin,
    /// No spin: yield a little ([`Idle::yield_briefly`]), then sleep.
    Sleep,
}

/// How a spin ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spun {
    /// Work came.
    Found,
    /// The window ended with nothing.
    Missed,
    /// The next timer is due: the loop has work, but no wake came, so the
    /// backoff learns nothing.
    Deadline,
    /// The thread lost its CPU while it spun (two looks at the clock more
    /// than [`PREEMPTED`] apart): another thread wants this CPU. Work may
    /// have come meanwhile; the worker holds off spinning for
    /// [`HOLD_OFF`].
    Preempted,
}

/// The backoff rule alone (owned by one worker).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backoff {
    /// Idles still to skip.
    skip: u32,
    /// Idles skipped after the last miss (0 after a spin that found work).
    span: u32,
}

impl Backoff {
    /// At an idle: whether the worker may spin now (else one fewer to skip).
    pub(crate) fn may_spin(&mut self) -> bool {
        if self.skip == 0 {
            return true;
        }
        self.skip -= 1;
        false
    }

    /// A spin ended so.
    pub(crate) fn learn(&mut self, spun: Spun) {
        match spun {
            Spun::Found => *self = Backoff::default(),
            Spun::Missed => {
                self.span = (self.span * 2 + 1).min(MAX_SKIP);
                self.skip = self.span;
            }
            Spun::Deadline | Spun::Preempted => {}
        }
    }
}

/// One worker's idle state: the part of its `Remote` this policy owns.
#[derive(Debug)]
pub(crate) struct Idle {
    /// Spinning now, past the spin's first look (read by the other workers:
    /// one spinner at a time).
    spinning: AtomicBool,
    /// The CPU the worker was on when it last left or entered an idle.
    cpu: AtomicU32,
    /// The backoff, packed (`skip` high, `span` low); only the worker's own
    /// thread reads and writes it.
    backoff: AtomicU64,
    /// No spin before this time (nanoseconds after the first
    /// [`since_epoch`], 0: none); only the worker's own thread reads and
    /// writes it.
    hold_until: AtomicU64,
    /// No yield before this time (as `hold_until`).
    yields_hold_until: AtomicU64,
    /// Spins begun, in all (the tests' deterministic count).
    #[cfg(test)]
    spins: AtomicU64,
}

impl Default for Idle {
    fn default() -> Idle {
        Idle {
            spinning: AtomicBool::new(false),
            cpu: AtomicU32::new(NO_CPU),
            backoff: AtomicU64::new(0),
            hold_until: AtomicU64::new(0),
            yields_hold_until: AtomicU64::new(0),
            #[cfg(test)]
            spins: AtomicU64::new(0),
        }
    }
}

impl Idle {
    fn load_backoff(&self) -> Backoff {
        let v = self.backoff.load(Ordering::Relaxed);
        Backoff {
            skip: (v >> 32) as u32,
            span: v as u32,
        }
    }

    /// (Written only when it changed: the line is read by the other
    /// workers, each write takes it away from them.)
    fn store_backoff(&self, b: Backoff) {
        let v = (u64::from(b.skip) << 32) | u64::from(b.span);
        if self.backoff.load(Ordering::Relaxed) != v {
            self.backoff.store(v, Ordering::Relaxed);
        }
    }

    /// Record `cpu` as where this worker runs, if it changed.
    fn store_cpu(&self, cpu: u32) {
        if self.cpu.load(Ordering::Relaxed) != cpu {
            self.cpu.store(cpu, Ordering::Relaxed);
        }
    }

    /// Spins this worker has begun.
    #[cfg(test)]
    pub(crate) fn spins(&self) -> u64 {
        self.spins.load(Ordering::Relaxed)
    }

    /// Record the CPU this thread runs on now (at the end of an idle, so
    /// that other workers know where this busy worker runs).
    pub(crate) fn note_cpu(&self) {
        self.store_cpu(current_cpu());
    }

    /// Choose what worker `me` of `all` does before it sleeps, running on
    /// CPU `cpu` (see [`current_cpu`]). `idle(w)`: worker `w`'s idle state;
    /// `asleep(w)`: whether it is in its sleep handshake; `has_work(w)`:
    /// whether it has a wake queued. `crowded`: whether the machine has no
    /// CPU to spare (see [`crowded`]), asked last. The other workers'
    /// `asleep` and `has_work` are read only where the rules need them (a
    /// peer on this CPU, a spinning peer): their lines are the ones a wake
    /// just wrote, which the woken worker is about to take.
    pub(crate) fn plan<W>(
        all: &[W],
        me: usize,
        cpu: u32,
        idle: impl Fn(&W) -> &Idle,
        asleep: impl Fn(&W) -> bool,
        has_work: impl Fn(&W) -> bool,
        crowded: impl FnOnce() -> bool,
    ) -> Plan {
        let this = idle(&all[me]);
        let mut backoff = this.load_backoff();
        let may = backoff.may_spin();
        this.store_backoff(backoff);
        if !may {
            return Plan::Sleep;
        }
        Self::plan_to_deadline(all, me, cpu, idle, asleep, has_work, crowded)
    }

    /// [`plan`](Self::plan) without the backoff: for a spin to a deadline
    /// a few microseconds away that ends in work (another worker's newest
    /// spawn that ages then, see `worker::placement`), which waits for no wake, so
    /// the misses of spins that did are no reason to skip it. The other
    /// rules hold: no spin on a CPU a busy peer waits for (that peer may
    /// be the spawner, about to park), on a crowded machine, or in a
    /// hold-off.
    pub(crate) fn plan_to_deadline<W>(
        all: &[W],
        me: usize,
        cpu: u32,
        idle: impl Fn(&W) -> &Idle,
        asleep: impl Fn(&W) -> bool,
        has_work: impl Fn(&W) -> bool,
        crowded: impl FnOnce() -> bool,
    ) -> Plan {
        let this = idle(&all[me]);
        if held(&this.hold_until) {
            return Plan::Sleep;
        }
        this.store_cpu(cpu);
        for (i, w) in all.iter().enumerate() {
            if i == me {
                continue;
            }
            let other = idle(w);
            if other.spinning.load(Ordering::Relaxed) {
                if !has_work(w) {
                    return Plan::Sleep;
                }
            } else if cpu != NO_CPU && other.cpu.load(Ordering::Relaxed) == cpu && !asleep(w) {
                return Plan::Sleep;
            }
        }
        if crowded() {
            Plan::Sleep
        } else {
            Plan::Spin
        }
    }

    /// Before a sleep without a spin: yield the CPU (through `give`) up to
    /// [`YIELDS`] times while `quick` (the remote queue's flag) finds
    /// nothing, unless a late yield holds yields off; whether `quick` found
    /// work. A yield later than [`YIELD_LATE`] holds them off for
    /// [`HOLD_OFF`].
    pub(crate) fn yield_briefly(&self, quick: impl Fn() -> bool, give: impl Fn()) -> bool {
        if held(&self.yields_hold_until) {
            return false;
        }
        for _ in 0..YIELDS {
            if quick() {
                return true;
            }
            let start = Instant::now();
            give();
            let back = Instant::now();
            if back.saturating_duration_since(start) > YIELD_LATE {
                hold(&self.yields_hold_until, back);
                return quick();
            }
        }
        false
    }

    /// Spin, from `start` (a clock reading taken just before), until
    /// `look` finds work or `until` passes. `quick` is read every round
    /// (the remote queue's flag), `look` every [`ROUNDS_PER_LOOK`].
    ///
    /// A spin is announced to the other workers (`spinning`, for their
    /// one-spinner rule) only once its first [`ROUNDS_PER_LOOK`] rounds
    /// found nothing: a spin that `quick` ends sooner (a reply between two
    /// workers, a microsecond or less) writes nothing the other workers
    /// read, so it takes no cache line from them on the way to the work,
    /// and it reads no clock (a preemption in those last rounds goes
    /// unseen; the next spin's looks catch a CPU that stays contended).
    pub(crate) fn spin(
        &self,
        start: Instant,
        until: Instant,
        deadline_is_timer: bool,
        quick: impl Fn() -> bool,
        look: impl Fn() -> bool,
    ) -> Spun {
        #[cfg(test)]
        self.spins.fetch_add(1, Ordering::Relaxed);
        let mut last = start;
        let mut announced = false;
        let spun = loop {
            if (0..ROUNDS_PER_LOOK).any(|_| {
                quick() || {
                    std::hint::spin_loop();
                    false
                }
            }) {
                break Spun::Found;
            }
            let found = look();
            let now = Instant::now();
            if now.saturating_duration_since(last) > PREEMPTED {
                hold(&self.hold_until, now);
                break Spun::Preempted;
            }
            if found {
                break Spun::Found;
            }
            if now >= until {
                break if deadline_is_timer {
                    Spun::Deadline
                } else {
                    Spun::Missed
                };
            }
            if !announced {
                self.spinning.store(true, Ordering::Relaxed);
                announced = true;
            }
            last = now;
        };
        if announced {
            self.spinning.store(false, Ordering::Relaxed);
        }
        let mut backoff = self.load_backoff();
        backoff.learn(spun);
        self.store_backoff(backoff);
        spun
    }
}

/// Hold off what `until` guards for [`HOLD_OFF`] from `now`.
fn hold(until: &AtomicU64, now: Instant) {
    until.store(since_epoch(now + HOLD_OFF).max(1), Ordering::Relaxed);
}

/// Whether what `until` guards is held off now (a passed hold is cleared).
fn held(until: &AtomicU64) -> bool {
    let t = until.load(Ordering::Relaxed);
    if t == 0 {
        return false;
    }
    if since_epoch(Instant::now()) < t {
        return true;
    }
    until.store(0, Ordering::Relaxed);
    false
}

/// Nanoseconds from the first call of this to `t`.
fn since_epoch(t: Instant) -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    u64::try_from(t.saturating_duration_since(epoch).as_nanos()).unwrap_or(u64::MAX)
}

/// Whether the machine has no CPU to spare for a spin: this process may
/// run on one CPU only, or the machine had more runnable threads than
/// that many CPUs when last counted (`/proc/loadavg`'s fourth field, read
/// again when the count is older than [`COUNT_EVERY`]; never crowded where
/// it cannot be read). The count includes this thread and a busy or
/// spinning peer: two workers ping-ponging on two CPUs are not crowded, one
/// more runnable thread anywhere is. `now`: the caller's clock reading.
pub(crate) fn crowded(now: Instant) -> bool {
    static LOADAVG: OnceLock<Option<File>> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    static CROWDED: AtomicBool = AtomicBool::new(false);
    if cpus() < 2 {
        return true;
    }
    #[cfg(test)]
    if tests::UNCROWDED.load(Ordering::Relaxed) {
        return false;
    }
    let now = since_epoch(now);
    if now < NEXT.load(Ordering::Relaxed) {
        return CROWDED.load(Ordering::Relaxed);
    }
    // Two workers may count at once: both store a fresh answer.
    NEXT.store(now.saturating_add(COUNT_EVERY_NS), Ordering::Relaxed);
    let Some(file) = LOADAVG.get_or_init(|| File::open("/proc/loadavg").ok()) else {
        return false;
    };
    let mut text = [0u8; 128];
    let crowded = file
        .read_at(&mut text, 0)
        .ok()
        .and_then(|n| runnable(&text[..n]))
        .is_some_and(|r| r > cpus());
    CROWDED.store(crowded, Ordering::Relaxed);
    crowded
}

/// The runnable threads in the text of `/proc/loadavg` (`0.50 0.40 0.30
/// 3/456 789`: 3).
fn runnable(text: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(text).ok()?;
    let field = text.split_ascii_whitespace().nth(3)?;
    field.split_once('/')?.0.parse().ok()
}

/// The CPUs this process may run on (1 if unknown), once.
fn cpus() -> usize {
    static CPUS: OnceLock<usize> = OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The CPU this thread runs on now, or [`NO_CPU`].
pub(crate) fn current_cpu() -> u32 {
    // SAFETY: `sched_getcpu` takes no arguments and touches no memory of
    // ours; it returns -1 on failure, mapped to `NO_CPU`.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).unwrap_or(NO_CPU)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::cell::Cell;

    use crate::hub::{self, Runtime};

    /// Set while a test needs spins on a loaded machine too: [`crowded`]
    /// then counts no threads (other tests' runtimes spin more meanwhile,
    /// bounded as ever).
    pub(super) static UNCROWDED: AtomicBool = AtomicBool::new(false);

    /// The spins begun by all workers of a runtime of two, as they go,
    /// with [`UNCROWDED`] set.
    fn runtime_spins() -> (Runtime, impl Fn() -> u64) {
        UNCROWDED.store(true, Ordering::Relaxed);
        let (rt, shared) = crate::hub::worker::tests::runtime_of_two();
        let spins = move || shared.workers.iter().map(|r| r.idle.spins()).sum();
        (rt, spins)
    }

    #[test]
    fn an_idle_runtime_spins_once_per_worker_then_sleeps() {
        let (_rt, spins) = runtime_spins();
        let before = spins();
        std::thread::sleep(Duration::from_millis(200));
        // At most the spin each worker may have begun as the block_on task
        // ended; nothing wakes them after it.
        let more = spins() - before;
        assert!(more <= 2, "{more} spins over an idle stretch");
    }

    #[test]
    fn timer_wakes_back_off() {
        let (rt, spins) = runtime_spins();
        let before = spins();
        rt.block_on(|| (0..300).for_each(|_| hub::sleep(Duration::from_millis(1))))
            .expect("the sleeper");
        // 300 idles on the sleeper's worker, each woken by its timer (a
        // spin 50 µs long finds nothing in a 1 ms sleep): spins at the 1st,
        // 3rd, 7th, ... 127th, then one in 64 (about 10); the other worker
        // is asleep (at most one spin as the task came).
        let more = spins() - before;
        assert!(more <= 14, "{more} spins for 300 timer wakes");
        if cpus() > 1 {
            assert!(more > 0, "no spin at all: the policy never spins");
        }
    }

    #[test]
    fn misses_back_off_to_one_spin_in_max_skip_plus_one() {
        let mut b = Backoff::default();
        let mut spins = 0;
        for _ in 0..10_000 {
            if b.may_spin() {
                spins += 1;
                b.learn(Spun::Missed);
            }
        }
        // Spins at the idles 1, 3, 7, 15, 31 and 63 (each miss doubles the
        // skip), then at every 64th (the skip is capped at MAX_SKIP).
        let ramp: usize = 63;
        assert_eq!(spins, 6 + (10_000 - ramp) / (MAX_SKIP as usize + 1));
    }

    #[test]
    fn a_found_spin_ends_the_backoff() {
        let mut b = Backoff::default();
        for _ in 0..5 {
            while !b.may_spin() {}
            b.learn(Spun::Missed);
        }
        assert!(!b.may_spin());
        while !b.may_spin() {}
        b.learn(Spun::Found);
        assert!((0..100).all(|_| {
            let may = b.may_spin();
            b.learn(Spun::Found);
            may
        }));
    }

    #[test]
    fn a_timer_deadline_teaches_nothing() {
        let mut b = Backoff::default();
        b.learn(Spun::Missed);
        let before = b;
        b.learn(Spun::Deadline);
        assert_eq!(b, before);
    }

    /// Each worker as `(state, asleep, has_work)`.
    type Part<'a> = (&'a Idle, bool, bool);

    fn plan_for(all: &[Part<'_>], me: usize, cpu: u32) -> Plan {
        plan_with(all, me, cpu, || false)
    }

    fn plan_with(all: &[Part<'_>], me: usize, cpu: u32, crowded: impl FnOnce() -> bool) -> Plan {
        Idle::plan(all, me, cpu, |p| p.0, |p| p.1, |p| p.2, crowded)
    }

    #[test]
    fn one_spinner_at_a_time_unless_it_has_work() {
        let a = Idle::default();
        let b = Idle::default();
        a.spinning.store(true, Ordering::Relaxed);
        assert_eq!(
            plan_for(&[(&a, false, false), (&b, false, false)], 1, 0),
            Plan::Sleep
        );
        assert_eq!(
            plan_for(&[(&a, false, true), (&b, false, false)], 1, 0),
            Plan::Spin
        );
    }

    #[test]
    fn a_busy_peer_on_this_cpu_gets_the_cpu() {
        let a = Idle::default();
        let b = Idle::default();
        a.cpu.store(3, Ordering::Relaxed);
        assert_eq!(
            plan_for(&[(&a, false, false), (&b, false, false)], 1, 3),
            Plan::Sleep
        );
        assert_eq!(b.cpu.load(Ordering::Relaxed), 3);
        // Asleep, or on another CPU, or where it ran unknown: no reason to
        // give the CPU away.
        assert_eq!(
            plan_for(&[(&a, true, false), (&b, false, false)], 1, 3),
            Plan::Spin
        );
        assert_eq!(
            plan_for(&[(&a, false, false), (&b, false, false)], 1, 2),
            Plan::Spin
        );
        a.cpu.store(NO_CPU, Ordering::Relaxed);
        assert_eq!(
            plan_for(&[(&a, false, false), (&b, false, false)], 1, NO_CPU),
            Plan::Spin
        );
    }

    #[test]
    fn a_crowded_machine_gets_no_spin() {
        let a = Idle::default();
        let b = Idle::default();
        let all = [(&a, true, false), (&b, false, false)];
        assert_eq!(plan_with(&all, 1, 0, || true), Plan::Sleep);
        // Asked last: a worker that sleeps for another reason reads no
        // count.
        a.spinning.store(true, Ordering::Relaxed);
        let asked = Cell::new(false);
        let crowded = || {
            asked.set(true);
            false
        };
        assert_eq!(plan_with(&all, 1, 0, crowded), Plan::Sleep);
        assert!(!asked.get());
    }

    #[test]
    fn a_late_yield_holds_yields_off() {
        let idle = Idle::default();
        let gave = Cell::new(0);
        let give = || gave.set(gave.get() + 1);
        assert!(!idle.yield_briefly(|| false, give));
        assert!(gave.get() >= 1 && gave.get() <= YIELDS);
        // (Cleared: the test thread itself may have lost its CPU.)
        idle.yields_hold_until.store(0, Ordering::Relaxed);
        assert!(idle.yield_briefly(|| true, give));
        // A yield that loses the CPU for a millisecond: no yield after it.
        let slow = || std::thread::sleep(Duration::from_millis(1));
        assert!(!idle.yield_briefly(|| false, slow));
        assert_ne!(idle.yields_hold_until.load(Ordering::Relaxed), 0);
        gave.set(0);
        assert!(!idle.yield_briefly(|| false, give));
        // Unless the test thread stalled for all of HOLD_OFF meanwhile.
        assert!(gave.get() == 0 || !held(&idle.yields_hold_until));
    }

    #[test]
    fn loadavg_runnable_field() {
        assert_eq!(runnable(b"0.50 0.40 0.30 3/456 789\n"), Some(3));
        assert_eq!(runnable(b"12.17 9.94 7.88 14/179 23234"), Some(14));
        assert_eq!(runnable(b"0.50 0.40 0.30"), None);
        assert_eq!(runnable(b"0.50 0.40 0.30 x/456 789"), None);
        assert_eq!(runnable(&[0xff, 0xfe]), None);
    }

    #[test]
    fn a_skipped_idle_sleeps_and_counts_down() {
        let a = Idle::default();
        let b = Idle::default();
        let mut missed = Backoff::default();
        missed.learn(Spun::Missed);
        b.store_backoff(missed);
        assert_eq!(
            plan_for(&[(&a, true, false), (&b, false, false)], 1, 0),
            Plan::Sleep
        );
        assert_eq!(
            plan_for(&[(&a, true, false), (&b, false, false)], 1, 0),
            Plan::Spin
        );
    }

    /// `spin`'s outcome, tried again while the test thread itself lost its
    /// CPU meanwhile (a loaded machine), at most 100 times.
    fn spin_unpreempted(
        idle: &Idle,
        until: Instant,
        timer: bool,
        quick: impl Fn() -> bool,
        look: impl Fn() -> bool,
    ) -> Spun {
        (0..100)
            .map(|_| idle.spin(Instant::now(), until, timer, &quick, &look))
            .find(|&s| s != Spun::Preempted)
            .expect("100 spins preempted in a row")
    }

    #[test]
    fn a_spin_ends_at_its_deadline_or_on_work() {
        let idle = Idle::default();
        let now = Instant::now();
        let never = || false;
        assert_eq!(
            spin_unpreempted(&idle, now, true, never, never),
            Spun::Deadline
        );
        assert_eq!(
            spin_unpreempted(&idle, now, false, never, never),
            Spun::Missed
        );
        let far = now + Duration::from_secs(3600);
        assert_eq!(
            spin_unpreempted(&idle, far, false, || true, never),
            Spun::Found
        );
        assert_eq!(
            spin_unpreempted(&idle, far, false, never, || true),
            Spun::Found
        );
        assert!(idle.spins() >= 4);
        assert!(!idle.spinning.load(Ordering::Relaxed));
    }

    #[test]
    fn only_a_spin_past_its_first_look_is_announced() {
        let idle = Idle::default();
        // Work seen in the first rounds: the flag is never written.
        let rounds = Cell::new(0);
        let saw = Cell::new(false);
        let quick = || {
            saw.set(saw.get() || idle.spinning.load(Ordering::Relaxed));
            rounds.set(rounds.get() + 1);
            rounds.get() > ROUNDS_PER_LOOK / 2
        };
        let far = Instant::now() + Duration::from_secs(3600);
        assert_eq!(
            spin_unpreempted(&idle, far, false, quick, || false),
            Spun::Found
        );
        assert!(!saw.get(), "a short spin was announced");
        // Past the first look the flag is up, until the spin ends: `quick`
        // ends the spin when it sees it (else the window ends it, Missed).
        let until = Instant::now() + Duration::from_secs(1);
        let seen = || idle.spinning.load(Ordering::Relaxed);
        let spun = (0..100)
            .map(|_| idle.spin(Instant::now(), until, false, seen, || false))
            .find(|&s| s != Spun::Preempted)
            .expect("100 spins preempted in a row");
        assert_eq!(spun, Spun::Found, "a long spin was never announced");
        assert!(!idle.spinning.load(Ordering::Relaxed));
    }

    #[test]
    fn a_preempted_spin_holds_spinning_off() {
        let idle = Idle::default();
        let far = Instant::now() + Duration::from_secs(3600);
        // A look that loses the CPU for a millisecond, as a preemption does.
        let slept = AtomicBool::new(false);
        let look = || {
            if !slept.swap(true, Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
            }
            false
        };
        assert_eq!(
            idle.spin(Instant::now(), far, false, || false, look),
            Spun::Preempted
        );
        assert_ne!(idle.hold_until.load(Ordering::Relaxed), 0);
        // The backoff learned nothing: the hold is by time, not by idles.
        assert_eq!(idle.load_backoff(), Backoff::default());
    }
}
