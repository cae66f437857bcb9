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

import fnmatch
import functools
import hashlib
import os
import platform
import shutil
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any

#: Distributions whose versions are recorded on every trial.
KEY_PACKAGES = (
    "multiverse-sweeper", "numpy", "scipy", "scikit-learn", "torch", "torchvision", "ray",
    "mlflow", "hydra-core", "omegaconf", "threadpoolctl",
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
    """GPU name, driver, CUDA and cuDNN versions; ``gpu.count = 0`` on a machine without one.

    The driver comes from ``nvidia-smi``; CUDA and cuDNN from torch, and only when the task
    has imported torch already (importing it here would cost every task a second or more).
    No GPU is recorded as such (not left out), so a report can say "none (CPU only)": when
    ``nvidia-smi`` lists none, or there is neither ``nvidia-smi`` nor an NVIDIA device file,
    and torch (if loaded) sees no CUDA device.
    """
    c: dict[str, str] = {} if _nvidia_present() else {"gpu.count": "0"}
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10)
            rows = [r.split(", ") for r in out.stdout.strip().splitlines() if r.strip()] if out.returncode == 0 else []
            if out.returncode == 0:  # a failing nvidia-smi says nothing about how many GPUs there are
                c["gpu.count"] = str(len(rows))
        except (OSError, subprocess.TimeoutExpired):
            rows = []
        if rows:
            c["gpu.name"] = "; ".join(sorted({r[0] for r in rows}))
            c["gpu.driver"] = rows[0][1] if len(rows[0]) > 1 else ""
            c["gpu.memory"] = rows[0][2] if len(rows[0]) > 2 else ""
    if torch_loaded:
        torch = sys.modules["torch"]
        c["cuda.version"] = str(torch.version.cuda)
        if torch.cuda.is_available():
            c["cuda.devices"] = "; ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
            c["cudnn.version"] = str(torch.backends.cudnn.version())
            if c.get("gpu.count") == "0":  # torch sees a device nvidia-smi did not list
                del c["gpu.count"]
    return tuple(sorted(c.items()))


def _nvidia_present() -> bool:
    """Whether this machine has ``nvidia-smi`` or an NVIDIA device file (``/dev/nvidia0``, ...)."""
    return shutil.which("nvidia-smi") is not None or any(Path("/dev").glob("nvidia[0-9]*"))


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
    that call's cost (NOTE: docs/decisions/0028-threadpool-scan-kept.md); their thread counts
    are read live from a kept controller. A task that imported a module since the last scan
    may have loaded a new BLAS or OpenMP runtime, so a change in ``sys.modules`` makes a new scan.
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


#: Untracked paths that are the sweeper's, Hydra's and MLflow's own outputs, matched against each path component:
#: a sweep writes them before its trials record the code, so they never make the tree dirty. ``__pycache__`` is
#: Python's: a worker importing the task script writes the script's bytecode there (unless PYTHONDONTWRITEBYTECODE
#: is set) before the trial records the code, and a clean checkout was recorded clean by the sweep's run and
#: dirty, ``__pycache__/`` untracked, by its trials.
TOOL_OUTPUTS = ("multirun", "outputs", "mlruns", "mlruns.db*", "mlartifacts", "report-*", "multiverse-*",
                "__pycache__")
#: How many untracked paths ``git.untracked`` names; ``git.untracked_count`` counts them all.
UNTRACKED_SHOWN = 20


def _git_state(code_dir: str) -> dict[str, str]:
    """Commit and dirty flag of the checkout holding ``code_dir``; empty outside git.

    Dirty means a tracked file differs from the commit or an untracked file (not ignored, not one
    of :data:`TOOL_OUTPUTS`) is in the repository: an untracked task script is code the commit
    does not hold. The untracked paths are listed in ``git.untracked`` (the first
    :data:`UNTRACKED_SHOWN`, from the repository's root) and counted in ``git.untracked_count``.
    """

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=code_dir, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip("\n") if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {}
    changed, untracked = parse_porcelain(git("status", "--porcelain=v1", "-z", "--untracked-files=normal") or "")
    state = {"git.commit": commit.strip(), "git.dirty": str(bool(changed or untracked)).lower()}
    if changed:  # what differs from the commit, as a hash: equal hashes, equal code
        state["git.diff_sha256"] = hashlib.sha256((git("diff", "HEAD") or "").encode()).hexdigest()
    if untracked:
        state.update(untracked_tags(untracked))
    return state


