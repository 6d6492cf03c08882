//! A record's state bits ([`Flags`]): unstarted, started, active, dead,
//! the marks of a kill on drop and of reuse, and whether it has a name of
//! its own.
//!
//! A leaf: uses nothing of the crate.

/// A record's state bits, as one value with named queries.
///
/// A greenlet is unstarted, then started (its body runs or is suspended),
/// then dead; a main greenlet is started from its creation and dies with its
/// thread. `killing` is set while a greenlet is being killed on drop (so that
/// a handle made and dropped again meanwhile starts no second kill); `leaked`
/// on one that survived that kill with no handle made meanwhile: it is left
/// alone by further kills on drop and stays suspended until its thread exits.
/// `reusable` on a dead greenlet whose record is ready for reuse as it is
/// (see [`Flags::is_reusable`]). `active` is `started` and not `dead`, kept
/// as a bit of its own (every write of the flags derives it) so that the
/// test every switch makes of its target is one bit test. `named` on a
/// greenlet made with a name (given, or a hub green thread's
/// `task-<id>`): set when the record is made or reused with a name, or
/// before it starts by `Record::name_after_task`, and kept until the
/// record is reused, so that the start, which labels the stack, tests one
/// bit for the common unnamed greenlet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flags(pub(super) u8);

impl Flags {
    pub(super) const STARTED: u8 = 1;
    pub(super) const DEAD: u8 = 2;
    pub(super) const MAIN: u8 = 4;
    pub(super) const LEAKED: u8 = 8;
    pub(super) const KILLING: u8 = 16;
    pub(super) const REUSABLE: u8 = 32;
    pub(super) const ACTIVE: u8 = 64;
    pub(super) const NAMED: u8 = 128;

    /// `bits` with [`ACTIVE`](Self::ACTIVE) derived from the others: set
    /// when `STARTED` and not `DEAD`.
    pub(super) const fn derive_active(bits: u8) -> u8 {
        if bits & (Flags::STARTED | Flags::DEAD) == Flags::STARTED {
            bits | Flags::ACTIVE
        } else {
            bits & !Flags::ACTIVE
        }
    }

    /// A new greenlet, not yet switched into.
    pub(crate) const UNSTARTED: Flags = Flags(0);

    /// [`UNSTARTED`](Self::UNSTARTED), with a name of its own or not:
    /// never switched into, not killed, no mark.
    #[inline(always)]
    pub(crate) const fn is_unstarted(self) -> bool {
        self.0 & !Flags::NAMED == 0
    }

    /// It was made with a name: a given one, or a hub green thread's.
    #[inline(always)]
    pub(crate) const fn is_named(self) -> bool {
        self.0 & Flags::NAMED != 0
    }

    /// A greenlet that can never run (made after its thread's state went).
    pub(crate) const BORN_DEAD: Flags = Flags(Flags::STARTED | Flags::DEAD);

    /// A main greenlet (dead when made for a thread that is gone).
    pub(crate) const fn main(alive: bool) -> Flags {
        let dead = if alive { 0 } else { Flags::DEAD };
        Flags(Flags::derive_active(Flags::STARTED | Flags::MAIN | dead))
    }

    /// It has been switched into (main greenlets always have).
    #[inline(always)]
    pub(crate) const fn is_started(self) -> bool {
        self.0 & Flags::STARTED != 0
    }

    /// It finished or was killed (a main greenlet: its thread exited).
    #[inline(always)]
    pub(crate) const fn is_dead(self) -> bool {
        self.0 & Flags::DEAD != 0
    }

    /// It is a thread's main greenlet.
    #[inline(always)]
    pub(crate) const fn is_main(self) -> bool {
        self.0 & Flags::MAIN != 0
    }

    /// It ignored the kill of its last handle's drop (or could not be
    /// killed then), and is left alone until its thread exits.
    #[inline(always)]
    pub(crate) const fn is_leaked(self) -> bool {
        self.0 & Flags::LEAKED != 0
    }

    /// It is being killed because its last handle was dropped.
    #[inline(always)]
    pub(crate) const fn is_killing(self) -> bool {
        self.0 & Flags::KILLING != 0
    }

    /// Started and not dead: a switch resumes it as it is.
    #[inline(always)]
    pub(crate) const fn is_active(self) -> bool {
        self.0 & Flags::ACTIVE != 0
    }

    /// A dead greenlet other than a main one: its run ended.
    #[inline(always)]
    pub(crate) const fn is_finished(self) -> bool {
        self.0 & (Flags::DEAD | Flags::MAIN) == Flags::DEAD
    }

    /// [`is_finished`](Self::is_finished), and neither being killed on drop
    /// nor leaked by such a kill: its last handle going only finalizes it.
    #[inline(always)]
    pub(crate) const fn is_simply_finished(self) -> bool {
        self.0 & (Flags::DEAD | Flags::MAIN | Flags::LEAKED | Flags::KILLING) == Flags::DEAD
    }

    /// [`is_simply_finished`](Self::is_simply_finished), and its record is
    /// ready for reuse as it is: when its body ended (`switch::finish`) it
    /// had no name, main's handle as its parent, a handle left and no
    /// killer's link, and was not being unwound; since, it stayed
    /// registered (`ThreadState::unregister` clears the mark) and its
    /// parent main's ([`Record::replace_parent`](super::Record::replace_parent) clears it otherwise). The
    /// rest holds for every dead greenlet with a handle whose body ended:
    /// not current, its closure gone at its start, its fiber right after
    /// its end (`switch::keep_finished`; a body that ended during its
    /// forced unwind keeps its fiber, and is not marked). So its only
    /// handle's drop tests this instead of each of them
    /// (`ThreadState::recycle_finished`).
    #[inline(always)]
    pub(crate) const fn is_reusable(self) -> bool {
        self.0 & (Flags::DEAD | Flags::MAIN | Flags::LEAKED | Flags::KILLING | Flags::REUSABLE)
            == Flags::DEAD | Flags::REUSABLE
    }

    /// `dead`, `active` or `unstarted`, for `Debug`.
    pub(crate) const fn state_name(self) -> &'static str {
        if self.is_dead() {
            "dead"
        } else if self.is_started() {
            "active"
        } else {
            "unstarted"
        }
    }
}
