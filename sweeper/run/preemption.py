"""Preemption: SIGTERM to the sweep's driver stops it at the trials' next checkpoints, to be resumed.

Batch systems warn a job before they end it: Slurm sends a signal ``--signal=B:TERM@180``
seconds before the time limit (or at ``scancel``), Kubernetes sends SIGTERM and waits
``terminationGracePeriodSeconds``. On SIGTERM the driver

1. starts no new trial;
2. waits up to ``hydra.sweeper.preempt_grace_s`` for each trial that was running to save
   its next checkpoint (:func:`sweeper.save_checkpoint`) or to end, whichever comes first;
3. stops Ray Tune the way Ctrl-C does (a SIGUSR1 to itself): Tune saves its experiment state
   and stops the trials' workers;
4. closes the runs of the trials in flight as KILLED with ``sweeper.status=PREEMPTED``, and
   the sweep's run likewise, then exits with :data:`~sweeper.run.stops.PREEMPTED_EXIT_STATUS` (75, ``EX_TEMPFAIL``:
   "try again later"), which ``cluster/slurm/sweep.sbatch`` answers by requeueing the job;
   ``sweeper resume`` then continues each trial from its checkpoint, in its run.

A second SIGTERM skips the rest of the wait. Only a driver running Tune in its own main
thread catches the signal (not through Ray Client, where Tune runs on the head node).

Ctrl-C (SIGINT) stops the sweep at once instead (:class:`Interruption`): no new trial starts,
Tune's loop ends as above, the trials in flight are closed KILLED with
``sweeper.status=INTERRUPTED`` (``sweeper resume`` continues them from their checkpoints or
runs them again), the sweep's run likewise, and the driver exits with
:data:`~sweeper.run.stops.INTERRUPTED_EXIT_STATUS` (130). A second Ctrl-C raises ``KeyboardInterrupt`` at once.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from ray.tune import Callback

from sweeper.run.trial_result import TrialResult

if TYPE_CHECKING:
    from ray.tune.experiment import Trial

log = logging.getLogger(__name__)



class Preemption(Callback):
    """Turns SIGTERM into a stop at the running trials' next checkpoints (see the module docstring).

    Args:
        grace_s: the longest wait for the checkpoints, in seconds.
        searcher: the sweep's :class:`~sweeper.run.searcher.MultiverseSearch` (held: no new trial).
    """

    def __init__(self, grace_s: float, searcher: Any) -> None:
        self.grace_s = grace_s
        self.searcher = searcher
        self.requested_at: float | None = None  # time.monotonic() of the first SIGTERM
        self._waiting: set[str] = set()  # trials running at the signal that have not checkpointed or ended since
        self._trials: list[Trial] = []
        self._stopping = False

    @property
    def requested(self) -> bool:
        return self.requested_at is not None

    def catching(self) -> AbstractContextManager[None]:
        """Catch SIGTERM while the block runs (in the main thread only; elsewhere nothing changes)."""
        return catching(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.requested_at is not None:
            log.warning("SIGTERM again: stopping the sweep now")
            self._stop()
            return
        self.requested_at = time.monotonic()
        self.searcher.held = True
        self._waiting = {t.trial_id for t in self._trials if t.status == "RUNNING"}
        log.warning("SIGTERM: no new trial starts; waiting up to %g s (hydra.sweeper.preempt_grace_s) for the next "
                    "checkpoint of the %d running trial(s), then the sweep stops to be resumed", self.grace_s,
                    len(self._waiting))

    def on_step_begin(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        self._trials = trials  # the signal handler reads the running trials from here

    def on_trial_result(self, iteration: int, trials: list[Trial], trial: Trial, result: dict[str, Any],
                        **info: Any) -> None:
        if TrialResult.from_dict(result).checkpoint_step is not None:
            self._waiting.discard(trial.trial_id)

    def on_trial_complete(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self._waiting.discard(trial.trial_id)

    def on_trial_error(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self._waiting.discard(trial.trial_id)

    def on_step_end(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        if self.requested_at is None or self._stopping:
            return
        waited = time.monotonic() - self.requested_at
        self._waiting &= {t.trial_id for t in trials if t.status == "RUNNING"}
        if not self._waiting or waited >= self.grace_s:
            if self._waiting:
                log.warning("%d trial(s) saved no checkpoint within %g s: they continue from their last one",
                            len(self._waiting), self.grace_s)
            self._stop()

    def _stop(self) -> None:
        """Stop Tune's loop as Ctrl-C does: its handler of SIGUSR1 (installed by ``tune.run``) ends the run."""
        self._stopping = True
        os.kill(os.getpid(), signal.SIGUSR1)


class Interruption:
    """Turns Ctrl-C (SIGINT) into a recorded stop (see the module docstring).

    Tune's own SIGINT handler is turned off (``TUNE_DISABLE_SIGINT_HANDLER``): it would end the
    run as if the sweep had finished, and print a ``Tuner.restore`` hint our users do not resume with.

    Args:
        searcher: the sweep's :class:`~sweeper.run.searcher.MultiverseSearch` (held: no new trial).
    """

    def __init__(self, searcher: Any) -> None:
        self.searcher = searcher
        self.requested = False

    def catching(self) -> AbstractContextManager[None]:
        """Catch SIGINT while the block runs (in the main thread only; elsewhere nothing changes)."""
        os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
        return catching(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        self.searcher.held = True
        log.warning("Ctrl-C: no new trial starts; the sweep stops, and `sweeper resume` continues it "
                    "(Ctrl-C again stops at once)")
        os.kill(os.getpid(), signal.SIGUSR1)  # Tune's handler of SIGUSR1 ends its loop, saving its state


@contextmanager
def catching(signum: int, handler: Any) -> Iterator[None]:
    """``handler`` answers ``signum`` while the block runs, in the main thread (signals reach no other)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signum, handler)
    try:
        yield
    finally:
        signal.signal(signum, previous)
