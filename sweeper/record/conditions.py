"""Conditions of measurement: how a score was obtained, captured in the process that ran it.

Belz et al. (2022) need every condition under which a measurement was taken to say how
reproducible it is; Crane (2018) showed that host, threads and library versions move
scores. This module reads them in the worker that runs a trial (never the driver), so a
sweep on a cluster records each node's own conditions. Values are strings, ready to be
MLflow tags under the ``sweeper.`` prefix.

What does not change within a process (host, CPU, Python, packages, code version) is read
once per process; thread counts are read at every trial.

References:
    Belz, A., Popović, M., Mille, S. (2022). Quantified Reproducibility Assessment of NLP
    Results. ACL 2022.
    Crane, M. (2018). Questionable Answers in Question Answering Research:
    Reproducibility and Variability of Published Results. TACL 6.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

#: Distributions whose versions are recorded on every trial.
KEY_PACKAGES = (
    "multiverse-sweeper", "numpy", "scipy", "scikit-learn", "torch", "torchvision", "ray",
    "mlflow", "hydra-core", "omegaconf", "GPy", "threadpoolctl",
)


def capture_conditions(code_dir: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Read the conditions of measurement of this process.

    Args:
        code_dir: a directory inside the git checkout of the code under test (the task's
            source folder); the working directory when None.

    Returns:
        Tag name -> value, e.g. ``{"host": "node-3", "git.commit": "1a2b...",
        "pkg.numpy": "2.4.6", "threads.openblas": "2", ...}``.
    """
    conditions = dict(_static_conditions(str(code_dir) if code_dir else os.getcwd()))
    conditions.update(_thread_conditions())
    conditions.update(_gpu_conditions("torch" in sys.modules))
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        conditions["gpu.visible"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return conditions


@functools.lru_cache(maxsize=1)
def installed_packages() -> tuple[str, ...]:
    """Every installed distribution as ``name==version``, sorted: this process's ``pip freeze``."""
    found = {(d.metadata["Name"] or "").lower(): d.version for d in metadata.distributions() if d.metadata["Name"]}
    return tuple(f"{name}=={version}" for name, version in sorted(found.items()))


def packages_hash() -> str:
    """SHA-256 of :func:`installed_packages`, one line each: equal hashes, equal environments."""
    return hashlib.sha256("\n".join(installed_packages()).encode()).hexdigest()


@functools.lru_cache(maxsize=8)
def _static_conditions(code_dir: str) -> tuple[tuple[str, str], ...]:
    c: dict[str, str] = {
        "host": socket.gethostname(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "python.implementation": platform.python_implementation(),
        "cpu.model": _cpu_model(),
        "cpu.count": str(os.cpu_count() or 0),
        "cpu.available": str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()),
        "pid": str(os.getpid()),
    }
    for name in KEY_PACKAGES:
        try:
            c[f"pkg.{name}"] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    c["packages.sha256"] = packages_hash()
    c["packages.count"] = str(len(installed_packages()))
    c.update(_git_state(code_dir))
    return tuple(sorted(c.items()))


@functools.lru_cache(maxsize=2)
def _gpu_conditions(torch_loaded: bool) -> tuple[tuple[str, str], ...]:
    """GPU name, driver, CUDA and cuDNN versions; empty on a machine without one.

    The driver comes from ``nvidia-smi``; CUDA and cuDNN from torch, and only when the task
    has imported torch already (importing it here would cost every task a second or more).
    """
    c: dict[str, str] = {}
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10)
            rows = [r.split(", ") for r in out.stdout.strip().splitlines() if r.strip()] if out.returncode == 0 else []
        except (OSError, subprocess.TimeoutExpired):
            rows = []
        if rows:
            c["gpu.count"] = str(len(rows))
            c["gpu.name"] = "; ".join(sorted({r[0] for r in rows}))
            c["gpu.driver"] = rows[0][1] if len(rows[0]) > 1 else ""
            c["gpu.memory"] = rows[0][2] if len(rows[0]) > 2 else ""
    if torch_loaded:
        torch = sys.modules["torch"]
        c["cuda.version"] = str(torch.version.cuda)
        if torch.cuda.is_available():
            c["cuda.devices"] = "; ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
            c["cudnn.version"] = str(torch.backends.cudnn.version())
    return tuple(sorted(c.items()))