def parse_porcelain(status: str) -> tuple[list[str], list[str]]:
    """The changed tracked paths and the untracked paths (less :data:`TOOL_OUTPUTS`) of ``git status -z``."""
    changed: list[str] = []
    untracked: list[str] = []
    entries = iter(status.split("\0"))
    for entry in entries:
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if code == "??":
            if not is_tool_output(path):
                untracked.append(path)
        elif code != "!!":
            changed.append(path)
            if "R" in code or "C" in code:  # a rename or copy is followed by its source path
                next(entries, None)
    return changed, untracked


def is_tool_output(path: str) -> bool:
    """Whether a repository path lies in (or is) one of :data:`TOOL_OUTPUTS`."""
    return any(fnmatch.fnmatch(part, pattern) for part in PurePosixPath(path).parts for pattern in TOOL_OUTPUTS)


def untracked_tags(paths: list[str]) -> dict[str, str]:
    """``git.untracked`` (the first :data:`UNTRACKED_SHOWN` paths, and how many more) and ``git.untracked_count``."""
    shown = ", ".join(paths[:UNTRACKED_SHOWN])
    if len(paths) > UNTRACKED_SHOWN:
        shown += f", ... ({len(paths) - UNTRACKED_SHOWN} more)"
    return {"git.untracked": shown, "git.untracked_count": str(len(paths))}


#: The files of a config folder that :func:`config_dir_sha256` hashes: the ones Hydra reads.
CONFIG_SUFFIXES = (".yaml", ".yml")
#: A config folder with more files than this is not hashed (a config_path of "." in a big tree).
MAX_CONFIG_FILES = 10_000


def file_sha256(path: str | os.PathLike[str]) -> str | None:
    """SHA-256 of a file's bytes; None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None


def config_files(config_dir: str | os.PathLike[str]) -> list[Path] | None:
    """The YAML files below ``config_dir``, sorted, less hidden folders and :data:`TOOL_OUTPUTS`.

    None when the folder cannot be read or holds more than :data:`MAX_CONFIG_FILES` of them.
    """
    root = Path(config_dir)
    if not root.is_dir():
        return None
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not is_tool_output(d)]
        found += [Path(folder, f) for f in files if f.endswith(CONFIG_SUFFIXES) and not f.startswith(".")]
        if len(found) > MAX_CONFIG_FILES:
            return None
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def config_dir_sha256(config_dir: str | os.PathLike[str]) -> tuple[str, int] | None:
    """A stable SHA-256 of a config folder and how many files it covers; None when it cannot be read.

    The hash runs over the sorted relative paths (POSIX form) and each file's SHA-256, so it does
    not depend on the folder's location, the order the OS lists files in, or their timestamps:
    equal hashes, equal configs.
    """
    files = config_files(config_dir)
    if files is None:
        return None
    digest = hashlib.sha256()
    for path in files:
        content = file_sha256(path)
        if content is None:
            return None
        digest.update(f"{path.relative_to(config_dir).as_posix()}\0{content}\n".encode())
    return digest.hexdigest(), len(files)


def code_identity(script: str | None, config_dir: str | None) -> dict[str, str]:
    """The task script's and its config folder's SHA-256, with or without git.

    A commit says what code ran only in a checkout; these hashes say it anywhere (a copied script,
    a tarball, a cluster node). Read once per process, as the git state is (a worker imports the
    script once too). Returns ``code.script``, ``code.script_sha256``, ``code.config_dir``,
    ``code.config_sha256`` and ``code.config_files`` for what could be read; empty when nothing could.
    """
    return dict(_code_identity(script, config_dir))


@functools.lru_cache(maxsize=8)
def _code_identity(script: str | None, config_dir: str | None) -> tuple[tuple[str, str], ...]:
    identity: dict[str, str] = {}
    script_hash = file_sha256(script) if script else None
    if script_hash is not None:
        identity.update({"code.script": str(script), "code.script_sha256": script_hash})
    config_hash = config_dir_sha256(config_dir) if config_dir else None
    if config_hash is not None:
        identity.update({"code.config_dir": str(config_dir), "code.config_sha256": config_hash[0],
                         "code.config_files": str(config_hash[1])})
    return tuple(identity.items())


def unidentified_code_warning(conditions: dict[str, str]) -> str | None:
    """One line saying the code cannot be identified (no git commit, no script hash) in ``conditions``; else None."""
    if conditions.get("git.commit") or conditions.get("code.script_sha256"):
        return None
    return ("The task's code cannot be identified (not in a git checkout, and its script cannot be read): the "
            "records will not say which code produced the scores. Run the task from a script in a git repository.")


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
