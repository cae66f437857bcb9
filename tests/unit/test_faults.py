"""Trial-level faults without Ray: the time limit's thread, out-of-memory and worker-death wording,
and the driver-side guard's decisions on stand-in trials."""

from __future__ import annotations

import contextvars
import re
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from sweeper.run.faults import (
    TIMEOUT_STATUS,
    TimeLimitExceeded,
    call_with_time_limit,
    driver_margin_s,
    grace_s,
    task_error_message,
    worker_error_message,
)

# ------------------------------------------------------------------ call_with_time_limit
VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


def test_a_call_within_the_limit_returns_its_value_or_raises_its_exception() -> None:
    assert call_with_time_limit(lambda: 42, 5.0) == 42
    with pytest.raises(ZeroDivisionError):
        call_with_time_limit(lambda: 1 / 0, 5.0)


def test_the_call_sees_the_callers_context_variables() -> None:
    VAR.set("caller's")
    assert call_with_time_limit(VAR.get, 5.0) == "caller's"


def test_a_trials_limit_counts_from_its_tasks_call_and_passes_the_tasks_arguments() -> None:
    """What precedes the call (the sweeper composing the trial's config) is not the task's time."""
    from sweeper.run.trial import _within_time_limit

    task = _within_time_limit(lambda cfg, scale=1: (time.sleep(0.2), cfg * scale)[1], 0.5)
    time.sleep(0.6)  # longer than the limit, before the call
    assert task(21, scale=2) == 42
    with pytest.raises(TimeLimitExceeded):
        _within_time_limit(lambda: time.sleep(1.5), 0.3)()
    untimed = lambda: "no limit"  # noqa: E731 - the task itself is returned without one
    assert _within_time_limit(untimed, None) is untimed


def test_python_code_is_interrupted_at_the_limit_and_unwinds() -> None:
    cleaned = threading.Event()

    def spin() -> None:
        try:
            while True:
                try:  # noqa: SIM105 - a plain try/except, as a task's own code would write it
                    sum(range(100))
                except Exception:  # noqa: BLE001 - a task's own handler must not swallow the interrupt
                    pass
        finally:
            cleaned.set()

    started = time.monotonic()
    with pytest.raises(TimeLimitExceeded) as info:
        call_with_time_limit(spin, 0.3, grace=2.0)
    assert not info.value.stuck
    assert cleaned.is_set(), "the task's finally blocks ran"
    assert time.monotonic() - started < 1.5
    # Where the interrupt lands is the interpreter's choice: any line of spin's loop (the loop's jump back is
    # the `while True:` line's).
    assert re.fullmatch(r"exceeded hydra\.sweeper\.trial_timeout_s=0\.3 s: interrupted after [\d.]+ s at "
                        r"test_faults\.py:\d+ in spin: "
                        r"(while True:|try:.*|sum\(range\(100\)\)|except Exception:.*|pass)",
                        str(info.value)), str(info.value)
    assert "in spin" in info.value.stack
    assert not [t for t in threading.enumerate() if t.name == "sweeper-trial-task" and t.is_alive()]


def test_native_code_that_does_not_return_is_reported_stuck() -> None:
    def sleep() -> None:  # C: the interrupt waits until the call returns
        time.sleep(3)

    started = time.monotonic()
    with pytest.raises(TimeLimitExceeded) as info:
        call_with_time_limit(sleep, 0.2, grace=0.3)
    assert info.value.stuck
    assert 0.5 <= time.monotonic() - started < 2.0
    message = str(info.value)
    assert re.fullmatch(r"exceeded hydra\.sweeper\.trial_timeout_s=0\.2 s and did not stop within [\d.]+ s more, at "
                        r"test_faults\.py:\d+ in sleep: time\.sleep\(3\) \(native code sees no interrupt until it "
                        r"returns\); its worker process was ended", message), message


def test_the_limits_grow_with_the_timeout_within_bounds() -> None:
    assert grace_s(2) == 1.0 and grace_s(50) == 5.0 and grace_s(10_000) == 10.0
    assert driver_margin_s(2) == 10.0 and driver_margin_s(300) == 30.0 and driver_margin_s(10_000) == 60.0


