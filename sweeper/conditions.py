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
import os
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path

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
    return conditions


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
    c.update(_git_state(code_dir))
    return tuple(sorted(c.items()))


def _thread_conditions() -> dict[str, str]:
    c = {f"env.{k}": os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
         if k in os.environ}
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        return c
    for pool in threadpool_info():
        # numpy and scipy each ship an OpenBLAS with the same file prefix: name the library
        # by the folder it was loaded from (numpy.libs -> numpy) and its API.
        folder = Path(pool.get("filepath") or "").parent.name.removesuffix(".libs") or "system"
        lib = f"{folder}.{pool.get('internal_api') or pool.get('prefix') or 'unknown'}"
        c[f"threads.{lib}"] = str(pool.get("num_threads"))
        if pool.get("version"):
            c[f"blas.{lib}.version"] = f"{pool.get('internal_api')} {pool['version']}"
    return c


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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
    return {"git.commit": commit, "git.dirty": str(bool(status)).lower()}

