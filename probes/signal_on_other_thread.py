"""A signal whose C handler runs on another OS thread, the main thread spinning.

Usage: python signal_on_other_thread.py
A native thread (no thread state) waits in pause() with SIGUSR1 unblocked; the
main thread then blocks SIGUSR1 and sends it to the process with kill() called
through PyDLL (GIL kept, no PyErr_CheckSignals), so the C handler runs on the
native thread. The main thread then spins for 1 s holding the GIL, with no
other thread wanting it, and finally sleeps (drop_gil, take_gil).
Observed: 3.11.7 and 3.12.1 "NOT handled during a 1 s spin ... after a sleep:
handled" (on Linux _PyEval_SignalReceived computes the breaker as the
receiving thread, force=0); 3.13.0 "handled during the spin after 0
iterations" (it sets the main thread's bit).
"""
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
seen = []
signal.signal(signal.SIGUSR1, lambda s, f: seen.append(1))
tid = ctypes.c_ulong()
libc.pthread_create(ctypes.byref(tid), None, libc.pause, None)
time.sleep(0.05)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
ctypes.PyDLL(None).kill(os.getpid(), signal.SIGUSR1)
deadline = time.monotonic() + 1.0
n = 0
while not seen and time.monotonic() < deadline:
    n += 1
if seen:
    spin = "handled during the spin after %d iterations" % n
else:
    spin = "NOT handled during a 1 s spin (%d iterations)" % n
time.sleep(0.01)
print(sys.version.split()[0], spin, "| after a sleep:", "handled" if seen else "not handled")
