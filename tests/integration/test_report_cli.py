"""``sweeper report`` end to end: real sweeps through the Hydra command line, then the report command.

Two sweeps, each run once for the module: a ``random`` sweep of the toy app (Branin, mode
min), and a ``sobol`` sweep of the noisy app over ``env.seed x env.threads`` with the
hyperparameters fixed (8 Sobol points over 4 x 2 choices are exactly the full factorial),
which makes one QRA group of 8 measurements and 4 seed-paired threads comparisons.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sweeper.analysis import compare_conditions, expected_max, qra
from sweeper.record.shared_conditions import merged_tags, shared_from_tags
from sweeper.report.groups import BOOKKEEPING_TAGS
from tests.conftest import REPO
from tests.integration.conftest import ONE_AT_A_TIME, TOY_APP, Sweep, run_cli

pytestmark = pytest.mark.integration

NOISY_APP = REPO / "tests" / "integration" / "apps" / "noisy.py"
REPORT_FILES = ("report.md", "report.html", "expected_max.csv", "budget_to_reach.csv", "qra.csv", "conditions.csv",
                "environment.csv", "failures.csv", "trials.csv", "summary.json", "expected_max_trials.png")


def report_cli(sweep: Sweep, experiment: str, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "sweeper.cli", "report", "--experiment", experiment,
           "--tracking-uri", sweep.tracking_uri, "--out", str(out), *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def random_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Sweep, subprocess.CompletedProcess[str], Path]:
    tmp = tmp_path_factory.mktemp("random")
    sweep = run_cli(TOY_APP, tmp, "hydra.sweeper.strategy=random", "hydra.sweeper.num_trials=12", ONE_AT_A_TIME)
    assert sweep.proc.returncode == 0, sweep.output
    return sweep, report_cli(sweep, "toy", tmp / "report"), tmp / "report"


@pytest.fixture(scope="module")
def seed_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Sweep, subprocess.CompletedProcess[str], Path]:
    tmp = tmp_path_factory.mktemp("seeds")
    sweep = run_cli(NOISY_APP, tmp, "x=0.3", "y=0.6", "env.seed=choice(0,1,2,3)",
                    "env.threads=choice(1,2)", "hydra.sweeper.strategy=sobol", "hydra.sweeper.num_trials=8")
    assert sweep.proc.returncode == 0, sweep.output
    return sweep, report_cli(sweep, "noisy", tmp / "report"), tmp / "report"


def artifacts(sweep: Sweep, run_id: str) -> set[str]:
    from mlflow.tracking import MlflowClient

    return {Path(a.path).name for a in MlflowClient(sweep.tracking_uri).list_artifacts(run_id, "report")}


def test_random_sweep_report_matches_the_api_and_is_in_mlflow(random_sweep) -> None:
    sweep, proc, out = random_sweep
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert str(out / "report.html") in proc.stdout and "mlflow ui --backend-store-uri sqlite:///" in proc.stdout
    for name in REPORT_FILES:
        assert (out / name).exists(), name
    parent, children = sweep.runs("toy")
    logged = artifacts(sweep, parent.info.run_id)
    assert {p.name for p in out.iterdir()} <= logged and set(REPORT_FILES) <= logged
    # The CSV's curve is the API's, on the values MLflow holds (mode min: expected minimum).
    values = [r.data.metrics["score"] for r in children]
    durations = [r.data.metrics["sweeper.duration_s"] for r in children]
    em = expected_max(values, durations_s=durations, maximize=False)
    csv = pd.read_csv(out / "expected_max.csv")
    assert csv["n"].tolist() == list(range(1, 13)) and set(csv["group"]) == {"all trials"}
    np.testing.assert_allclose(csv["mean"], em.mean, rtol=0, atol=1e-9)
    np.testing.assert_allclose(csv["std"], em.std, rtol=0, atol=1e-9)
    np.testing.assert_allclose(csv["budget_s"], em.budget_s, rtol=0, atol=1e-9)
    text = (out / "report.md").read_text()
    assert "Caution" not in text and "i.i.d." not in text.split("## ")[0]
    assert "No two finished trials measured the same object" in text
    assert len(pd.read_csv(out / "qra.csv")) == 0


def test_seed_sweep_report_has_the_caution_qra_and_crane_statistics(seed_sweep) -> None:
    sweep, proc, out = seed_sweep
    assert proc.returncode == 0, proc.stdout + proc.stderr
    parent, children = sweep.runs("noisy")
    check_shared_conditions(sweep, parent, children, out)
    assert set(REPORT_FILES) | {"environment_env_threads.png"} <= artifacts(sweep, parent.info.run_id)
    text = (out / "report.md").read_text()
    top = text.split("## ")[0]
    assert "**Caution: the empirical expected-max estimator assumes i.i.d. random draws" in top
    assert "came from `sobol`" in top
    # The surrogate curve models the categorical env.seed x env.threads by coregionalization.
    assert "coregionalization of column 0" in text and "coregionalization of column 1" in text
    assert "surrogate_expected_max.png" in artifacts(sweep, parent.info.run_id)
    # The curve carries its GP's predictive checks, in words and as metrics on the sweep's run: 8 trials, and
    # every dim a condition of measurement (one configuration), too few for a verdict.
    assert "Too few trials to judge the GP behind this curve by its predictive checks" in text
    assert "leave-one-configuration-out (" in text
    metrics = parent.data.metrics
    assert 0 <= metrics["surrogate_loo_coverage95"] <= 1 and metrics["surrogate_loo_n"] == 8
    assert metrics["surrogate_loco_n"] == 8 and "surrogate_calibration_failed" not in metrics
    assert metrics["surrogate_loo_rmse"] > 0

    # QRA: all 8 trials measured one object (x, y fixed) under differing env.seed and env.threads.
    scores = {int(r.data.tags["sweeper.trial_index"]): r.data.metrics["score"] for r in children}
    row = pd.read_csv(out / "qra.csv").set_index("measurand").loc["score"]
    expected = qra(list(scores.values()))
    assert row["n"] == 8
    for column, value in [("mean", expected.mean), ("std", expected.std), ("ci_low", expected.std_ci[0]),
                          ("ci_high", expected.std_ci[1]), ("cv_star", expected.cv_star)]:
        assert row[column] == pytest.approx(value, rel=0, abs=1e-9), column
    conditions = pd.read_csv(out / "conditions.csv")
    assert len(conditions) == 8 and {"env.seed", "env.threads"} <= set(conditions.columns)
    # The page's table leaves out what restates another column value for value (the CSV keeps it all).
    assert {"env.OMP_NUM_THREADS", "threads.numpy.openblas", "env_in_force.seed"} <= set(conditions.columns)
    header = next(line for line in text.splitlines() if line.startswith("| index | run_id |"))
    assert "| env.seed | env.threads |" in header and "OMP_NUM_THREADS" not in header
    assert "threads.numpy.openblas" not in header and "env_in_force.seed" not in header
    assert sorted(zip(conditions["env.seed"], conditions["env.threads"], strict=True)) == [
        (s, t) for s in range(4) for t in (1, 2)]

    # Crane: threads 1 vs 2 paired on the seed.
    by = {(int(r.data.params["env.seed"]), int(r.data.params["env.threads"])): r.data.metrics["score"]
          for r in children}
    a, b = [by[(s, 1)] for s in range(4)], [by[(s, 2)] for s in range(4)]
    env = pd.read_csv(out / "environment.csv").iloc[0]
    ref = compare_conditions(a, b)
    assert env["condition"] == "env.threads" and env["n_pairs"] == 4
    for column in ("mean_difference", "wilcoxon_p", "t_statistic", "t_p", "kendall_tau", "spearman_rho"):
        assert env[column] == pytest.approx(getattr(ref, column), abs=1e-9), column
    assert "![score under each value of env.threads](environment_env_threads.png)" in text
    assert (out / "report.html").read_text().count("data:image/png;base64,") == len(list(out.glob("*.png")))


def check_shared_conditions(sweep: Sweep, parent: Any, children: list[Any], out: Path) -> None:
    """The conditions every trial shares are on the sweep's run, once; each trial keeps those that differ (here the
    swept seed and threads) and loses none: with the shared ones put back it holds all its conditions.json holds,
    and the report's checklist reads them."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(sweep.tracking_uri)
    shared = shared_from_tags(parent.data.tags)
    assert shared is not None and shared["host"] == socket.gethostname(), parent.data.tags
    assert {"python", "os", "cpu.model", "pkg.numpy", "packages.sha256", "code.script_sha256"} <= set(shared)
    varied = parent.data.tags["sweeper.varied_conditions"].split(", ")
    assert {"seed", "threads.numpy.openblas", "env_in_force.seed"} <= set(varied) and not set(varied) & set(shared)
    for run in children:
        tags = {k.removeprefix("sweeper.") for k in run.data.tags}
        assert not tags & set(shared) and set(varied) <= tags, tags
        assert len(tags - BOOKKEEPING_TAGS) < len(shared) / 2, tags  # of ~45 condition tags, only what differs
        record = json.loads(Path(client.download_artifacts(run.info.run_id, "conditions.json", str(out))).read_text())
        recorded = {**record["object_conditions"], **record["measurement_procedure"]}
        recorded.pop("environment_requested")
        merged = merged_tags(run.data.tags, shared)
        assert {k: merged.get(f"sweeper.{k}") for k in recorded} == recorded
    checklist = json.loads((out / "summary.json").read_text())["checklist"]  # read from the shared ones
    assert checklist["Hardware: CPU"].endswith(f"host {socket.gethostname()}"), checklist["Hardware: CPU"]
    assert f"numpy {np.__version__}" in checklist["Software versions"], checklist["Software versions"]