# ------------------------------------------------------------------ wording
def test_out_of_memory_in_the_task_says_so() -> None:
    with pytest.raises(MemoryError) as info:
        np.empty(2**50, dtype=np.uint8)  # 1 PiB: refused at once, nothing is allocated
    assert task_error_message(info.value).startswith("out of memory in the task: MemoryError: Unable to allocate")
    assert task_error_message(MemoryError()) == "out of memory in the task: MemoryError"

    class OutOfMemoryError(RuntimeError):  # torch.cuda.OutOfMemoryError's name
        pass

    assert task_error_message(OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")).startswith(
        "out of GPU memory in the task: OutOfMemoryError: CUDA out of memory")
    assert task_error_message(ValueError("x=0.9 is above")) == "ValueError: x=0.9 is above"


RAY_OOM = (
    "Failure # 1 (occurred at 2026-11-23_01-06-20)\n"
    "OutOfMemoryError: 1 worker(s) were killed due to the node running low on memory. Memory on the node (IP: "
    "192.0.2.2, ID: 081d44a986d8a12a6cf5c04478b26e0520459be274feaf81ca127645) was 3.53GB used / 23.54GB limit "
    "(0.149869)\nOOM kill reason: Memory usage 3788095488B exceeded threshold of 3735802112B (14.8% of "
    "25276063744B limit)\nObject store memory usage: [- objects spillable: 0\n"
)
WORKER_DIED = (
    "Failure # 1 (occurred at 2026-11-23_01-13-44)\n"
    "The actor died unexpectedly before finishing this task.\n\tclass_name: ImplicitFunc\n\tpid: 18949\n"
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: "
    "Worker unexpectedly exits with a connection error code 2. End of file. Some common causes include: (1) the "
    "process was killed by the OOM killer due to high memory usage, (2) ray stop --force was called, or (3) the "
    "worker crashed unexpectedly due to SIGSEGV or another unexpected error.\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (RAY_OOM, "the trial's worker was killed: out of memory (Ray's memory monitor: node 192.0.2.2 used 3.53GB "
                  "of 23.54GB, more than RAY_memory_usage_threshold=0.148)"),
        (WORKER_DIED, "the trial's worker process died (SYSTEM_ERROR: Worker unexpectedly exits with a connection "
                      "error code 2. End of file); a SIGKILL from the kernel's OOM killer, `ray stop --force`, or a "
                      "crash such as SIGSEGV end a worker this way"),
        # The latest of several failures is the one explained.
        (WORKER_DIED + RAY_OOM.replace("Failure # 1", "Failure # 2"), "the trial's worker was killed: out of memory"),
        ("Failure # 1 (occurred at x)\nThe actor died unexpectedly before finishing this task.\n\tclass_name: F\n"
         "The actor is dead because it was killed by `ray.kill`.\n", "The actor is dead because it was killed by"),
        ("Failure # 1 (occurred at x)\nTraceback (most recent call last):\n  File \"a.py\", line 1\n"
         "RuntimeError: boom\n", "RuntimeError: boom"),
        (None, "the trial's worker failed (Ray gave no reason)"),
        ("", "the trial's worker failed (Ray gave no reason)"),
    ],
)
def test_worker_errors_read_as_one_line(text: str | None, expected: str) -> None:
    message = worker_error_message(text)
    assert message.startswith(expected)
    assert "\n" not in message


# ------------------------------------------------------------------ the driver's guard (stand-in trials)
def fake_trial(trial_id: str = "t1", max_failures: int = 3, status: str = "RUNNING") -> SimpleNamespace:
    trial = SimpleNamespace(trial_id=trial_id, max_failures=max_failures, status=status, results=[],
                            temporary_state=SimpleNamespace(ray_actor=object()),
                            run_metadata=SimpleNamespace(num_failures=1), error_file=None, get_error=lambda: None)
    trial.update_last_result = trial.results.append
    return trial


