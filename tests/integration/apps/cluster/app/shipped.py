"""A sibling module of the cluster task: only Ray's working_dir upload puts it on a node."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path


def bowl(x: float, y: float) -> float:
    return (x - 0.3) ** 2 + (y - 0.6) ** 2


def hold(seconds: float) -> None:
    time.sleep(seconds)


def came_from_upload() -> bool:
    """True when this file is Ray's unpacked copy of the uploaded working_dir."""
    return "runtime_resources" in __file__ and "working_dir_files" in __file__


def meet(folder: str, count: int, timeout_s: float = 120.0) -> None:
    """Wait until ``count`` trials have reached this point (files in ``folder``, which the nodes share here).

    Ray Tune gives a pending trial a finished trial's worker (``reuse_actors``) when that worker is free
    before the pending trial's own worker has started: with trials shorter than a worker's start on the
    second node, every trial can run on the first. The first ``count`` trials wait here for each other, so
    they hold their nodes at once; later ones find the folder full and go on.
    """
    Path(folder, f"{os.getpid()}-{uuid.uuid4().hex}").touch()
    deadline = time.monotonic() + timeout_s
    while len(os.listdir(folder)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
