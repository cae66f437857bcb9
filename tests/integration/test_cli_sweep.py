"""End to end through the real Hydra command line, a real local Ray and a real SQLite MLflow store."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from sweeper.record.redaction import REDACTED
from tests.integration.conftest import ONE_AT_A_TIME, SVM_APP, TOY_APP, Sweep, run_cli

pytestmark = pytest.mark.integration


#: Credentials given the ways a user gives them (test_a_cli_sweep_records_no_secret): overrides under
#: credential-like keys, a database URL with a password under an innocent key, the environment.
SECRET_OVERRIDES = {  # override -> the secret it carries
    "+db.password=hunter2-SECRET-1": "hunter2-SECRET-1",
    "+api_key=sk-SECRET-2": "sk-SECRET-2",
    "+hf_token=hf_SECRET3": "hf_SECRET3",
    "+db.url=postgresql://sweeper:pgSECRET4@db.internal:5432/results": "pgSECRET4",
}
SECRET_ENVIRONMENT = {"MLFLOW_TRACKING_PASSWORD": "mlflowSECRET5", "WANDB_API_KEY": "wandbSECRET6"}
SECRETS = [*SECRET_OVERRIDES.values(), *SECRET_ENVIRONMENT.values()]


@pytest.fixture(scope="module")
def failing_sweep(tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    """16 trials of one Sobol design (seed 0) that cover every kind of trial: x > 0.7 raises, y > 0.8 returns
    NaN, a Branin value above 50 is outside the bounds [0, 50], the rest finish (5, 2, 3 and 6 trials); with
    credentials in overrides and in the environment, which no record may hold."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in SECRET_ENVIRONMENT.items():
            env.setenv(name, value)
        return run_cli(TOY_APP, tmp_path_factory.mktemp("failing"), "fail_above=0.7", "nan_above=0.8", "steps=3",
                       "hydra.sweeper.strategy=sobol", "hydra.sweeper.seed=0", "hydra.sweeper.num_trials=16",
                       "hydra.sweeper.max_failure_rate=1.0", "hydra.sweeper.metric_bounds=[0,50]",
                       "+tokenizer.name=bert-base", ONE_AT_A_TIME, *SECRET_OVERRIDES)


def test_failed_trials_and_values_outside_the_metric_bounds_are_recorded_and_the_sweep_completes(
        failing_sweep: Sweep) -> None:
    """Trials that raise, return NaN or a value outside ``metric_bounds`` fail alone; the sweep goes on."""
    from mlflow.tracking import MlflowClient

    from tests.integration.apps.toy import branin01

    sweep = failing_sweep
    assert sweep.proc.returncode == 0, sweep.output
    parent, children = sweep.runs("toy")
    assert len(children) == 16
    assert parent.data.params["metric_bounds"] == "[0, 50]"
    value = {r.info.run_id: branin01(float(r.data.params["x"]), float(r.data.params["y"])) for r in children}
    raised = [r for r in children if float(r.data.params["x"]) > 0.7]
    nan = [r for r in children if float(r.data.params["x"]) <= 0.7 and float(r.data.params["y"]) > 0.8]
    above = [r for r in children if r not in raised and r not in nan and value[r.info.run_id] > 50]
    ok = [r for r in children if r not in raised and r not in nan and r not in above]
    assert raised and nan and above and ok, "the design should cover every kind of trial"
    for r in raised:
        assert r.info.status == "FAILED"
        assert r.data.tags["sweeper.error"].startswith("ValueError: x=")
        assert "score" not in r.data.metrics
    for r in nan:
        assert r.info.status == "FAILED"
        assert "score=nan (not finite)" in r.data.tags["sweeper.error"]
    for r in above:  # FAILED with the value and the bound, never clipped into the fit
        assert r.info.status == "FAILED"
        assert f"score={value[r.info.run_id]:g} is outside metric_bounds=[0, 50] (above 50)" in \
            r.data.tags["sweeper.error"]
        assert "hydra.sweeper.metric_bounds" in r.data.tags["sweeper.error"]
    for r in ok:
        assert r.info.status == "FINISHED"
        assert r.data.metrics["score"] >= 0.39  # Branin's minimum is 0.398
        assert r.data.metrics["score"] == pytest.approx(value[r.info.run_id])  # not clipped

    client = MlflowClient(sweep.tracking_uri)
    with tempfile.TemporaryDirectory() as folder:  # not in the sweep's folder, which the secrets test reads
        trace = Path(client.download_artifacts(raised[0].info.run_id, "traceback.txt", folder)).read_text()
    assert "raise ValueError" in trace
    # Per-step metrics from log_metrics arrive with their steps; the final score lands on the last step the
    # task reported, not back at step 0.
    history = client.get_metric_history(ok[0].info.run_id, "partial")
    assert [m.step for m in history] == [0, 1, 2]
    assert [m.step for m in client.get_metric_history(ok[0].info.run_id, "score")] == [2]
    results = yaml.safe_load((sweep.sweep_dir / "optimization_results.yaml").read_text())
    assert results["num_failed"] == len(raised) + len(nan) + len(above)
    assert "FAILED: ValueError" in sweep.output


