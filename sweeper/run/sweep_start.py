"""What a sweep's driver does while Ray starts: everything the first trial needs besides Ray.

``ray.init`` spends seconds waiting for Ray's processes (its GCS, raylet and agents) to come
up. The driver's other start-up work runs in one thread beside it: the warning when the
task's code cannot be identified (it reads the installed packages and git), the sweep's
MLflow run (its store and the run's records), and the imports of Ray Tune, the run's own
modules and ``scipy.stats`` (the first Sobol point needs it), so that Tune starts its first
trial as soon as Ray is up. None of it is work the sweep did not do before; it only leaves
the path to the first trial (NOTE: docs/decisions/0056-start-up-beside-ray.md).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

log = logging.getLogger(__name__)

#: Ray Tune behaviour the sweeper relies on; set before Tune is imported.
TUNE_ENV = {
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",  # MLflow is the record: no Tune result logs
    "TUNE_DISABLE_STRICT_METRIC_CHECKING": "1",  # per-step results carry no objective
    "RAY_CHDIR_TO_TRIAL_DIR": "0",  # tasks see the launch directory, as in a plain Hydra run
    "RAY_AIR_NEW_OUTPUT": "0",
    # Tune saves its experiment state whenever a trial has checkpointed keep_checkpoints times since the last
    # save, and warns when that is more than every 5 s: with one checkpoint per epoch, it is meant to.
    "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "0",
}

Opened = TypeVar("Opened")


def set_tune_env() -> None:
    """Put :data:`TUNE_ENV` in the environment, where the user has not set a value."""
    for key, value in TUNE_ENV.items():
        os.environ.setdefault(key, value)


def beside_ray(warning: Callable[[], str | None], opening: Callable[[], Opened]) -> Future[Opened]:
    """Run ``warning`` (logged when not None), then ``opening``, then the Tune run's imports, in a thread.

    The returned future holds what ``opening`` returned, or its exception; a failed import is
    left to the Tune run, which imports the same modules again and reports it there.
    """
    set_tune_env()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sweep-start")
    future = pool.submit(_prepare, warning, opening)
    pool.shutdown(wait=False)
    return future


def _prepare(warning: Callable[[], str | None], opening: Callable[[], Opened]) -> Opened:
    text = warning()
    if text is not None:
        log.warning(text)
    opened = opening()
    try:
        import_tune_run()
    except Exception as exc:  # noqa: BLE001 - the Tune run imports them again and says what failed
        log.debug("importing the Tune run's modules ahead of Ray failed: %s", exc)
    return opened


def import_tune_run() -> None:
    """Import Ray Tune and the modules of the sweep's Tune run (about a second of CPU on a quiet core), and
    ``scipy.stats``: the first Sobol point imports it (``qmc``, 0.5 CPU-s after the rest), in Tune's loop on the
    way to the first trial, and the end of every sweep needs it anyway (its prospective check)."""
    import ray.tune  # noqa: F401 - imported for the Tune run, which follows
    import scipy.stats  # noqa: F401 - for the first Sobol point and the sweep's end

    import sweeper.run.checkpoint_callback
    import sweeper.run.fault_guard
    import sweeper.run.recorder
    import sweeper.run.searcher
    import sweeper.run.trial
    import sweeper.run.tune_run  # noqa: F401 - the last of the Tune run's modules
