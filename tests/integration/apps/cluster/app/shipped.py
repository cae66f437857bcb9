"""A sibling module of the cluster task: only Ray's working_dir upload puts it on a node."""

from __future__ import annotations

import time


def bowl(x: float, y: float) -> float:
    return (x - 0.3) ** 2 + (y - 0.6) ** 2


def hold(seconds: float) -> None:
    time.sleep(seconds)


def came_from_upload() -> bool:
    """True when this file is Ray's unpacked copy of the uploaded working_dir."""
    return "runtime_resources" in __file__ and "working_dir_files" in __file__
