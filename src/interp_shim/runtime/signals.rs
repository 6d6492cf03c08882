//! Signals: the C-level handler's trip, and `handle_signals`, the first
//! stage of handling the eval breaker, following the main thread's
//! [`SignalDisposition`] (a Python handler, the default SIGINT handler written
//! in C, or `SIG_IGN`; defined in `callbacks.rs`).
//!
//! Uses the shared state and the core's signal steps
//! (`InterpCore::signal_received`, `take_signals`, `resignal_signals`);
//! `Py::call` enters a Python handler.

use super::super::core::ThreadIdx;
use super::callbacks::SignalDisposition;
use super::error::{PyErr, PyResult};
use super::state::Shared;
use super::Py;

/// The C-level signal handler (`signal_handler` → `trip_signal`), run on
/// thread `receiver`: mark the signal tripped, then
/// `_PyEval_SignalReceived`. Under `SIG_IGN` the OS never calls it.
pub(super) fn trip_signal(shared: &Shared, receiver: ThreadIdx) {
    let mut st = shared.state.lock();
    if matches!(st.signal, Some(SignalDisposition::Ignore)) {
        return;
    }
    st.tripped = true;
    st.core.signal_received(receiver);
}

/// `handle_signals`: unsignal, then `_PyErr_CheckSignalsTstate` calls the
/// tripped signal's handler; a failing handler re-signals and its
/// exception propagates from the frame at the check site.
pub(super) fn handle_signals(py: &Py) -> PyResult<()> {
    let disposition = {
        let mut st = py.lock();
        // UNSIGNAL_PENDING_SIGNALS (main thread only)
        if !st.core.take_signals(py.idx) {
            return Ok(());
        }
        // _PyErr_CheckSignalsTstate: only a tripped signal's handler runs,
        // and its flag is cleared first.
        if !std::mem::take(&mut st.tripped) {
            return Ok(());
        }
        st.signal.clone()
    };
    let result = match disposition {
        None | Some(SignalDisposition::Ignore) => Ok(()),
        Some(SignalDisposition::Python { name, handler }) => {
            py.lock().stats.signal_handlers_run += 1;
            // _PyErr_CheckSignalsTstate: the handler is an ordinary Python call.
            py.call(name, |py| handler(py))
        }
        // signal_default_int_handler: PyErr_SetNone(PyExc_KeyboardInterrupt),
        // called from C: no frame of its own.
        Some(SignalDisposition::DefaultInt) => Err(PyErr::keyboard_interrupt()),
    };
    if result.is_err() {
        // handle_signals: "re-schedule a call to handle_signals()"
        py.lock().core.resignal_signals(py.idx);
    }
    result
}
