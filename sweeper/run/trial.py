"""One trial, in the Ray worker that runs it: compose, run the Hydra job, report.

The driver ships a :class:`TrialContext` once (inside the trainable); each trial then
composes its Hydra config from the suggestion's overrides in the sweep's launch directory where
the node has it, puts the config's ``env`` block in force (:mod:`sweeper.environment`: seeds,
threads, determinism, device), runs the task through Hydra's own ``run_job`` (so the task sees
the usual job output directory, ``HydraConfig`` and logging) with :func:`sweeper.log_metrics`
and its checkpoints (:mod:`sweeper.checkpoint`) routed through Ray Tune
(:mod:`sweeper.run.tune_checkpoints`), captures the conditions of measurement of *this* process, and
returns one result dict. Exceptions and unusable metrics never escape: they become a FAILED
result with the reason (a ``MemoryError`` says "out of memory"), so the driver records them and
the sweep goes on. What the job prints goes to its Hydra job's log file too, and a failed trial's
traceback is written there (:mod:`sweeper.run.job_output`, :func:`_job_files`). With
``trial_timeout_s`` the task runs in a thread of its own and a task over the limit (counted from its
call, not from the composing before it) ends TIMEOUT (:mod:`sweeper.run.faults`); one stuck in
native code ends its worker process after reporting.
Infrastructure faults (a dead worker) still surface as Tune errors, which Tune may retry.
"""

from __future__ import annotations

import logging
import math
import numbers
import os
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, run_job, setup_globals
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

from sweeper.checkpoint import storing_in
from sweeper.environment import ENV_KEY, EnvironmentInForce, apply_environment, last_environment
from sweeper.record.conditions import capture_conditions, installed_packages
from sweeper.record.metrics import reporting_to
from sweeper.run.cluster import node_placement
from sweeper.run.code_identity import code_conditions
from sweeper.run.compose import TrialComposer
from sweeper.run.faults import TIMEOUT_STATUS, TimeLimitExceeded, call_with_time_limit, task_error_message
from sweeper.run.job import in_launch_dir, run_split_job
from sweeper.run.job import usable as split_job_usable
from sweeper.run.job_output import JobOutput, job_log_handlers
from sweeper.run.trial_result import (
    CONDITIONS_KEY,
    CONFIG_KEY,
    DURATION_KEY,
    ERROR_KEY,
    EXCEPTION_KEY,
    JOB_DIR_KEY,
    JOB_LOG_KEY,
    METRICS_KEY,
    PACKAGES_KEY,
    REPLAYED_KEY,
    RETURNED_KEY,
    STATUS_KEY,
    STEP_KEY,
    STEP_METRICS_KEY,
    TRACEBACK_KEY,
    WORKER_ENDS_KEY,
    TrialResult,
)
from sweeper.run.tune_checkpoints import TuneCheckpoints
from sweeper.search.settings import TRIAL_KEY
from sweeper.search.space import SearchSpace
from sweeper.search.warping import MetricBounds

__all__ = ["CONDITIONS_KEY", "CONFIG_KEY", "DURATION_KEY", "ERROR_KEY", "EXCEPTION_KEY", "JOB_DIR_KEY", "JOB_LOG_KEY",
           "METRICS_KEY", "PACKAGES_KEY", "REPLAYED_KEY", "RETURNED_KEY", "STATUS_KEY", "STEP_KEY", "STEP_METRICS_KEY",
           "TRACEBACK_KEY", "WORKER_ENDS_KEY", "MissingMetricError", "TrialContext", "TrialError", "TrialResult",
           "make_trainable", "metrics_from_return", "run_trial", "trial_result"]

#: Config keys holding the task's random seed, recorded as a condition of measurement.
SEED_KEYS = ("env.seed", "seed")
#: Top-level config blocks that describe the sweep, not the object measured.
RUN_SETTING_KEYS = ("ray", "mlflow")


_PACKAGES_SENT = False  # whether this process sent its package list to the driver
#: Exit status of a worker process that ended itself because its task was stuck past the time limit.
STUCK_EXIT_STATUS = 70

log = logging.getLogger(__name__)


class TrialError(Exception):
    """The task ran but its output cannot be used; the message says why and what to do."""


class MissingMetricError(TrialError):
    """The task returned a dict without the metric; ``returned`` holds the keys it did return."""

    def __init__(self, message: str, returned: list[str]) -> None:
        super().__init__(message)
        self.returned = returned