def _everything_mlflow_holds(tracking_uri: str, artifact_root: Path) -> tuple[dict[str, str], list[dict]]:
    """Every file of the store (the database itself and each artifact) as text, and every run's data."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    runs = []
    for exp in client.search_experiments():
        for run in client.search_runs([exp.experiment_id], max_results=5000):
            runs.append({"name": run.info.run_name, "params": dict(run.data.params), "tags": dict(run.data.tags),
                         "metrics": list(run.data.metrics)})
    db = Path(tracking_uri[len("sqlite:///"):])
    files = {str(db): db.read_bytes().decode("latin-1")}
    for path in artifact_root.rglob("*"):
        if path.is_file():
            files[str(path)] = path.read_bytes().decode("utf-8", errors="replace")
    return files, runs


def test_a_cli_sweep_records_no_secret(failing_sweep: Sweep) -> None:
    """Secrets stay out of the records: every param, tag and metric key of every run, the raw database file and
    every artifact file (failed trials' tracebacks included) are searched for the secret strings."""
    sweep = failing_sweep
    assert sweep.proc.returncode == 0, sweep.output
    parent, children = sweep.runs("toy")
    assert len(children) == 16

    files, runs = _everything_mlflow_holds(sweep.tracking_uri, sweep.sweep_dir.parent / "mlruns")
    names = {Path(f).name for f in files}
    assert {"mlruns.db", "multirun.yaml", "search_space.json", "conditions.json", "optimization_results.yaml",
            "trials.csv", "traceback.txt"} <= names, names  # the search below covered each kind of record
    for secret in SECRETS:
        leaks = [f for f, text in files.items() if secret in text]
        leaks += [f"run {r['name']}: {json.dumps(r)}" for r in runs if secret in json.dumps(r)]
        assert not leaks, f"{secret!r} reached MLflow: {leaks}"

    # The keys are there, with the marker: a reader sees that a value was given and hidden.
    for child in children:
        params = child.data.params
        assert params["db.password"] == params["api_key"] == params["hf_token"] == REDACTED
        assert params["db.url"] == f"postgresql://sweeper:{REDACTED}@db.internal:5432/results"
        assert params["tokenizer.name"] == "bert-base"  # an ordinary key is left alone
        assert params["x"] != REDACTED
    tags = parent.data.tags
    for override in ("+db.password", "+api_key", "+hf_token"):
        assert f"{override}={REDACTED}" in tags["sweeper.overrides"]
        assert f"{override}={REDACTED}" in tags["sweeper.command"]
    assert "+tokenizer.name=bert-base" in tags["sweeper.overrides"]
    assert not any(k.startswith("sweeper.driver.env.") and k.split(".")[-1] in SECRET_ENVIRONMENT for k in tags)

    artifacts = {Path(f).name: Path(f) for f in files}
    config = yaml.safe_load(artifacts["multirun.yaml"].read_text())
    assert config["db"]["password"] == config["api_key"] == config["hf_token"] == REDACTED
    assert config["tokenizer"] == {"name": "bert-base"}
    assert f"+db.password={REDACTED}" in config["hydra"]["overrides"]["task"]
    measured = json.loads(artifacts["conditions.json"].read_text())["object"]
    assert measured["db.password"] == measured["api_key"] == REDACTED


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
    live maps (issue 19): it logs none, and the points do not depend on them. 4 Sobol points, then two
    GP batches of 4: the second batch is planned on the first's results, whichever order they came in."""
    from mlflow.tracking import MlflowClient

    args = ("sleep_s=0.4", "hydra.sweeper.deterministic=true", "hydra.sweeper.seed=3", "hydra.sweeper.num_trials=12",
            "hydra.sweeper.n_initial=4", "hydra.sweeper.batch_size=4", "hydra.sweeper.strategy=ivr")
    points, live = [], []
    for name, extra in (("a", ("hydra.sweeper.live_maps=true",)), ("b", ("hydra.sweeper.live_maps=false",))):
        (tmp_path / name).mkdir()
        sweep = run_cli(TOY_APP, tmp_path / name, *args, *extra)
        assert sweep.proc.returncode == 0, sweep.output
        parent, children = sweep.runs("toy")
        points.append([(r.data.params["x"], r.data.params["y"]) for r in children])
        client = MlflowClient(sweep.tracking_uri)
        # The sweep's run scores the searcher's predictions of the trials it chose, made before they ran.
        chosen = [r for r in children if "sweeper.predicted_mean" in r.data.tags]
        z = [(r.data.metrics["score"] - float(r.data.tags["sweeper.predicted_mean"]))
             / float(r.data.tags["sweeper.predicted_sd"]) for r in chosen]
        closing = client.get_run(parent.info.run_id).data.metrics
        assert len(chosen) == 8 and closing["prospective_n"] == 8
        # Planned from the 4 Sobol results, then from 8: what each prediction's model was fitted on.
        assert sorted(int(r.data.tags["sweeper.predicted_from"]) for r in chosen) == [4] * 4 + [8] * 4
        assert closing["prospective_coverage95"] == pytest.approx(np.mean(np.abs(z) <= 1.959964), abs=1e-9)
        assert "The searcher's predictions, made before the trials ran: prospective" in sweep.output
        live.append(([a.path for a in client.list_artifacts(parent.info.run_id, "live")],
                     sorted(k for k in client.get_run(parent.info.run_id).data.metrics if k.startswith("live_")),
                     {m.step: m.value for m in client.get_metric_history(parent.info.run_id, "live_trials")}))
    assert len(points[0]) == 12
    assert points[0] == points[1]
    assert live[0][0] == [f"live/batch_00{b}_{what}.png" for b in (1, 2) for what in ("mean", "sd")]
    assert {"live_trials", "live_loo_coverage95", "live_loo_rmse"} <= set(live[0][1])
    assert live[0][2] == {1: 4, 2: 8}  # each batch waited for every earlier result
    assert live[1] == ([], [], {})  # hydra.sweeper.live_maps=false


def test_a_grid_without_num_trials_runs_each_point_once_and_the_start_line_names_the_fixed_values(
        tmp_path: Path) -> None:
    """Issue 34: toy.yaml sets num_trials 8; unset, a 4-point grid runs 4 trials, one per point (it ran 8 before)."""
    sweep = run_cli(TOY_APP, tmp_path, "hydra.sweeper.strategy=grid", "hydra.sweeper.num_trials=null",
                    "hydra.sweeper.params={x:'choice(0.1, 0.9)',y:'choice(0.2, 0.8)'}", "sleep_s=0.01",
                    "mlflow.experiment_name=grid-once")
    assert sweep.proc.returncode == 0, sweep.output
    [start] = [line for line in sweep.output.splitlines() if "MultiverseSweeper(" in line]
    assert "num_trials=4" in start and "sleep_s=0.01" in start.split("; fixed: ")[1], start
    _, children = sweep.runs("grid-once")
    points = sorted((float(r.data.params["x"]), float(r.data.params["y"])) for r in children)
    assert points == [(0.1, 0.2), (0.1, 0.8), (0.9, 0.2), (0.9, 0.8)]
