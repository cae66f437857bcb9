"""What every benchmark reports besides its numbers: the machine, the command, the files.

A table means little without the machine it was measured on and the exact command that
produced it, so both go at the top of every ``bench/results/<name>.md`` and into the JSON.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
PACKAGES = ("ray", "mlflow", "hydra-core", "GPy", "emukit", "botorch", "gpytorch", "torch", "numpy", "scipy")


def machine() -> dict[str, Any]:
    """CPU model, cores, load, BLAS threads and package versions of this process."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {
        "cpu_model": model,
        "cpu_count": os.cpu_count(),
        "cpus_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "load_average_1_5_15": [round(v, 2) for v in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": {},
    }
    for name in PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            info["packages"][name] = metadata.version(name)
    try:
        from threadpoolctl import threadpool_info

        info["blas_threads"] = {p.get("internal_api", "?"): p.get("num_threads") for p in threadpool_info()}
    except ImportError:
        pass
    return info


def source_digest() -> str:
    """A short hash of the sweeper's source (``sweeper/**/*.py``): which code was measured."""
    h = hashlib.sha256()
    for path in sorted((RESULTS_DIR.parents[1] / "sweeper").rglob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def command() -> str:
    """The command line that is running, as a user would type it."""
    return "python -m bench " + shlex.join(sys.argv[1:])


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def fmt(value: float | None, digits: int = 3) -> str:
    """A number for a table cell; ``—`` for a missing or NaN value."""
    if value is None or value != value:
        return "—"
    return f"{value:.{digits}g}" if abs(value) < 10 ** digits else f"{value:.0f}"


def run_jobs(jobs: list[tuple[Any, tuple[Any, ...]]], processes: int) -> list[dict[str, Any]]:
    """Each ``(function, arguments)`` called in one of ``processes`` worker processes; the rows in the jobs' order."""
    with ProcessPoolExecutor(max(1, processes)) as pool:
        return list(pool.map(_call, jobs))


def _call(job: tuple[Callable[..., dict[str, Any]], tuple[Any, ...]]) -> dict[str, Any]:
    fn, job_args = job
    return fn(*job_args)


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def write_results(name: str, markdown: str, raw: dict[str, Any]) -> Path:
    """Write ``<name>.md`` (machine, command, the tables) and ``<name>.json``; print the tables."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    m = machine()
    header = (
        f"Command: `{command()}`  \n"
        f"Machine: {m['cpu_model']}, {m['cpus_available']} of {m['cpu_count']} cores available, "
        f"load average {m['load_average_1_5_15']} at the end; Python {m['python']}; "
        + ", ".join(f"{k} {v}" for k, v in m["packages"].items())
        + f"  \nDate: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; sweeper source sha256 {source_digest()}\n"
    )
    text = f"## {name}\n\n{header}\n{markdown}\n"
    (RESULTS_DIR / f"{name}.md").write_text(text, encoding="utf-8")
    payload = {"name": name, "command": command(), "machine": m, "sweeper_source_sha256": source_digest(), **raw}
    (RESULTS_DIR / f"{name}.json").write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
    print(text)
    print(f"wrote {RESULTS_DIR / (name + '.md')} and {name}.json")
    return RESULTS_DIR / f"{name}.md"


def timed_run(cmd: list[str], cwd: Path, timeout: int,
              extra_env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """Run ``cmd``; return it, the epoch time at launch and its wall seconds. Raise with its output if it fails."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    launched, t = time.time(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc, launched, wall
