"""Readers of the sweep's SQLite store never cost it a record.

While a sweep writes ``mlruns.db``, everything a user points at the same file reads it at
once, for real: ``sweeper report``, ``sweeper multiverse`` and ``sweeper trials`` in a loop (on
an earlier sweep in the same file, as a user browses while sweeping: written straight through the
sweeper's tracker by :func:`tests.sweep_records.record_sweep`), an ``mlflow server`` on
the file polled over HTTP, and a Python reader that opens and closes connections as a notebook
does. Every trial of the sweep must be in MLflow, complete, and the sweep must say so only
then (docs/decisions/0001-sqlite-readers.md: a writer that had lost its SQLite lock lost most of
its commits to readers that open and close connections, some without an error).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import REPO
from tests.integration.conftest import STORE_TEMPLATE, TOY_APP, record_faults, run_cli
from tests.integration.services import free_port, http_status, process_group, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VENV_BIN = Path(sys.executable).parent
NUM_TRIALS = 16

#: A notebook's reads: MLflow's search, and a plain connection opened and closed (the close of a
#: last connection checkpoints the write-ahead log and deletes it).
#:
#: The Python reader and the server use MLflow's ``NullPool`` (``MLFLOW_SQLALCHEMYSTORE_POOLCLASS``):
#: a connection per request, closed after it. With MLflow's default pool a reader keeps a
#: connection, and its shared lock, open all along, which kept anyone from deleting the log and
#: hid the lost lock of the writer: this test then passed without the fix.
NULL_POOL = {"MLFLOW_SQLALCHEMYSTORE_POOLCLASS": "NullPool"}
_PYTHON_READER = """
import os, sqlite3, sys, time
from mlflow.tracking import MlflowClient
db, stop = sys.argv[1], sys.argv[2]
reads = 0
while not os.path.exists(stop):
    client = MlflowClient(f"sqlite:///{db}")
    client.search_runs([e.experiment_id for e in client.search_experiments()], max_results=100)
    con = sqlite3.connect(db, timeout=5)
    con.execute("SELECT count(*) FROM runs").fetchone()
    con.close()
    reads += 1
    time.sleep(0.05)
print(reads)
"""
#: The earlier sweep: a finished random sweep of the toy task's 6 trials, written in a process of its own, so that
#: the test's process holds no connection to the file (see NULL_POOL). Prints the sweep's run id.
#: NOTE: docs/decisions/0050-test-time-cuts.md
_EARLIER_SWEEP = """
import sys
from tests.integration.apps.toy import branin01
from tests.sweep_records import record_sweep
points = [{"x": x, "y": y} for x, y in ((0.1, 0.2), (0.8, 0.3), (0.4, 0.9), (0.6, 0.6), (0.3, 0.5), (0.9, 0.8))]
print(record_sweep(f"sqlite:///{sys.argv[1]}", "earlier", [branin01(p["x"], p["y"]) for p in points], points=points,
                   space={"x": "interval(0, 1)", "y": "interval(0, 1)"}, metric="score", mode="min"))
