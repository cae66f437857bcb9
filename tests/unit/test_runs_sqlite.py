"""The fast paths of sweeper.analysis.runs give exactly what the plain ones gave.

- ``sqlite_child_runs`` (read-only SQL) against ``search_child_runs`` (MLflow's public
  ``search_runs``) on a small SQLite store written with the recorder's own calls, with the
  awkward cases: a failed trial without metrics, a NaN metric, a tag logged as None, a
  deleted run, a run of another sweep, a repeated trial index;
- the column-wise ``trials_frame`` against the one-dict-per-run construction it replaced
  (kept here as the reference), cell for cell and dtype for dtype.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sweeper.analysis import runs
from sweeper.analysis.runs import RunRecord, parse_number, trials_frame


def reference_trials_frame(records: list[RunRecord]) -> pd.DataFrame:
    """The trial table built as before the fast path: one dict per run, then per-cell parsing."""
    rows = []
    for run in records:
        tags = run.tags
        metrics = dict(run.metrics)
        duration = metrics.pop(runs.DURATION_METRIC, None)
        if duration is None:
            duration = parse_number(tags.get("sweeper.duration_s", "nan"))
        row: dict[str, Any] = {
            "index": int(parse_number(tags.get("sweeper.trial_index", "-1"))), "run_id": run.run_id,
            "status": run.status, "phase": tags.get("sweeper.phase"),
            "batch": parse_number(tags.get("sweeper.batch", "-1")),
            "duration_s": float(duration) if isinstance(duration, (int, float)) else math.nan,
            "start_time": run.start_time, "end_time": run.end_time, "error": tags.get("sweeper.error")}
        row.update({f"param.{k}": v for k, v in run.params.items()})
        row.update({f"metric.{k}": v for k, v in metrics.items()})
        row.update({f"tag.{k[len('sweeper.'):]}": v for k, v in tags.items() if k.startswith("sweeper.")})
        rows.append(row)
    frame = pd.DataFrame(rows, columns=None if rows else list(runs.BASE_COLUMNS))
    for name in ("start_time", "end_time"):
        frame[name] = pd.to_datetime(frame[name], unit="ms", utc=True)

    def numeric(column: pd.Series) -> pd.Series:
        parsed = [parse_number(v) for v in column]
        present = [v for v in parsed if v is not None and not (isinstance(v, float) and math.isnan(v))]
        if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present) and \
                len(present) == len(parsed):
            return pd.Series(parsed, index=column.index, dtype="int64")
        if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
            return pd.Series([math.nan if v is None else v for v in parsed], index=column.index, dtype="float64")
        return pd.Series(parsed, index=column.index, dtype="object")

    for name in [c for c in frame.columns if c.startswith("param.")] + ["batch"]:
        frame[name] = numeric(frame[name])
    ordered = [*runs.BASE_COLUMNS, *sorted(c for c in frame.columns if c not in runs.BASE_COLUMNS)]
    return frame[ordered].sort_values(["index", "start_time"], kind="stable").reset_index(drop=True)


def awkward_records() -> list[RunRecord]:
    """Runs with missing, mixed, None and NaN cells, out of order, one index twice."""
    out = []
    for i in range(12):
        params = {"x": repr(0.1 * i), "epochs": str(5 + i % 2), "model": "mlp" if i % 3 else "cnn",
                  "lr": "1e-3" if i % 2 else "0.01", "mixed": "3" if i % 4 else "auto"}
        if i == 5:
            del params["epochs"]  # a param only some runs have: NaN, and the column becomes float
        metrics = {} if i == 3 else {"acc": 0.5 + 0.01 * i, "sweeper.duration_s": 1.0 + i}
        if i == 7:
            metrics["acc"] = math.nan
        tags = {"sweeper.trial_index": str(i if i != 11 else 4), "sweeper.phase": "sobol",
                "sweeper.batch": str(i // 4), "sweeper.cpu.model": "CPU", "mlflow.runName": f"t{i}",
                "sweeper.error": "boom" if i == 3 else None}
        if i == 2:
            tags["sweeper.only.here"] = "x"
            tags["sweeper.duration_s"] = "2.5"
        out.append(RunRecord(f"run{(i * 7) % 12:02d}", "FAILED" if i == 3 else "FINISHED",
                             1_700_000_000_000 + (i * 5) % 12, None if i == 9 else 1_700_000_001_000 + i,
                             params, metrics, tags))
    return out


def test_column_wise_frame_equals_the_per_run_construction() -> None:
    records = awkward_records()
    new, old = trials_frame(records), reference_trials_frame(records)
    pd.testing.assert_frame_equal(new, old, check_exact=True)
    assert new["param.epochs"].dtype == np.float64 and new["param.mixed"].dtype == object
    assert new["index"].tolist()[:6] == [0, 1, 2, 3, 4, 4]


def test_empty_frame_equals_the_per_run_construction() -> None:
    pd.testing.assert_frame_equal(trials_frame([]), reference_trials_frame([]), check_exact=True)


def test_mlflow_run_objects_are_accepted() -> None:
    record = awkward_records()[0]
    run = type("Run", (), {
        "info": type("Info", (), {"run_id": record.run_id, "status": record.status, "start_time": record.start_time,
                                  "end_time": record.end_time})(),
        "data": type("Data", (), {"params": record.params, "metrics": record.metrics, "tags": record.tags})()})()
    pd.testing.assert_frame_equal(trials_frame([run]), trials_frame([record]), check_exact=True)


# ---------------------------------------------------------------- SQL against search_runs
@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str, Any]:
    """A SQLite store with one sweep of 9 trials (the awkward cases), another sweep, a deleted run."""
    from sweeper.record.tracking import MLflowTracker

    db = tmp_path_factory.mktemp("store") / "mlruns.db"
    uri = f"sqlite:///{db}"
    tracker = MLflowTracker(uri, "unit-sql")
    parent = tracker.start_run("sweep", params={"metric": "acc", "mode": "max", "strategy": "sobol"},
                               tags={"role": "sweep"})
    other = tracker.start_run("other-sweep", tags={"role": "sweep"})
    for i in range(9):
        run = tracker.start_run(f"trial-{i}", parent_run_id=parent, params={"x": 0.125 * i, "model": "mlp"},
                                tags={"trial_index": i if i != 8 else 2, "phase": "sobol", "batch": i // 4})
        metrics = {} if i == 3 else {"acc": 0.5 + 0.01 * i, "sweeper.duration_s": 1.0 + i}
        tracker.log(run, params={"epochs": 5} if i != 4 else None, metrics=metrics,
                    tags={"status": "FAILED" if i == 3 else "FINISHED", "error": "boom" if i == 3 else None})
        if i == 6:
            tracker.client.log_metric(run, "loss", float("nan"))  # MLflow stores it with is_nan
        tracker.finish(run, "FAILED" if i == 3 else "FINISHED")
        if i == 5:
            tracker.client.delete_run(run)  # deleted runs are not part of the sweep any more
    stray = tracker.start_run("stray", parent_run_id=other, params={"x": 0.5})
    tracker.finish(stray)
    return uri, tracker.experiment_id, parent, tracker.client


def test_sql_reads_what_search_runs_returns(store: tuple[str, str, str, Any]) -> None:
    uri, experiment_id, parent, client = store
    via_sql = runs.sqlite_child_runs(Path(uri[len("sqlite:///"):]), experiment_id, parent)
    via_api = runs.search_child_runs(client, experiment_id, parent)
    assert len(via_sql) == 8  # 9 trials, one deleted; the stray run of the other sweep is not there
    assert [r.run_id for r in via_sql] == [r.run_id for r in via_api]  # same order
    for a, b in zip(via_sql, via_api, strict=True):
        assert (a.run_id, a.status, a.start_time, a.end_time, a.params, a.tags) == \
               (b.run_id, b.status, b.start_time, b.end_time, b.params, b.tags)
        assert a.metrics.keys() == b.metrics.keys()
        np.testing.assert_array_equal(list(a.metrics.values()), list(b.metrics.values()))  # NaN == NaN here
    assert any(math.isnan(r.metrics.get("loss", 0.0)) for r in via_sql)
    pd.testing.assert_frame_equal(trials_frame(via_sql), trials_frame(via_api), check_exact=True)


def test_load_sweep_falls_back_to_search_runs_when_sql_fails(
        store: tuple[str, str, str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    uri, _, parent, _ = store
    fast = runs.load_sweep("unit-sql", uri, run_id=parent)

    def broken(*args: Any) -> Any:
        raise sqlite3.OperationalError("no such table: latest_metrics")

    monkeypatch.setattr(runs, "sqlite_child_runs", broken)
    slow = runs.load_sweep("unit-sql", uri, run_id=parent)
    pd.testing.assert_frame_equal(fast.trials, slow.trials, check_exact=True)
    assert len(fast.trials) == 8 and fast.trials["index"].tolist() == [0, 1, 2, 2, 3, 4, 6, 7]
