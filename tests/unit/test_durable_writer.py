"""The durable writer on a real SQLite store: a short trial's run goes in with its first log."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from sweeper.record.spool import HOLD_START_S, DurableWriter, _coalesced
from sweeper.record.tracking import MLflowTracker


def _counted(tracker: MLflowTracker, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """The store calls the tracker makes, in order (the calls still go to the real store)."""
    calls: list[tuple[str, Any]] = []
    client = tracker.client
    create_run, log_batch = client.create_run, client.log_batch

    def create(*args: Any, **kwargs: Any) -> Any:
        calls.append(("create_run", set(kwargs.get("tags") or {})))
        return create_run(*args, **kwargs)

    def batch(run_id: str, metrics: Any = (), params: Any = (), tags: Any = ()) -> Any:
        calls.append(("log_batch", {p.key for p in params} | {m.key for m in metrics} | {t.key for t in tags}))
        return log_batch(run_id, metrics=metrics, params=params, tags=tags)

    monkeypatch.setattr(client, "create_run", create)
    monkeypatch.setattr(client, "log_batch", batch)
    return calls


@pytest.fixture
def tracker(tmp_path: Path) -> MLflowTracker:
    return MLflowTracker(f"sqlite:///{tmp_path / 'mlruns.db'}", "durable")


def test_a_run_whose_first_log_comes_soon_is_created_with_it(tracker: MLflowTracker,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counted(tracker, monkeypatch)
    writer = DurableWriter(tracker, None)
    handle = writer.start_run("creating", "trial-0000", params={"x": 0.5}, tags={"status": "RUNNING", "seed": 1})
    writer.log("closing", handle, metrics={"score": 0.75}, tags={"status": "FINISHED"})
    writer.finish("closing", handle, "FINISHED")
    writer.close()

    assert calls == [("create_run", {"mlflow.runName", "sweeper.status", "sweeper.seed", "sweeper.writer_handle"}),
                     ("log_batch", {"x", "score"})]  # one transaction fewer than create + params + results
    run = tracker.client.get_run(writer.run_id(handle))
    assert run.info.status == "FINISHED" and run.data.params == {"x": "0.5"} and run.data.metrics == {"score": 0.75}
    assert run.data.tags["sweeper.status"] == "FINISHED" and run.data.tags["sweeper.seed"] == "1"


def test_a_longer_run_appears_running_after_the_wait_and_keeps_its_writes(tracker: MLflowTracker,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counted(tracker, monkeypatch)
    writer = DurableWriter(tracker, None)
    handle = writer.start_run("creating", "trial-0001", params={"x": 0.5}, tags={"status": "RUNNING"})
    deadline = time.monotonic() + HOLD_START_S + 5
    while writer.run_id(handle) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    run_id = writer.run_id(handle)
    assert run_id is not None, "the run was never created while its trial ran"
    assert tracker.client.get_run(run_id).info.status == "RUNNING"
    writer.log("closing", handle, metrics={"score": 0.25})
    writer.finish("closing", handle, "FINISHED")
    writer.close()

    assert [c[0] for c in calls] == ["create_run", "log_batch", "log_batch"]  # params at creation, results later
    run = tracker.client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.params == {"x": "0.5"} and run.data.metrics == {"score": 0.25}


def test_closing_writes_a_creation_still_waiting(tracker: MLflowTracker) -> None:
    writer = DurableWriter(tracker, None)
    parent = writer.start_run("creating the sweep", "sweep")
    child = writer.start_run("creating", "trial-0000", parent_run_id=parent)  # its parent is held too
    writer.close()

    run = tracker.client.get_run(writer.run_id(child))
    assert run.info.status == "RUNNING" and run.data.tags["mlflow.parentRunId"] == writer.run_id(parent)


def test_writes_that_could_change_the_record_are_left_apart() -> None:
    start = {"op": "start_run", "run": "h", "params": {"x": 1}, "tags": {"a": 1}}
    same_param = {"op": "log", "run": "h", "params": {"x": 2}, "metrics": {}, "tags": None}
    many_tags = {"op": "log", "run": "h", "params": None, "metrics": {}, "tags": {f"t{i}": i for i in range(100)}}

    assert _coalesced(start, same_param) == (start, same_param)
    assert _coalesced(start, many_tags) == (start, many_tags)
    created, logged = _coalesced(start, {"op": "log", "run": "h", "params": None, "metrics": {"s": 1},
                                         "tags": {"a": 2}})
    assert created["tags"] == {"a": 2} and created["params"] is None and logged["params"] == {"x": 1}


def test_a_creation_retried_after_an_outage_finds_the_run_it_made(tracker: MLflowTracker) -> None:
    """The store created the run but its answer was lost: the retry must not create a second one."""
    writer = DurableWriter(tracker, None)
    writer.close()
    handle = "local-" + "ab" * 16
    created = tracker.start_run("trial-0003", tags={"writer_handle": handle})  # what reached the store
    op = {"op": "start_run", "what": "creating", "run": handle, "run_name": "trial-0003", "parent_run_id": None,
          "params": {"x": 0.5}, "tags": {"status": "RUNNING"}, "tried": True}

    writer._apply(op)

    assert writer.run_id(handle) == created
    assert len(tracker.client.search_runs([tracker.experiment_id])) == 1
    assert tracker.client.get_run(created).data.params == {"x": "0.5"}


def test_a_figure_waits_in_the_spool_through_an_outage_and_lands_byte_for_byte(tracker: MLflowTracker, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = tracker.start_run("sweep")
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
    log_bytes, calls = tracker.log_bytes, []

    def away_once(*args: Any) -> None:
        calls.append(args[-1])
        if len(calls) == 1:
            raise ConnectionError("Connection refused")
        log_bytes(*args)

    monkeypatch.setattr(tracker, "log_bytes", away_once)
    spool = tmp_path / "spool.jsonl"
    writer = DurableWriter(tracker, spool, retry_delays_s=(), drain_every_s=3600.0)  # sent at close only
    writer.log_bytes("logging the live map of batch 1", run_id, png, "live/batch_001_mean.png")
    writer._queue.join()
    assert writer.spooled == 1 and "live/batch_001_mean.png" in spool.read_text()  # base64 inside the JSON line
    writer.close()
    assert writer.spooled == 0 and calls == ["live/batch_001_mean.png"] * 2
    down = tracker.client.download_artifacts(run_id, "live/batch_001_mean.png", str(tmp_path / "down"))
    assert Path(down).read_bytes() == png
