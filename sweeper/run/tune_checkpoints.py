"""Trial checkpoints through Ray Tune: the worker's store, the driver's keeper, the storage scan.

In a trial's worker, :class:`TuneCheckpoints` backs :func:`sweeper.save_checkpoint` and
:func:`sweeper.load_checkpoint`: a state is written to a local temporary folder (the format
of :mod:`sweeper.checkpoint`) and reported with ``tune.report(..., checkpoint=...)``, which
copies it from the worker straight into the trial's folder under ``ray.storage_path``
(``checkpoint_000007/``; a local path, NFS or ``s3://``), never through the driver. Ray Tune's
checkpoint manager keeps the newest ``hydra.sweeper.keep_checkpoints`` of each trial and
deletes the older ones; a trial that Tune restores gets its checkpoint back from
``tune.get_checkpoint()``.

In the driver, :class:`~sweeper.run.checkpoint_callback.CheckpointKeeper` decides, when a trial
(re)starts, which checkpoint it continues from: the newest *complete* one on storage
(:func:`newest_checkpoint`), in its own folder or, for a trial of a resumed sweep, in the folder
its previous attempt used. Tune keeps its own record of a trial's newest checkpoint in its
experiment state, which it saves every few seconds: a driver killed between two saves left a
record one or more checkpoints behind, possibly of a folder the manager had deleted already, and
restoring it would redo epochs or fail. The keeper points Tune at what is really there (``Trial``
internals of Ray 2.60). When a trial has ended (finished, failed), its checkpoints are deleted,
unless ``hydra.sweeper.keep_finished_checkpoints``. This module is what both need: the worker's
store and the scan of storage.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sweeper.checkpoint import (
    FOLDER_PREFIX,
    META_FILE,
    CheckpointInfo,
    complete_meta,
    read_checkpoint,
    write_checkpoint,
)
from sweeper.run.trial_result import TrialResult

if TYPE_CHECKING:
    import pyarrow.fs

log = logging.getLogger(__name__)

_TUNE_FOLDER = re.compile(r"^checkpoint_(\d+)$")


# ---------------------------------------------------------------------------------- in the worker
class TuneCheckpoints:
    """A trial's checkpoint store (see :func:`sweeper.checkpoint.storing_in`): Ray Tune's checkpoints."""

    def __init__(self) -> None:
        self._seq: int | None = None  # the next checkpoint's sequence number, once known

    def save(self, state: Any, step: int) -> None:
        from ray import tune

        if self._seq is None:  # the first save of this attempt: after the checkpoint it was restored from
            _after_existing_folders()
            restored = tune.get_checkpoint()
            self._seq = 0 if restored is None else _meta_seq(restored) + 1
        with tempfile.TemporaryDirectory(prefix="sweeper-checkpoint-") as folder:
            write_checkpoint(folder, state, step, self._seq)
            tune.report(TrialResult(checkpoint_step=step).to_dict(), checkpoint=tune.Checkpoint.from_directory(folder))
        self._seq += 1

    def load(self) -> Any | None:
        from ray import tune

        checkpoint = tune.get_checkpoint()
        if checkpoint is None:
            return None
        with checkpoint.as_directory() as folder:  # a local path as it is; s3:// downloaded
            state, info = read_checkpoint(folder)
        log.info("continuing from the checkpoint of step %d, %s", info.step, checkpoint.path)
        self._seq = info.seq + 1 if self._seq is None else self._seq
        return state


def _meta_seq(checkpoint: Any) -> int:
    """The sequence number in a Tune checkpoint's ``checkpoint.json``, read alone (not the whole state)."""
    with checkpoint.filesystem.open_input_stream(f"{checkpoint.path}/{META_FILE}") as stream:
        return int(json.loads(stream.read().decode("utf-8")).get("seq", 0))