"""


@contextlib.contextmanager
def mlflow_server_on(db: Path, root: Path) -> Iterator[Callable[[], str]]:
    """``mlflow server`` on the sweep's SQLite file, as a user runs it to browse. Yields a call that waits
    until it serves and returns its URL: it starts (~10 s on 2 busy cores) while the test goes on.

    It is stopped with SIGKILL: a reader has nothing to save, and after SIGTERM it took 8 s to exit.
    """
    root.mkdir()
    port, log = free_port(), root / "mlflow-server.log"
    cmd = [str(VENV_BIN / "mlflow"), "server", "--backend-store-uri", f"sqlite:///{db}", "--host", "127.0.0.1",
           "--port", str(port), "--workers", "1", "--default-artifact-root", str(root / "artifacts")]
    with process_group(cmd, log, cwd=root, env={**os.environ, **NULL_POOL}, stop_signal=signal.SIGKILL) as proc:
        url = f"http://127.0.0.1:{port}"

        def serving() -> str:
            wait_until(lambda: http_status(f"{url}/health") == 200, "mlflow server", 180, proc, log)
            return url

        yield serving


#: The commands a user points at the store while the sweep writes, and their own arguments.
COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "trials": lambda tmp: [],
    "report": lambda tmp: ["--out", str(tmp / "report")],
    "multiverse": lambda tmp: ["--out", str(tmp / "maps")],
}


class Readers:
    """The readers, each in a loop until :meth:`stop`; how often each read, and how often it failed."""

    def __init__(self, tmp_path: Path, db: Path, earlier_run: str) -> None:
        self.tmp_path, self.db, self.earlier_run = tmp_path, db, earlier_run
        self.reads: Counter[str] = Counter()
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """The readers that come and go: the commands and the Python reader."""
        self._python = subprocess.Popen([sys.executable, "-c", _PYTHON_READER, str(self.db),
                                         str(self.tmp_path / "stop")], stdout=subprocess.PIPE, text=True,
                                        env={**os.environ, **NULL_POOL})
        for name in COMMANDS:
            self._thread(self._command, name)

    def poll_server(self, url: str) -> None:
        self._thread(self._server, url)

    def _thread(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        (self.tmp_path / "stop").touch()
        for thread in self._threads:
            thread.join(120)
        out, _ = self._python.communicate(timeout=60)
        self.reads["python"] = int(out.split()[-1]) if self._python.returncode == 0 and out.split() else 0
        if self._python.returncode != 0:
            self.failures.append(f"the Python reader exited {self._python.returncode}")

    def _command(self, name: str) -> None:
        """``sweeper <name>`` on the earlier sweep, again and again, as a user browsing in another terminal.

        Each command loops in a thread of its own, so each starts while the sweep writes however slow the
        others are (in turn, a loaded machine let the sweep end before ``multiverse`` had its turn)."""
        uri = f"sqlite:///{self.db}"
        while not self._stop.is_set():
            proc = subprocess.run([str(VENV_BIN / "sweeper"), name, *COMMANDS[name](self.tmp_path), "--experiment",
                                   "earlier", "--tracking-uri", uri, "--run", self.earlier_run], capture_output=True,
                                  text=True, timeout=300, cwd=self.tmp_path)
            self.reads[name] += 1
            if proc.returncode != 0:
                self.failures.append(f"sweeper {name} exited {proc.returncode}: {proc.stderr[-2000:]}")

    def _server(self, url: str) -> None:
        """The runs table of the MLflow UI, as a browser asks the server for it."""
        body = json.dumps({"experiment_ids": ["0", "1", "2", "3"], "max_results": 100}).encode()
        while not self._stop.wait(0.2):
            request = urllib.request.Request(f"{url}/api/2.0/mlflow/runs/search", data=body,
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    json.load(answer)
                self.reads["mlflow server"] += 1
            except OSError as exc:
                self.failures.append(f"mlflow server: {exc}")


def test_a_sweep_beside_every_kind_of_reader_of_its_sqlite_file_records_every_trial(tmp_path: Path) -> None:
    db = tmp_path / "mlruns.db"
    STORE_TEMPLATE.copy_to(db)  # the store the sweeps write into, there before the server starts on it
    with mlflow_server_on(db, tmp_path / "server") as serving:  # it starts while the earlier sweep is written
        earlier = subprocess.run([sys.executable, "-c", _EARLIER_SWEEP, str(db)], cwd=REPO, capture_output=True,
                                 text=True, timeout=120)
        assert earlier.returncode == 0, earlier.stderr[-3000:]
        readers = Readers(tmp_path, db, earlier.stdout.split()[-1])
        server_url = serving()
        readers.start()
        readers.poll_server(server_url)
        try:
            sweep = run_cli(TOY_APP, tmp_path, f"hydra.sweeper.num_trials={NUM_TRIALS}", "hydra.sweeper.strategy=sobol",
                            "sleep_s=1.0", "steps=3")
        finally:
            readers.stop()  # before the server stops

    output = sweep.output
    assert sweep.proc.returncode == 0, output[-4000:]
    assert "disk I/O error" not in output and "MLflow write failed" not in output, output[-4000:]
    assert f"Finished {NUM_TRIALS} trials (0 failed)" in output
    assert not (sweep.sweep_dir / "mlflow_spool.jsonl").exists()
    parent, trials = sweep.runs("toy")
    assert parent.info.status == "FINISHED" and parent.data.metrics["num_finished"] == NUM_TRIALS
    assert sorted(int(r.data.tags["sweeper.trial_index"]) for r in trials) == list(range(NUM_TRIALS))
    client = MlflowClient(sweep.tracking_uri)
    for run in trials:  # complete: closed, with the metric, its per-step history and its conditions
        assert run.info.status == "FINISHED" and "score" in run.data.metrics, run.data.tags
        assert [m.step for m in client.get_metric_history(run.info.run_id, "partial")] == [0, 1, 2]
        assert "conditions.json" in {a.path for a in client.list_artifacts(run.info.run_id)}
    # Every reader really read while the sweep wrote, and none of them failed either.
    assert readers.failures == []
    assert all(readers.reads[name] >= 1 for name in ("report", "multiverse", "trials", "mlflow server", "python")), \
        readers.reads
    record_faults("readers beside a sweep on its SQLite file", faults_injected=sum(readers.reads.values()),
                  trials_expected=NUM_TRIALS, trials_recorded=len(trials),
                  finished_runs=sum(r.info.status == "FINISHED" for r in trials), duplicates=0,
                  **{f"reads_{k.replace(' ', '_')}": v for k, v in readers.reads.items()})
