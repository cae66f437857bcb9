"""``sweeper multiverse`` end to end, and categorical dims and stop_on_bayes_factor through the Hydra CLI.

One ``ivr`` sweep over ``lr`` (log) x ``width`` x ``family`` (a choice, so the searcher's
coregionalized GP chooses the points), some trials failing and some filtered, then the
analysis command with two kernels; and a sweep that stops on a conclusive Bayes factor.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.conftest import REPO
from tests.integration.conftest import ONE_AT_A_TIME, TOY_APP, Sweep, run_cli

pytestmark = pytest.mark.integration

FORKS_APP = REPO / "tests" / "integration" / "apps" / "forks.py"
FILES = ("map_mean_lr_width.png", "map_sd_lr_width.png", "map_lr_width.csv", "bayes_factors.csv",
         "interaction.json", "sensitivity.png", "sensitivity.csv", "coregionalization_family.png",
         "coregionalization_family.csv", "loo.csv", "summary.json", "multiverse.md")


def multiverse_cli(sweep: Sweep, out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "sweeper.cli", "multiverse", "--experiment", "forks",
           "--tracking-uri", sweep.tracking_uri, "--out", str(out), "--resolution", "12", *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def forks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Sweep, Path]:
    tmp = tmp_path_factory.mktemp("forks")
    sweep = run_cli(FORKS_APP, tmp, "fail_above=0.9", "hydra.sweeper.live_maps=true", ONE_AT_A_TIME)
    assert sweep.proc.returncode == 0, sweep.output
    return sweep, tmp


def logged(sweep: Sweep, run_id: str, folder: str) -> set[str]:
    from mlflow.tracking import MlflowClient

    return {Path(a.path).name for a in MlflowClient(sweep.tracking_uri).list_artifacts(run_id, folder)}


def test_ivr_with_a_categorical_dim_runs_through_hydra(forks) -> None:
    sweep, _ = forks
    parent, children = sweep.runs("forks")
    assert len(children) == 16
    ivr = [r for r in children if r.data.tags["sweeper.phase"] == "ivr"]
    # (that IVR reaches every category is shown in tests/unit/test_policy_categorical.py)
    assert len(ivr) == 8 and {r.data.params["family"] for r in children} == {"plain", "residual"}
    assert all(float(r.data.tags["sweeper.predicted_sd"]) >= 0 for r in ivr)


def test_the_sweep_logged_a_live_map_of_each_gp_batch(forks) -> None:
    """Issue 19: after each GP batch, its map (two PNGs), the GP's leave-one-out check and the trials it
    rests on, on the sweep's run, the metrics at step = the batch."""
    from mlflow.tracking import MlflowClient

    sweep, _ = forks
    parent, children = sweep.runs("forks")
    assert logged(sweep, parent.info.run_id, "live") == {f"batch_{b:03d}_{what}.png" for b in (1, 2)
                                                          for what in ("mean", "sd")}
    client = MlflowClient(sweep.tracking_uri)
    history = {key: {m.step: m.value for m in client.get_metric_history(parent.info.run_id, key)}
               for key in ("live_trials", "live_loo_n", "live_loo_coverage95", "live_loo_rmse", "live_draw_cpu_s")}
    assert all(list(steps) == [1, 2] for steps in history.values()), history
    finished = sum(r.info.status == "FINISHED" for r in children)
    trials = history["live_trials"]
    assert 4 <= trials[1] < trials[2] <= finished and history["live_loo_n"] == trials
    assert all(0 <= v <= 1 for v in history["live_loo_coverage95"].values())
    assert all(v > 0 for v in [*history["live_loo_rmse"].values(), *history["live_draw_cpu_s"].values()])
    png = client.download_artifacts(parent.info.run_id, "live/batch_002_mean.png", str(sweep.sweep_dir / "live"))
    assert Path(png).read_bytes().startswith(b"\x89PNG") and 10_000 < Path(png).stat().st_size < 150_000


