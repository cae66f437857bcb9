"""The tracker's fast SQLite writes (sweeper.record.sqlite_writes) against MLflow's own client, on real stores.

The same runs go through both paths into two SQLite stores; read back through ``MlflowClient``,
every field must be equal but the ids and the times.
"""

from __future__ import annotations

import logging
import math
import pickle
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow.entities import Metric
from mlflow.exceptions import MlflowException
from mlflow.store.db.utils import _get_latest_schema_revision
from mlflow.tracking import MlflowClient

from sweeper.record import sqlite_writes
from sweeper.record.note import NOTE_TAG
from sweeper.record.sqlite_writes import Batch
from sweeper.record.tracking import MLflowTracker

#: Columns of MLflow's ``runs`` table that differ between two stores even when the records are the same.
_RUN_IDS_AND_TIMES = ("run_uuid", "start_time", "end_time", "artifact_uri")


@pytest.fixture(scope="module")
def trackers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MLflowTracker, MLflowTracker]]:
    """A tracker writing fast and one writing through MLflow's client, each into its own SQLite store."""
    folder = tmp_path_factory.mktemp("fast-writes")
    for name in ("fast", "mlflow"):
        (folder / name).mkdir()
    fast = MLflowTracker(f"sqlite:///{folder / 'fast' / 'mlruns.db'}", "exp")
    slow = MLflowTracker(f"sqlite:///{folder / 'mlflow' / 'mlruns.db'}", "exp")
    slow._rows = None  # MLflow's client path, as for any store not SQLite
    assert fast._rows is not None
    yield fast, slow


def _one_sweep(tracker: MLflowTracker) -> str:
    """A sweep's records as the sweeper writes them, with every kind of write; returns the sweep's run id."""
    parent = tracker.start_run("sweep", params={"strategy": "sobol", "n": 3}, tags={"role": "sweep", "seed": 0})
    for i in range(3):
        run = tracker.start_run(f"trial-{i:04d}", parent_run_id=parent,
                                params={"x": 0.1 * i, "opt": "adam", "api_key": "s3cret", "long": "v" * 7000},
                                tags={"status": "RUNNING", "skipped": None, "phase": "sobol"})
        tracker.log(run, metrics={"loss": 1.0 / (i + 1), "acc": 0.5, "nan": math.nan, "text": "no"},
                    tags={"status": "FINISHED", NOTE_TAG: f"trial {i}"}, params={"x": 0.1 * i})
        tracker.log(run, metrics={"loss": 0.25, "acc": 0.25}, step=2)
        tracker.log(run, metrics={"loss": 0.5}, step=1)  # an older step: the latest value stays step 2's
        tracker.finish(run, ("FINISHED", "FAILED", "KILLED")[i])
    many = tracker.start_run("trial-many", parent_run_id=parent, params={f"p{k}": k for k in range(150)},
                             tags={f"t{k}": k for k in range(120)})
    tracker.log(many, metrics={f"m{k}": k for k in range(1100)}, tags={"mlflow.runName": "renamed"})
    tracker.reopen(many)
    tracker.log(many, tags={"status": "RUNNING"})
    tracker.finish(parent)
    return parent


def _records(tracker: MLflowTracker, parent: str) -> dict[str, Any]:
    """Everything MLflow reads back of a sweep, by run name, with the ids and times taken out."""
    client = MlflowClient(tracker.tracking_uri)
    runs = {"sweep": client.get_run(parent)} | {r.info.run_name: r for r in tracker.child_runs(parent)}
    tagged = client.search_runs([tracker.experiment_id], "tags.`sweeper.role` = 'sweep'")
    assert [r.info.run_id for r in tagged] == [parent]
    out: dict[str, Any] = {}
    for name, found in runs.items():
        run = client.get_run(found.info.run_id)
        assert found.data.to_dictionary() == run.data.to_dictionary()  # search_runs reads the same as get_run
        run_id = run.info.run_id
        info = dict(run.info)
        folder = Path(tracker.tracking_uri[10:]).parent.as_uri()
        assert info.pop("artifact_uri") == f"{folder}/mlruns/exp/{run_id}/artifacts"  # as MLflow builds it
        assert info.pop("end_time") is None or run.info.end_time >= run.info.start_time
        for key in ("run_id", "run_uuid", "start_time"):
            info.pop(key, None)
        tags = {k: ("<id>" if v in (parent, run_id) else "<time>" if k == "sweeper.resumed_at" else v)
                for k, v in run.data.tags.items()}
        history = {key: sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))  # by time
                   for key in sorted(run.data.metrics)[:5]}
        latest = sorted((m.key, m.value, m.step) for m in run.data._metric_objs)  # with their steps
        out[name] = {"info": info, "params": run.data.params, "tags": tags, "metrics": run.data.metrics,
                     "latest": latest, "history": history, "row": _run_row(tracker, run_id)}
    return out


