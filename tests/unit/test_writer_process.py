"""The MLflow writer in a child process: same records as the thread, and nothing left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from sweeper.record.tracking import MLflowTracker
from sweeper.record.writer_process import WriterProcess


def test_writes_land_in_order_and_handles_resolve_after_close(tmp_path: Path) -> None:
    tracker = MLflowTracker(f"sqlite:///{tmp_path / 'mlruns.db'}", "writer")
    parent = tracker.start_run("sweep")
    writer = WriterProcess(tracker, tmp_path / "spool.jsonl")
    handle = writer.start_run("creating", "trial-0000", parent_run_id=parent, params={"x": 0.5},
                              tags={"status": "RUNNING"})
    assert handle.startswith("local-") and writer.run_id(handle) is None  # known once the writer closed
    writer.log("closing", handle, metrics={"score": 0.75}, tags={"status": "FINISHED"})
    writer.log_text("closing", handle, '{"seed": 1}', "conditions.json")
    writer.finish("closing", handle, "FINISHED")
    writer.log("a write MLflow refuses", "0" * 32, params={"x": 1})  # no such run: dropped, reported
    writer.close()

    run_id = writer.run_id(handle)
    assert run_id is not None and not writer._process.is_alive()
    run = tracker.client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.params == {"x": "0.5"}
    assert run.data.metrics == {"score": 0.75} and run.data.tags["sweeper.status"] == "FINISHED"
    assert run.data.tags["mlflow.parentRunId"] == parent
    assert [a.path for a in tracker.client.list_artifacts(run_id)] == ["conditions.json"]
    assert len(writer.failures) == 1 and writer.failures[0].startswith("a write MLflow refuses")
    assert writer.spooled == 0 and not (tmp_path / "spool.jsonl").exists()


def test_the_child_sends_what_reached_it_and_ends_when_the_driver_is_killed(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    parent = MLflowTracker(uri, "writer").start_run("sweep")
    driver = (
        "import os, sys, time\n"
        "from sweeper.record.tracking import MLflowTracker\n"
        "from sweeper.record.writer_process import WriterProcess\n"
        f"writer = WriterProcess(MLflowTracker({uri!r}, 'writer'), None)\n"
        "print(writer._process.pid, flush=True)\n"
        "for i in range(5):\n"
        f"    writer.start_run('creating', f'trial-{{i}}', parent_run_id={parent!r})\n"
        "time.sleep(1.0)  # the queue's feeder thread hands the writes over\n"
        "os.kill(os.getpid(), 9)\n"
    )
    proc = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr[-2000:]
    child = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 60
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(child), "the writer process outlived its driver"
    tracker = MLflowTracker(uri, "writer")
    names = {r.info.run_name for r in tracker.child_runs(parent)}
    assert names == {f"trial-{i}" for i in range(5)}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by init) is not alive
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_a_writer_forked_before_any_thread_writes_the_records_and_none_is_forked_beside_a_thread(
        tmp_path: Path) -> None:
    """The sweep's driver forks its writer first thing (MLflow imported, no store open); the child then
    opens its own store. With another thread running, no fork: the writer is spawned as before."""
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    driver = (
        "import threading, time\n"
        "from sweeper.record.tracking import MLflowTracker\n"
        "from sweeper.record.writer_process import WriterProcess, WriterStart\n"
        f"start = WriterStart.fork({str(tmp_path / 'spool.jsonl')!r}, {uri!r})\n"
        "forked = start.process._popen.method if start else None\n"
        f"tracker = MLflowTracker({uri!r}, 'writer')\n"  # the store, opened after the fork
        "parent = tracker.start_run('sweep')\n"
        f"writer = WriterProcess(tracker, {str(tmp_path / 'spool.jsonl')!r}, start)\n"
        "handle = writer.start_run('creating', 'trial-0', parent_run_id=parent, params={'x': 0.5})\n"
        "writer.log('closing', handle, metrics={'score': 0.75})\n"
        "writer.finish('closing', handle, 'FINISHED')\n"
        "writer.close()\n"
        "threading.Thread(target=time.sleep, args=(2,), daemon=True).start()\n"
        f"beside = WriterStart.fork(None, {uri!r})\n"
        "print(forked, writer.run_id(handle), writer.failures, beside)\n"
    )
    proc = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    method, run_id, failures, beside = proc.stdout.split()
    assert (method, failures, beside) == ("fork", "[]", "None")
    run = MLflowTracker(uri, "writer").client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.params == {"x": "0.5"} and run.data.metrics == {"score": 0.75}


def test_a_forked_writer_nobody_adopted_ends_when_discarded() -> None:
    driver = (
        "from sweeper.record.writer_process import WriterStart\n"
        "start = WriterStart.fork(None, 'sqlite:///unused.db')\n"
        "start.discard()\n"
        "print(start.process.exitcode)\n"
    )
    proc = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.split() == ["0"], proc.stdout + proc.stderr[-3000:]


def test_the_store_a_writer_will_open_is_imported_before_the_fork_and_a_server_needs_none() -> None:
    """The driver imports MLflow's SQLAlchemy store before it forks the writer, so that both processes
    have it at the cost of one import; a tracking server's URI imports no database code."""
    driver = (
        "import sys\n"
        "from sweeper.record.tracking import import_store\n"
        "import_store('http://127.0.0.1:5000')\n"
        "served = 'mlflow.store.tracking.sqlalchemy_store' in sys.modules\n"
        "import_store('sqlite:///mlruns.db')\n"
        "print(served, 'mlflow.store.tracking.sqlalchemy_store' in sys.modules,\n"
        "      'sqlalchemy.dialects.sqlite' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.split() == ["False", "True", "True"], proc.stdout + proc.stderr[-3000:]
