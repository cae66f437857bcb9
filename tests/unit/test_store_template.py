"""A new SQLite store copied from MLflow's own empty store is the store MLflow would have made.

Real MLflow on real SQLite files: one store made by ``MlflowClient`` alone, one by the tracker
(from the template), side by side in one folder, compared table by table.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from sweeper.record.sqlite_store import empty_store_template


def _clauses(sql: str | None) -> list[str] | None:
    """A ``CREATE`` statement's clauses, sorted: MLflow's own migrations write a table's constraints in the
    order of a Python set, so two stores MLflow made itself can list them in different orders."""
    return None if sql is None else sorted(part.strip() for part in sql.split(", \n"))


def _contents(db: Path) -> dict[str, object]:
    """Schema, migration head and the rows MLflow puts in a new store (times left out: they are the clock's)."""
    with closing(sqlite3.connect(db)) as con:
        return {
            "schema": sorted(((kind, name, table, _clauses(sql)) for kind, name, table, sql in
                              con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")), key=repr),
            "alembic": con.execute("SELECT version_num FROM alembic_version").fetchall(),
            "default experiment": con.execute(
                "SELECT experiment_id, name, artifact_location, lifecycle_stage, workspace FROM experiments "
                "WHERE experiment_id = 0").fetchall(),
            "workspaces": con.execute("SELECT * FROM workspaces").fetchall(),
            "runs": con.execute("SELECT COUNT(*) FROM runs").fetchall(),
        }


def test_a_store_from_the_template_is_the_store_mlflow_makes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    from sweeper.record.tracking import MLflowTracker

    monkeypatch.chdir(tmp_path)  # MLflow puts the Default experiment's artifacts under the working directory
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    MlflowClient(f"sqlite:///{tmp_path / 'by_mlflow.db'}").search_experiments()
    tracker = MLflowTracker(f"sqlite:///{tmp_path / 'by_template.db'}", "exp")
    assert len(list((tmp_path / "cache" / "multiverse-sweeper").glob("empty-store-mlflow-*.db"))) == 1

    assert _contents(tmp_path / "by_template.db") == _contents(tmp_path / "by_mlflow.db")
    # The copy works as a store: a run written, read back by a fresh client.
    run_id = tracker.start_run("t", params={"a": 1})
    tracker.finish(run_id, "FINISHED")
    run = MlflowClient(f"sqlite:///{tmp_path / 'by_template.db'}").get_run(run_id)
    assert run.data.params == {"a": "1"} and run.info.status == "FINISHED"


def test_the_template_is_built_once_and_a_cache_that_cannot_be_written_leaves_it_to_mlflow(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sweeper.record.tracking import MLflowTracker

    built: list[str] = []

    def build(path: str) -> None:  # what MLflow leaves in a new store, in small: its Default experiment
        built.append(path)
        with closing(sqlite3.connect(path)) as con:
            con.execute("CREATE TABLE experiments (experiment_id INTEGER PRIMARY KEY, name TEXT)")
            con.execute("INSERT INTO experiments VALUES (0, 'Default'), (1, 'kept')")
            con.commit()

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first = empty_store_template("k", build)
    assert first is not None and empty_store_template("k", build) == first and len(built) == 1
    with closing(sqlite3.connect(first)) as con:  # the one row that depends on the maker's folder is gone
        assert con.execute("SELECT name FROM experiments").fetchall() == [("kept",)]

    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    assert empty_store_template("k", build) is None
    tracker = MLflowTracker(f"sqlite:///{tmp_path / 'plain.db'}", "exp")  # MLflow makes the tables itself
    assert tracker.experiment_id == "1"