def test_multiverse_writes_and_logs_every_artifact(forks) -> None:
    from sweeper.report import parse_filter
    from sweeper.report.outputs import filter_hash

    sweep, tmp = forks
    out = tmp / "mv"
    proc = multiverse_cli(sweep, out, "--filter", "train_acc >= 0.9")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "interaction all: log10 K =" in proc.stdout and "sensitivity family:" in proc.stdout
    assert "effect of any choice: log10 K =" in proc.stdout and "depends on any choice" not in proc.stderr
    for name in FILES:
        assert (out / name).stat().st_size > 0, name
    parent, children = sweep.runs("forks")
    # A filtered map has its own MLflow folder, named in the output, never the unfiltered one's (issue 35).
    folder = f"matern52-ard-filtered-{filter_hash(parse_filter('train_acc>=0.90'))}"
    assert f"under multiverse/{folder}/" in proc.stdout
    assert set(FILES) <= logged(sweep, parent.info.run_id, f"multiverse/{folder}")
    assert not logged(sweep, parent.info.run_id, "multiverse/matern52-ard")
    summary = json.loads((out / "summary.json").read_text())
    failed = sum(r.info.status == "FAILED" for r in children)
    filtered = sum(r.info.status == "FINISHED" and r.data.metrics["train_acc"] < 0.9 for r in children)
    assert failed > 0 and summary["trials"] == {"run": 16, "kept": 16 - failed - filtered, "failed": failed,
                                                "filtered": filtered, "fit": 16 - failed - filtered}
    grid = pd.read_csv(out / "map_lr_width.csv")
    assert set(grid["facet"]) == {"family=plain", "family=residual"} and len(grid) == 2 * 12 * 12
    lr = np.sort(grid["lr"].unique())
    np.testing.assert_allclose(lr, np.logspace(-4, 0, 12))  # a log axis in original units
    assert np.all(grid["sd"] >= 0) and grid["mean"].between(-0.5, 1.2).all()
    assert np.all(grid["sd"] >= grid["sd_latent"])  # a new trial's sd: the GP's uncertainty plus noise
    # The GP's leave-one-out check: per trial, in the summary, next to the maps, and on the sweep's run.
    loo = summary["loo"]
    assert loo["n"] == summary["trials"]["fit"] and 0 <= loo["coverage68"] <= loo["coverage95"] <= 1
    assert len(pd.read_csv(out / "loo.csv")) == loo["n"]
    # ... and the searcher's own predictions of the trials it chose, scored by hand from their records.
    calibration = summary["calibration"]
    markdown = (out / "multiverse.md").read_text()
    assert calibration["sentence"] in markdown and "| predictive check | verdict |" in markdown
    assert set(calibration["checks"]) == {"leave-one-out", "leave-one-configuration-out", "prospective"}
    verdicts = {c["verdict"] for c in calibration["checks"].values()}
    assert verdicts <= {"passed", "failed", "conservative", "too few trials"}
    assert calibration["verdict"] == ("failed" if "failed" in verdicts else calibration["verdict"])
    kept = [r for r in children if r.info.status == "FINISHED" and r.data.metrics["train_acc"] >= 0.9
            and "sweeper.predicted_mean" in r.data.tags]
    # Each is read by the predictive's own quantiles (2.5, 16, 50, 84, 97.5 %), recorded beside its mean and sd.
    quantiles = np.array([json.loads(r.data.tags["sweeper.predicted_quantiles"]) for r in kept])
    assert quantiles.shape == (len(kept), 5) and np.all(np.diff(quantiles, axis=1) >= 0)
    result = np.array([r.data.metrics["test_acc"] for r in kept])
    prospective = calibration["checks"]["prospective"]
    assert len(kept) > 0 and prospective["n"] == len(kept)
    inside = (quantiles[:, 0] <= result) & (result <= quantiles[:, 4])
    assert prospective["coverage95"] == pytest.approx(np.mean(inside), abs=1e-9)
    from mlflow.tracking import MlflowClient

    run_metrics = MlflowClient(sweep.tracking_uri).get_run(parent.info.run_id).data.metrics
    prefix = f"multiverse_{folder.replace('-filtered-', '_filtered_')}_"
    assert run_metrics[f"{prefix}loo_coverage95"] == pytest.approx(loo["coverage95"])
    assert run_metrics[f"{prefix}prospective_coverage95"] == pytest.approx(prospective["coverage95"])
    assert run_metrics[f"{prefix}effect_p"] == summary["effect"]["p_value"] <= 0.05  # the sweep's choices matter
    assert run_metrics[f"{prefix}effect_log10_K"] == pytest.approx(summary["effect"]["log10_K"])
    tests = pd.read_csv(out / "bayes_factors.csv")
    assert tests["dims"].tolist() == ["all", "lr x width", "lr x family", "width x family"]
    assert set(tests["verdict"]) <= {"interaction", "no interaction", "inconclusive"}
    sens = pd.read_csv(out / "sensitivity.csv")
    assert sens["name"].tolist() == ["lr", "width", "family"] and (sens["total"] > -0.05).all()
    corr = pd.read_csv(out / "coregionalization_family.csv").set_index("family")
    assert corr.loc["plain", "plain"] == pytest.approx(1.0) and -1 <= corr.loc["plain", "residual"] <= 1
    assert "## Coregionalization of family" in (out / "multiverse.md").read_text()


