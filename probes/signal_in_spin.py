"""A Python signal handler entered from the 3.11 spin livelocks too.

Usage: python signal_in_spin.py
Observed on 3.11.7: faulthandler dumps on_signal <- <lambda> <- first <- <module>.
"""
import faulthandler, sys, _testcapi, time, signal, threading, os
faulthandler.dump_traceback_later(2, exit=True)
def on_signal(signum, frame): pass
signal.signal(signal.SIGUSR1, on_signal)
main = threading.get_ident()
def kick():
    time.sleep(0.5)
    signal.pthread_kill(main, signal.SIGUSR1)
def second(): pass
def first():
    _testcapi._pending_threadfunc(second)
    (lambda: None)()
threading.Thread(target=kick, daemon=True).start()
sys.settrace(lambda *a: None)
_testcapi._pending_threadfunc(first)
time.sleep(1)
print("done")