@dataclass
class TrialContext:
    """Everything a worker needs to run any trial of the sweep."""

    #: First, so that it unpickles first: a sweeper.run.task_ref.TaskRef imports the user's script,
    #: which the rest (a config node that is one of its dataclasses) may need.
    task_function: TaskFunction
    hydra_context: HydraContext
    composer: TrialComposer
    singleton_state: dict[Any, Any]
    space: SearchSpace
    metric: str
    code_dir: str | None = None
    #: The driver's code version when the code was uploaded to the nodes (see conditions.shipped_code).
    shipped_code: dict[str, str] | None = None
    #: A resumed sweep's trials that had ended (index -> sweeper.run.resume.Ledger.result_of): not run again.
    replayed: dict[int, dict[str, Any]] | None = None
    #: hydra.sweeper.trial_timeout_s: a trial running longer ends TIMEOUT (None: no limit).
    trial_timeout_s: float | None = None
    #: hydra.sweeper.metric_bounds: a value outside them makes the trial FAILED (None: no bounds).
    metric_bounds: MetricBounds | None = None
    #: The directory the sweep was launched from (the driver's cwd, Hydra's ``hydra.runtime.cwd``).
    launch_dir: str | None = None


def make_trainable(ctx: TrialContext) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A Tune function trainable running trials of ``ctx``; call it where Ray is initialised.

    The context (the sweep's composed config, Hydra's state, the task) goes to Ray's object
    store once and the trainable holds only its reference: Tune unpickles the registered
    trainable in the driver for every trial it creates (``Trial.get_trainable_cls``), which
    must not unpickle the context each time (NOTE: docs/decisions/0030-trial-context-by-reference.md).
    Each worker process fetches the context once (:func:`_context`). Ray pins an object
    whose reference is pickled this way (into Tune's registry) for the driver's lifetime,
    i.e. the sweep's; ``RAY_allow_out_of_band_object_ref_serialization=0`` would refuse it.
    """
    import ray

    ctx_ref = ray.put(ctx)

    def multiverse_trial(config: dict[str, Any]) -> dict[str, Any]:
        result = trial_result(_context(ctx_ref), config)
        if result.worker_ends:
            _report_and_exit(result)
        return result.to_dict()

    multiverse_trial.context_ref = ctx_ref  # type: ignore[attr-defined]  # read by tests and benchmarks
    return multiverse_trial


#: This process's trial contexts, by object reference: fetched from Ray's object store once.
_CONTEXTS: dict[str, TrialContext] = {}


def _context(ref: Any) -> TrialContext:
    key = ref.hex()
    if key not in _CONTEXTS:
        import ray

        _CONTEXTS[key] = ray.get(ref)
    return _CONTEXTS[key]


def _report_and_exit(result: TrialResult) -> None:
    """Hand a stuck trial's result to Tune, then end this worker process.

    The stuck thread cannot be stopped, and must not run on beside the next trial. Tune's
    synchronous reporting returns from ``report`` once the driver asks for the next result,
    i.e. once it holds this one; the driver's :class:`~sweeper.run.fault_guard.FaultGuard` has
    then marked the trial as not to be retried, and records the worker's end as TIMEOUT.
    """
    from ray import tune

    try:
        tune.report(result.to_dict())
    finally:
        log.error("trial %s: %s; ending worker process %d", result.status, result.error, os.getpid())
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(STUCK_EXIT_STATUS)


def run_trial(ctx: TrialContext, config: Mapping[str, Any]) -> dict[str, Any]:
    """Run one trial and return its result dict, as Ray Tune carries it (never raises for task faults)."""
    return trial_result(ctx, config).to_dict()


def trial_result(ctx: TrialContext, config: Mapping[str, Any]) -> TrialResult:
    """Run one trial and return its result (never raises for task faults)."""
    index = int(config[TRIAL_KEY]["index"])
    if ctx.replayed and index in ctx.replayed:
        return _replayed_result(ctx.replayed[index], ctx.metric)
    params = {k: v for k, v in config.items() if k != TRIAL_KEY}
    started = time.perf_counter()
    result = TrialResult(ctx.metric, math.nan, status="FAILED", metrics={}, config={})
    with JobOutput() as output:  # what the job prints goes to its log file too (sweeper.run.job_output)
        job, in_force = _run_and_judge(ctx, params, index, result, output)
        if job is not None:
            files = _job_files(job, index, result)
            result.job_dir, result.job_log = files.get(JOB_DIR_KEY), files.get(JOB_LOG_KEY)
    result.duration_s = time.perf_counter() - started
    if ctx.shipped_code is None:
        conditions = capture_conditions(ctx.code_dir)
    else:  # uploaded code: this node has no checkout; its version is the driver's
        conditions = {**capture_conditions(os.getcwd()), **ctx.shipped_code}
    conditions.update(code_conditions(ctx.task_function, ctx.hydra_context))  # the script and config, hashed
    conditions.update(node_placement())
    if in_force is not None:  # as read again if the task imported torch since (sweeper.environment)
        conditions.update((last_environment() or in_force).as_conditions())
    task_config = result.config or {}
    seed = next((task_config[k] for k in SEED_KEYS if k in task_config), None)
    if seed is not None:
        conditions["seed"] = str(seed)
    result.conditions = conditions
    global _PACKAGES_SENT
    if not _PACKAGES_SENT:
        result.packages = list(installed_packages())
        _PACKAGES_SENT = True
    return result


def _run_and_judge(ctx: TrialContext, params: dict[str, Any], index: int, result: TrialResult,
                   output: JobOutput) -> tuple[JobReturn | None, EnvironmentInForce | None]:
    """Run the trial's job and put its status, metrics or error in ``result``; never raises for task faults."""
    job: JobReturn | None = None
    in_force: EnvironmentInForce | None = None
    try:
        task = _within_time_limit(output.task(ctx.task_function), ctx.trial_timeout_s)
        with reporting_to(_report_step), storing_in(TuneCheckpoints()), in_launch_dir(ctx.launch_dir):
            job, in_force = _run_job(ctx, ctx.space.dim_overrides(params), index, task)
        result.config = _flat_task_config(job)
        # Hydra's job runner keeps the task's exception (a TimeLimitExceeded too) as its return value: raised here.
        metrics = metrics_from_return(job.return_value, ctx.metric, ctx.metric_bounds)
        result.value, result.status, result.metrics = metrics[ctx.metric], "FINISHED", metrics
    except TimeLimitExceeded as exc:
        result.status, result.error, result.traceback = TIMEOUT_STATUS, str(exc), exc.stack
        if exc.stuck:
            result.worker_ends = True
    except Exception as exc:  # noqa: BLE001 - any task fault becomes a FAILED trial
        result.error = str(exc) if isinstance(exc, TrialError) else task_error_message(exc)
        if isinstance(exc, MissingMetricError):
            result.returned = exc.returned
        elif not isinstance(exc, TrialError):
            result.exception = f"{type(exc).__module__}.{type(exc).__qualname__}"
        result.traceback = "".join(traceback.format_exception(exc))
    return job, in_force


def _within_time_limit(task: Callable[..., Any], limit_s: float | None) -> Callable[..., Any]:
    """``task`` under the trial's time limit, counted from the task's call.

    The limit is the task's: composing the trial's config and making its job folder (the
    sweeper's work, seconds in a fresh worker on a loaded machine) are not counted against it,
    and a timed-out trial still has its folder, its log and its configuration recorded.
    """
    if limit_s is None:
        return task

    def within_limit(*args: Any, **kwargs: Any) -> Any:
        return call_with_time_limit(lambda: task(*args, **kwargs), limit_s)

    return within_limit


def _job_files(job: JobReturn, index: int, result: TrialResult | Mapping[str, Any]) -> dict[str, str]:
    """Where the trial's Hydra job left its files (``JOB_DIR_KEY``, ``JOB_LOG_KEY``); a failed or timed-out
    trial's error and traceback go to its log.

    Hydra's job logging (``hydra/job_logging``, by default ``<output_dir>/<job name>.log``) still
    holds the root logger when the job returns; the task's exception, which Hydra does not log,
    is written to that file alone (not to the worker's console), so the folder a user opens
    holds the reason. A job logging to no file in its folder gives its folder only.
    """
    trial = result if isinstance(result, TrialResult) else TrialResult.from_dict(result)
    try:
        output_dir = str(job.hydra_cfg.hydra.runtime.output_dir)  # type: ignore[union-attr]  # None: raises, below
    except Exception:  # noqa: BLE001 - a job without Hydra's runtime settings: nothing to point to
        return {}
    files = {JOB_DIR_KEY: output_dir}
    handlers = job_log_handlers(output_dir)
    if not handlers:
        return files
    files[JOB_LOG_KEY] = handlers[0].baseFilename
    if trial.status in ("FAILED", TIMEOUT_STATUS) and trial.error:
        ended = "failed" if trial.status == "FAILED" else "timed out"
        record = log.makeRecord(log.name, logging.ERROR, __file__, 0, "trial #%d %s: %s\n%s",
                                (index, ended, trial.error, trial.traceback or ""), None)
        for handler in handlers:
            handler.handle(record)
            handler.flush()
    return files


def _replayed_result(ended: Mapping[str, Any], metric: str) -> TrialResult:
    """The result of a trial that ended before the sweep's driver died, as MLflow recorded it."""
    return TrialResult(metric, ended["value"], status=ended["status"], metrics=dict(ended["metrics"]),
                       duration_s=ended["duration_s"], replayed=ended["run_id"], error=ended.get("error") or None)


def metrics_from_return(value: Any, metric: str, bounds: MetricBounds | None = None) -> dict[str, float]:
    """Turn a task's return value (a number or a dict of numbers) into metrics.

    Raises:
        TrialError: no usable value for ``metric`` (missing, not a number, NaN or inf), or a
            value outside the metric's declared ``bounds`` (never clipped).
    """
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        metrics = {metric: float(value)}
    elif isinstance(value, Mapping):
        metrics = {str(k): float(v) for k, v in value.items()
                   if isinstance(v, numbers.Real) and not isinstance(v, bool)}
        if metric not in value:
            returned = sorted(map(str, value))
            raise MissingMetricError(
                f"the task returned {returned} but not the metric {metric!r}: "
                f"return it, or set hydra.sweeper.metric to one of the returned keys.", returned)
        if metric not in metrics:
            raise TrialError(f"the task returned {metric}={value[metric]!r}, which is not a number")
    else:
        raise TrialError(
            f"the task returned {type(value).__name__} {value!r:.80}; return a number or a dict "
            f"of numbers that includes {metric!r}."
        )
    if not math.isfinite(metrics[metric]):
        raise TrialError(f"the task returned {metric}={metrics[metric]} (not finite)")
    outside = None if bounds is None else bounds.violation(metrics[metric], metric)
    if outside and bounds is not None:  # a violation comes with bounds
        raise TrialError(f"the task returned {outside}: a value the metric cannot take is an error, not "
                         f"clipped. Fix the task, or declare the bounds it really has "
                         f"(hydra.sweeper.metric_bounds={bounds.text()}).")
    return metrics


def _run_job(ctx: TrialContext, dim_overrides: list[str], index: int,
             task_function: TaskFunction) -> tuple[JobReturn, EnvironmentInForce | None]:
    """Compose the trial's config, put its ``env`` block in force, run ``task_function`` (the task) through Hydra."""
    setup_globals()
    Singleton.set_state(ctx.singleton_state)
    if ctx.composer.split_ok and split_job_usable(ctx.hydra_context):
        trial = ctx.composer.split(dim_overrides, index)
        in_force = _environment(trial.task)
        return run_split_job(task_function, trial), in_force
    sweep_config = ctx.composer.compose(dim_overrides)
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{index}"
        sweep_config.hydra.job.num = index
    in_force = _environment(sweep_config)
    return run_job(  # sets HydraConfig itself
        hydra_context=ctx.hydra_context,
        task_function=task_function,
        config=sweep_config,
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    ), in_force


def _environment(cfg: DictConfig) -> EnvironmentInForce | None:
    """Put the config's ``env`` block in force (seeds, threads, determinism), if it has one."""
    env = cfg.get(ENV_KEY)
    if not isinstance(env, DictConfig):
        return None
    values = OmegaConf.to_container(env, resolve=True)
    assert isinstance(values, dict)
    return apply_environment(cast(dict[str, Any], values))  # a config node's keys are strings


def _flat_task_config(job: JobReturn) -> dict[str, Any]:
    """The task's config as dotted leaves, without Hydra's and the run settings' blocks."""
    if job.cfg is None:
        return {}
    try:
        tree = OmegaConf.to_container(job.cfg, resolve=True)
    except Exception:  # noqa: BLE001 - an unresolvable interpolation: log what we can
        tree = OmegaConf.to_container(job.cfg, resolve=False)
    flat: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict) and node:
            for k, v in node.items():
                walk(v, f"{prefix}{k!s}.")
        else:
            flat[prefix[:-1]] = node

    assert isinstance(tree, dict)
    for key, node in tree.items():
        if key not in RUN_SETTING_KEYS:
            walk(node, f"{key!s}.")
    return flat


def _report_step(metrics: dict[str, float], step: int) -> None:
    from ray import tune

    tune.report(TrialResult(step=step, step_metrics=metrics).to_dict())
