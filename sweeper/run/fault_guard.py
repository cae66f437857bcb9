"""The driver's side of trial-level faults, as a Tune callback (see :mod:`sweeper.run.faults`).

- A trial that reported TIMEOUT is never retried: its worker ends its own process after the
  report when the task is stuck in native code, and Tune would otherwise take that for a
  dead node and run the trial again (``ray.max_failures``).
- A trial that has not reported by ``trial_timeout_s + grace + margin`` is stuck where its
  worker cannot even run its watchdog (native code holding the GIL): the driver records it
  TIMEOUT and kills the worker.
- A worker killed by Ray's memory monitor fails its trial instead of crashing the sweep
  (Ray 2.60's Tune has no case for ``OutOfMemoryError`` in its actor manager), and is
  retried at most once, however large ``ray.max_failures`` is.
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any

import ray
from ray.tune import Callback

from sweeper.run.faults import (
    TIMEOUT_STATUS,
    driver_margin_s,
    grace_s,
    unanswered_timeout_message,
    worker_error_message,
)
from sweeper.run.trial_result import TrialResult

if TYPE_CHECKING:
    from ray.tune.experiment import Trial

log = logging.getLogger(__name__)

class FaultGuard(Callback):
    """Enforces ``trial_timeout_s`` from the driver and keeps timed-out trials from being retried.

    Args:
        metric: the modelled metric (a TIMEOUT result carries it as NaN).
        trial_timeout_s: the per-trial limit, or None (then only the OOM rule applies).
    """

    def __init__(self, metric: str, trial_timeout_s: float | None) -> None:
        self.metric = metric
        self.limit_s = trial_timeout_s
        self._started: dict[str, float] = {}  # running trial id -> time.monotonic() at start

    @property
    def deadline_s(self) -> float:
        """Seconds after a trial's start past which the driver stops waiting for its worker."""
        assert self.limit_s is not None
        return self.limit_s + grace_s(self.limit_s) + driver_margin_s(self.limit_s)

    def on_trial_start(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        if self.limit_s is not None:
            self._started[trial.trial_id] = time.monotonic()

    def on_trial_result(self, iteration: int, trials: list[Trial], trial: Trial, result: dict[str, Any],
                        **info: Any) -> None:
        status = TrialResult.from_dict(result).status
        if status is None:
            return  # a per-step result: the trial runs on
        self._started.pop(trial.trial_id, None)
        if status == TIMEOUT_STATUS:
            trial.max_failures = 0  # its worker may end itself now: that is no node failure to retry

    def on_trial_complete(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self._started.pop(trial.trial_id, None)

    def on_trial_error(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self._started.pop(trial.trial_id, None)

    def on_trial_recover(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self._started.pop(trial.trial_id, None)
        if "out of memory" in worker_error_message(trial_error_text(trial)):
            # Tune retries it now; an OOM kill is likely to repeat, so this retry is the last one
            # (also with ray.max_failures=-1, which would retry it forever).
            trial.max_failures = trial.run_metadata.num_failures

    def on_step_end(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        if not self._started:
            return
        now = time.monotonic()
        for trial in trials:
            started = self._started.get(trial.trial_id)
            if started is None or now - started <= self.deadline_s:
                continue
            del self._started[trial.trial_id]
            self._kill_overdue(trial, now - started)

    def _kill_overdue(self, trial: Trial, elapsed_s: float) -> None:
        assert self.limit_s is not None
        actor = trial.temporary_state.ray_actor
        if trial.status != "RUNNING" or actor is None:
            return
        error = unanswered_timeout_message(self.limit_s, elapsed_s)
        log.warning("trial %s: %s", trial.trial_id, error)
        trial.max_failures = 0
        # What the recorder closes the run with (sweeper.run.recorder reads the last result on an error).
        trial.update_last_result(TrialResult(self.metric, math.nan, status=TIMEOUT_STATUS, error=error,
                                             traceback=error, metrics={}, duration_s=elapsed_s).to_dict())
        ray.kill(actor, no_restart=True)


def trial_error_text(trial: Trial) -> str | None:
    """Tune's text of the trial's errors, ``Failure # n (occurred at ...)`` blocks, the latest last.

    Read from the driver's staging copy, which Tune writes as it handles the error;
    ``Trial.get_error`` reads the copy in the experiment's storage, which lags one sync behind.
    """
    path = trial.error_file
    if path:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            pass
    return trial.get_error()


def tolerate_oom_kills() -> None:
    """Make Tune fail a trial whose worker Ray's memory monitor killed, instead of the whole run.

    Ray raises ``OutOfMemoryError`` (not a ``RayActorError``) for a call to an actor that the
    memory monitor killed, and Tune 2.60's actor manager stops the experiment on any error
    that is neither; here it is passed on as the actor failure it is, with Ray's message.
    Idempotent.

    What it patches: the private ``RayActorManager._actor_task_failed`` of Ray's actor manager
    (``ray.air.execution._internal``), wrapped once per process. Why no public API suffices: Tune
    decides in there whether an actor's error fails the trial or the experiment, and offers no hook
    or setting for it. How breakage shows:
    tests/integration/test_trial_faults.py::test_a_worker_killed_for_memory_fails_its_trial_and_is_retried_once.
    """
    from ray.air.execution._internal.actor_manager import RayActorManager
    from ray.exceptions import OutOfMemoryError, RayActorError

    original = RayActorManager._actor_task_failed  # noqa: SLF001 - no hook on actor errors; test_trial_faults.py
    if getattr(original, "sweeper_oom", False):
        return

    def _actor_task_failed(self: Any, tracked_actor_task: Any, exception: Exception) -> None:
        if isinstance(exception, OutOfMemoryError) and not isinstance(exception, RayActorError):
            exception = WorkerOutOfMemory(str(exception))
        original(self, tracked_actor_task, exception)

    _actor_task_failed.sweeper_oom = True  # type: ignore[attr-defined]  # marks the wrapper: wrap once
    RayActorManager._actor_task_failed = _actor_task_failed  # noqa: SLF001 - no hook on actor errors; test_trial_faults


class WorkerOutOfMemory(ray.exceptions.RayActorError):
    """A trial's worker killed by Ray's memory monitor (the text is Ray's ``OutOfMemoryError``)."""

    def __init__(self, message: str) -> None:
        super().__init__(error_msg=f"OutOfMemoryError: {message}")
