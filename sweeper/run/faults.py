"""Trial-level faults: the per-trial time limit, out-of-memory, and readable worker errors.

Free of Ray (the worker imports it through :mod:`sweeper.run.trial`); the driver's side of the
time limit is :mod:`sweeper.run.fault_guard`.

A trial whose task runs past ``hydra.sweeper.trial_timeout_s`` (counted from the task's call,
after the worker composed its config: ``sweeper.run.trial._within_time_limit``) is stopped in
three layers, each a backstop for the one before:

1. **Python code** (a loop, a slow pure-Python step): the task runs in a thread of its
   own; at the limit :func:`call_with_time_limit` raises :class:`TrialTimeout` in that
   thread (``PyThreadState_SetAsyncExc``, delivered between two bytecodes). The task
   unwinds through its ``finally`` blocks, the trial ends TIMEOUT and the worker process
   runs the next trial as usual.
2. **Native code that released the GIL** (``time.sleep``, a long NumPy/BLAS call, a
   blocking socket): the exception cannot be delivered until the call returns. After a
   grace period (:func:`grace_s`) the worker reports the trial TIMEOUT, with the stack of
   the stuck thread, and ends its own process: nothing of the stuck call reaches the next
   trial (Tune starts a fresh worker for it).
3. **Native code holding the GIL** (a C extension that never lets go): no thread of the
   worker runs Python any more. The driver, which knows when each trial started, kills
   the worker :func:`driver_margin_s` after the worker should have reported (see
   :class:`sweeper.run.fault_guard.FaultGuard`); it counts from the trial's start, so the
   margin also covers the composing before the task's call.

In every layer the trial is recorded as TIMEOUT (an MLflow run FAILED, tagged
``sweeper.status=TIMEOUT``), counts as a failed point for the searcher and the failure
budget, and is never retried as if its node had died.
"""

from __future__ import annotations

import contextvars
import ctypes
import linecache
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

#: The status of a trial stopped at its time limit (MLflow records the run FAILED; the tag says TIMEOUT).
TIMEOUT_STATUS = "TIMEOUT"
#: How the setting is typed on the command line; every message names it.
TIMEOUT_KEY = "hydra.sweeper.trial_timeout_s"


class TrialTimeout(BaseException):
    """Raised inside a task's thread at its time limit.

    A ``BaseException`` (like ``KeyboardInterrupt``), so that the task's own
    ``except Exception`` and Hydra's ``run_job`` do not swallow it.
    """


class TimeLimitExceeded(Exception):
    """A call ran past its time limit.

    Attributes:
        limit_s: the limit.
        elapsed_s: how long it had run when it was given up.
        stuck: True if the call did not stop within the grace period (native code): the
            process must end, the thread cannot be reclaimed.
        location: where the call was at the limit, ``file:line in function: source``.
        stack: the thread's stack at the limit (for the trial's traceback artifact).
    """

    def __init__(self, limit_s: float, elapsed_s: float, stuck: bool, location: str, stack: str) -> None:
        self.limit_s, self.elapsed_s, self.stuck, self.location, self.stack = limit_s, elapsed_s, stuck, location, stack
        super().__init__(timeout_message(limit_s, elapsed_s, stuck, location))


def grace_s(limit_s: float) -> float:
    """How long a task interrupted at ``limit_s`` may take to unwind before it counts as stuck."""
    return min(10.0, max(1.0, 0.1 * limit_s))


def driver_margin_s(limit_s: float) -> float:
    """How long past ``limit_s + grace_s`` the driver waits for a worker's report before killing it.

    At least 10 s: the driver counts from the trial's start, and a fresh worker's first trial, an instant
    one, once took over 10 s from there to its report on an overloaded machine (three test processes on
    two cores); with a 5 s floor that trial was killed as stuck.
    """
    return min(60.0, max(10.0, 0.1 * limit_s))


def timeout_message(limit_s: float, elapsed_s: float, stuck: bool, location: str) -> str:
    """The recorded reason of a TIMEOUT trial stopped by its worker."""
    if not stuck:
        return f"exceeded {TIMEOUT_KEY}={limit_s:g} s: interrupted after {elapsed_s:.1f} s at {location}"
    return (f"exceeded {TIMEOUT_KEY}={limit_s:g} s and did not stop within {elapsed_s - limit_s:.1f} s more, at "
            f"{location} (native code sees no interrupt until it returns); its worker process was ended")


def unanswered_timeout_message(limit_s: float, elapsed_s: float) -> str:
    """The recorded reason of a TIMEOUT trial whose worker the driver had to kill."""
    return (f"exceeded {TIMEOUT_KEY}={limit_s:g} s and its worker did not answer for {elapsed_s:.0f} s (stuck in "
            f"native code that holds Python's GIL); the driver killed the worker process")