def _run_row(tracker: MLflowTracker, run_id: str) -> dict[str, Any]:
    """The run's row in MLflow's ``runs`` table but its id and times: what no reader shows (e.g. '' or NULL)."""
    with sqlite3.connect(tracker.tracking_uri[10:]) as db:
        db.row_factory = sqlite3.Row
        row = dict(db.execute("SELECT * FROM runs WHERE run_uuid = ?", (run_id,)).fetchone())
        counts = {table: db.execute(f"SELECT count(*) FROM {table} WHERE run_uuid = ?", (run_id,)).fetchone()[0]
                  for table in ("params", "tags", "metrics", "latest_metrics")}
    return {k: v for k, v in row.items() if k not in _RUN_IDS_AND_TIMES} | counts


def test_the_fast_path_writes_the_records_mlflow_writes(trackers: tuple[MLflowTracker, MLflowTracker]) -> None:
    fast, slow = trackers
    records = [_records(tracker, _one_sweep(tracker)) for tracker in (fast, slow)]
    assert sorted(records[0]) == ["renamed", "sweep", "trial-0000", "trial-0001", "trial-0002"]
    for name in records[1]:
        assert records[0][name] == records[1][name], name
    trial = records[0]["trial-0001"]
    assert trial["info"]["status"] == "FAILED" and trial["latest"] == [("acc", 0.25, 2), ("loss", 0.25, 2)]
    assert trial["history"]["loss"] == [(0, 0.5), (1, 0.5), (2, 0.25)]
    assert len(trial["params"]["long"]) == 6000 and trial["params"]["api_key"] == "***"
    assert records[0]["renamed"]["info"]["status"] == "RUNNING" and len(records[0]["renamed"]["metrics"]) == 1100


def test_nan_and_infinite_values_are_stored_as_mlflow_stores_them(
        trackers: tuple[MLflowTracker, MLflowTracker]) -> None:
    values = [math.nan, math.inf, -math.inf, 2.5, 2.5]  # the last twice: one row
    histories = []
    for tracker in trackers:
        run = tracker.start_run("values")
        metrics = [Metric("v", value, 1000 + min(i, 3), min(i, 3)) for i, value in enumerate(values)]
        if tracker._rows is not None:  # the tracker leaves out values that are not finite: straight to the rows
            tracker._rows.log_batches(run, [Batch(metrics=metrics)])
        else:
            tracker.client.log_batch(run, metrics=metrics)
        history = tracker.client.get_metric_history(run, "v")
        histories.append(sorted((m.step, m.timestamp, str(m.value)) for m in history))
        histories.append(tracker.client.get_run(run).data.metrics)
    assert histories[0] == histories[2] and len(histories[0]) == 4
    assert histories[1] == histories[3] == {"v": 2.5}  # the latest value: step 3's


def _refusal(call: Any, *ids: str) -> tuple[str, str, str]:
    with pytest.raises(MlflowException) as caught:
        call()
    message = caught.value.message
    for run_id in ids:
        message = message.replace(run_id, "<id>")
    return type(caught.value).__name__, caught.value.error_code, message


def _refusals(tracker: MLflowTracker) -> tuple[Any, ...]:
    """What a tracker refuses, and what it wrote of the calls it refused."""
    run = tracker.start_run("params", params={"lr": 0.1})
    tracker.log(run, params={"lr": 0.1})  # the same value: taken
    refused = _refusal(lambda: tracker.log(run, params={"lr": 0.2, "new": 1}, metrics={"m": 1.0}, tags={"t": "x"}),
                       run)
    data = tracker.client.get_run(run).data
    too_long = _refusal(lambda: tracker.log(run, tags={"k" * 250: "v"}), run)  # 'sweeper.' and 250 characters
    tracker.client.delete_run(run)
    deleted = _refusal(lambda: tracker.log(run, metrics={"m": 2.0}), run)
    ended = _refusal(lambda: tracker.finish(run), run)
    missing = _refusal(lambda: tracker.finish("0" * 32), "0" * 32)
    bad_param = _refusal(lambda: tracker.start_run("bad param", params={"a//b": 1}))
    created = [r.info.status for r in tracker.client.search_runs([tracker.experiment_id],
                                                                 "attributes.run_name = 'bad param'")]
    # 101 params: two batches; the second changes the first's p_0 ('p@0' is cleaned to 'p_0')
    params = {"p_0": 1} | {f"q{k}": k for k in range(99)} | {"p@0": 2}
    twice = _refusal(lambda: tracker.start_run("twice", params=params))
    kept = [len(r.data.params) for r in tracker.client.search_runs([tracker.experiment_id],
                                                                   "attributes.run_name = 'twice'")]
    return (refused, data.params, data.metrics, data.tags.get("sweeper.t"), deleted, ended, missing, too_long,
            bad_param, created, twice[:2], kept)


