"""Where a sweep's trials run: the Ray connection and the code each node is given.

On a local Ray (``ray.address`` null) workers are processes of this machine: they import
the task from the launch directory through ``PYTHONPATH``, nothing is uploaded. When the
sweep joins a cluster (``ray.address=auto|host:6379|ray://host:10001``) the nodes may never
have seen the repo, so by default the launch directory is uploaded to every node as Ray's
``runtime_env`` ``working_dir``, with the task script's folder put on the workers'
``PYTHONPATH`` (a script's sibling modules import as they do on the laptop).
``ray.py_modules`` ships extra packages (``[sweeper]`` for nodes without this package), and
``ray.runtime_env`` passes anything else of Ray's (pip, conda, container, env_vars).

Nothing here talks to MLflow: every MLflow write happens in the driver (see
:mod:`sweeper.run.recorder`), so workers need no route to the tracking server.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sweeper.record.spool import RETRY_DELAYS_ENV

#: ``ray.working_dir`` value that uploads the launch directory when joining a cluster.
AUTO = "auto"
#: Set by Ray's job supervisor for a job's entrypoint: its JobConfig, runtime_env included.
JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"
#: Environment variables every worker gets (see sweeper.run.hydra_sweeper._TUNE_ENV).
WORKER_ENV = {"RAY_CHDIR_TO_TRIAL_DIR": "0"}
#: The driver's settings its workers get too, where it has them: through Ray Client the sweep's MLflow
#: writer runs in a Ray task on the head, and waits out an outage as the driver would have.
FORWARDED_ENV = (RETRY_DELAYS_ENV,)

_ADDRESS = re.compile(r"^(auto|local|ray://[^\s:/]+(:\d+)?|[^\s:/]+(:\d+))$")


def address_problem(address: str | None) -> str | None:
    """Say what is wrong with a ``ray.address`` value, or None if it has a usable form."""
    if address is None:
        return None
    match = _ADDRESS.match(address)
    port = (match.group(2) or match.group(3) or ":1")[1:] if match else None
    if port is not None and not 0 < int(port) < 65536:
        return (f"ray.address={address!r} is not a Ray address: port {int(port)} is not in 1-65535. "
                f"Try ray.address=HOST:6379 (the head's GCS port) or ray://HOST:10001 (Ray Client)")
    if match:
        return None
    return (f"ray.address={address!r} is not a Ray address: use auto (on a node of a running cluster), "
            f"HOST:6379 (the head's GCS port), ray://HOST:10001 (Ray Client), or null for a local Ray")


def runtime_env(ray_cfg: Mapping[str, Any], *, code_dir: str | None, launch_dir: str) -> dict[str, Any]:
    """The ``runtime_env`` every trial's worker starts in.

    Args:
        ray_cfg: the sweep's ``ray`` block (``address``, ``working_dir``, ``py_modules``,
            ``excludes``, ``runtime_env``).
        code_dir: the folder of the task's script (None if unknown).
        launch_dir: the directory the sweep was launched from.

    Raises:
        ValueError: a ``working_dir`` or ``py_modules`` entry that does not exist, or a task
            script outside the uploaded folder; the message names the key and the fix.
    """
    joining = ray_cfg.get("address") is not None
    setting = ray_cfg.get("working_dir", AUTO)
    # AUTO: inside `ray job submit --working-dir` the job shipped the code already, and Ray
    # refuses a second working_dir: the workers inherit the job's.
    upload = (launch_dir if joining and not _job_ships_code() else None) if setting == AUTO else setting
    env: dict[str, Any] = {}
    env_vars = {**WORKER_ENV, **{k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}}
    if upload is None and _job_ships_code():
        relative = _relative_to(Path(code_dir).resolve(), Path(launch_dir).resolve()) if code_dir else None
        if relative not in (None, "."):
            env_vars["PYTHONPATH"] = relative
    elif upload is None:
        # Same machine (or the code is already on every node): import from where it lies.
        paths = [p for p in (code_dir, launch_dir, os.environ.get("PYTHONPATH")) if p]
        env_vars["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        root = Path(upload).expanduser().resolve()
        if not root.is_dir():
            raise ValueError(f"ray.working_dir={setting!r}: {root} is not a directory; give the folder whose "
                             f"files the trials need, or ray.working_dir=null if every node has the code already")
        env["working_dir"] = str(root)
        env["excludes"] = list(ray_cfg.get("excludes") or [])
        if code_dir:
            relative = _relative_to(Path(code_dir).resolve(), root)
            if relative is None:
                raise ValueError(
                    f"the task's script folder {code_dir} is outside ray.working_dir ({root}), so the nodes "
                    f"would not get it: launch the sweep from a folder that contains the script, or set "
                    f"ray.working_dir to one")
            # Relative to the unpacked working_dir, the worker's cwd; Ray puts the root itself first.
            if relative != ".":
                env_vars["PYTHONPATH"] = relative
    modules = [module_path(m) for m in ray_cfg.get("py_modules") or []]
    if modules:
        env["py_modules"] = modules
    extra = dict(ray_cfg.get("runtime_env") or {})
    env_vars.update(extra.pop("env_vars", None) or {})
    env["env_vars"] = env_vars
    env.update(extra)
    return env


def _job_ships_code() -> bool:
    """Whether this driver is a Ray job's entrypoint whose runtime_env carries the code."""
    config = os.environ.get(JOB_CONFIG_ENV)
    if not config:
        return False
    try:
        env = json.loads(config).get("runtime_env") or {}
    except (ValueError, AttributeError):
        return False
    return bool(env.get("working_dir") or env.get("py_modules"))


