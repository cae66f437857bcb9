"""Environment conditions as experimental factors: set them in the worker, then read them back.

Crane (2018) showed that the seed, the thread count, the BLAS library, CPU vs GPU and cuDNN
move scores by more than most published improvements. The ``env`` config group
(``conf/env/``) makes each of them a setting of the trial, sweepable like any
hyperparameter (``env.seed='range(0,200)'``, ``env.threads=1,2``,
``env.deterministic=true,false``, ``env.device=cpu,cuda``), and :func:`apply_environment`
puts them in force in the process that runs the trial, before the task builds anything:

=================  =========================================================================
key                effect
=================  =========================================================================
``seed``           ``random.seed``, ``numpy.random.seed``, ``torch.manual_seed`` (CPU and every CUDA device)
``threads``        BLAS/OpenMP pools via threadpoolctl, ``torch.set_num_threads``, and the
                   ``OMP/MKL/OPENBLAS_NUM_THREADS`` variables for libraries loaded later
``deterministic``  ``torch.use_deterministic_algorithms``, ``CUBLAS_WORKSPACE_CONFIG=:4096:8``,
                   cuDNN deterministic with the autotuner off
``cudnn``          ``torch.backends.cudnn.enabled``
``cudnn_benchmark``  the cuDNN autotuner (forced off by ``deterministic``)
``device``         ``cpu``, ``cuda``, or ``auto``: CUDA when torch sees a GPU in this process
                   (Ray sets ``CUDA_VISIBLE_DEVICES`` to the GPUs it gave the trial)
``matmul_precision``  ``torch.set_float32_matmul_precision`` (``highest``, ``high``, ``medium``) and,
                      for convolutions, ``torch.backends.cudnn.allow_tf32`` (off at ``highest``:
                      cuDNN's default TF32 convolutions would otherwise stay on, as measured
                      on an H100, docs/gpu.md)
=================  =========================================================================

What is *in force* is then read back (:class:`EnvironmentInForce`), not copied from the
request: the thread count of every BLAS pool and of torch, whether deterministic
algorithms are on, the cuDNN flags, the matmul precision, the device. Without torch
installed the torch settings are skipped and recorded as absent.

torch is not imported for a task that has not imported it, where the device does not
depend on it (``env.device=cpu``, or ``auto`` where no GPU can be seen: no GPU device file
or ``CUDA_VISIBLE_DEVICES`` empty; NOTE: docs/decisions/0034-torch-imported-only-when-needed.md).
The torch settings are put in force when the task imports torch itself (an import hook,
before its ``import torch`` returns), and what is in force is read again.

References:
    Crane, M. (2018). Questionable Answers in Question Answering Research:
    Reproducibility and Variability of Published Results. TACL 6, §4.4-4.5.
    PyTorch documentation, "Reproducibility" (deterministic algorithms, CUBLAS_WORKSPACE_CONFIG).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import os
import random
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

#: The config block a trial's environment is read from.
ENV_KEY = "env"
DEVICES = ("auto", "cpu", "cuda")
MATMUL_PRECISIONS = ("highest", "high", "medium")
#: cuBLAS needs a fixed workspace to be deterministic (PyTorch's reproducibility notes).
CUBLAS_WORKSPACE = ":4096:8"
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
#: Device files without which torch sees no GPU on Linux: NVIDIA's driver, AMD's ROCm, WSL 2's GPU.
GPU_DEVICE_FILES = ("/dev/nvidiactl", "/dev/kfd", "/dev/dxg")

log = logging.getLogger(__name__)


class EnvironmentSettingError(ValueError):
    """An ``env`` setting is invalid or cannot be honoured here; the message names the fix."""


@dataclass(frozen=True)
class EnvSettings:
    """The requested environment of a trial: the keys of the ``env`` config group."""

    seed: int = 0
    threads: int | None = None
    deterministic: bool = False
    cudnn: bool = True
    cudnn_benchmark: bool = False
    device: str = "auto"
    matmul_precision: str = "highest"

    @classmethod
    def from_config(cls, env: Mapping[str, Any] | None) -> EnvSettings:
        """Read the ``env`` block (a dict or DictConfig); unknown keys and bad values raise, all at once."""
        if env is None:
            return cls()
        data = dict(env.items())
        known = {f.name for f in fields(cls)}
        problems = [f"env.{k} is not an environment setting (known: {', '.join(sorted(known))})"
                    for k in data if k not in known]
        settings = cls(**{k: v for k, v in data.items() if k in known})
        problems += settings.problems()
        if problems:
            raise EnvironmentSettingError("; ".join(problems))
        return settings

    def problems(self) -> list[str]:
        p = []
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            p.append(f"env.seed={self.seed!r} must be an integer >= 0")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int)
                                         or self.threads < 1):
            p.append(f"env.threads={self.threads!r} must be an integer >= 1, or null to leave threads alone")
        if self.device not in DEVICES:
            p.append(f"env.device={self.device!r} must be one of {', '.join(DEVICES)}")
        if self.matmul_precision not in MATMUL_PRECISIONS:
            p.append(f"env.matmul_precision={self.matmul_precision!r} must be one of {', '.join(MATMUL_PRECISIONS)}")
        for key in ("deterministic", "cudnn", "cudnn_benchmark"):
            if not isinstance(getattr(self, key), bool):
                p.append(f"env.{key}={getattr(self, key)!r} must be true or false")
        return p


@dataclass(frozen=True)
class EnvironmentInForce:
    """What :func:`apply_environment` read back after setting it; None where it does not apply.

    Attributes:
        seed: The seed given to every generator.
        device: ``cpu`` or ``cuda``.
        blas_threads: Each distinct ``"<api>=<n>"`` of the BLAS/OpenMP pools once (a reused worker has more copies).
        torch_threads: ``torch.get_num_threads()``.
        deterministic: ``torch.are_deterministic_algorithms_enabled()``.
        cublas_workspace: ``CUBLAS_WORKSPACE_CONFIG`` as set in the process.
        cudnn_enabled, cudnn_deterministic, cudnn_benchmark: ``torch.backends.cudnn`` flags.
        matmul_precision: ``torch.get_float32_matmul_precision()``.
        cudnn_allow_tf32: ``torch.backends.cudnn.allow_tf32`` (TF32 convolutions).
    """

    seed: int
    device: str
    blas_threads: str
    torch_threads: int | None = None
    deterministic: bool | None = None
    cublas_workspace: str | None = None
    cudnn_enabled: bool | None = None
    cudnn_deterministic: bool | None = None
    cudnn_benchmark: bool | None = None
    matmul_precision: str | None = None
    cudnn_allow_tf32: bool | None = None

    def as_conditions(self) -> dict[str, str]:
        """Tag name -> text, under ``env_in_force.``; fields that do not apply are left out."""
        return {f"env_in_force.{k}": (str(v).lower() if isinstance(v, bool) else str(v))
                for k, v in asdict(self).items() if v is not None}


_LAST: EnvironmentInForce | None = None


def env_problems(env: Mapping[str, Any], space: Any) -> list[str]:
    """Every invalid ``env`` setting of a sweep: the config's own and each swept value of an ``env.*`` dim.

    Checked in the driver before Ray starts (whether a GPU is there is left to the worker).
    """
    def check(values: Mapping[str, Any]) -> list[str]:
        try:
            EnvSettings.from_config(values)
        except EnvironmentSettingError as exc:
            return str(exc).split("; ")
        return []

    prefix = ENV_KEY + "."
    swept = {dim.name[len(prefix):]: dim for dim in space.dims if dim.name.startswith(prefix)}
    fixed = {k: v for k, v in env.items() if k not in swept}
    problems = check(fixed)
    for key, dim in swept.items():
        for value in getattr(dim, "choices", None) or getattr(dim, "values", None) or (dim.low, dim.high):
            problems += [f"{p} (swept by {dim.name}={dim.spec})" for p in check({**fixed, key: value})
                         if p.startswith(f"env.{key}")]
    return list(dict.fromkeys(problems))


def apply_environment(env: Mapping[str, Any] | EnvSettings | None) -> EnvironmentInForce:
    """Put the ``env`` settings in force in this process and return what is in force.

    Idempotent: applying the same settings twice leaves the same state (the generators are
    re-seeded to the same point). Call it before the task builds data or models.

    Args:
        env: The ``env`` config block (dict or DictConfig), an :class:`EnvSettings`, or
            None (the defaults: seed 0, threads untouched, not deterministic, device auto).

    Returns:
        The settings read back from the libraries.

    Raises:
        EnvironmentSettingError: A bad setting, or ``device=cuda`` without a visible GPU.
    """
    global _LAST, _PENDING
    s = env if isinstance(env, EnvSettings) else EnvSettings.from_config(env)
    _PENDING = None  # a request still waiting for torch is replaced by this one
    has_torch = "torch" in sys.modules or importlib.util.find_spec("torch") is not None
    torch = _torch_now(s.device) if has_torch else None
    device = _resolve_device(s.device, torch)
    original = _original_state()
    if torch is not None:
        _original_torch_threads(torch)  # before the pools are limited below
    from threadpoolctl import threadpool_limits

    # A reused worker ran other trials before: a setting left at null or false restores the
    # process's own state instead of inheriting the previous trial's.
    _set_variables(_thread_variables(s, original), _THREAD_VARIABLES)
    threadpool_limits(limits=s.threads if s.threads is not None else original.pools)  # stays for the trial
    cublas = {"CUBLAS_WORKSPACE_CONFIG": CUBLAS_WORKSPACE} if s.deterministic else original.variables
    _set_variables(cublas, ("CUBLAS_WORKSPACE_CONFIG",))
    random.seed(s.seed)
    np.random.seed(s.seed)
    if torch is not None:
        _apply_torch(torch, s)
    elif has_torch:  # installed, not loaded: when the task imports it
        _PENDING = s
        if not any(isinstance(f, _TorchImportHook) for f in sys.meta_path):
            sys.meta_path.insert(0, _TorchImportHook())
    _LAST = read_environment(s.seed, device)
    return _LAST


def _apply_torch(torch: Any, s: EnvSettings) -> None:
    """The torch part of the settings (see the module docstring's table)."""
    torch.set_num_threads(s.threads if s.threads is not None else _original_torch_threads(torch))
    torch.manual_seed(s.seed)  # seeds every CUDA device too
    torch.use_deterministic_algorithms(s.deterministic)
    torch.backends.cudnn.enabled = s.cudnn
    torch.backends.cudnn.deterministic = s.deterministic
    torch.backends.cudnn.benchmark = s.cudnn_benchmark and not s.deterministic
    torch.set_float32_matmul_precision(s.matmul_precision)
    torch.backends.cudnn.allow_tf32 = s.matmul_precision != "highest"  # convolutions follow matmuls


def read_environment(seed: int, device: str) -> EnvironmentInForce:
    """Read the thread counts, torch flags and matmul precision now in force (torch's if it is loaded)."""
    from threadpoolctl import threadpool_info

    pools = ",".join(sorted({f"{p.get('internal_api')}={p.get('num_threads')}" for p in threadpool_info()}))
    torch = sys.modules.get("torch")  # not loaded: its settings wait for the task's import
    if torch is None:
        return EnvironmentInForce(seed, device, pools)
    return EnvironmentInForce(
        seed=seed, device=device, blas_threads=pools, torch_threads=torch.get_num_threads(),
        deterministic=torch.are_deterministic_algorithms_enabled(),
        cublas_workspace=os.environ.get("CUBLAS_WORKSPACE_CONFIG"), cudnn_enabled=torch.backends.cudnn.enabled,
        cudnn_deterministic=torch.backends.cudnn.deterministic, cudnn_benchmark=torch.backends.cudnn.benchmark,
        matmul_precision=torch.get_float32_matmul_precision(), cudnn_allow_tf32=torch.backends.cudnn.allow_tf32)


@dataclass(frozen=True)
class _OriginalState:
    """The process's own thread and cuBLAS settings, before any trial changed them."""

    variables: dict[str, str]
    pools: dict[str, int]


_ORIGINAL: _OriginalState | None = None
_ORIGINAL_TORCH_THREADS: int | None = None
#: The settings whose torch part waits for the task's ``import torch`` (None: nothing waits).
_PENDING: EnvSettings | None = None


def _original_state() -> _OriginalState:
    global _ORIGINAL
    if _ORIGINAL is None:
        from threadpoolctl import threadpool_info

        _ORIGINAL = _OriginalState(
            variables={k: os.environ[k] for k in (*_THREAD_VARIABLES, "CUBLAS_WORKSPACE_CONFIG") if k in os.environ},
            pools={p["user_api"]: p["num_threads"] for p in threadpool_info()})
    return _ORIGINAL


def _original_torch_threads(torch: Any) -> int:
    """torch's own thread count in this process, read before any trial set it."""
    global _ORIGINAL_TORCH_THREADS
    if _ORIGINAL_TORCH_THREADS is None:
        _ORIGINAL_TORCH_THREADS = torch.get_num_threads()
    return _ORIGINAL_TORCH_THREADS


def _thread_variables(s: EnvSettings, original: _OriginalState) -> dict[str, str]:
    return {k: str(s.threads) for k in _THREAD_VARIABLES} if s.threads is not None else original.variables


class _TorchImportHook(importlib.abc.MetaPathFinder):
    """Puts the waiting settings' torch part in force as the task's ``import torch`` completes.

    First on ``sys.meta_path`` once settings have waited, it answers for ``torch`` alone: it
    takes the spec the other finders give and wraps its loader (once; it then leaves the path).
    """

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenApplySettings(spec.loader)
        return spec


class _ThenApplySettings(importlib.abc.Loader):
    """torch's own loader, then :func:`_torch_loaded`; the module keeps its own loader.

    torch loads under the process's own thread variables, not a trial's, so that its own
    thread count is read as it would be without a trial (a later trial with ``threads=null``
    gets it back, and with it torch's OpenMP pool), as when torch is imported before any trial.
    """

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__loader__ = module.__spec__.loader = self.loader
        trials = {k: os.environ[k] for k in _THREAD_VARIABLES if k in os.environ}
        _set_variables(_original_state().variables, _THREAD_VARIABLES)
        try:
            self.loader.exec_module(module)
            _original_torch_threads(module)
        finally:
            _set_variables(trials, _THREAD_VARIABLES)
        _torch_loaded(module)


def _torch_loaded(torch: Any) -> None:
    """Put the waiting settings' torch part in force, and read what is in force again."""
    global _LAST, _PENDING
    s, _PENDING = _PENDING, None
    if s is None:
        return
    try:
        from threadpoolctl import threadpool_limits

        if s.threads is not None:  # torch's own pools, loaded now
            threadpool_limits(limits=s.threads)
        _apply_torch(torch, s)
        if _LAST is not None:
            _LAST = read_environment(_LAST.seed, _LAST.device)
    except Exception:  # never fail the task's import; the record reads what is in force
        log.exception("could not put the env settings in force on torch as the task imported it")


def _set_variables(values: Mapping[str, str], names: tuple[str, ...]) -> None:
    for name in names:
        if name in values:
            os.environ[name] = values[name]
        else:
            os.environ.pop(name, None)


def last_environment() -> EnvironmentInForce | None:
    """What is in force after the latest :func:`apply_environment` in this process (None before any): as it
    returned it, or as read again when the task imported torch since."""
    return _LAST


def _torch_now(device: str) -> Any:
    """Installed torch, if the task has imported it or the device depends on it; else None (see the module
    docstring)."""
    if "torch" in sys.modules:
        return sys.modules["torch"]
    if device == "cpu" or (device == "auto" and not gpu_possible()):
        return None
    import torch

    return torch


def gpu_possible() -> bool:
    """Whether torch could see a GPU in this process, answered without importing it.

    False where ``CUDA_VISIBLE_DEVICES`` hides every device, on macOS (no CUDA), and on Linux
    without any of :data:`GPU_DEVICE_FILES`; True otherwise (torch then decides).
    """
    if os.environ.get("CUDA_VISIBLE_DEVICES") in ("", "-1") or sys.platform == "darwin":
        return False
    if sys.platform.startswith("linux"):
        return any(os.path.exists(f) for f in GPU_DEVICE_FILES)
    return True


def _resolve_device(requested: str, torch: Any) -> str:
    has_gpu = torch is not None and torch.cuda.is_available()
    if requested == "cuda" and not has_gpu:
        why = "torch is not installed" if torch is None else (
            "torch sees no GPU (CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')!r}: give trials a GPU with "
            "ray.resources_per_trial.gpu=1, or a fraction such as 0.25)")
        raise EnvironmentSettingError(f"env.device=cuda but {why}. Use env.device=auto to fall back to the CPU.")
    if requested == "auto":
        return "cuda" if has_gpu else "cpu"
    return requested
