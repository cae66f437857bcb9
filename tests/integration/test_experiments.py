"""Every experiment's CPU scale, end to end: the real Hydra command line, a real local Ray, SQLite MLflow.

Budgets are cut further from the command line (fewer trials and epochs) to keep the file
at about two minutes on 2 cores.
"""

from __future__ import annotations

import itertools
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from sweeper.record.shared_conditions import merged_tags, shared_from_tags
from tests.documented import documented, run_documented
from tests.integration.conftest import ONE_AT_A_TIME, Sweep, run_documented_sweep

pytestmark = pytest.mark.integration

PER_EPOCH = ("train_acc", "train_loss", "test_acc", "test_loss")


def _history(sweep: Sweep, run: Any, key: str) -> list[int]:
    """The steps (epochs) at which ``key`` was logged; the final value is the last epoch's, at the last step."""
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


def analyse(command: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """A documented ``sweeper report`` / ``sweeper multiverse`` command, run as written where the sweep's
    MLflow store is (the commands' default ``--tracking-uri sqlite:///mlruns.db``)."""
    proc = run_documented(command, tmp_path, timeout=300)
    assert proc.returncode == 0, f"{command}\n{(proc.stdout + proc.stderr)[-4000:]}"
    return proc


def test_optimizer_gap_cpu(tmp_path: Path) -> None:
    command = documented("python experiments/train.py --multirun +experiment=optimizer_gap/cpu")
    sweep = run_documented_sweep(command, tmp_path, "epochs=2", "hydra.sweeper.num_trials=6",
                    "hydra.sweeper.n_initial=4", "hydra.sweeper.batch_size=2", ONE_AT_A_TIME)
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
            assert m[f"{opt}_{key}"] >= 0 and _history(sweep, r, f"{opt}_{key}") == [0, 1]
    # A well-tuned SGD beats a badly-tuned Adam somewhere, and the other way round elsewhere.
    gaps = [r.data.metrics["gap"] for r in children]
    assert min(gaps) < 0 < max(gaps)
    analyse(documented("sweeper multiverse --experiment optimizer-gap-cpu"), tmp_path)
    (out,) = tmp_path.glob("multiverse-optimizer-gap-cpu-*-matern52-ard")  # keyed by the sweep's run (issue 35)
    assert {"map_mean_optimizer.lr_optimizer.eps.png", "summary.json"} <= {f.name for f in out.iterdir()}


def test_batch_size_cpu(tmp_path: Path) -> None:
    command = documented("python experiments/train.py --multirun +experiment=batch_size/cpu")
    # Its 8 Sobol points (seed 1) of its 20 epochs, not its 24 trials: 4 of them fit their training data (both
    # models, both datasets), enough for the filter below (the 16 trials of seed 0, one IVR batch, also kept 4;
    # with 12 epochs 3 did). The Sobol points and the trainings are seeded: the same 4 every time.
    sweep = run_documented_sweep(command, tmp_path, "hydra.sweeper.seed=1", "hydra.sweeper.num_trials=8",
                                 ONE_AT_A_TIME)
    children = _finished(sweep, "batch-size-cpu", 8)
    for r in children:
        p, m = r.data.params, r.data.metrics
        assert p["model"] in ("mlp", "cnn") and p["data.name"] in ("digits", "breast_cancer")
        assert 16 <= int(p["batch_size"]) <= 1024 and 1e-4 <= float(p["optimizer.lr"]) <= 10 ** -0.5
        assert {"test_acc", "train_acc", "test_loss", "train_loss", "duration_s", "epochs"} <= set(m)
        assert 0 <= m["test_acc"] <= 1 and 0 <= m["train_acc"] <= 1
        assert all(_history(sweep, r, key) == list(range(20)) for key in PER_EPOCH)
    assert {r.data.params["data.name"] for r in children} == {"digits", "breast_cancer"}
    assert len({r.data.params["model"] for r in children}) == 2
    proc = analyse(documented('sweeper multiverse --experiment batch-size-cpu --filter "train_acc >= 0.99"'), tmp_path)
    kept = sum(r.data.metrics["train_acc"] >= 0.99 for r in children)
    assert kept >= 4 and f"({kept} of 8 trials modelled" in proc.stdout, (kept, proc.stdout[-2000:])


def test_seeds_cpu_repeats_bit_identically_in_separate_trials(tmp_path: Path) -> None:
    """2 seeds x 2 thread counts x deterministic on/off, the grid run twice (16 trials)."""
    command = documented("python experiments/train.py --multirun +experiment=seeds/cpu")
    sweep = run_documented_sweep(command, tmp_path, "epochs=2",  # params={...} replaces the YAML's params
                    "hydra.sweeper.params={env.seed:'range(0, 2)',env.threads:'choice(1, 2)',"
                    "env.deterministic:'choice(true, false)'}",
                    "hydra.sweeper.grid_repeats=2", "hydra.sweeper.num_trials=16", "hydra.sweeper.n_initial=16",
                    "hydra.sweeper.batch_size=16")
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
    # One worker ran every trial: the first imported scikit-learn and SciPy (their own OpenBLAS and OpenMP) after
    # its environment was read, the later ones had them loaded. Equal settings must still read as equal conditions.
    parent = sweep.runs("seeds-cpu")[0]
    shared = shared_from_tags(parent.data.tags)
    pools = {(r.data.params["env.threads"], merged_tags(r.data.tags, shared)["sweeper.env_in_force.blas_threads"])
             for r in children}
    assert sorted(pools) == [("1", "openblas=1,openmp=1"), ("2", "openblas=2,openmp=2")], pools
    by_seed = {seed: cells[(seed, "1", "True")][0].data.metrics["train_loss"] for seed in ("0", "1")}
    assert by_seed["0"] != by_seed["1"]  # a different seed is a different measurement
    # Without the GP surrogate's expected-max curve (a grid is not random search, so the report draws one by
    # default): the repeated measurements' statistics below are what this experiment is for.
    analyse(f'{documented("sweeper report --experiment seeds-cpu")} --surrogate never', tmp_path)
    (folder,) = tmp_path.glob("report-seeds-cpu-*")  # keyed by the sweep's run (issue 35)
    report = (folder / "report.md").read_text()
    assert "CV*" in report and "Wilcoxon" in report, report[:3000]


def test_budget_cpu_reports_one_expected_max_curve_per_family(tmp_path: Path) -> None:
    command = documented("python experiments/train.py --multirun +experiment=budget/cpu")
    sweep = run_documented_sweep(command, tmp_path, "epochs=2", "hydra.sweeper.num_trials=8", ONE_AT_A_TIME)
    children = _finished(sweep, "budget-cpu", 8)
    assert {r.data.tags["sweeper.phase"] for r in children} == {"random"}
    assert {r.data.params["model"] for r in children} == {"logreg", "mlp"}
    for r in children:
        assert r.data.params["optimizer.name"] in ("sgd", "adam")
        assert 16 <= int(r.data.params["batch_size"]) <= 256
        assert all(_history(sweep, r, key) == [0, 1] for key in PER_EPOCH)
    analyse(documented("sweeper report --experiment budget-cpu --group-by model"), tmp_path)
    (folder,) = tmp_path.glob("report-budget-cpu-*")
    report = (folder / "report.md").read_text()
    assert "model=logreg" in report and "model=mlp" in report
