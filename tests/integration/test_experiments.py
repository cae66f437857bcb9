"""Every experiment's CPU scale, end to end: the real Hydra command line, a real local Ray, SQLite MLflow.

Budgets are cut further from the command line (fewer trials and epochs) to keep the file
at about two minutes on 2 cores.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.integration.conftest import Sweep, run_cli

pytestmark = pytest.mark.integration

TRAIN_APP = REPO / "experiments" / "train.py"
PER_EPOCH = ("train_acc", "train_loss", "test_acc", "test_loss")


def _history(sweep: Sweep, run: Any, key: str) -> list[int]:
    """The steps (epochs) at which ``key`` was logged; the final value is logged once more, at the last step."""
    from mlflow.tracking import MlflowClient

    history = MlflowClient(sweep.tracking_uri).get_metric_history(run.info.run_id, key)
    last_epoch = max(history, key=lambda m: (m.step, m.timestamp))
    assert any(m.value == run.data.metrics[key] for m in history if m.step == last_epoch.step)
    return sorted({m.step for m in history})


def _finished(sweep: Sweep, experiment: str, n: int) -> list[Any]:
    assert sweep.proc.returncode == 0, sweep.output
    parent, children = sweep.runs(experiment)
    assert parent.info.status == "FINISHED"
    assert len(children) == n
    assert all(r.info.status == "FINISHED" for r in children), [r.data.tags.get("sweeper.error") for r in children]
    return children


def test_optimizer_gap_cpu(tmp_path: Path) -> None:
    sweep = run_cli(TRAIN_APP, tmp_path, "+experiment=optimizer_gap/cpu", "epochs=2", "hydra.sweeper.num_trials=6",
                    "hydra.sweeper.n_initial=4", "hydra.sweeper.batch_size=2")
    children = _finished(sweep, "optimizer-gap-cpu", 6)
    assert [r.data.tags["sweeper.phase"] for r in children] == ["sobol"] * 4 + ["ivr"] * 2
    for r in children:
        m = r.data.metrics
        assert 1e-4 <= float(r.data.params["optimizer.lr"]) <= 1
        assert 1e-11 <= float(r.data.params["optimizer.eps"]) <= 1e-4
        assert r.data.params["task"] == "optimizer_gap" and r.data.params["model"] == "mlp"
        assert m["gap"] == pytest.approx(m["sgd_test_acc"] - m["adam_test_acc"])
        assert m["epochs"] == 2 and m["duration_s"] > 0
        for opt, key in itertools.product(("sgd", "adam"), PER_EPOCH):
            assert 0 <= m[f"{opt}_{key}"] and _history(sweep, r, f"{opt}_{key}") == [0, 1]
    # A well-tuned SGD beats a badly-tuned Adam somewhere, and the other way round elsewhere.
    gaps = [r.data.metrics["gap"] for r in children]
    assert min(gaps) < 0 < max(gaps)


def test_batch_size_cpu(tmp_path: Path) -> None:
    sweep = run_cli(TRAIN_APP, tmp_path, "+experiment=batch_size/cpu", "epochs=3", "hydra.sweeper.num_trials=8",
                    "hydra.sweeper.n_initial=4", "hydra.sweeper.batch_size=4")
    children = _finished(sweep, "batch-size-cpu", 8)
    for r in children:
        p, m = r.data.params, r.data.metrics
        assert p["model"] in ("mlp", "cnn") and p["data.name"] in ("digits", "breast_cancer")
        assert 16 <= int(p["batch_size"]) <= 1024 and 1e-4 <= float(p["optimizer.lr"]) <= 10 ** -0.5
        assert {"test_acc", "train_acc", "test_loss", "train_loss", "duration_s", "epochs"} <= set(m)
        assert 0 <= m["test_acc"] <= 1 and 0 <= m["train_acc"] <= 1
        assert all(_history(sweep, r, key) == [0, 1, 2] for key in PER_EPOCH)
    assert {r.data.params["data.name"] for r in children} == {"digits", "breast_cancer"}
    assert len({r.data.params["model"] for r in children}) == 2


def test_seeds_cpu_repeats_bit_identically_in_separate_trials(tmp_path: Path) -> None:
    """2 seeds x 2 thread counts x deterministic on/off, each cell measured twice (16 Sobol points)."""
    sweep = run_cli(TRAIN_APP, tmp_path, "+experiment=seeds/cpu", "epochs=2",
                    "hydra.sweeper.params={env.seed:'range(0, 2)'}",  # merged: the two choices stay
                    "hydra.sweeper.num_trials=16", "hydra.sweeper.n_initial=16", "hydra.sweeper.batch_size=16")
    children = _finished(sweep, "seeds-cpu", 16)
    cells: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    for r in children:
        p = r.data.params
        assert (p["model"], p["optimizer.lr"], p["batch_size"]) == ("mlp", "0.05", "32")  # one fixed configuration
        assert all(_history(sweep, r, key) == [0, 1] for key in PER_EPOCH)
        cells[(p["env.seed"], p["env.threads"], p["env.deterministic"])].append(r)
    assert sorted(cells) == sorted(itertools.product(("0", "1"), ("1", "2"), ("True", "False")))
    assert all(len(runs) == 2 for runs in cells.values())
    for (seed, threads, deterministic), (a, b) in cells.items():
        assert a.data.tags["sweeper.trial_index"] != b.data.tags["sweeper.trial_index"]
        if deterministic == "True":  # same seed, threads and deterministic kernels: the very same numbers
            for key in ("test_acc", "test_loss", "train_loss"):
                assert a.data.metrics[key] == b.data.metrics[key], (seed, threads, key)
    by_seed = {seed: cells[(seed, "1", "True")][0].data.metrics["train_loss"] for seed in ("0", "1")}
    assert by_seed["0"] != by_seed["1"]  # a different seed is a different measurement


def test_budget_cpu_reports_one_expected_max_curve_per_family(tmp_path: Path) -> None:
    sweep = run_cli(TRAIN_APP, tmp_path, "+experiment=budget/cpu", "epochs=2", "hydra.sweeper.num_trials=8")
    children = _finished(sweep, "budget-cpu", 8)
    assert {r.data.tags["sweeper.phase"] for r in children} == {"random"}
    assert {r.data.params["model"] for r in children} == {"logreg", "mlp"}
    for r in children:
        assert r.data.params["optimizer.name"] in ("sgd", "adam")
        assert 16 <= int(r.data.params["batch_size"]) <= 256
        assert all(_history(sweep, r, key) == [0, 1] for key in PER_EPOCH)
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "sweeper.cli", "report", "--experiment", "budget-cpu",
                           "--tracking-uri", sweep.tracking_uri, "--group-by", "model", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = (out / "report.md").read_text()
    assert "model=logreg" in report and "model=mlp" in report
