"""MLflowTracker and its durable writer against a real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.record.spool import DurableWriter
from sweeper.record.tracking import MLflowTracker, clean_key
from sweeper.record.tracking_uri import absolute_tracking_uri, tracking_uri_problem

pytestmark = pytest.mark.integration


def test_durable_writer_keeps_order_resolves_handles_and_drops_refused_writes(tmp_path: Path) -> None:
    tracker = MLflowTracker(f"sqlite:///{tmp_path / 'records.db'}", "exp")
    writer = DurableWriter(tracker, tmp_path / "spool.jsonl")
    parent = tracker.start_run("sweep")
    run = writer.start_run("creating a trial", "trial-0000", parent_run_id=parent, params={"x": 0.5})
    for step in range(30):
        writer.log(f"step {step}", run, metrics={"loss": float(step)}, step=step)
    writer.log("a refused write", "no-such-run-id", tags={"a": 1})  # a bad request, not an outage
    writer.log_text("after it", run, "hello", "notes.txt")
    writer.finish("closing", run, "FINISHED")
    writer.close()
    run_id = writer.run_id(run)
    assert run_id is not None and not run_id.startswith("local-")
    history = tracker.client.get_metric_history(run_id, "loss")
    assert [m.step for m in history] == list(range(30))
    assert tracker.client.get_run(run_id).info.status == "FINISHED"
    assert tracker.client.get_run(run_id).data.tags["mlflow.parentRunId"] == parent
    assert len(writer.failures) == 1 and writer.failures[0].startswith("a refused write: ")
    assert writer.spooled == 0 and not (tmp_path / "spool.jsonl").exists()  # nothing was an outage


def test_tracker_writes_nested_runs_in_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    tracker = MLflowTracker("sqlite:///records.db", "exp")
    assert tracker.tracking_uri == f"sqlite:///{tmp_path / 'records.db'}"
    parent = tracker.start_run("sweep", tags={"role": "sweep"})
    params = {f"p{i}": i for i in range(250)}  # more than MLflow's 100 per call
    child = tracker.start_run("trial-0000", parent_run_id=parent, params=params,
                              tags={f"t{i}": i for i in range(150)})
    tracker.log(child, metrics={"acc": 0.5, "nan": float("nan"), "text": "x", "flag": True},
                tags={"host": "h", "skipped": None})
    tracker.finish(child, "FAILED")
    run = tracker.client.get_run(child)
    assert run.info.status == "FAILED"
    assert len(run.data.params) == 250 and run.data.params["p249"] == "249"
    assert run.data.tags["sweeper.t149"] == "149" and run.data.tags["sweeper.host"] == "h"
    assert "sweeper.skipped" not in run.data.tags
    assert run.data.metrics == {"acc": 0.5}  # NaN, text and bools are not metrics
    assert [r.info.run_id for r in tracker.child_runs(parent)] == [child]
    assert tracker.ui_command() == f"mlflow ui --backend-store-uri sqlite:///{tmp_path / 'records.db'}"
    # MLflow 3 shows an experiment as GenAI (traces, no runs) unless it is tagged, or the URL asks for runs.
    exp = tracker.client.get_experiment(tracker.experiment_id)
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    url = f"http://127.0.0.1:5000/#/experiments/{tracker.experiment_id}/runs"
    assert tracker.browse_lines(parent) == [
        tracker.ui_command(), f"the sweep's trials: {url}?workflowType=machine_learning",
        f"the sweep's run:    {url}/{parent}?workflowType=machine_learning"]


def test_uri_and_key_helpers() -> None:
    assert absolute_tracking_uri("http://h:5000") == "http://h:5000"
    assert absolute_tracking_uri("sqlite:////abs/x.db") == "sqlite:////abs/x.db"
    assert tracking_uri_problem("sqlite:///mlruns.db") is None
    assert tracking_uri_problem("http://") == "an http(s) tracking URI needs a host, e.g. http://127.0.0.1:5000"
    assert "unknown scheme 'ftp'" in tracking_uri_problem("ftp://x")
    assert clean_key("model@pkg+x") == "model_pkg_x"


def test_sqlite_artifacts_sit_next_to_the_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    tracker = MLflowTracker(f"sqlite:///{tmp_path / 'records.db'}", "my exp")
    run = tracker.start_run("r")
    tracker.log_text(run, "hello", "note.txt")
    assert (tmp_path / "mlruns" / "my_exp" / run / "artifacts" / "note.txt").read_text() == "hello"
    assert not (workdir / "mlruns").exists()
