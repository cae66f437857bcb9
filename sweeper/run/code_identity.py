"""Which code a sweep runs: the task's script and its Hydra config folder, found from the task and Hydra.

:func:`sweeper.record.conditions.code_identity` hashes the two files' worth of code; this module
finds them, which takes Hydra (the config search path) and the task's :class:`TaskRef`, so it
lives in the run layer. The trials call :func:`code_conditions` in the worker (the script that
actually ran there); the sweep's run records the driver's (:func:`code_conditions` again) and
the driver warns once at start when the code cannot be identified (:func:`code_warning`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlparse

from sweeper.record.conditions import capture_conditions, code_identity, unidentified_code_warning
from sweeper.run.task_ref import TaskRef

#: Hydra's name for the config search path entry of the app's own ``config_path``.
MAIN_PROVIDER = "main"


def task_script(task_function: Callable[..., Any] | None) -> str | None:
    """The file the task function's source is in (the worker's copy for a :class:`TaskRef`); None if unknown."""
    try:
        function = task_function.function if isinstance(task_function, TaskRef) else task_function
        return inspect.getsourcefile(function) if function is not None else None
    except Exception:  # noqa: BLE001 - a script that cannot be imported or inspected has no known file
        return None


def config_dir(hydra_context: Any) -> str | None:
    """The app's config folder (its ``config_path``) from Hydra's search path; None for a package or none."""
    try:
        elements = hydra_context.config_loader.get_search_path().get_path()
    except AttributeError:
        return None
    for element in elements:
        path = str(element.path or "")
        if element.provider != MAIN_PROVIDER or not path:
            continue
        if "://" not in path:  # Hydra keeps the app's folder as a plain path
            return path
        return unquote(urlparse(path).path) or None if path.startswith("file://") else None
    return None


def code_conditions(task_function: Callable[..., Any] | None, hydra_context: Any) -> dict[str, str]:
    """``code.script``, ``code.script_sha256``, ``code.config_dir``, ``code.config_sha256``: what could be read."""
    return code_identity(task_script(task_function), config_dir(hydra_context))


def code_warning(task_function: Callable[..., Any] | None, hydra_context: Any, code_dir: str | None) -> str | None:
    """One line for the driver to log at start when neither git nor the script identifies the code; else None."""
    conditions = {**capture_conditions(code_dir), **code_conditions(task_function, hydra_context)}
    return unidentified_code_warning(conditions)
