"""The durable writer on a real SQLite store: a short trial's run goes in with its first log."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from sweeper.record.spool import HOLD_START_S, RETRY_DELAYS_ENV, RETRY_DELAYS_S, DurableWriter, _coalesced, retry_delays
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
    """A tracker on MLflow's client path, whose calls these tests count and fail (the spool does the same over
    the fast SQLite writes, which write the same records: tests/unit/test_sqlite_fast_writes.py)."""
    tracker = MLflowTracker(f"sqlite:///{tmp_path / 'mlruns.db'}", "durable")
    tracker._rows = None
    return tracker


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


def test_the_retry_waits_come_from_the_environment_and_a_bad_value_names_the_variable(
        tracker: MLflowTracker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RETRY_DELAYS_ENV, raising=False)
    assert retry_delays() == RETRY_DELAYS_S == (1.0, 2.0, 4.0, 8.0)
    monkeypatch.setenv(RETRY_DELAYS_ENV, " 0.5, 1,30 ")
    assert retry_delays() == (0.5, 1.0, 30.0)
    writer = DurableWriter(tracker, None)
    writer.close()
    assert writer.retry_delays_s == (0.5, 1.0, 30.0)
    given = DurableWriter(tracker, None, retry_delays_s=(2.0,))
    given.close()
    assert given.retry_delays_s == (2.0,)  # given: the environment's is not read
    for bad in ("1,soon", "-1", "1,,2", "nan", "inf"):
        monkeypatch.setenv(RETRY_DELAYS_ENV, bad)
        with pytest.raises(ValueError, match=rf"^{RETRY_DELAYS_ENV}='{re.escape(bad)}' is invalid: .* each >= 0, "
                                             rf"separated by commas\. Try {RETRY_DELAYS_ENV}=1,2,4,8\.$"):
            retry_delays()


def test_a_write_the_store_does_not_answer_is_spooled_after_the_waits_and_close_waits_as_long(
        tracker: MLflowTracker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SWEEPER_MLFLOW_RETRY_DELAYS_S=0.2,0.3: a write is tried three times over 0.5 s, then spooled; the close
    offers the spool for as long again, then leaves it for ``sweeper sync``."""
    run_id = tracker.start_run("sweep")
    tried: list[float] = []

    def away(*args: Any, **kwargs: Any) -> None:
        tried.append(time.monotonic())
        raise ConnectionError("Connection refused")

    monkeypatch.setattr(tracker, "log", away)
    monkeypatch.setenv(RETRY_DELAYS_ENV, "0.2,0.3")
    spool = tmp_path / "spool.jsonl"
    writer = DurableWriter(tracker, spool, drain_every_s=0.1)
    writer.log("logging a metric", run_id, metrics={"acc": 0.5})
    writer._queue.join()
    assert len(tried) == 3 and tried[-1] - tried[0] >= 0.5 and writer.spooled == 1
    closing = time.monotonic()
    writer.close()
    assert 0.5 <= time.monotonic() - closing < 5.0 and writer.spooled == 1 and spool.is_file()


def test_a_sqlite_write_that_fails_with_a_disk_error_is_retried_then_spooled_never_dropped(
        tracker: MLflowTracker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's "disk I/O error" (or a locked, full or read-only file) is the store's condition, not a bad
    request: the write is retried, then waits in the spool, and ``sync`` sends it once the file takes writes."""
    import sqlite3

    from sweeper.record.spool import sync

    run_id = tracker.start_run("sweep")
    log_batch, failing = tracker.client.log_batch, {"left": 1}

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if failing["left"]:
            failing["left"] -= 1
            raise sqlite3.OperationalError("disk I/O error")
        return log_batch(*args, **kwargs)

    monkeypatch.setattr(tracker.client, "log_batch", flaky)
    spool = tmp_path / "mlflow_spool.jsonl"
    writer = DurableWriter(tracker, spool, retry_delays_s=(0.0,), drain_every_s=3600.0)
    writer.log("logging a metric", run_id, metrics={"m": 1.0})
    writer._queue.join()
    assert writer.failures == [] and writer.spooled == 0  # the retry went through
    assert tracker.client.get_run(run_id).data.metrics == {"m": 1.0}

    failing["left"] = 10**6  # the file stays unwritable: the write waits in the spool
    writer.log("logging another metric", run_id, metrics={"n": 2.0})
    writer.close(drain_timeout_s=0.0)
    assert writer.failures == [] and writer.spooled == 1 and spool.is_file()

    failing["left"] = 0
    left, dropped = sync(tmp_path, lambda uri, experiment: tracker)
    assert (left, dropped) == (0, []) and not spool.exists()
    assert tracker.client.get_run(run_id).data.metrics == {"m": 1.0, "n": 2.0}
