"""Ring capacity and make_pending_calls' loop bound.

Usage: python ring_and_bound.py
A running pending call adds calls until the push fails. Observed:
3.11.7 capacity 31, 31 run by the same make, 31 later;
3.12.1 capacity 31, 31, 31; 3.13.0 capacity 32, 31 by the same make, and the
32nd runs at a later check site with nothing added (3.13 re-signals).
"""
import sys, _testcapi, time
ran = []
res = {}
def filler(): ran.append(1)
def outer():
    n = 0
    while _testcapi._pending_threadfunc(filler):   # returns False when the push fails
        n += 1
        if n > 1000: break
    res["capacity"] = n
    res["ran_inside"] = len(ran)
_testcapi._pending_threadfunc(outer)
while "capacity" not in res:
    pass
after_make = len(ran)          # what the same make_pending_calls ran after outer returned
for i in range(100000):        # backward jumps: check sites, no new adds
    pass
after_loop = len(ran)
time.sleep(0.01)
print(sys.version.split()[0], res, "ran_by_same_make_or_soon:", after_make, "after_loop:", after_loop, "after_sleep:", len(ran))
