//! Greenlets inside the model ([`PyGreenlet`]): each greenlet of a model
//! thread has its own simulated frame stack, saved when it is switched away
//! from and restored into the thread when it is switched into, as greenlet
//! 3.5.6 does with the interpreter's frames (`Greenlet::g_switchstack`:
//! `PythonState::operator<<(tstate)` on the origin before `slp_switch`,
//! `Greenlet::g_switchstack_success`: `PythonState::operator>>(tstate)` on
//! the target after it; `TPythonState.cpp`). A new greenlet starts with no
//! frames (`PythonState::set_initial_state`: `_top_frame = nullptr`).
//!
//! What greenlet does *not* switch stays with the thread: the trace and
//! profile functions and `tstate->tracing` (the counter
//! `PyThreadState_EnterTracing`/`LeaveTracing` move, the drain's shield).
//! 3.11's `cframe->use_tracing`, which `operator<<`/`>>` do save, is
//! overwritten in the target by the origin's current value
//! (`PythonState::will_switch_from`, 3.11 only), and 3.12/3.13 save nothing
//! about tracing; so after a switch the traced state is the thread's on all
//! three versions, which is what the core computes (from the thread's hooks
//! and its tracing counter) without any switching of its own. Checked on
//! 3.11.7, 3.12.1 and 3.13.0 by `probes/greenlet_switch_in_cleanup.py`.
//!
//! The switching itself is the crate's own greenlets (`crate::coroutine`):
//! a model greenlet runs its body on its own stack. Which greenlet's frames
//! the thread's stack holds is synchronized with the crate's current
//! greenlet at every model switch and at every frame push and pop, so that
//! switches the crate makes by itself (a finished greenlet returning to its
//! parent, a kill) are followed too.
//!
//! Uses the shared state (`state.rs`) and the crate's greenlets.

use std::fmt;
use std::sync::Arc;

use crate::coroutine::{getcurrent, ErrorKind, Greenlet, GreenletError, Value};

use super::error::{PyErr, PyResult};
use super::state::{Shared, State};
use super::Py;

/// A greenlet of a model thread (`greenlet.greenlet(run)`), made by
/// [`Py::greenlet`] and entered with [`Py::switch`].
///
/// # Examples
/// ```
/// # use std::time::Duration;
/// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
///
/// let rt = Interpreter::new(PyVersion::V3_11);
/// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
///     let g = py.greenlet("g_body", |py, v| {
///         let back = v.downcast::<i32>().unwrap() + 1;
///         Ok(back.into())
///     })?;
///     assert_eq!(g.name(), "g_body");
///     assert_eq!(py.switch(&g, 41)?.downcast::<i32>().unwrap(), 42);
///     Ok(())
/// })
/// .unwrap();
/// ```
#[derive(Clone)]
pub struct PyGreenlet {
    pub(super) inner: Greenlet,
    pub(super) name: &'static str,
}

impl fmt::Debug for PyGreenlet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PyGreenlet")
            .field("name", &self.name)
            .field("id", &self.inner.id())
            .finish()
    }
}

impl PyGreenlet {
    /// The name of its `run` function (its first frame).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether its `run` has finished (`greenlet.dead`).
    ///
    /// # Examples
    /// ```
    /// # use std::time::Duration;
    /// use greenlet::interp_shim::{PyVersion, Interpreter, Watchdog};
    ///
    /// let rt = Interpreter::new(PyVersion::V3_13);
    /// rt.run(Watchdog::Report(Duration::from_secs(20)), |py| {
    ///     let g = py.greenlet("run", |_, v| Ok(v))?;
    ///     assert!(!g.is_dead());
    ///     py.switch(&g, ())?;
    ///     assert!(g.is_dead());
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn is_dead(&self) -> bool {
        self.inner.is_dead()
    }
}

/// Make thread `py`'s stack the current greenlet's: if another greenlet's
/// frames are in it, save them (`PythonState::operator<<`) and restore the
/// current one's (`PythonState::operator>>`; none yet: an empty stack).
/// A no-op on a thread that never used a model greenlet (so that no
/// greenlet state is made for it).
pub(super) fn sync_frames(py: &Py, st: &mut State) {
    let slot = &mut st.threads[py.idx];
    let Some(running) = slot.running_greenlet else {
        return;
    };
    let current = getcurrent().id();
    if current != running {
        switch_frames(st, py, running, current);
    }
}

fn switch_frames(st: &mut State, py: &Py, from: u64, to: u64) {
    let slot = &mut st.threads[py.idx];
    let saved = std::mem::take(&mut slot.frames);
    slot.parked_frames.insert(from, saved);
    slot.frames = slot.parked_frames.remove(&to).unwrap_or_default();
    slot.running_greenlet = Some(to);
}

/// `greenlet.getcurrent()` on thread `py` as a model greenlet.
pub(super) fn current_greenlet(py: &Py) -> PyGreenlet {
    let inner = getcurrent();
    note_greenlet_use(py, &inner);
    let name = if inner.is_main() {
        "main"
    } else {
        py.lock().threads[py.idx]
            .greenlet_names
            .get(&inner.id())
            .copied()
            .unwrap_or("greenlet")
    };
    PyGreenlet { inner, name }
}

/// From the first model greenlet of a thread on, its frames follow the
/// crate's current greenlet.
fn note_greenlet_use(py: &Py, current: &Greenlet) {
    let mut st = py.lock();
    let slot = &mut st.threads[py.idx];
    if slot.running_greenlet.is_none() {
        slot.running_greenlet = Some(current.id());
    }
}

/// `greenlet.greenlet(run)` on thread `py`: its body runs as the function
/// `name` when first switched into, on a new, empty frame stack.
pub(super) fn new_greenlet(
    py: &Py,
    name: &'static str,
    body: impl FnOnce(&Py, Value) -> PyResult<Value> + 'static,
) -> PyResult<PyGreenlet> {
    py.cancelled()?;
    note_greenlet_use(py, &getcurrent());
    let shared: Arc<Shared> = Arc::clone(&py.shared);
    let idx = py.idx;
    let inner = Greenlet::builder()
        .name(name)
        .spawn(move |value| {
            let py = Py::new(shared, idx);
            // g_switchstack_success: operator>> of a new greenlet
            sync_frames(&py, &mut py.lock());
            py.call(name, |py| body(py, value))
                .map_err(GreenletError::user)
        })
        .map_err(|err| greenlet_error(&err))?;
    py.lock().threads[py.idx]
        .greenlet_names
        .insert(inner.id(), name);
    Ok(PyGreenlet { inner, name })
}

/// `greenlet.switch(value)` from thread `py` into `target`: the origin's
/// frames are saved, the target's restored when it runs, and the origin's
/// again when control comes back (whoever switches back).
pub(super) fn switch_to(py: &Py, target: &PyGreenlet, value: Value) -> PyResult<Value> {
    py.cancelled()?;
    sync_frames(py, &mut py.lock());
    let result = target.inner.switch(value);
    // back in the origin: g_switchstack_success restores its frames
    sync_frames(py, &mut py.lock());
    result.map_err(|err| match err.into_kind() {
        ErrorKind::User(inner) => match inner.downcast::<PyErr>() {
            Ok(err) => *err,
            Err(other) => PyErr::exception("greenlet.error", other.to_string()),
        },
        other => greenlet_error(&other),
    })
}

fn greenlet_error(err: &dyn fmt::Display) -> PyErr {
    PyErr::exception("greenlet.error", err.to_string())
}