def call_with_time_limit(fn: Callable[[], T], limit_s: float, grace: float | None = None) -> T:
    """Run ``fn()`` in a thread of its own; return its value or raise its exception.

    At ``limit_s`` seconds :class:`TrialTimeout` is raised inside that thread. If the thread
    ends within ``grace`` seconds more, :class:`TimeLimitExceeded` is raised with
    ``stuck=False``; if it is still running (native code), with ``stuck=True``, and the
    thread is left behind (a daemon): the caller must end the process before it runs
    anything else that shares state with ``fn``.

    The thread runs in a copy of the caller's ``contextvars`` context.
    """
    grace = grace_s(limit_s) if grace is None else grace
    outcome: dict[str, Any] = {}
    lock = threading.Lock()
    state = {"done": False, "interrupted": False}

    def body() -> None:
        try:
            try:
                outcome["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller as it is
                outcome["error"] = exc
            with lock:
                state["done"] = True
        except TrialTimeout:  # delivered just as fn ended: the caller reports the time limit
            pass

    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(body,), name="sweeper-trial-task", daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(limit_s)
    if thread.is_alive():
        frame = sys._current_frames().get(thread.ident or -1)  # noqa: SLF001 - the documented way to see it
        location, stack = describe_frame(frame), "".join(traceback.format_stack(frame)) if frame else ""
        with lock:
            if not state["done"]:
                state["interrupted"] = True
                _raise_in_thread(thread, TrialTimeout)
        if state["interrupted"]:
            thread.join(grace)
            stuck = thread.is_alive()
            stack = f"The task's thread at the time limit (most recent call last):\n{stack}"
            raise TimeLimitExceeded(limit_s, time.monotonic() - started, stuck, location, stack)
        thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _raise_in_thread(thread: threading.Thread, exc_type: type[BaseException]) -> None:
    """Schedule ``exc_type`` to be raised in ``thread`` at its next bytecode."""
    set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc  # returns how many threads it reached
    ident = ctypes.c_ulong(thread.ident or 0)
    if set_async_exc(ident, ctypes.py_object(exc_type)) > 1:  # cannot happen for one ident; undo if it does
        set_async_exc(ident, None)  # NULL clears it


def describe_frame(frame: FrameType | None) -> str:
    """``toy.py:42 in main: time.sleep(1e6)``: the innermost frame outside this module."""
    here = Path(__file__).resolve()
    while frame is not None and Path(frame.f_code.co_filename).resolve() == here:
        frame = frame.f_back
    if frame is None:
        return "an unknown place"
    source = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    where = f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno} in {frame.f_code.co_name}"
    return f"{where}: {source}" if source else where


# ------------------------------------------------------------------ out of memory and worker deaths
def task_error_message(exc: BaseException) -> str:
    """One line saying what went wrong in a task; out-of-memory says so first."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, MemoryError):
        return f"out of memory in the task: {text}"
    if type(exc).__name__ == "OutOfMemoryError" or "CUDA out of memory" in str(exc):
        return f"out of GPU memory in the task: {text}"
    return text


_FAILURE_HEADER = re.compile(r"^Failure # \d+ \(occurred at [^)]*\)\s*$", re.MULTILINE)
_NODE_MEMORY = re.compile(r"Memory on the node \(IP: ([^,]+), ID: [^)]*\)[^.]*? "
                          r"was (.+?) used / (.+?) limit \(([\d.]+)\)")
_OOM_THRESHOLD = re.compile(r"exceeded threshold of \d+B \(([\d.]+)% of")
_EXIT_DETAIL = re.compile(r"Worker exit detail: (.+?)(?: There are some potential root causes| Some common causes|$)",
                          re.DOTALL)
_EXIT_TYPE = re.compile(r"Worker exit type: (\w+)")


def worker_error_message(text: str | None) -> str:
    """A readable reason for a trial whose worker failed, from Tune's error text.

    Tune keeps one text per trial (``Failure # n (occurred at ...)`` blocks appended per
    attempt); the last block is the one explained. A kill by Ray's memory monitor reads
    ``the trial's worker was killed: out of memory (...)``.
    """
    if not text or not text.strip():
        return "the trial's worker failed (Ray gave no reason)"
    last = _FAILURE_HEADER.split(text)[-1].strip() or text.strip()
    if ("running low on memory" in last or "OutOfMemoryError" in last or "NODE_OUT_OF_MEMORY" in last
            or "OUT_OF_MEMORY" in last):
        node, threshold = _NODE_MEMORY.search(last), _OOM_THRESHOLD.search(last)
        what = "Ray's memory monitor"
        if node:
            what += f": node {node.group(1)} used {node.group(2)} of {node.group(3)}"
            if threshold:
                what += f", more than RAY_memory_usage_threshold={float(threshold.group(1)) / 100:.3g}"
        return f"the trial's worker was killed: out of memory ({what})"
    detail = _EXIT_DETAIL.search(last)
    exit_type = _EXIT_TYPE.search(last)
    if detail or exit_type:
        what = " ".join((detail.group(1) if detail else "").split()).rstrip(".")
        kind = exit_type.group(1) if exit_type else "unknown exit"
        hint = ""
        if "SIGKILL" in last or "connection error" in last or "OOM killer" in last:
            hint = ("; a SIGKILL from the kernel's OOM killer, `ray stop --force`, or a crash such as SIGSEGV "
                    "end a worker this way")
        return f"the trial's worker process died ({kind}{': ' + what if what else ''}){hint}"
    # Else the exception's own line: the last unindented one (a traceback ends with it).
    lines = [ln.strip() for ln in last.splitlines() if ln.strip() and not ln.startswith((" ", "\t", "Traceback"))]
    line = lines[-1] if lines else last.splitlines()[0]
    return line if len(line) <= 500 else line[:497] + "..."
