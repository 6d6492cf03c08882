// Test-only helper module for port/scenarios and port/probes. It is not part of the fix.
//
//  slow_thread_exit(us)        make the calling thread's exit wait `us` microseconds, without the
//                              GIL, in a C++ thread_local destructor. Call it after the thread's
//                              first greenlet.getcurrent(): thread_local destructors run in reverse
//                              order of construction, so the wait then comes before greenlet's own
//                              thread-state destructor queues the state (as a slow library
//                              destructor or a descheduled thread would delay it).
//  add_pending_nogil()         from a Python thread: release the GIL, Py_AddPendingCall(record), retake.
//  add_pending_from_c_thread(delay_us)
//                              start a plain C++ thread (no Python thread state, never takes the GIL)
//                              that sleeps delay_us and then calls Py_AddPendingCall(record).
//  pending_result()            (added_ns, ran_ns, ran_on_thread_ident, add_rc) of the last probe; ran_ns 0 = not yet.
//  reset()                     forget the last probe.
//  monotonic_ns()              the clock used above (CLOCK_MONOTONIC).
//  fill_ring_and_wait(wait_us) with the GIL released, add no-op pending calls until
//                              Py_AddPendingCall fails (the ring is full), then sleep wait_us
//                              (still without the GIL) so that other threads can run and fail to
//                              add theirs; returns how many were added. The no-ops run later.
//  set_c_tracer(kind)          install a do-nothing C-level trace ("trace") or profile ("profile")
//                              function on the calling thread, as coverage.py's C tracer does (no
//                              Python code runs inside it); "none" removes both. Returns the number
//                              of events the C function saw since the last call.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include <atomic>
#include <string>
#include <chrono>
#include <thread>
#include <time.h>

namespace {

long long now_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

struct SlowExit
{
    long us = 0;
    ~SlowExit()
    {
        if (us > 0) {
            std::this_thread::sleep_for(std::chrono::microseconds(us));
        }
    }
};
thread_local SlowExit slow_exit;

std::atomic<long long> added_ns{0};
std::atomic<long long> ran_ns{0};
std::atomic<unsigned long> ran_ident{0};
std::atomic<int> add_rc{0};

int record(void*)
{
    ran_ns.store(now_ns());
    ran_ident.store(PyThread_get_thread_ident());
    return 0;
}

PyObject* py_slow_thread_exit(PyObject*, PyObject* arg)
{
    long us = PyLong_AsLong(arg);
    if (us == -1 && PyErr_Occurred()) {
        return nullptr;
    }
    slow_exit.us = us;
    Py_RETURN_NONE;
}

PyObject* py_add_pending_nogil(PyObject*, PyObject*)
{
    int rc;
    long long t;
    Py_BEGIN_ALLOW_THREADS
    t = now_ns();
    rc = Py_AddPendingCall(record, nullptr);
    Py_END_ALLOW_THREADS
    added_ns.store(t);
    add_rc.store(rc);
    return PyLong_FromLong(rc);
}

PyObject* py_add_pending_from_c_thread(PyObject*, PyObject* arg)
{
    long us = PyLong_AsLong(arg);
    if (us == -1 && PyErr_Occurred()) {
        return nullptr;
    }
    std::thread([us]() {
        std::this_thread::sleep_for(std::chrono::microseconds(us));
        added_ns.store(now_ns());
        add_rc.store(Py_AddPendingCall(record, nullptr));
    }).detach();
    Py_RETURN_NONE;
}

PyObject* py_pending_result(PyObject*, PyObject*)
{
    return Py_BuildValue("LLki", added_ns.load(), ran_ns.load(), ran_ident.load(), add_rc.load());
}

PyObject* py_reset(PyObject*, PyObject*)
{
    added_ns.store(0);
    ran_ns.store(0);
    ran_ident.store(0);
    add_rc.store(0);
    Py_RETURN_NONE;
}

PyObject* py_monotonic_ns(PyObject*, PyObject*)
{
    return PyLong_FromLongLong(now_ns());
}

int noop_pending(void*)
{
    return 0;
}

PyObject* py_fill_ring_and_wait(PyObject*, PyObject* arg)
{
    long us = PyLong_AsLong(arg);
    if (us == -1 && PyErr_Occurred()) {
        return nullptr;
    }
    long added = 0;
    Py_BEGIN_ALLOW_THREADS
    while (added < 100000 && Py_AddPendingCall(noop_pending, nullptr) == 0) {
        added++;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(us));
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(added);
}

std::atomic<long long> c_events{0};

int noop_c_tracer(PyObject*, PyFrameObject*, int, PyObject*)
{
    c_events.fetch_add(1, std::memory_order_relaxed);
    return 0;
}

PyObject* py_set_c_tracer(PyObject*, PyObject* arg)
{
    const char* kind = PyUnicode_AsUTF8(arg);
    if (!kind) {
        return nullptr;
    }
    std::string k(kind);
    if (k == "trace") {
        PyEval_SetTrace(noop_c_tracer, nullptr);
    }
    else if (k == "profile") {
        PyEval_SetProfile(noop_c_tracer, nullptr);
    }
    else if (k == "none") {
        PyEval_SetTrace(nullptr, nullptr);
        PyEval_SetProfile(nullptr, nullptr);
    }
    else {
        PyErr_Format(PyExc_ValueError, "set_c_tracer: kind must be 'trace', 'profile' or 'none', not %R", arg);
        return nullptr;
    }
    return PyLong_FromLongLong(c_events.exchange(0));
}

PyMethodDef methods[] = {
    {"slow_thread_exit", py_slow_thread_exit, METH_O, "delay this thread's exit (microseconds, no GIL)"},
    {"add_pending_nogil", py_add_pending_nogil, METH_NOARGS, "Py_AddPendingCall with the GIL released"},
    {"add_pending_from_c_thread", py_add_pending_from_c_thread, METH_O,
     "Py_AddPendingCall from a plain C++ thread after a delay (microseconds)"},
    {"pending_result", py_pending_result, METH_NOARGS, "(added_ns, ran_ns, ran_ident, add_rc)"},
    {"reset", py_reset, METH_NOARGS, "forget the last probe"},
    {"fill_ring_and_wait", py_fill_ring_and_wait, METH_O,
     "fill the pending-call ring without the GIL, then sleep (microseconds); returns the number added"},
    {"set_c_tracer", py_set_c_tracer, METH_O, "install a no-op C trace/profile function ('trace'|'profile'|'none')"},
    {"monotonic_ns", py_monotonic_ns, METH_NOARGS, "CLOCK_MONOTONIC in ns"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "porthelper", "test-only helper for the greenlet port", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

} // namespace

PyMODINIT_FUNC PyInit_porthelper(void)
{
    return PyModule_Create(&module);
}