def test_a_timed_out_trial_is_never_retried() -> None:
    from sweeper.run.fault_guard import FaultGuard
    from sweeper.run.trial import STATUS_KEY

    guard = FaultGuard("score", 2.0)
    trial = fake_trial()
    guard.on_trial_start(0, [trial], trial)
    guard.on_trial_result(0, [trial], trial, {"sweeper_step": 0})  # a per-step result changes nothing
    assert trial.max_failures == 3
    guard.on_trial_result(0, [trial], trial, {STATUS_KEY: TIMEOUT_STATUS})
    assert trial.max_failures == 0
    assert not guard._started  # reported: no backstop for it


def test_a_silent_overdue_trial_is_recorded_timeout_and_its_worker_killed(monkeypatch) -> None:
    import sweeper.run.fault_guard as fault_guard
    from sweeper.run.trial import ERROR_KEY, STATUS_KEY

    killed = []
    monkeypatch.setattr(fault_guard.ray, "kill", lambda actor, no_restart: killed.append(actor))
    clock = [100.0]
    monkeypatch.setattr(fault_guard.time, "monotonic", lambda: clock[0])
    guard = fault_guard.FaultGuard("score", 2.0)
    overdue, finished = fake_trial("t1"), fake_trial("t2")
    for trial in (overdue, finished):
        guard.on_trial_start(0, [overdue, finished], trial)
    guard.on_trial_result(0, [finished], finished, {STATUS_KEY: "FINISHED"})
    clock[0] += guard.deadline_s - 0.1
    guard.on_step_end(0, [overdue, finished])
    assert not killed  # 2 s limit + 1 s grace + 10 s margin not reached yet
    clock[0] += 0.2
    guard.on_step_end(0, [overdue, finished])
    assert killed == [overdue.temporary_state.ray_actor]
    assert overdue.max_failures == 0 and finished.max_failures == 3
    (result,) = overdue.results
    assert result[STATUS_KEY] == TIMEOUT_STATUS and np.isnan(result["score"])
    assert result[ERROR_KEY].startswith("exceeded hydra.sweeper.trial_timeout_s=2 s and its worker did not answer "
                                        "for 13 s")
    guard.on_step_end(0, [overdue, finished])
    assert len(killed) == 1  # once


def test_an_oom_killed_trial_is_retried_at_most_once() -> None:
    from sweeper.run.fault_guard import FaultGuard

    guard = FaultGuard("score", None)
    trial = fake_trial(max_failures=-1)  # -1: Tune would retry forever
    trial.get_error = lambda: RAY_OOM
    guard.on_trial_recover(0, [trial], trial)
    assert trial.max_failures == 1  # this retry (after failure 1) is the last
    other = fake_trial(max_failures=-1)
    other.get_error = lambda: WORKER_DIED
    guard.on_trial_recover(0, [other], other)
    assert other.max_failures == -1  # a dead node is retried as configured


def test_tune_fails_the_trial_not_the_run_when_the_memory_monitor_kills_its_worker() -> None:
    """Ray raises OutOfMemoryError for such a call; Tune 2.60's actor manager knew only actor and task errors."""
    from ray.air.execution._internal.actor_manager import RayActorManager
    from ray.exceptions import OutOfMemoryError, RayActorError

    from sweeper.run.fault_guard import tolerate_oom_kills

    tolerate_oom_kills()
    tolerate_oom_kills()  # idempotent
    seen = []
    actor = SimpleNamespace(actor_id="a1", _on_error=lambda actor, exc: seen.append(("actor", exc)))
    task = SimpleNamespace(_tracked_actor=actor, _on_error=lambda actor, exc: seen.append(("task", exc)))
    manager = SimpleNamespace(_failed_actor_ids=set(), _cleanup_actor=lambda tracked_actor: None)
    RayActorManager._actor_task_failed(manager, task, OutOfMemoryError(RAY_OOM.split("\n", 1)[1]))
    assert [who for who, _ in seen] == ["actor", "task"]
    assert all(isinstance(exc, RayActorError) for _, exc in seen)
    assert manager._failed_actor_ids == {"a1"}
    assert worker_error_message(str(seen[0][1])).startswith("the trial's worker was killed: out of memory")
