"""``save_checkpoint`` / ``load_checkpoint``: a long task continues where it stopped.

A task saves its whole state (epoch, model and optimizer ``state_dict``, RNG states, ...)
as often as it likes, and asks for it back when it starts::

    from sweeper import load_checkpoint, save_checkpoint

    state = load_checkpoint()          # None on a fresh start
    start = 0 if state is None else state["epoch"] + 1
    if state is not None:
        model.load_state_dict(state["model"])
    for epoch in range(start, epochs):
        ...
        log_metrics({"loss": loss}, step=epoch)
        save_checkpoint({"epoch": epoch, "model": model.state_dict()}, step=epoch)

Inside a sweep the trial's worker stores each checkpoint through Ray Tune's checkpoints
into ``ray.storage_path`` (:mod:`sweeper.run.tune_checkpoints`), and a trial that restarts (its
worker or node died, the sweep's driver died and ``sweeper resume`` continued it, the sweep
was preempted) gets the newest one back. Outside a sweep (``python train.py ...``) both work
in the job's output directory (``<output dir>/checkpoints/``), so the task runs the same with
or without the sweeper: a second run with the same ``hydra.run.dir`` continues the first.

On disk a checkpoint is a folder holding the state (``state.pt``, written by ``torch.save``
when torch is imported, else ``state.pkl`` by pickle) and ``checkpoint.json``: its step,
its sequence number (the newest checkpoint is the one of the highest: it counts the saves of
the whole training, attempts included, where steps may repeat and clocks differ), when it
was saved, and each file's size and SHA-256. A folder whose ``checkpoint.json`` is
missing or whose files differ in size from it is incomplete (a copy cut short by a kill)
and is never loaded; one whose content differs from its SHA-256 raises
:class:`CheckpointCorrupt`. Tensors come back on the CPU (``map_location="cpu"``):
``load_state_dict`` moves them to the model's and optimizer's device.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

META_FILE = "checkpoint.json"
TORCH_FILE, PICKLE_FILE = "state.pt", "state.pkl"
#: Folder of the checkpoints of a task run outside a sweep, in its job's output directory.
LOCAL_FOLDER = "checkpoints"
#: Folders of one checkpoint each are named ``checkpoint_<something>`` (Ray Tune's names, and ours outside a sweep).
FOLDER_PREFIX = "checkpoint_"


class CheckpointCorrupt(RuntimeError):
    """A complete-looking checkpoint whose content differs from its recorded SHA-256."""


class CheckpointStore(Protocol):
    """Where a running task's checkpoints go (a trial's worker installs one; see :func:`storing_in`)."""

    def save(self, state: Any, step: int) -> None: ...

    def load(self) -> Any | None: ...


_store: CheckpointStore | None = None
_saves = 0  # checkpoints saved by the running task (the step when neither it nor log_metrics gives one)


def save_checkpoint(state: Any, step: int | None = None) -> None:
    """Store ``state`` as the running task's newest checkpoint.

    Args:
        state: anything pickle (or ``torch.save``) can write: nested dicts of numbers,
            arrays, tensors and ``state_dict``s.
        step: the step (epoch) the state is at; default: the last step given to
            :func:`sweeper.log_metrics`, else the number of checkpoints saved before.
    """
    global _saves
    from sweeper.record.metrics import last_step

    if step is None:
        logged = last_step()
        step = _saves if logged is None else logged
    _saves += 1
    store = _store or _local_store()
    store.save(state, int(step))


def load_checkpoint() -> Any | None:
    """The state of the newest checkpoint of this task, or None on a fresh start."""
    store = _store or _local_store()
    return store.load()


@contextmanager
def storing_in(store: CheckpointStore) -> Iterator[None]:
    """Route :func:`save_checkpoint` and :func:`load_checkpoint` to ``store`` while a trial runs."""
    global _store, _saves
    previous, _store, _saves = _store, store, 0
    try:
        yield
    finally:
        _store = previous


# ---------------------------------------------------------------------------------- the format
@dataclass(frozen=True)
class CheckpointInfo:
    """A complete checkpoint folder: where it is, its step, its sequence number, when it was saved (epoch s)."""

    path: str
    step: int
    seq: int
    saved_at: float

    @classmethod
    def of(cls, path: str, meta: dict[str, Any]) -> CheckpointInfo:
        return cls(path, int(meta["step"]), int(meta.get("seq", 0)), float(meta["saved_at"]))

    @property
    def order(self) -> tuple[int, float]:
        """Sorts checkpoints oldest first: by sequence number, then by time."""
        return self.seq, self.saved_at


def write_checkpoint(directory: str | Path, state: Any, step: int, seq: int = 0) -> None:
    """Write ``state`` and its ``checkpoint.json`` into ``directory`` (created if absent)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if "torch" in sys.modules:  # a state with tensors: torch's format (zip, tensors stored as bytes)
        import torch

        name = TORCH_FILE
        torch.save(state, directory / name)
    else:
        name = PICKLE_FILE
        with open(directory / name, "wb") as f:
            pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
    meta = {"step": int(step), "seq": int(seq), "saved_at": time.time(), "files": {name: _describe(directory / name)}}
    # Written last: a folder with its checkpoint.json has the state beside it (see complete_meta for copies).
    (directory / META_FILE).write_text(json.dumps(meta), encoding="utf-8")