def module_path(entry: str) -> str:
    """A ``ray.py_modules`` entry as the folder Ray uploads: a path, or an importable package's name."""
    path = Path(entry).expanduser()
    if path.exists():
        return str(path.resolve())
    spec = importlib.util.find_spec(entry) if entry.isidentifier() or "." in entry else None
    if spec is not None and spec.submodule_search_locations:
        return str(Path(list(spec.submodule_search_locations)[0]).resolve())
    if spec is not None and spec.origin:
        raise ValueError(f"ray.py_modules: {entry!r} is a single-file module ({spec.origin}); Ray ships "
                         f"packages (folders): put it in ray.working_dir instead")
    raise ValueError(f"ray.py_modules: {entry!r} is neither a path nor an importable package; give a "
                     f"package folder (e.g. src/mylib) or a package name (e.g. sweeper)")


def is_client_address(address: str | None) -> bool:
    """Whether ``ray.address`` connects through Ray Client (``ray://``)."""
    return bool(address) and str(address).startswith("ray://")


def storage_path(ray_cfg: Mapping[str, Any], sweep_dir: Path, *, client: bool = False) -> str | None:
    """Where Ray Tune keeps the sweep's experiment state: ``ray.storage_path``, or the sweep dir.

    Through Ray Client, Tune runs on the head node, where the driver's sweep dir may not
    exist: None there leaves Tune's default (``~/ray_results`` on the head).
    """
    given = ray_cfg.get("storage_path")
    if not given:
        return None if client else str(sweep_dir)
    return given if "://" in given else str(Path(given).expanduser().resolve())


def tune_experiment_path(storage: str | None, name: str) -> str:
    """Where a Tune experiment lives: ``storage/name``, Tune's ``~/ray_results`` when storage is None."""
    return f"{(storage or '~/ray_results').rstrip('/')}/{name}"


def tune_location(ray_cfg: Mapping[str, Any], sweep_dir: Path, parent_run_id: str) -> tuple[str | None, str]:
    """Ray Tune's storage path and experiment name for a new sweep (None: Tune's default storage)."""
    storage = storage_path(ray_cfg, sweep_dir, client=is_client_address(ray_cfg.get("address")))
    # One Tune experiment per sweep, also when several sweeps share a storage_path.
    return storage, "tune" if storage == str(sweep_dir) else f"{sweep_dir.name}-{parent_run_id[:8]}"


def node_placement() -> dict[str, str]:
    """The Ray node this process runs on (empty outside Ray): id and IP, recorded on each trial."""
    import ray

    if not ray.is_initialized():  # a benchmark or test outside Ray: asking would start one
        return {}
    from ray.util import get_node_ip_address

    return {"ray.node_id": ray.get_runtime_context().get_node_id(), "ray.node_ip": get_node_ip_address()}


def _relative_to(path: Path, root: Path) -> str | None:
    try:
        return str(path.relative_to(root)) or "."
    except ValueError:
        return None

