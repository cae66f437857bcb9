"""The documented commands no other test runs: ``make demo`` and the analysis commands on its
sweep, and the GPU check's CPU dry run with its tables (issue 16).

Each is taken from its document by :func:`tests.documented.documented` and run with bash as
written, with at most a few size options added (fewer trials, one workload).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.documented import documented, run_documented

pytestmark = pytest.mark.integration


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """What ``make demo`` reads (the Makefile, the app, its configs), copied with their times, and the
    project's installed .venv linked in, so the demo's sweep and records land here, not in the repo."""
    for name in ("Makefile", "pyproject.toml", "requirements.lock"):
        shutil.copy2(REPO / name, tmp_path / name)
    for name in ("experiments", "conf"):
        shutil.copytree(REPO / name, tmp_path / name, copy_function=shutil.copy2)
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    # The stamp of `make install` is newer than the lock: make reuses the .venv, never rebuilds the real one.
    assert subprocess.run(["make", "--question", ".venv/.installed"], cwd=tmp_path).returncode == 0, \
        "the project's .venv is older than requirements.lock or pyproject.toml: run `make install` first"
    return tmp_path


def test_make_demo_then_the_readmes_report_and_multiverse_on_its_sweep(checkout: Path) -> None:
    demo = documented("make demo")
    small = "OVERRIDES='hydra.sweeper.num_trials=8 hydra.sweeper.n_initial=4 hydra.sweeper.batch_size=4'"
    proc = run_documented(f"{demo} {small}", checkout, timeout=400)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert "Finished 8 trials (0 failed)" in output and "Best: trial #" in output, output[-3000:]
    assert f"mlflow ui --backend-store-uri sqlite:///{checkout / 'mlruns.db'}" in output, output[-3000:]
    assert "?workflowType=machine_learning" in output

    proc = run_documented(documented("sweeper report --experiment svm-breast-cancer"), checkout, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    report = (checkout / "report-svm-breast-cancer" / "report.md").read_text()
    assert "8 trials" in report and "test_acc" in report, report[:3000]

    proc = run_documented(documented("sweeper multiverse --experiment svm-breast-cancer"), checkout, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    maps = checkout / "multiverse-svm-breast-cancer-matern52-ard"
    assert (maps / "map_mean_C_gamma.png").stat().st_size > 10_000, sorted(p.name for p in maps.iterdir())


def test_the_gpu_checks_cpu_dry_run_and_its_tables(tmp_path: Path) -> None:
    dry_run = documented("python bench/gpu_check.py --out dry.json --device cpu")
    script = str(REPO / "bench" / "gpu_check.py")
    small = "--quick --workloads cnn-digits --modes reproducible --sections environment,determinism"
    proc = run_documented(f"{dry_run.replace('bench/gpu_check.py', script)} {small}", tmp_path, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    results = json.loads((tmp_path / "dry.json").read_text())
    assert {"environment", "determinism"} <= set(results["sections"]), sorted(results["sections"])

    shutil.copy(tmp_path / "dry.json", tmp_path / "results.json")
    tables = run_documented(documented("python bench/gpu_check.py --markdown results.json").replace(
        "bench/gpu_check.py", script), tmp_path, timeout=120)
    assert tables.returncode == 0, tables.stderr[-3000:]
    # Two trainings in one process and one in another, same seed, reproducible mode: bit-identical on the CPU.
    assert "| cnn-digits | reproducible | True / True |" in tables.stdout, tables.stdout[-3000:]