def read_checkpoint(directory: str | Path) -> tuple[Any, CheckpointInfo]:
    """The state saved in ``directory`` and what ``checkpoint.json`` says of it, its content checked.

    Raises:
        CheckpointCorrupt: a file's SHA-256 differs from the recorded one.
        FileNotFoundError: not a complete checkpoint.
    """
    directory = Path(directory)
    meta = complete_meta(os.listdir(directory), lambda name: (directory / name).read_text(encoding="utf-8"),
                         lambda name: (directory / name).stat().st_size)
    if meta is None:
        raise FileNotFoundError(f"{directory} holds no complete checkpoint ({META_FILE} and the files it lists)")
    for name, want in meta["files"].items():
        got = _describe(directory / name)
        if got["sha256"] != want["sha256"]:
            raise CheckpointCorrupt(f"{directory / name} differs from the SHA-256 in its {META_FILE}: the file was "
                                    f"changed after it was saved; delete the folder to start from an older one")
    name, info = next(iter(meta["files"])), CheckpointInfo.of(str(directory), meta)
    if name == TORCH_FILE:
        import torch

        return torch.load(directory / name, map_location="cpu", weights_only=False), info
    with open(directory / name, "rb") as f:
        return pickle.load(f), info


def complete_meta(names: list[str], read_text: Any, size_of: Any) -> dict[str, Any] | None:
    """``checkpoint.json`` of a folder listing ``names``, if every file it lists is there at its size.

    ``read_text(name)`` and ``size_of(name)`` read the folder (a local one, or storage through
    pyarrow): a copy cut short (a worker killed while it uploaded) lacks a file or has one short.
    """
    if META_FILE not in names:
        return None
    try:
        meta = json.loads(read_text(META_FILE))
        files = meta["files"]
        if not files or any(name not in names or size_of(name) != want["size"] for name, want in files.items()):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return meta


def _describe(path: Path) -> dict[str, Any]:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return {"size": path.stat().st_size, "sha256": digest.hexdigest()}


# ---------------------------------------------------------------------------------- outside a sweep
class LocalCheckpoints:
    """Checkpoints in a local folder, newest ``keep`` kept: a task run outside a sweep.

    Each is written to a hidden folder, then renamed into place (atomic on one file system),
    then the older ones are deleted.
    """

    def __init__(self, folder: str | Path, keep: int = 1) -> None:
        self.folder = Path(folder)
        self.keep = keep

    def save(self, state: Any, step: int) -> None:
        partial = self.folder / f".partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        found = self.complete()
        write_checkpoint(partial, state, step, found[-1].seq + 1 if found else 0)
        target = self.folder / f"{FOLDER_PREFIX}{int(time.time() * 1e6):017d}"
        os.replace(partial, target)
        for old in self.complete()[:-self.keep]:
            shutil.rmtree(old.path, ignore_errors=True)
        log.debug("checkpoint of step %d saved in %s", step, target)

    def load(self) -> Any | None:
        found = self.complete()
        if not found:
            return None
        log.info("continuing from the checkpoint of step %d in %s", found[-1].step, found[-1].path)
        return read_checkpoint(found[-1].path)[0]

    def complete(self) -> list[CheckpointInfo]:
        """The complete checkpoints in the folder, oldest first."""
        if not self.folder.is_dir():
            return []
        found = []
        for child in self.folder.iterdir():
            if child.name.startswith(FOLDER_PREFIX) and child.is_dir():
                meta = complete_meta(os.listdir(child), lambda n, c=child: (c / n).read_text(encoding="utf-8"),
                                     lambda n, c=child: (c / n).stat().st_size)
                if meta is not None:
                    found.append(CheckpointInfo.of(str(child), meta))
        return sorted(found, key=lambda c: c.order)


def _local_store() -> LocalCheckpoints:
    """Outside a sweep: ``checkpoints/`` in the Hydra job's output directory, else in the working directory."""
    folder = Path.cwd()
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            folder = Path(HydraConfig.get().runtime.output_dir)
    except ImportError:  # not a Hydra app
        pass
    return LocalCheckpoints(folder / LOCAL_FOLDER)
