"""The tracker's write path on a real SQLite store: what one trial's records cost is what the sweep pays."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sweeper.record.redaction import REDACTED
from sweeper.record.tracking import MLflowTracker


def test_a_run_is_created_with_its_tags_and_its_text_artifacts_land_in_its_folder(tmp_path: Path) -> None:
    tracker = MLflowTracker(f"sqlite:///{tmp_path / 'mlruns.db'}", "writes")
    parent = tracker.start_run("sweep", tags={"role": "sweep"})
    run_id = tracker.start_run("trial-0001", parent_run_id=parent, params={"x": 0.25, "api_key": "s3cret"},
                               tags={"phase": "sobol", "skipped": None, "password": "hunter2"})
    tracker.log_text(run_id, '{"a": 1} https://user:pw@host/x', "conditions.json")
    tracker.log_text(run_id, "nested", "logs/deep/file.txt")
    tracker.finish(run_id)

    run = tracker.client.get_run(run_id)
    tags = run.data.tags
    assert tags["sweeper.phase"] == "sobol" and "sweeper.skipped" not in tags
    assert tags["sweeper.password"] == "***" and run.data.params == {"x": "0.25", "api_key": "***"}
    assert tags["mlflow.runName"] == "trial-0001" and tags["mlflow.parentRunId"] == parent
    assert run.info.status == "FINISHED"
    folder = Path(tracker.client.download_artifacts(run_id, "", str(tmp_path / "down")))
    assert (folder / "conditions.json").read_text() == '{"a": 1} https://user:***@host/x'  # redacted on the way
    assert (folder / "logs" / "deep" / "file.txt").read_text() == "nested"
    assert sorted(a.path for a in tracker.client.list_artifacts(run_id)) == ["conditions.json", "logs"]


def test_artifacts_of_a_run_created_elsewhere_land_once_its_folder_is_looked_up(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    run_id = MLflowTracker(uri, "writes").start_run("made by another tracker")
    other = MLflowTracker(uri, "writes")  # as the writer process, which did not create the sweep's run
    other.log_text(run_id, "hello", "notes.txt")
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    other.log_bytes(run_id, png, "live/batch_001_mean.png")
    down = tmp_path / "down"
    assert Path(other.client.download_artifacts(run_id, "notes.txt", str(down))).read_text() == "hello"
    assert Path(other.client.download_artifacts(run_id, "live/batch_001_mean.png", str(down))).read_bytes() == png


def test_a_sqlite_store_is_put_in_write_ahead_log_mode(tmp_path: Path) -> None:
    db = tmp_path / "mlruns.db"
    MLflowTracker(f"sqlite:///{db}", "writes")
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_processes_opening_one_new_sqlite_store_at_once_all_get_it(tmp_path: Path) -> None:
    """MLflow's migrations race when several processes create a store's tables together (the
    slower ones fail with "table ... already exists"); the tracker opens the store again."""
    import subprocess
    import sys
    import time

    go = tmp_path / "go"
    script = (
        "import pathlib, sys, time\n"
        "from sweeper.record.tracking import MLflowTracker\n"
        f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.01)\n"
        f"MLflowTracker('sqlite:///{tmp_path / 'mlruns.db'}', 'race')\n"
        "print('opened')\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    time.sleep(3.0)  # all three have imported mlflow and wait for the signal
    go.touch()
    outputs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err[-2000:] for _, err in outputs]
    assert all(out.strip() == "opened" for out, _ in outputs)


def test_the_tracker_redacts_what_any_caller_writes(tmp_path: Path) -> None:
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


_WRITER = """
import sys, time
from sweeper.record.tracking import MLflowTracker
tracker = MLflowTracker(sys.argv[1], "writes")
run_id = tracker.start_run("busy")
open(sys.argv[2], "w").close()  # the readers may start
for step in range(int(sys.argv[3])):
    tracker.log(run_id, metrics={"m": float(step)}, step=step)  # one commit each
    time.sleep(0.004)
print(run_id)
"""

_READER = """
import os, sqlite3, sys, time
while not os.path.exists(sys.argv[2]):
    con = sqlite3.connect(sys.argv[1], timeout=5)  # read-write, as MLflow's own readers open it
    con.execute("SELECT count(*) FROM runs").fetchone()
    con.close()  # a last connection closing checkpoints and deletes the write-ahead log
"""


def test_readers_opening_and_closing_the_store_cost_the_writer_no_commit(tmp_path: Path) -> None:
    """Processes that open and close the sweep's SQLite file (``sweeper report``, ``mlflow ui``, a
    notebook) while the tracker writes: every commit of the writer is in the store afterwards.

    The writer's process must keep SQLite's shared lock on the file: had it closed a descriptor
    of its own on the file (as the tracker once did to lock around MLflow's migrations), a
    reader's closing connection deleted the log under it, and most commits vanished without an
    error (docs/decisions/0001-sqlite-readers.md)."""
    import subprocess
    import sys

    db, ready, done, steps = tmp_path / "mlruns.db", tmp_path / "ready", tmp_path / "done", 40
    uri = f"sqlite:///{db}"
    # The store exists before anyone reads it, made by a process that is gone (one still open would
    # hold a lock of its own all along, and hide the writer's).
    subprocess.run([sys.executable, "-c", f"from sweeper.record.tracking import MLflowTracker; "
                    f"MLflowTracker({uri!r}, 'writes')"], check=True)
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, uri, str(ready), str(steps)], stdout=subprocess.PIPE,
                              text=True)
    while not ready.exists():
        assert writer.poll() is None, "the writer ended before it wrote"
    readers = [subprocess.Popen([sys.executable, "-c", _READER, str(db), str(done)]) for _ in range(1)]
    out, _ = writer.communicate(timeout=120)
    done.touch()
    for reader in readers:
        assert reader.wait(30) == 0
    assert writer.returncode == 0
    history = MLflowTracker(uri, "writes").client.get_metric_history(out.split()[-1], "m")
    assert sorted(int(m.step) for m in history) == list(range(steps))
