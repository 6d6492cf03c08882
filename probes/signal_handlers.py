"""SIGINT with the default (C) handler, SIG_IGN, and a Python handler: where does it surface?

Usage: python signal_handlers.py
For each handler (default, ignore, python) and each hook (none, settrace, setprofile),
the main thread runs `busy()` (a bytecode loop that calls `tick()` and stops after
0.6 s or when a Python handler has run), and a thread sends SIGINT to it with
signal.pthread_kill after 0.1 s. One line per case:
  <version> <handler> <hook> outcome=<KeyboardInterrupt|completed> raised_in=<innermost
  traceback frame> handler_entries=<'call' events (settrace/setprofile) of Python handler
  functions> c_calls=<c_call events naming a signal handler builtin> handler_caller=<frame
  the Python handler was called from>
Observed: see probes/RESULTS.md ("signal_handlers").
"""
import faulthandler
import signal
import sys
import threading
import time

faulthandler.dump_traceback_later(20, exit=True)
MAIN = threading.get_ident()


def tick():
    return None


def run(handler, hook):
    stop = {"flag": False, "caller": "-"}
    calls, c_calls = [], []

    def on_sigint(signum, frame):
        stop["flag"] = True
        stop["caller"] = frame.f_code.co_name if frame else "None"

    def busy():
        deadline = time.monotonic() + 0.6
        while not stop["flag"] and time.monotonic() < deadline:
            tick()

    def tracer(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "on_sigint":
            calls.append("on_sigint")
        return None

    def profiler(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "on_sigint":
            calls.append("on_sigint")
        if event == "c_call" and getattr(arg, "__name__", "") in ("default_int_handler",):
            c_calls.append(arg.__name__)

    signal.signal(signal.SIGINT, {"default": signal.default_int_handler, "ignore": signal.SIG_IGN,
                                  "python": on_sigint}[handler])

    def kick():
        time.sleep(0.1)
        signal.pthread_kill(MAIN, signal.SIGINT)

    k = threading.Thread(target=kick)
    k.start()
    outcome, raised_in = "completed", "-"
    try:
        if hook == "settrace":
            sys.settrace(tracer)
        elif hook == "setprofile":
            sys.setprofile(profiler)
        busy()
    except KeyboardInterrupt as e:
        outcome = "KeyboardInterrupt"
        tb = e.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        raised_in = tb.tb_frame.f_code.co_name
    finally:
        sys.settrace(None)
        sys.setprofile(None)
    k.join()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print(sys.version.split()[0], handler, hook, f"outcome={outcome}", f"raised_in={raised_in}",
          f"handler_entries={','.join(calls) or '-'}", f"c_calls={','.join(c_calls) or '-'}",
          f"handler_caller={stop['caller']}", flush=True)


for handler in ("default", "ignore", "python"):
    for hook in ("none", "settrace", "setprofile"):
        run(handler, hook)
