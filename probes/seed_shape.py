"""The seed report's shape without greenlet.

Usage: python seed_shape.py trace|cprofile|pyprofile|none
Thread A adds call #1 (not the main thread, as greenlet's TLS destructor does);
#1 releases B and polls (sleeping 1 ms) until B has added call #2, then enters
a function. Observed (3 runs each): 3.11.7 hangs in is_set under trace and
cprofile, GREEN under pyprofile and none; 3.12.1 and 3.13.0 GREEN in every mode.
"""
import faulthandler, sys, threading, time, _testcapi
faulthandler.dump_traceback_later(3, exit=True)
release_b = threading.Event()
added_b = threading.Event()
state = {}
def second(): state["second"] = True
def first():
    release_b.set()
    while not added_b.is_set():
        time.sleep(0.001)
    (lambda: None)()
    state["first"] = True
def _a(): _testcapi._pending_threadfunc(first)
def _b():
    release_b.wait()
    _testcapi._pending_threadfunc(second)
    added_b.set()
mode = sys.argv[1]
if mode == "trace": sys.settrace(lambda *a: None)
elif mode == "pyprofile": sys.setprofile(lambda *a: None)
elif mode == "cprofile":
    import cProfile; p = cProfile.Profile(); p.enable()
b = threading.Thread(target=_b); b.start()
a = threading.Thread(target=_a); a.start(); a.join()
for _ in range(2000):
    time.sleep(0.001)
    if len(state) == 2: break
b.join()
print(sys.version.split()[0], mode, "GREEN", sorted(state))
