"""Probe: does sys.settrace / sys.setprofile see Python code run by greenlet's thread-state cleanup?

One thread leaves a weakref callback on its main greenlet and exits; the main thread (tracing or
profiling, recording 'call' events) waits until the cleanup ran the callback, which calls
marker_in_cleanup(). Prints whether the tracer saw the callback and the marker, and how many
Python-level 'call' events it saw in total. On the robust build the cleanup runs untraced.
"""
import argparse
import sys
import threading
import time
import weakref

import greenlet
from greenlet._greenlet import get_pending_cleanup_count


def marker_in_cleanup():
    return 42


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("trace", "profile", "monitoring"), default="trace",
                    help="monitoring = a sys.monitoring tool on PY_START (3.12+), as coverage's sysmon core")
    args = ap.parse_args()
    seen = []
    done = []

    def callback(_ref):
        done.append(marker_in_cleanup())

    def tracer(frame, event, arg):
        if event == "call":
            seen.append(frame.f_code.co_name)
        return None

    keep = []

    def worker():
        keep.append(weakref.ref(greenlet.getcurrent(), callback))

    if args.mode == "trace":
        sys.settrace(tracer)
    elif args.mode == "profile":
        sys.setprofile(tracer)
    else:
        mon = sys.monitoring
        tool = mon.COVERAGE_ID
        mon.use_tool_id(tool, "untraced_cleanup probe")
        mon.register_callback(tool, mon.events.PY_START, lambda code, offset: seen.append(code.co_name))
        mon.set_events(tool, mon.events.PY_START)
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    for _ in range(5000):
        if done and not get_pending_cleanup_count():
            break
        time.sleep(0.001)
    sys.settrace(None)
    sys.setprofile(None)
    if args.mode == "monitoring":
        sys.monitoring.set_events(sys.monitoring.COVERAGE_ID, 0)
        sys.monitoring.free_tool_id(sys.monitoring.COVERAGE_ID)
    print(f"python={sys.version.split()[0]} mode={args.mode} callback_ran={bool(done)} "
          f"tracer_saw_callback={'callback' in seen} tracer_saw_marker={'marker_in_cleanup' in seen} "
          f"call_events={len(seen)}", flush=True)


if __name__ == "__main__":
    main()
