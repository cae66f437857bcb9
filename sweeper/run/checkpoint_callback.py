"""The driver's side of trial checkpoints (see :mod:`sweeper.run.tune_checkpoints`), as a Tune callback.

When a trial (re)starts, :class:`CheckpointKeeper` finds its newest *complete* checkpoint on
storage, in its own folder or, for a trial of a resumed sweep, in the folder its previous
attempt used, and makes it the one Tune restores the trial from. Tune's own record of it,
in the experiment state it saves every few seconds, may lag behind after a driver died
between two saves, and may name a folder its manager has since deleted. When a trial has
ended (finished or failed), its checkpoints are deleted unless
``hydra.sweeper.keep_finished_checkpoints``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ray.tune import Callback

from sweeper.checkpoint import CheckpointInfo
from sweeper.run.tune_checkpoints import delete_checkpoints, newest_checkpoint
from sweeper.search.settings import TRIAL_KEY

if TYPE_CHECKING:
    from ray.tune.experiment import Trial

log = logging.getLogger(__name__)


class CheckpointKeeper(Callback):
    """Points each (re)starting trial at its newest complete checkpoint; deletes an ended trial's.

    Args:
        keep_finished: keep the checkpoints of trials that ended (else they are deleted).
        previous_folders: trial index -> the folder its previous attempt wrote checkpoints
            to (a sweep resumed after its driver died; from MLflow's ``sweeper.trial_dir``).
    """

    def __init__(self, keep_finished: bool = False, previous_folders: dict[int, str] | None = None) -> None:
        self.keep_finished = keep_finished
        self.previous_folders = dict(previous_folders or {})
        self._restored_from: dict[str, CheckpointInfo | None] = {}  # trial id -> where its attempt started

    def folders(self, trial: Trial) -> list[str]:
        """Where the trial's checkpoints are: its own folder and its previous attempt's."""
        index = int(trial.config[TRIAL_KEY]["index"])
        return [trial.storage.trial_fs_path, *([self.previous_folders[index]] if index in self.previous_folders
                                                else [])]

    def newest(self, trial: Trial) -> CheckpointInfo | None:
        """The trial's newest complete checkpoint on storage now."""
        return newest_checkpoint(trial.storage.storage_filesystem, self.folders(trial))

    def restored_from(self, trial: Trial) -> CheckpointInfo | None:
        """The checkpoint the trial's current attempt continues from (None: from the start)."""
        return self._restored_from.get(trial.trial_id)

    def on_trial_start(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        newest = self.newest(trial)
        self._restored_from[trial.trial_id] = newest
        _point_tune_at(trial, newest)
        if newest is not None:
            log.debug("trial %s restores %s (step %d)", trial.trial_id, newest.path, newest.step)

    def on_trial_complete(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self._ended(trial)

    def on_trial_error(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self._ended(trial)

    def _ended(self, trial: Trial) -> None:
        self._restored_from.pop(trial.trial_id, None)
        if self.keep_finished:
            return
        try:
            deleted = delete_checkpoints(trial.storage.storage_filesystem, self.folders(trial))
        except OSError as exc:  # never fatal to the sweep: the space stays used, and says so
            log.warning("could not delete the checkpoints of trial %s: %s", trial.trial_id, exc)
            return
        if deleted:
            log.debug("deleted %d checkpoint folder(s) of trial %s", deleted, trial.trial_id)


def _point_tune_at(trial: Trial, checkpoint: CheckpointInfo | None) -> None:
    """Make ``checkpoint`` the one Tune restores the trial from (None: start it from the beginning).

    What it patches: Ray 2.60 keeps it in ``trial.run_metadata.checkpoint_manager``, in the private
    ``_latest_checkpoint_result`` and ``_checkpoint_results`` (the list its ``num_to_keep`` deletes
    from). Why no public API suffices: Tune restores a trial from its own record only, and has no
    setter for it. The trial's ``on_trial_start`` callbacks run before Tune schedules the restore.
    How breakage shows: tests/integration/test_checkpoints.py (a killed worker retried from its
    checkpoint in the same run; SIGTERM, then ``sweeper resume``) and tests/integration/test_resume.py.
    """
    from ray.train._internal.session import _TrainingResult
    from ray.tune import Checkpoint

    manager = trial.run_metadata.checkpoint_manager
    latest = manager._latest_checkpoint_result  # noqa: SLF001 - no public getter; test_checkpoints.py
    if checkpoint is None:
        newest, kept = None, []
    elif latest is None or latest.checkpoint.path != checkpoint.path:
        result = _TrainingResult(checkpoint=Checkpoint(checkpoint.path, trial.storage.storage_filesystem), metrics={})
        newest, kept = result, [result]
    else:
        return
    manager._latest_checkpoint_result = newest  # noqa: SLF001 - no public setter; test_checkpoints.py
    manager._checkpoint_results = kept  # noqa: SLF001 - no public setter; test_checkpoints.py
    trial.run_metadata.invalidate_cache()