def test_another_kernel_is_logged_beside_the_first(forks) -> None:
    sweep, tmp = forks
    # The sweep declared no bounds; --bounds gives them (this test_acc can fall below 0: [-1, 1]).
    proc = multiverse_cli(sweep, tmp / "mv-rbf", "--kernel", "rbf", "--others", "marginal", "--no-log",
                          "--bounds", "-1", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((tmp / "mv-rbf" / "summary.json").read_text())
    assert summary["hyperparameters"]["kernel"] == "rbf" and summary["metric_bounds"] == [-1, 1]
    assert summary["hyperparameters"]["warp"]["bounds"] == [-1, 1]
    assert pd.read_csv(tmp / "mv-rbf" / "map_lr_width.csv")["mean"].between(-1, 1).all()
    parent, _ = sweep.runs("forks")
    assert not logged(sweep, parent.info.run_id, "multiverse/rbf")  # --no-log


@pytest.mark.parametrize(("args", "message"), [
    (("--filter", "train_acc >> 1"), "invalid filter"),
    (("--metric", "val_loss"), "no trial has the metric 'val_loss'"),
    (("--filter", "train_acc > 2"), "only 0 trial(s) finished and passed the filter"),
])
def test_bad_requests_say_what_to_fix(forks, args: tuple[str, ...], message: str) -> None:
    sweep, tmp = forks
    proc = multiverse_cli(sweep, tmp / "bad", *args)
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr


def test_sweep_stops_on_a_conclusive_bayes_factor(tmp_path: Path) -> None:
    # Branin's two inputs interact strongly: the test is conclusive long before 40 trials.
    sweep = run_cli(TOY_APP, tmp_path, "hydra.sweeper.strategy=ivr", "hydra.sweeper.num_trials=40",
                    "hydra.sweeper.n_initial=12", "hydra.sweeper.batch_size=4", "hydra.sweeper.deterministic=true",
                    "hydra.sweeper.stop_on_bayes_factor=10", "hydra.sweeper.n_candidates=256",
                    "hydra.sweeper.n_integration=256", ONE_AT_A_TIME)
    assert sweep.proc.returncode == 0, sweep.output
    assert "Stopped early on a conclusive Bayes factor" in sweep.output
    parent, children = sweep.runs("toy")
    results = yaml.safe_load((sweep.sweep_dir / "optimization_results.yaml").read_text())
    checks = results["interaction_tests"]
    assert checks[-1]["verdict"] == "interaction" and checks[-1]["log10_K"] < -1
    assert len(children) == checks[-1]["n"] < 40 and results["num_trials"] == len(children)
    assert parent.data.tags["sweeper.stopped_on_bayes_factor"].endswith(f"after {len(children)} trials: interaction")
    from mlflow.tracking import MlflowClient

    history = sorted((m.step, m.value) for m in
                     MlflowClient(sweep.tracking_uri).get_metric_history(parent.info.run_id, "interaction_log10_K"))
    assert [h[0] for h in history] == [c["batch"] for c in checks]
    assert [h[1] for h in history] == pytest.approx([c["log10_K"] for c in checks])