def test_report_cli_errors_are_clear(seed_sweep, tmp_path: Path) -> None:
    sweep, _, _ = seed_sweep
    bad = report_cli(sweep, "noisy", tmp_path / "r", "--filter", "score => 0.9")
    assert bad.returncode == 1
    assert "invalid filter 'score => 0.9': expected \"<metric> <op> <number>\"" in bad.stderr
    missing = report_cli(sweep, "nope", tmp_path / "r")
    assert missing.returncode == 1 and "no experiment 'nope'" in missing.stderr and "noisy" in missing.stderr
    assert not (tmp_path / "r").exists()


def test_load_sweep_pages_through_every_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.sweep_report import write_synthetic_sweep
    from sweeper.analysis import runs

    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    write_synthetic_sweep(uri, "paged", 3, repeats=0, strategy="random")  # an older sweep: not the latest
    parent = write_synthetic_sweep(uri, "paged", 12, repeats=4, fail_rate=0.0)
    monkeypatch.setattr(runs, "PAGE_SIZE", 5)  # 12 runs: three pages
    records = runs.load_sweep("paged", uri)
    assert records.parent_run_id == parent and records.strategy == "ivr" and records.metric == "score"
    assert records.trials["index"].tolist() == list(range(12))
    assert records.space is not None and records.space.names == ["x", "y"]
    assert records.trials["param.env.threads"].dtype == np.int64
    assert len(records.finished()) == 12 and len(records.failed()) == 0
    child = records.trials["run_id"].iloc[0]
    with pytest.raises(runs.SweepNotFoundError, match=f"it is a trial of sweep {parent}"):
        runs.load_sweep("paged", uri, run_id=child)
    with pytest.raises(runs.SweepNotFoundError, match="the file does not exist"):
        runs.load_sweep("paged", f"sqlite:///{tmp_path / 'missing.db'}")


