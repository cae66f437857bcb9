"""Issue 35: an output folder is replaced as a whole or not at all, and an MLflow artifact folder keeps one
report's files only (or the command says which old ones the store kept)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.report.document import OutputDir, OutputDirError


def earlier_report(path: Path) -> Path:
    path.mkdir()
    (path / "summary.json").write_text("{}")
    (path / "filtered.csv").write_text("old")
    return path


def test_a_rewrite_replaces_the_whole_folder_and_a_failure_leaves_the_old_one(tmp_path: Path) -> None:
    target = earlier_report(tmp_path / "report-x-12345678")
    failed = OutputDir(target)
    failed.text("summary.json", "{\"new\": 1}")
    del failed  # a build that raised midway: its staging folder goes, the earlier report stays whole
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]
    assert (target / "filtered.csv").read_text() == "old"

    out = OutputDir(target)
    out.text("summary.json", "{\"new\": 1}")
    out.text("report.md", "# new\n")
    assert out.commit() == target and out.files == [target / "summary.json", target / "report.md"]
    assert sorted(p.name for p in target.iterdir()) == ["report.md", "summary.json"]  # filtered.csv is gone
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]


def test_a_folder_that_is_not_ours_is_never_replaced(tmp_path: Path) -> None:
    (tmp_path / "code.py").write_text("x = 1\n")
    with pytest.raises(OutputDirError, match="holds files but no summary.json"):
        OutputDir(tmp_path)
    assert (tmp_path / "code.py").read_text() == "x = 1\n"
    OutputDir(tmp_path / "empty").commit()  # a new (or empty) folder is fine


def test_a_store_that_cannot_delete_gets_the_new_files_and_the_stale_ones_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.store.artifact.local_artifact_repo import LocalArtifactRepository

    from sweeper.record.tracking import MLflowTracker
    from sweeper.report.build_report import ArtifactsNotReplaced, log_files

    tracker = MLflowTracker(f"sqlite:///{tmp_path / 'mlruns.db'}", "outputs")
    run = tracker.start_run("sweep")
    tracker.log_text(run, "old", "report/filtered.csv")
    files = [tmp_path / "report.md"]
    files[0].write_text("# new\n")
    assert log_files(files, tracker, run, "report") == ["report/report.md"]  # a local store: deleted on disk
    assert [a.path for a in tracker.client.list_artifacts(run, "report")] == ["report/report.md"]

    tracker.log_text(run, "old", "report/sub/stale.csv")
    def cannot_delete(self: object, artifact_path: str | None = None) -> None:
        raise NotImplementedError("this store cannot delete")

    monkeypatch.setattr(LocalArtifactRepository, "delete_artifacts", cannot_delete)
    with pytest.raises(ArtifactsNotReplaced, match=r"1 file\(s\) of an earlier report stay in report/"):
        log_files(files, tracker, run, "report")
    assert tracker.client.list_artifacts(run, "report")[0].path == "report/report.md"
