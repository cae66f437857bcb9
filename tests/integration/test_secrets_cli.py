"""Secrets stay out of the records: a real sweep through the Hydra CLI, then every byte MLflow holds.

The sweep gets credentials the ways a user gives them: overrides under credential-like keys,
a database URL with a password under an innocent key, and credentials in the environment.
Afterwards the SQLite store (every param, tag and metric key of every run, and the raw
database file) and every artifact file are searched for the secret strings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sweeper.record.redaction import REDACTED
from tests.integration.conftest import ONE_AT_A_TIME, TOY_APP, run_cli

pytestmark = pytest.mark.integration

OVERRIDES = {  # override -> the secret it carries
    "+db.password=hunter2-SECRET-1": "hunter2-SECRET-1",
    "+api_key=sk-SECRET-2": "sk-SECRET-2",
    "+hf_token=hf_SECRET3": "hf_SECRET3",
    "+db.url=postgresql://sweeper:pgSECRET4@db.internal:5432/results": "pgSECRET4",
}
ENVIRONMENT = {"MLFLOW_TRACKING_PASSWORD": "mlflowSECRET5", "WANDB_API_KEY": "wandbSECRET6"}
SECRETS = [*OVERRIDES.values(), *ENVIRONMENT.values()]


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


def test_a_cli_sweep_records_no_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    sweep = run_cli(TOY_APP, tmp_path, "hydra.sweeper.num_trials=2", "hydra.sweeper.n_initial=2",
                    "hydra.sweeper.batch_size=2", "+tokenizer.name=bert-base", ONE_AT_A_TIME, *OVERRIDES)
    assert sweep.proc.returncode == 0, sweep.output
    parent, children = sweep.runs("toy")
    assert len(children) == 2

    files, runs = _everything_mlflow_holds(sweep.tracking_uri, tmp_path / "mlruns")
    names = {Path(f).name for f in files}
    assert {"mlruns.db", "multirun.yaml", "search_space.json", "conditions.json", "optimization_results.yaml",
            "trials.csv"} <= names, names  # the search below covered each kind of record
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
    assert not any(k.startswith("sweeper.driver.env.") and k.split(".")[-1] in ENVIRONMENT for k in tags)

    artifacts = {Path(f).name: Path(f) for f in files}
    config = yaml.safe_load(artifacts["multirun.yaml"].read_text())
    assert config["db"]["password"] == config["api_key"] == config["hf_token"] == REDACTED
    assert config["tokenizer"] == {"name": "bert-base"}
    assert f"+db.password={REDACTED}" in config["hydra"]["overrides"]["task"]
    measured = json.loads(artifacts["conditions.json"].read_text())["object"]
    assert measured["db.password"] == measured["api_key"] == REDACTED


def test_the_tracker_redacts_what_any_caller_writes(tmp_path: Path) -> None:
    from sweeper.record.tracking import MLflowTracker

    tracker = MLflowTracker(f"sqlite:///{tmp_path / 'records.db'}", "exp")
    run = tracker.start_run("r", params={"db.password": "pw-S1", "lr": 0.1}, tags={"clientSecret": "cs-S2"})
    tracker.log(run, params={"uri": "https://u:url-S3@h/x"}, tags={"error": "connect(password='pw-S4') failed"},
                metrics={"acc": 0.5})
    tracker.log_text(run, "db:\n  password: pw-S5\nurl: redis://:r-S6@h\n", "notes.yaml")
    data = tracker.client.get_run(run).data
    assert data.params == {"db.password": REDACTED, "lr": "0.1", "uri": f"https://u:{REDACTED}@h/x"}
    assert data.tags["sweeper.clientSecret"] == REDACTED
    assert data.tags["sweeper.error"] == f"connect(password={REDACTED} failed"
    assert data.metrics == {"acc": 0.5}
    text = next((tmp_path / "mlruns").rglob("notes.yaml")).read_text()
    assert text == f"db:\n  password: {REDACTED}\nurl: redis://:{REDACTED}@h\n"
    raw = (tmp_path / "records.db").read_bytes()
    assert not any(s.encode() in raw for s in ("pw-S1", "cs-S2", "url-S3", "pw-S4"))
