"""Helper processes of a sweep's driver (the MLflow writer, the live-map painter), spawned lean.

A helper runs work that must stay off the Python lock of Tune's loop. It is *spawned*, never
forked: the driver runs Ray's threads, and a fork copies their locks in whatever state they
are. A spawned child would run the driver's ``__main__`` (the user's task script) again as
``__mp_main__``, with its imports (torch, scikit-learn, the data loading) costing the helper
seconds and memory it never uses; :func:`start_helper` starts it with the main module hidden,
so the child imports only the module of its target.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

#: The one start method of helpers (see the module docstring); its ``Queue`` feeds them.
SPAWN = multiprocessing.get_context("spawn")


def start_helper(target: Callable[..., None], args: tuple[Any, ...], name: str) -> Any:
    """Start ``target(*args)`` in a spawned daemon process named ``name``; return the process."""
    process = SPAWN.Process(target=target, name=name, daemon=True, args=args)
    with _main_module_hidden():
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
    saved = {key: main.__dict__[key] for key in ("__spec__", "__file__") if key in main.__dict__}
    main.__spec__ = None
    main.__dict__.pop("__file__", None)
    try:
        yield
    finally:
        main.__dict__.update(saved)
