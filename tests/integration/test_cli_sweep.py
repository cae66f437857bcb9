"""End to end through the real Hydra command line, a real local Ray and a real SQLite MLflow store."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.integration.conftest import ONE_AT_A_TIME, SVM_APP, TOY_APP, run_cli

pytestmark = pytest.mark.integration


def test_failed_trials_are_recorded_and_the_sweep_completes(tmp_path: Path) -> None:
    sweep = run_cli(TOY_APP, tmp_path, "fail_above=0.7", "nan_above=0.8", "steps=3",
                    "hydra.sweeper.num_trials=10", "hydra.sweeper.max_failure_rate=1.0", ONE_AT_A_TIME)
    assert sweep.proc.returncode == 0, sweep.output
    parent, children = sweep.runs("toy")
    assert len(children) == 10
    raised = [r for r in children if float(r.data.params["x"]) > 0.7]
    nan = [r for r in children if float(r.data.params["x"]) <= 0.7 and float(r.data.params["y"]) > 0.8]
    ok = [r for r in children if r not in raised and r not in nan]
    assert raised and ok, "the design should cover both regions"
    for r in raised:
        assert r.info.status == "FAILED"
        assert r.data.tags["sweeper.error"].startswith("ValueError: x=")
        assert "score" not in r.data.metrics
    for r in nan:
        assert r.info.status == "FAILED"
        assert "score=nan (not finite)" in r.data.tags["sweeper.error"]
    for r in ok:
        assert r.info.status == "FINISHED"
        assert r.data.metrics["score"] >= 0.39  # Branin's minimum is 0.398
    from mlflow.tracking import MlflowClient

    client = MlflowClient(sweep.tracking_uri)
    trace = Path(client.download_artifacts(raised[0].info.run_id, "traceback.txt", str(tmp_path))).read_text()
    assert "raise ValueError" in trace
    # Per-step metrics from log_metrics arrive with their steps; the final score lands on the last step the
    # task reported, not back at step 0.
    history = client.get_metric_history(ok[0].info.run_id, "partial")
    assert [m.step for m in history] == [0, 1, 2]
    assert [m.step for m in client.get_metric_history(ok[0].info.run_id, "score")] == [2]
    results = yaml.safe_load((sweep.sweep_dir / "optimization_results.yaml").read_text())
    assert results["num_failed"] == len(raised) + len(nan)
    assert "FAILED: ValueError" in sweep.output


def test_a_value_outside_the_metric_bounds_fails_its_trial_not_the_sweep(tmp_path: Path) -> None:
    from tests.integration.apps.toy import branin01

    sweep = run_cli(TOY_APP, tmp_path, "hydra.sweeper.strategy=sobol", "hydra.sweeper.num_trials=8",
                    "hydra.sweeper.max_failure_rate=1.0", "hydra.sweeper.metric_bounds=[0,50]", ONE_AT_A_TIME)
    assert sweep.proc.returncode == 0, sweep.output
    parent, children = sweep.runs("toy")
    assert parent.data.params["metric_bounds"] == "[0, 50]"
    value = {r.info.run_id: branin01(float(r.data.params["x"]), float(r.data.params["y"])) for r in children}
    above = [r for r in children if value[r.info.run_id] > 50]
    assert above and len(above) < len(children), "the Sobol design should fall on both sides of 50"
    for r in children:
        if r in above:  # FAILED with the value and the bound, never clipped into the fit
            assert r.info.status == "FAILED"
            assert f"score={value[r.info.run_id]:g} is outside metric_bounds=[0, 50] (above 50)" in \
                r.data.tags["sweeper.error"]
            assert "hydra.sweeper.metric_bounds" in r.data.tags["sweeper.error"]
        else:
            assert r.info.status == "FINISHED" and r.data.metrics["score"] == pytest.approx(value[r.info.run_id])


def test_invalid_space_fails_before_any_trial(tmp_path: Path) -> None:
    sweep = run_cli(SVM_APP, tmp_path, "C=tag(log, interval(0, 10))", "hydra.sweeper.batch_size=0", fresh_store=True)
    assert sweep.proc.returncode != 0
    out = sweep.output
    assert "C is given both in hydra.sweeper.params" in out or "hydra.sweeper.params.C" in out
    assert "log-scaled dimension needs lower bound > 0" in out
    assert "hydra.sweeper.batch_size=0 is invalid" in out
    assert "Ray:" not in out  # Ray never started
    assert not (tmp_path / "mlruns.db").exists()


def test_log_dim_with_zero_bound_on_the_command_line_names_it(tmp_path: Path) -> None:
    sweep = run_cli(TOY_APP, tmp_path, "hydra.sweeper.params={}", "+lr=tag(log, interval(0, 1))", "x=0.5",
                    fresh_store=True)
    assert sweep.proc.returncode != 0
    assert "lr='tag(log, interval(0, 1))': a log-scaled dimension needs lower bound > 0, got 0.0" in sweep.output
    assert not (tmp_path / "mlruns.db").exists()


def test_a_swept_key_missing_from_the_config_fails_before_any_trial(tmp_path: Path) -> None:
    sweep = run_cli(TOY_APP, tmp_path, "hydra.sweeper.params={}", "typo=interval(0, 1)", fresh_store=True)
    assert sweep.proc.returncode != 0
    assert "does not compose" in sweep.output and "typo" in sweep.output
    assert not (tmp_path / "mlruns.db").exists()


def test_deterministic_sweeps_choose_the_same_points(tmp_path: Path) -> None:
    """Trials sleep random times, so they finish in a different order each run. The second runs without
    live maps (issue 19): it logs none, and the points do not depend on them."""
    from mlflow.tracking import MlflowClient

    args = ("sleep_s=0.4", "hydra.sweeper.deterministic=true", "hydra.sweeper.seed=3", "hydra.sweeper.num_trials=16",
            "hydra.sweeper.n_initial=4", "hydra.sweeper.batch_size=4", "hydra.sweeper.strategy=ivr")
    points, live = [], []
    for name, extra in (("a", ("hydra.sweeper.live_maps=true",)), ("b", ("hydra.sweeper.live_maps=false",))):
        (tmp_path / name).mkdir()
        sweep = run_cli(TOY_APP, tmp_path / name, *args, *extra)
        assert sweep.proc.returncode == 0, sweep.output
        parent, children = sweep.runs("toy")
        points.append([(r.data.params["x"], r.data.params["y"]) for r in children])
        client = MlflowClient(sweep.tracking_uri)
        live.append(([a.path for a in client.list_artifacts(parent.info.run_id, "live")],
                     sorted(k for k in client.get_run(parent.info.run_id).data.metrics if k.startswith("live_")),
                     {m.step: m.value for m in client.get_metric_history(parent.info.run_id, "live_trials")}))
    assert len(points[0]) == 16
    assert points[0] == points[1]
    assert live[0][0] == [f"live/batch_00{b}_{what}.png" for b in (1, 2, 3) for what in ("mean", "sd")]
    assert {"live_trials", "live_loo_coverage95", "live_loo_rmse"} <= set(live[0][1])
    assert live[0][2] == {1: 4, 2: 8, 3: 12}  # each batch waited for every earlier result
    assert live[1] == ([], [], {})  # hydra.sweeper.live_maps=false
