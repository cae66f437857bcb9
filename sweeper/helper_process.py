"""Helper processes of a sweep's driver (the MLflow writer, the live-map painter), started lean.

A helper runs work that must stay off the Python lock of Tune's loop. Once the driver runs
Ray's threads (or any thread), a helper is *spawned*, never forked: a fork copies the other
threads' locks in whatever state they are. A spawned child would run the driver's ``__main__``
(the user's task script) again as ``__mp_main__``, with its imports (torch, scikit-learn, the
data loading) costing the helper seconds and memory it never uses; :func:`start_helper` starts
it with the main module hidden, so the child imports only the module of its target.

Before any thread starts, :func:`fork_helper` forks instead: the child has the modules the
driver imported already, at no cost (the MLflow writer's ``import mlflow`` is about 2 of the
3 CPU-seconds a spawned writer took to start, on every sweep).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

#: The start method of helpers once the driver has threads (see the module docstring); its ``Queue`` feeds them.
SPAWN = multiprocessing.get_context("spawn")
#: The start method of :func:`fork_helper` (Linux, macOS), or None where the platform has no fork.
FORK = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None


def start_helper(target: Callable[..., None], args: tuple[Any, ...], name: str) -> Any:
    """Start ``target(*args)`` in a spawned daemon process named ``name``; return the process."""
    process = SPAWN.Process(target=target, name=name, daemon=True, args=args)
    with _main_module_hidden():
        process.start()
    return process


def fork_helper(target: Callable[..., None], args: tuple[Any, ...], name: str) -> Any:
    """Fork ``target(*args)`` as a daemon process named ``name`` if this process runs no other thread.

    Returns:
        The process, or None (other threads run, or no fork here): then start it with
        :func:`start_helper`. ``args``' queues must be :data:`FORK`'s.
    """
    if FORK is None or threading.active_count() != 1:
        return None
    process = FORK.Process(target=target, name=name, daemon=True, args=args)
    process.start()
    return process


def orphaned(parent_pid: int) -> bool:
    """Whether the driver that started this helper is gone (the helper then ends on its own)."""
    return os.getppid() != parent_pid


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
    """Start a spawned child without running the driver's ``__main__`` in it.

    A spawned child runs the parent's main script again unless the main module names neither
    a file nor a spec (``multiprocessing.spawn.get_preparation_data``).
    """
    main = sys.modules["__main__"]
    saved: dict[str, Any] = {key: main.__dict__[key] for key in ("__spec__", "__file__") if key in main.__dict__}
    main.__spec__ = None
    main.__dict__.pop("__file__", None)
    try:
        yield
    finally:
        main.__dict__.update(saved)
