"""Run a trial's task the way Hydra's ``run_job`` does, from the config's two parts.

``hydra.core.utils.run_job`` takes one whole config per job and copies it four times (twice
in ``HydraConfig.set_config``, a deep copy for the task, another of the hydra node for the
``JobReturn``), then writes ``.hydra/*.yaml`` with PyYAML's pure-Python emitter. For a task
that takes milliseconds this is most of a trial's cost in its worker. :func:`run_split_job`
does the same steps, in the same order, with the same observable results (``HydraConfig``
during the task, working directory, job logging, ``.hydra/config.yaml``, ``hydra.yaml`` and
``overrides.yaml`` byte for byte, ``hydra.job.env_set``, the ``JobReturn``), from the task
config and the process's one hydra config that :meth:`sweeper.run.compose.TrialComposer.split`
gives. The YAML files' text is kept between trials where it does not change
(:mod:`sweeper.run.job_yaml`), and the job's logging is built directly where only its log file is
new (:mod:`sweeper.run.job_logging`; NOTE: docs/decisions/0064-per-trial-job-work.md).

Hydra callbacks (``hydra.callbacks``) receive the whole config, so a sweep that has any
runs every trial through Hydra's own ``run_job`` (see :func:`usable`).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

from hydra import version
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobRuntime, JobStatus, _flush_loggers, env_override
from hydra.types import HydraContext, TaskFunction

from sweeper.run.compose import TrialParts
from sweeper.run.job_logging import configure_job_log


def usable(hydra_context: HydraContext) -> bool:
    """Whether :func:`run_split_job` may run this sweep's jobs: no Hydra callbacks to call."""
    return not getattr(hydra_context.callbacks, "callbacks", [])


def run_split_job(task_function: TaskFunction, trial: TrialParts) -> JobReturn:
    """Run ``task_function(trial.task)`` as ``run_job`` would with the whole config.

    Args:
        task_function: the ``@hydra.main`` function, unwrapped.
        trial: the task's config (the task keeps it), ``{"hydra": ...}`` read-only with
            this trial's ``job.*``, overrides and ``runtime.output_dir``, its plain mirror,
            and the job's directory (see ``TrialComposer.split``).
    """
    task_cfg, hydra_cfg, output_dir = trial.task, trial.hydra, trial.output_dir
    hydra = hydra_cfg.hydra
    old_cwd = os.getcwd()
    instance = HydraConfig.instance()
    orig_hydra_cfg = instance.cfg
    instance.cfg = hydra_cfg  # type: ignore[assignment]  # what set_config's masked copy would hold: a DictConfig
    chdir = False
    try:
        ret = JobReturn()
        ret.cfg = task_cfg
        ret.hydra_cfg = hydra_cfg
        ret.overrides = list(hydra.overrides.task)
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        chdir = _chdir(hydra.job.chdir)
        if chdir:
            os.chdir(output_dir)
            ret.working_dir = output_dir
        else:
            ret.working_dir = os.getcwd()
        configure_job_log(hydra.job_logging, hydra.verbose)
        if hydra.output_subdir is not None:
            _save_configs(Path(output_dir) / str(hydra.output_subdir), trial)
        with env_override(hydra.job.env_set):
            try:
                ret.return_value = task_function(task_cfg)
                ret.status = JobStatus.COMPLETED
            except Exception as e:  # noqa: BLE001 - run_job's contract: the exception is the return value
                ret.return_value = e
                ret.status = JobStatus.FAILED
        ret.task_name = JobRuntime.instance().get("name")
        _flush_loggers()
        return ret
    finally:
        instance.cfg = orig_hydra_cfg
        if chdir:
            os.chdir(old_cwd)


def _save_configs(directory: Path, trial: TrialParts) -> None:
    """``.hydra/config.yaml``, ``hydra.yaml`` and ``overrides.yaml``, as ``run_job`` writes them."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in trial.texts.of(trial).items():
        with open(directory / name, "w", encoding="utf-8") as file:
            file.write(text)


def _chdir(job_chdir: bool | None) -> bool:
    """Whether the job runs in its output directory: ``hydra.job.chdir``, unset decided as run_job does."""
    if job_chdir is not None:
        return bool(job_chdir)
    if version.base_at_least("1.2"):
        return False
    warnings.warn("Future Hydra versions will no longer change working directory at job runtime by default.",
                  stacklevel=3)
    return True


@contextlib.contextmanager
def in_launch_dir(launch_dir: str | None) -> Iterator[None]:
    """Compose and run the job in the directory the sweep was launched from, where this node has it.

    Hydra resolves a relative ``hydra.sweep.dir`` and ``hydra.runtime.cwd`` (what
    ``get_original_cwd``/``to_absolute_path`` return) against the working directory at
    composition, and the basic launcher runs every job in the launch directory. A worker of a
    local Ray starts there too; a worker of a cluster's node starts where that node's ``ray start``
    ran, or in Ray's copy of the uploaded ``working_dir``. On a node that has the launch directory
    (the same machine, a shared filesystem) the trial therefore runs there, as under the basic
    launcher; elsewhere it stays where Ray started it.
    """
    here = os.getcwd()
    if not launch_dir or launch_dir == here or not os.path.isdir(launch_dir):
        yield
        return
    os.chdir(launch_dir)
    try:
        yield
    finally:
        os.chdir(here)
