"""3.13: every take_gil re-sets CALLS_TO_DO while a call waits behind a running one.

Usage: python3.13 recursive_trips_after_take_gil.py [--no-second], under gdb
with a counting breakpoint on make_pending_calls (a gdb command file holding:
set breakpoint pending on / set $n = 0 / break make_pending_calls / commands
with silent, set $n = $n + 1, continue, end / run / printf of $n).
Pending call `first` has a thread add `second` (queued behind `first`, which
is running), then sleeps 50 times (each sleep: drop_gil, take_gil).
take_gil's update_eval_breaker_for_thread sets the main thread's CALLS_TO_DO
bit whenever the main-thread queue holds calls, so each sleep is followed by
one recursive make_pending_calls (which clears the bit and returns 0).
Observed on 3.13.0: 54 and 55 entries (two runs); 3 with --no-second (no call queued behind).
"""
import _testcapi, sys, threading, time
done = []
def second():
    pass
def first():
    add = (lambda: None) if "--no-second" in sys.argv else (lambda: _testcapi._pending_threadfunc(second))
    t = threading.Thread(target=add)
    t.start()
    t.join()
    for _ in range(50):
        time.sleep(0.001)
    done.append(1)
_testcapi._pending_threadfunc(first)
while not done:
    time.sleep(0.001)
print(sys.version.split()[0], "done")
