"""What a trial reports to the driver: :class:`TrialResult`, and the keys of the dict Ray Tune carries it in.

A trial's worker builds a :class:`TrialResult` and hands Ray Tune its :meth:`~TrialResult.to_dict`; the
driver's searcher (:mod:`sweeper.run.searcher`), trial recorder (:mod:`sweeper.run.recorder`) and fault
guard (:mod:`sweeper.run.fault_guard`) read Tune's dict back with :meth:`~TrialResult.from_dict`. The
dict's keys are the ``*_KEY`` names below (plus the metric's own name), as Ray Tune's experiment state
holds them. One type serves every result a trial sends: its last (with a ``status``), a step of
:func:`sweeper.log_metrics` (``step``) and a checkpoint's note (``checkpoint_step``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Keys of the result dict a trial returns to the driver.
STATUS_KEY = "sweeper_status"  # FINISHED | FAILED | TIMEOUT
ERROR_KEY = "sweeper_error"  # one line: what went wrong
TRACEBACK_KEY = "sweeper_traceback"
METRICS_KEY = "sweeper_metrics"  # every number the task returned
CONDITIONS_KEY = "sweeper_conditions"
CONFIG_KEY = "sweeper_config"  # the composed task config, flattened (dotted keys)
DURATION_KEY = "sweeper_duration_s"
STEP_KEY = "sweeper_step"  # present only in per-step results from log_metrics
STEP_METRICS_KEY = "sweeper_step_metrics"
PACKAGES_KEY = "sweeper_packages"  # the process's pip freeze, in its first result only
RETURNED_KEY = "sweeper_returned"  # the keys a task returned without the metric
REPLAYED_KEY = "sweeper_replayed"  # the MLflow run of a trial that ended before a resume
WORKER_ENDS_KEY = "sweeper_worker_ends"  # True: the task is stuck; the worker process ends after this result
#: ``module.QualName`` of the exception that failed the trial (raised by the task, or composing its config);
#: absent when the task ran but its return value is unusable (TrialError), for a timeout and a dead worker.
EXCEPTION_KEY = "sweeper_exception"
JOB_DIR_KEY = "sweeper_job_dir"  # the Hydra job's output directory (on the node that ran it)
JOB_LOG_KEY = "sweeper_job_log"  # the Hydra job's log file, which a failed trial's traceback is written to
#: Key of the result a trial reports with each checkpoint: the checkpoint's step.
CHECKPOINT_STEP_KEY = "sweeper_checkpoint_step"


@dataclass
class TrialResult:
    """One result of a trial; a field that is None is absent from its dict.

    Attributes:
        metric: the modelled metric's name, the dict's key of :attr:`value` (None: not read).
        value: the metric's value (NaN for a trial that did not finish).
        status: FINISHED, FAILED or TIMEOUT in a trial's last result; None in a per-step result, or a
            result that did not come through the sweeper's trainable.
    """

    metric: str | None = None
    value: float | None = None
    status: str | None = None
    metrics: dict[str, float] | None = None
    config: dict[str, Any] | None = None
    error: str | None = None
    returned: list[str] | None = None
    exception: str | None = None
    traceback: str | None = None
    worker_ends: bool | None = None
    job_dir: str | None = None
    job_log: str | None = None
    duration_s: float | None = None
    conditions: dict[str, Any] | None = None
    packages: list[str] | None = None
    replayed: str | None = None
    step: int | None = None
    step_metrics: dict[str, float] | None = None
    checkpoint_step: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The dict Ray Tune carries: the metric's value under its name, every other present field under its key."""
        out: dict[str, Any] = {} if self.metric is None or self.value is None else {self.metric: self.value}
        for name, key in _KEYS.items():
            value = getattr(self, name)
            if value is not None:
                out[key] = value
        return out

    @classmethod
    def from_dict(cls, result: Mapping[str, Any], metric: str | None = None) -> TrialResult:
        """A result as Ray Tune hands it to the driver; ``metric``: the key of the value (None: not read)."""
        value = None if metric is None else result.get(metric)
        return cls(metric, value, **{name: result.get(key) for name, key in _KEYS.items()})


#: Each field of TrialResult but the metric and its value, and its key in the dict.
_KEYS = {"status": STATUS_KEY, "metrics": METRICS_KEY, "config": CONFIG_KEY, "error": ERROR_KEY,
         "returned": RETURNED_KEY, "exception": EXCEPTION_KEY, "traceback": TRACEBACK_KEY,
         "worker_ends": WORKER_ENDS_KEY, "job_dir": JOB_DIR_KEY, "job_log": JOB_LOG_KEY, "duration_s": DURATION_KEY,
         "conditions": CONDITIONS_KEY, "packages": PACKAGES_KEY, "replayed": REPLAYED_KEY, "step": STEP_KEY,
         "step_metrics": STEP_METRICS_KEY, "checkpoint_step": CHECKPOINT_STEP_KEY}
