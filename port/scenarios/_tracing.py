"""Install a do-nothing trace or profile function on the calling thread, the way a scenario asks.

--tracer c (the default when port/work/helper-<version>/porthelper is built) installs a C-level
function through PyEval_SetTrace/PyEval_SetProfile, like coverage.py's C tracer: no Python code
runs inside it. --tracer py installs a Python function with sys.settrace/sys.setprofile; then a
pending call is often handled inside the tracer function itself, where tracing is already
suspended, which hides the bug some of the time.
"""
import sys

try:
    import _helper_path  # noqa: F401
    import porthelper
except ImportError:  # helper not built: only the Python tracer is available
    porthelper = None

DEFAULT_TRACER = "c" if porthelper is not None else "py"


def _noop(frame, event, arg):
    return None


def install(mode, tracer):
    """Start tracing ('trace'), profiling ('profile') or nothing ('none') on this thread."""
    if mode == "none":
        return
    if tracer == "c":
        if porthelper is None:
            raise SystemExit("--tracer c needs port/work/helper-<python version>/porthelper: run port/build.sh")
        porthelper.set_c_tracer(mode)
    elif mode == "trace":
        sys.settrace(_noop)
    else:
        sys.setprofile(_noop)


def remove():
    """Stop tracing and profiling on this thread."""
    sys.settrace(None)
    sys.setprofile(None)
    if porthelper is not None:
        porthelper.set_c_tracer("none")


def add_arguments(ap):
    ap.add_argument("--mode", choices=("trace", "profile", "none"), default="trace")
    ap.add_argument("--tracer", choices=("c", "py"), default=DEFAULT_TRACER)
    ap.add_argument("--timeout", type=float, default=20.0)