def test_the_scale_minimum_the_qra_advice_names_is_an_option(seed_sweep, tmp_path: Path) -> None:
    sweep, _, _ = seed_sweep
    proc = report_cli(sweep, "noisy", tmp_path / "r", "--scale-min", "0.1", "--surrogate", "never", "--no-log")
    assert proc.returncode == 0, proc.stderr
    parent, children = sweep.runs("noisy")
    expected = qra([r.data.metrics["score"] for r in children], scale_min=0.1)
    row = pd.read_csv(tmp_path / "r" / "qra.csv").set_index("measurand").loc["score"]
    assert row["cv_star"] == pytest.approx(expected.cv_star, abs=1e-9) and expected.cv_star != qra(
        [r.data.metrics["score"] for r in children]).cv_star
    assert "scale minimum 0.1, set by --scale-min" in (tmp_path / "r" / "report.md").read_text()


def report_in(sweep: Sweep, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``sweeper report`` of the noisy sweep as a user runs it in ``cwd``: no --out, the default folder."""
    cmd = [sys.executable, "-m", "sweeper.cli", "report", "--experiment", "noisy", "--tracking-uri",
           sweep.tracking_uri, "--surrogate", "never", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)


def test_reports_with_and_without_a_filter_never_mix_and_the_sweep_run_leads_to_them(seed_sweep,
                                                                                     tmp_path: Path) -> None:
    """Issue 35: folders keyed by sweep run and filter, each rewritten as a whole, locally and in MLflow, and
    the sweep's run describes itself (command, best trial, trial count) and links to every report logged."""
    from mlflow.tracking import MlflowClient

    from sweeper.report import parse_filter
    from sweeper.report.outputs import filter_hash

    sweep, _, _ = seed_sweep
    parent, children = sweep.runs("noisy")
    run, client = parent.info.run_id, MlflowClient(sweep.tracking_uri)
    rule = f"score >= {float(np.median([r.data.metrics['score'] for r in children])):.6f}"
    digest = filter_hash(parse_filter(rule))
    # An earlier report of each kind left a file the next must not keep: in MLflow's report/ and on disk.
    client.log_text(run, "old", "report/stale.txt")
    unfiltered = tmp_path / f"report-noisy-{run[:8]}"
    unfiltered.mkdir()
    (unfiltered / "summary.json").write_text("{}")
    (unfiltered / "stale.txt").write_text("old")

    proc = report_in(sweep, tmp_path, "--filter", rule)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"under report-filtered-{digest}/" in proc.stdout
    proc = report_in(sweep, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    filtered = tmp_path / f"{unfiltered.name}-{digest}"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([unfiltered.name, filtered.name])  # no staging left
    assert (filtered / "filtered.csv").is_file() and not (unfiltered / "filtered.csv").exists()
    assert not (unfiltered / "stale.txt").exists() and (unfiltered / "report.html").is_file()
    assert "filtered.csv" in artifacts_in(client, run, f"report-filtered-{digest}")
    assert {p.name for p in unfiltered.iterdir()} == artifacts_in(client, run, "report")  # stale.txt is gone

    parent = client.get_run(run)
    note = parent.data.tags["mlflow.note.content"]
    best = max(children, key=lambda r: r.data.metrics["score"])
    assert parent.data.metrics["best_score"] == pytest.approx(best.data.metrics["score"])
    assert parent.data.metrics["num_trials"] == 8
    assert "noisy.py --multirun hydra/sweeper=multiverse" in note and "- Trials: 8 (8 finished, 0 failed)" in note
    assert f"- Best trial: #{best.data.tags['sweeper.trial_index']} (" in note and "env.seed=" in note
    assert "`report/report.html`" in note and f"`report-filtered-{digest}/report.html`" in note
    assert f"written to `{unfiltered}`" in note

    # An --out that holds something else is never deleted.
    (tmp_path / "notes.txt").write_text("mine")
    refused = report_cli(sweep, "noisy", tmp_path)
    assert refused.returncode == 1 and "holds files but no summary.json" in refused.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine"


def artifacts_in(client: object, run_id: str, folder: str) -> set[str]:
    listed = client.list_artifacts(run_id, folder)  # type: ignore[attr-defined]  # an MlflowClient
    return {Path(a.path).name for a in listed}


def test_the_commands_the_sweep_prints_last_run_as_printed(random_sweep, tmp_path: Path) -> None:
    import shlex

    sweep, _, _ = random_sweep
    lines = sweep.output.split("Next:\n", 1)[1].splitlines()[:2]
    assert [line.split()[:2] for line in lines] == [["sweeper", "report"], ["sweeper", "multiverse"]]
    assert re.search(r"\[12/12, \d+:\d\d elapsed\] #\d+ ", sweep.output)  # the last progress line: nothing left
    for k, line in enumerate(lines):
        argv = shlex.split(line)[1:]
        proc = subprocess.run([sys.executable, "-m", "sweeper.cli", *argv, "--no-log", "--out", str(tmp_path / str(k))],
                              cwd=tmp_path, capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, line + "\n" + proc.stderr
        assert (tmp_path / str(k) / "summary.json").exists()