def _thread_conditions() -> dict[str, str]:
    c = {f"env.{k}": os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
         if k in os.environ}
    for pool in _threadpools():
        # numpy and scipy each ship an OpenBLAS with the same file prefix: name the library
        # by the folder it was loaded from (numpy.libs -> numpy) and its API.
        folder = Path(pool.get("filepath") or "").parent.name.removesuffix(".libs") or "system"
        lib = f"{folder}.{pool.get('internal_api') or pool.get('prefix') or 'unknown'}"
        c[f"threads.{lib}"] = str(pool.get("num_threads"))
        if pool.get("version"):
            c[f"blas.{lib}.version"] = f"{pool.get('internal_api')} {pool['version']}"
    return c


_POOLS: tuple[int, Any] | None = None  # (len(sys.modules) at the scan, threadpoolctl's controller)


def _threadpools() -> list[dict[str, Any]]:
    """threadpoolctl's ``threadpool_info()``, without rescanning the loaded libraries each trial.

    Finding the libraries (walking every shared object the process has loaded) is most of
    that call's ~2 ms; their thread counts are read live from a kept controller. A task that
    imported a module since the last scan may have loaded a new BLAS or OpenMP runtime, so
    a change in ``sys.modules`` makes a new scan.
    """
    global _POOLS
    from threadpoolctl import ThreadpoolController

    if _POOLS is None or _POOLS[0] != len(sys.modules):
        controller = ThreadpoolController()
        _POOLS = (len(sys.modules), controller)  # counted after the scan, which may import
    return _POOLS[1].info()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def shipped_code(working_dir: str | None, code_dir: str | None) -> dict[str, str] | None:
    """The code version of a working_dir uploaded to the nodes, read on the driver; None if none is.

    A node running uploaded code has no git checkout (``.git`` is not uploaded): its trials
    record the driver's commit, dirty flag and diff hash, and where the code came from.
    """
    if working_dir is None:
        return None
    return {**_git_state(code_dir or working_dir), "code.shipped_from": f"{socket.gethostname()}:{working_dir}"}


def _git_state(code_dir: str) -> dict[str, str]:
    """Commit and dirty flag of the checkout holding ``code_dir``; empty outside git."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=code_dir, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {}
    status = git("status", "--porcelain", "--untracked-files=no")
    state = {"git.commit": commit, "git.dirty": str(bool(status)).lower()}
    if status:  # what differs from the commit, as a hash: equal hashes, equal code
        state["git.diff_sha256"] = hashlib.sha256((git("diff", "HEAD") or "").encode()).hexdigest()
    return state


#: Which recorded conditions describe the machine and process that measured (Belz et al.'s
#: measurement procedure), by tag prefix; code and packages are object conditions.
_PROCEDURE_PREFIXES = ("host", "os", "python", "cpu.", "gpu.", "cuda.", "cudnn.", "blas.", "threads.", "env_in_force.",
                       "env.", "ray.", "pid")
_OBJECT_PREFIXES = ("git.", "pkg.", "packages.", "code.")
#: Config blocks that define how the score is measured (the evaluation data and protocol).
METHOD_BLOCKS = ("data", "eval", "evaluation")


def measurement_record(metric: str, metrics: dict[str, float], config: dict[str, Any],
                       conditions: dict[str, str]) -> dict[str, Any]:
    """One trial's measurement in the structure of Belz et al. (2022), for ``conditions.json``.

    ``object``: the system measured, i.e. its config without the environment (``env.*``) and
    evaluation blocks; ``measurand``: the metric and its value; ``object_conditions``: what
    the object was built from (code commit and diff hash, package versions, the requested
    ``env.*`` settings); ``measurement_method``: how it was scored (the metric and the
    evaluation data blocks, e.g. ``data.*``); ``measurement_procedure``: where and how the
    measurement ran (host, CPU, GPU, BLAS, threads and the environment read back).
    """
    def block(key: str) -> str:
        return key.split(".", 1)[0]

    env = {k: v for k, v in config.items() if block(k) == "env" or k == "seed"}
    method = {k: v for k, v in config.items() if block(k) in METHOD_BLOCKS}
    return {
        "object": {k: v for k, v in config.items() if k not in env and k not in method},
        "measurand": {"name": metric, "value": metrics.get(metric), "other_metrics": {
            k: v for k, v in metrics.items() if k != metric}},
        "object_conditions": {"environment_requested": env,
                              **{k: v for k, v in conditions.items() if k.startswith(_OBJECT_PREFIXES)}},
        "measurement_method": {"metric": metric, **method},
        "measurement_procedure": {k: v for k, v in conditions.items()
                                  if k.startswith(_PROCEDURE_PREFIXES) and not k.startswith(_OBJECT_PREFIXES)},
    }
