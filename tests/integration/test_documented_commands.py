"""The documented commands no other test runs: ``make demo`` and the analysis commands on its
sweep (which is also the suite's check of an SVM sweep's records), and the GPU check's CPU dry
run with its tables (issue 16).

Each is taken from its document by :func:`tests.documented.documented` and run with bash as
written, with at most a few size options added (fewer trials, one workload).
"""

from __future__ import annotations

import itertools
import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from sweeper.record.shared_conditions import merged_tags, shared_from_tags
from tests.conftest import REPO
from tests.documented import documented, run_documented
from tests.integration.conftest import Sweep

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
    """The demo's sweep, with 12 trials, is also the suite's check of what an SVM sweep records (it was a
    sweep of its own in test_cli_sweep, of the same app and config)."""
    demo = documented("make demo")
    small = "OVERRIDES='hydra.sweeper.num_trials=12 hydra.sweeper.n_initial=4 hydra.sweeper.batch_size=4'"
    proc = run_documented(f"{demo} {small}", checkout, timeout=400)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    assert "Finished 12 trials (0 failed)" in output and "Best: trial #" in output, output[-3000:]
    assert f"mlflow ui --backend-store-uri sqlite:///{checkout / 'mlruns.db'}" in output, output[-3000:]
    assert "?workflowType=machine_learning" in output
    assert "Token authentication is enabled" not in output  # Ray's notice on every local start (issue 34)
    (sweep_dir,) = {p.parent for p in (checkout / "multirun").glob("*/*/optimization_results.yaml")}
    sweep = Sweep(proc, sweep_dir, f"sqlite:///{checkout / 'mlruns.db'}")
    check_svm_sweep_records(sweep)
    run8 = sweep.runs("svm-breast-cancer")[0].info.run_id[:8]  # the outputs are keyed by the sweep's run (issue 35)

    proc = run_documented(documented("sweeper report --experiment svm-breast-cancer"), checkout, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    report = (checkout / f"report-svm-breast-cancer-{run8}" / "report.md").read_text()
    assert "12 trials" in report and "test_acc" in report, report[:3000]

    proc = run_documented(documented("sweeper multiverse --experiment svm-breast-cancer"), checkout, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    maps = checkout / f"multiverse-svm-breast-cancer-{run8}-matern52-ard"
    assert (maps / "map_mean_C_gamma.png").stat().st_size > 10_000, sorted(p.name for p in maps.iterdir())
    # Whether the sampler's chains drew one map (decision 0080): in the summary and on the sweep's run.
    chains = json.loads((maps / "summary.json").read_text())["chains"]
    parent = sweep.runs("svm-breast-cancer")[0]
    from mlflow.tracking import MlflowClient

    logged = MlflowClient(sweep.tracking_uri).get_run(parent.info.run_id).data.metrics
    assert logged["multiverse_matern52-ard_chains_rhat"] == pytest.approx(chains["rhat"]) and chains["draws"] == 16
    assert (chains["caution"] is None) == chains["agree"]
    assert chains["agree"] == (chains["rhat"] <= chains["rhat_limit"] or chains["spread"] <= chains["noise"])
    said = "one map" if chains["agree"] else "different maps"
    line = f"chains of the GP's hyperparameter sampler: {said} (potential scale reduction {chains['rhat']:.2f}"
    assert line in proc.stdout, proc.stdout


CONDITION_TAGS = ("sweeper.host", "sweeper.python", "sweeper.pkg.numpy", "sweeper.pkg.scikit-learn",
                  "sweeper.cpu.model", "sweeper.cpu.count", "sweeper.ray.node_id", "sweeper.duration_s")


def check_svm_sweep_records(sweep: Sweep) -> None:
    """A 12-trial sweep of experiments/svm.py (4 Sobol points, two ivr batches of 4): every trial in MLflow
    with its params, metrics, conditions and the GP's tags, the results file, Hydra's folders, Tune's state."""
    assert sweep.proc.returncode == 0, sweep.output
    parent, children = sweep.runs("svm-breast-cancer")

    assert parent.info.status == "FINISHED"
    assert parent.data.params["strategy"] == "ivr"
    assert parent.data.params["space.C"] == "tag(log, interval(1e-3, 1e5))"
    assert len(children) == 12
    assert [int(r.data.tags["sweeper.trial_index"]) for r in children] == list(range(12))
    assert [r.data.tags["sweeper.phase"] for r in children] == ["sobol"] * 4 + ["ivr"] * 8
    assert [r.data.tags["sweeper.batch"] for r in children] == ["0"] * 4 + ["1"] * 4 + ["2"] * 4
    shared = shared_from_tags(parent.data.tags)
    for r in children:
        assert r.info.status == "FINISHED"
        assert 1e-3 <= float(r.data.params["C"]) <= 1e5
        assert 1e-7 <= float(r.data.params["gamma"]) <= 10
        assert r.data.params["data.test_size"] == "0.3"  # the composed config rides along
        assert 0.3 < r.data.metrics["test_acc"] <= 1.0
        assert "train_acc" in r.data.metrics
        tags = merged_tags(r.data.tags, shared)  # with the conditions all trials share, from the sweep's run
        for tag in CONDITION_TAGS:
            assert tags.get(tag), f"{tag} missing on trial {r.data.tags['sweeper.trial_index']}"
        assert r.data.tags["sweeper.status"] == "FINISHED"
    for r in children[4:]:
        assert float(r.data.tags["sweeper.acquisition"]) > 0
        assert float(r.data.tags["sweeper.predicted_sd"]) > 0
        # conf/svm.yaml declares the accuracy's bounds: the searcher's GP predicts inside them, and the quantiles
        # the prospective check reads (2.5, 16, 50, 84, 97.5 %) are its own, inside the bounds too.
        assert 0.0 < float(r.data.tags["sweeper.predicted_mean"]) < 1.0
        quantiles = json.loads(r.data.tags["sweeper.predicted_quantiles"])
        assert len(quantiles) == 5 and 0.0 <= quantiles[0] <= quantiles[2] <= quantiles[4] <= 1.0, quantiles
    assert parent.data.params["metric_bounds"] == "[0, 1]"

    # The IVR points are spread over the (log) space, not clustered.
    X = np.array([[math.log10(float(r.data.params["C"])), math.log10(float(r.data.params["gamma"]))]
                  for r in children]) / 8.0
    assert min(np.linalg.norm(a - b) for a, b in itertools.combinations(X, 2)) > 1e-3

    results = yaml.safe_load((sweep.sweep_dir / "optimization_results.yaml").read_text())
    best = max(children, key=lambda r: r.data.metrics["test_acc"])
    assert results["best_value"] == pytest.approx(best.data.metrics["test_acc"])
    assert results["best_params"]["C"] == pytest.approx(float(best.data.params["C"]))
    assert results["best_value"] > 0.93  # a well-chosen SVC clears 0.95 on this split
    assert results["num_trials"] == 12 and results["num_failed"] == 0
    assert "mlflow ui --backend-store-uri sqlite:///" in sweep.output
    # Hydra's own per-job output folders exist, one per trial.
    assert sorted(int(p.name) for p in sweep.sweep_dir.iterdir() if p.name.isdigit()) == list(range(12))
    # MLflow is the record: Tune keeps its experiment state for resuming, not a second,
    # unredacted copy of every result (its JSON/CSV loggers cost driver time per trial).
    tune_files = [p.name for p in (sweep.sweep_dir / "tune").rglob("*") if p.is_file()]
    assert any(name.startswith("experiment_state") for name in tune_files), tune_files
    assert not {"result.json", "params.json", "progress.csv"} & set(tune_files), tune_files
    assert "Failed to fetch metrics" not in sweep.output  # Tune's warning about the logs it no longer has


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
    # The environment section: the presets read back as set, in one process and in either order, and a GPU asked
    # for where none is visible is refused with the fix (the CPU stand-in of a trial given no GPU).
    read_back = tables.stdout.split("apply_environment, read back")[1].split("\n\n")[1]  # the first table after it
    rows = {line.split(" | ")[0].lstrip("| "): line for line in read_back.splitlines()}
    reproducible = "| openblas=1,openmp=1 | :4096:8 | false | false | true | true | true | cpu | highest | 0 | 1 |"
    assert rows["reproducible"].endswith(reproducible) and rows["reproducible again"].endswith(reproducible), rows
    assert rows["defaults again"] == rows["auto (defaults)"].replace("auto (defaults)", "defaults again"), rows
    assert "- device=cuda: EnvironmentSettingError: env.device=cuda but torch sees no GPU" in tables.stdout