def _after_existing_folders() -> None:
    """Number this attempt's checkpoints after every folder already in the trial's folder.

    Tune numbers a trial's checkpoint folders from the index its experiment state holds; in a
    sweep resumed after its driver died, that state may lag behind the folders written since,
    and a new checkpoint would be copied over an existing one.

    What it patches: ``current_checkpoint_index`` of the worker's training session storage
    (``ray.train._internal.session``). Why no public API suffices: Tune numbers checkpoints itself
    and takes no index. How breakage shows: the resume steps of tests/integration/test_checkpoints.py.
    """
    from ray.train._internal.session import get_session

    storage = get_session().storage
    indices = [int(m.group(1)) for m in map(_TUNE_FOLDER.match, _names(storage.storage_filesystem,
                                                                       storage.trial_fs_path)) if m]
    if indices and max(indices) > storage.current_checkpoint_index:
        storage.current_checkpoint_index = max(indices)


# ---------------------------------------------------------------------------------- storage
def storage_filesystem(path: str) -> tuple[pyarrow.fs.FileSystem, str]:
    """The pyarrow file system of a storage path or URI (local, NFS, ``s3://``...) and the path on it."""
    from ray.train._internal.storage import get_fs_and_path

    return get_fs_and_path(path, None)


def _names(fs: pyarrow.fs.FileSystem, folder: str) -> list[str]:
    import pyarrow.fs

    infos = fs.get_file_info(pyarrow.fs.FileSelector(folder, allow_not_found=True))
    return [os.path.basename(i.path) for i in infos]


def checkpoints_in(fs: pyarrow.fs.FileSystem, folders: Iterable[str | None]) -> list[CheckpointInfo]:
    """The complete checkpoints in ``folders`` (trial folders on ``fs``), oldest first."""
    import pyarrow.fs

    found = []
    for folder in filter(None, folders):
        for name in _names(fs, folder):
            if not name.startswith(FOLDER_PREFIX):
                continue
            path = f"{folder}/{name}"
            infos = fs.get_file_info(pyarrow.fs.FileSelector(path, allow_not_found=True))
            sizes = {os.path.basename(i.path): i.size for i in infos}

            def read_text(n: str, p: str = path) -> str:
                with fs.open_input_stream(f"{p}/{n}") as stream:
                    return stream.read().decode("utf-8")

            meta = complete_meta(list(sizes), read_text, sizes.get)
            if meta is not None:
                found.append(CheckpointInfo.of(path, meta))
    return sorted(found, key=lambda c: c.order)


def newest_checkpoint(fs: pyarrow.fs.FileSystem, folders: Iterable[str | None]) -> CheckpointInfo | None:
    """The newest complete checkpoint in ``folders`` (the highest sequence number), or None."""
    found = checkpoints_in(fs, folders)
    return found[-1] if found else None


def delete_checkpoints(fs: pyarrow.fs.FileSystem, folders: Iterable[str | None]) -> int:
    """Delete every ``checkpoint_*`` folder, complete or not, in ``folders``; return how many."""
    deleted = 0
    for folder in filter(None, folders):
        for name in _names(fs, folder):
            if name.startswith(FOLDER_PREFIX):
                fs.delete_dir(f"{folder}/{name}")
                deleted += 1
    return deleted


# ---------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class CheckpointSettings:
    """The sweep's checkpoint settings (``hydra.sweeper.*``; see ``MultiverseSweeperConf``)."""

    keep_checkpoints: int = 1
    keep_finished_checkpoints: bool = False
    preempt_grace_s: float = 120.0

    def problems(self, prefix: str = "hydra.sweeper.") -> list[str]:
        """Every invalid setting, each naming the key, the value and a fix."""
        found = []
        keep = self.keep_checkpoints
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            found.append(f"{prefix}keep_checkpoints={keep!r} is invalid: a running trial keeps at least its newest "
                         f"checkpoint. Try {prefix}keep_checkpoints=1.")
        grace = self.preempt_grace_s
        if isinstance(grace, bool) or not isinstance(grace, int | float) or not 0 <= grace < math.inf:
            found.append(f"{prefix}preempt_grace_s={grace!r} is invalid: the seconds trials get to save a checkpoint "
                         f"after SIGTERM, a number >= 0. Try {prefix}preempt_grace_s=120.")
        return found