def test_a_param_logged_again_with_another_value_is_refused_as_mlflow_refuses_it(
        trackers: tuple[MLflowTracker, MLflowTracker]) -> None:
    outcomes = [_refusals(tracker) for tracker in trackers]
    assert outcomes[0] == outcomes[1]
    refused = outcomes[0][0]
    assert refused[1] == "INVALID_PARAMETER_VALUE" and "Changing param values is not allowed" in refused[2]
    assert outcomes[0][1:4] == ({"lr": "0.1"}, {}, None)  # nothing of the refused call was written
    assert outcomes[0][6][1] == "RESOURCE_DOES_NOT_EXIST"
    assert outcomes[0][9] == ["RUNNING"]  # MLflow's client creates the run, then refuses its params
    assert outcomes[0][11] == [100]  # MLflow's client wrote the first batch before it met the second's change


def test_a_write_waits_for_another_process_holding_the_store(trackers: tuple[MLflowTracker, MLflowTracker],
                                                              tmp_path: Path) -> None:
    fast, _ = trackers
    path = fast.tracking_uri[10:]
    run = fast.start_run("waits")
    held = tmp_path / "held"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time, pathlib\n"
        "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "db.execute('BEGIN IMMEDIATE')\n"
        "db.execute(\"UPDATE experiments SET last_update_time = last_update_time WHERE experiment_id = 0\")\n"
        "pathlib.Path(sys.argv[2]).touch()\n"
        "time.sleep(1.5)\n"
        "db.execute('COMMIT')\n"), path, str(held)])
    try:
        deadline = time.monotonic() + 20
        while not held.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert held.exists()
        reader = sqlite3.connect(path)  # a reader beside them (sweeper report, mlflow ui): never in the way
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM runs").fetchone()
        started = time.monotonic()
        fast.log(run, metrics={"score": 0.5}, tags={"status": "FINISHED"})
        fast.finish(run)
        waited = time.monotonic() - started
        reader.rollback()
        reader.close()
    finally:
        assert holder.wait(timeout=30) == 0
    assert waited > 0.5  # it waited for the other process's transaction instead of failing
    back = MlflowClient(fast.tracking_uri).get_run(run)
    assert back.data.metrics == {"score": 0.5} and back.info.status == "FINISHED"


def test_the_schema_the_fast_path_knows_is_the_one_mlflow_creates(
        trackers: tuple[MLflowTracker, MLflowTracker]) -> None:
    assert _get_latest_schema_revision() == sqlite_writes.KNOWN_SCHEMA_REVISION
    for tracker in trackers:
        assert sqlite_writes.schema_revision(tracker.tracking_uri[10:]) == sqlite_writes.KNOWN_SCHEMA_REVISION


def test_a_store_of_another_schema_is_written_through_mlflow_and_said_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(sqlite_writes, "KNOWN_SCHEMA_REVISION", "0123456789ab")  # as with another MLflow installed
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    with caplog.at_level(logging.WARNING, logger="sweeper.record.sqlite_writes"):
        tracker = MLflowTracker(uri, "other")
        again = MLflowTracker(uri, "other")
    assert tracker._rows is None and again._rows is None
    warnings = [r.getMessage() for r in caplog.records if "written through MLflow's client" in r.getMessage()]
    assert len(warnings) == 1 and "0123456789ab" in warnings[0]
    run = tracker.start_run("through MLflow", params={"x": 1})
    tracker.log(run, metrics={"m": 1.0})
    tracker.finish(run)
    back = MlflowClient(uri).get_run(run)
    assert back.data.params == {"x": "1"} and back.data.metrics == {"m": 1.0} and back.info.status == "FINISHED"


def test_a_tracker_pickled_as_ray_tune_pickles_it_writes_fast_where_it_is_loaded(
        trackers: tuple[MLflowTracker, MLflowTracker]) -> None:
    fast, _ = trackers
    fast.start_run("before")  # its connection is open: it stays behind
    loaded = pickle.loads(pickle.dumps(fast))
    assert loaded._rows is not None
    run = loaded.start_run("after", params={"x": 1})
    loaded.finish(run)
    assert MlflowClient(fast.tracking_uri).get_run(run).data.params == {"x": "1"}
