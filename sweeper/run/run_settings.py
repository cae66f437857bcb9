"""The settings of running a sweep's trials (``hydra.sweeper.*``) that the search itself does not read.

The sweeper's settings (``MultiverseSweeperConf``) go to three owners: the search
(:class:`~sweeper.search.settings.PolicySettings`), the run (:class:`RunSettings`) and the trials'
checkpoints (:class:`~sweeper.run.tune_checkpoints.CheckpointSettings`); ``params`` is the search space.
tests/unit/test_settings_agree.py checks that each setting has exactly one owner, with the same default.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

#: What every message about a sweeper setting names the key with.
PREFIX = "hydra.sweeper."


@dataclass(frozen=True)
class RunSettings:
    """How the driver runs and judges the trials (see ``MultiverseSweeperConf`` for each setting's meaning)."""

    metric: str = "objective"
    max_failure_rate: float = 0.5
    #: A trial running longer ends TIMEOUT and counts as failed (None: no limit); see sweeper.run.faults.
    trial_timeout_s: float | None = None
    resume: bool = False
    live_maps: bool = True

    def max_failures(self, num_trials: int) -> int:
        """How many of ``num_trials`` may fail before no new trial starts (the rate clamped to [0, 1])."""
        return math.floor(min(max(self.max_failure_rate, 0.0), 1.0) * num_trials)

    def problems(self, prefix: str = PREFIX, keys: tuple[str, ...] = ("max_failure_rate", "trial_timeout_s",
                                                                       "metric")) -> list[str]:
        """Every invalid setting among ``keys``, in their order, each naming the key, the value and a fix."""
        return [problem for key in keys if (problem := _CHECKS[key](self, prefix)) is not None]


def _max_failure_rate_problem(s: RunSettings, prefix: str) -> str | None:
    if 0.0 <= s.max_failure_rate <= 1.0:
        return None
    return (f"{prefix}max_failure_rate={s.max_failure_rate!r} is invalid: it is a fraction "
            f"between 0 and 1. Try {prefix}max_failure_rate=0.5.")


def _trial_timeout_problem(s: RunSettings, prefix: str) -> str | None:
    limit = s.trial_timeout_s
    if limit is None or (isinstance(limit, int | float) and 0 < limit < math.inf):
        return None
    return (f"{prefix}trial_timeout_s={limit!r} is invalid: a trial's time limit is a positive number of seconds "
            f"(null: no limit). Try {prefix}trial_timeout_s=3600.")


def _metric_problem(s: RunSettings, prefix: str) -> str | None:
    if s.metric and str(s.metric).strip():
        return None
    return (f"{prefix}metric={s.metric!r} is invalid: name the key of the task's returned "
            f"dict to model (a plain number returned is named by it). Try {prefix}metric=objective.")


_CHECKS: dict[str, Callable[[RunSettings, str], str | None]] = {
    "max_failure_rate": _max_failure_rate_problem,
    "trial_timeout_s": _trial_timeout_problem,
    "metric": _metric_problem,
}
