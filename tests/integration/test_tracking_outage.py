"""The tracking server goes away during a sweep: nothing is lost.

Real parts: PostgreSQL, ``mlflow server`` (cluster/mlflow/serve.sh), a sweep through the Hydra
command line on a local Ray. The server process is stopped while trials run and started again
on the same port; in the second case it stays away until the sweep has ended, and
``sweeper sync`` sends what was spooled.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.integration.conftest import SHARED_RAY, TOY_APP, child_runs, record_faults, runs_by_index
from tests.integration.services import free_port, mlflow_server, postgres_server

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VENV_BIN = Path(sys.executable).parent
SPOOL = "mlflow_spool.jsonl"


def _sweep(tmp_path: Path, url: str, num_trials: int, name: str,
           **env: str) -> tuple[subprocess.Popen, Path, Path]:
    """The sweep, on the session's shared Ray head: what is under test is its tracking server."""
    sweep_dir, log = tmp_path / name, tmp_path / f"{name}.log"
    ray, ray_env = SHARED_RAY.join()
    cmd = [sys.executable, str(TOY_APP), "--multirun", "hydra/sweeper=multiverse", f"hydra.sweep.dir={sweep_dir}",
           f"mlflow.tracking_uri={url}", f"mlflow.experiment_name={name}", *ray,
           f"hydra.sweeper.num_trials={num_trials}", "hydra.sweeper.n_initial=4", "hydra.sweeper.batch_size=2",
           "sleep_s=2"]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, **ray_env, **env})
    return proc, sweep_dir, log


def _wait(condition, what: str, log: Path, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}:\n{log.read_text()[-4000:]}"
        time.sleep(0.5)


def _children(url: str, experiment: str) -> list:
    return child_runs(MlflowClient(url), experiment)


def _finished(url: str, experiment: str) -> int:
    with contextlib.suppress(Exception):
        return sum(r.info.status == "FINISHED" for r in _children(url, experiment))
    return 0


def _assert_complete(url: str, experiment: str, num_trials: int) -> int:
    client = MlflowClient(url)
    runs = _children(url, experiment)
    by_index = runs_by_index(runs)
    assert sorted(by_index) == list(range(num_trials))
    for index, attempts in by_index.items():
        assert [r.info.status for r in attempts] == ["FINISHED"], (index, [r.info.status for r in attempts])
        run = attempts[0]
        assert {"x", "y"} <= set(run.data.params) and "score" in run.data.metrics
        assert run.data.tags["sweeper.status"] == "FINISHED" and run.data.tags["sweeper.host"]
        assert "conditions.json" in [a.path for a in client.list_artifacts(run.info.run_id)]
    parent = client.get_run(runs[0].data.tags["mlflow.parentRunId"])
    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["num_finished"] == num_trials
    assert "optimization_results.yaml" in [a.path for a in client.list_artifacts(parent.info.run_id)]
    return len(by_index)


def test_writes_wait_out_an_outage_and_a_sync_sends_what_the_sweep_left(tmp_path: Path) -> None:
    with postgres_server() as pg:
        backend, port = pg.create_database("mlflow"), free_port()
        root = tmp_path / "server"
        url = f"http://127.0.0.1:{port}"

        # 1. The server goes away mid-sweep for longer than the retries last, then comes back.
        with contextlib.ExitStack() as first:
            first.enter_context(mlflow_server(root, backend, port=port))
            proc, sweep_dir, log = _sweep(tmp_path, url, 8, "outage")
            _wait(lambda: _finished(url, "outage") >= 2, "two trials finished", log)
        _wait(lambda: (sweep_dir / SPOOL).is_file(), "writes spooled while the server is away", log, 120)
        with mlflow_server(root, backend, port=port):
            assert proc.wait(300) == 0, log.read_text()[-4000:]
            assert not (sweep_dir / SPOOL).exists()
            assert "spooling writes" in log.read_text() and "spooled writes were sent" in log.read_text()
            record_faults("tracking server stopped mid-sweep, restarted", faults_injected=1, trials_expected=8,
                          trials_recorded=_assert_complete(url, "outage", 8), duplicates=0)

            # 2. The server goes away and stays away until the sweep has ended. The sweep waits out the
            # outage for 1.5 s, not 15 (retrying each write, then at each close of its writers).
            proc, sweep_dir, log = _sweep(tmp_path, url, 4, "late", SWEEPER_MLFLOW_RETRY_DELAYS_S="0.5,1")
            _wait(lambda: "MLflow: experiment" in log.read_text(), "the sweep's run created", log)
        assert proc.wait(400) == 0, log.read_text()[-4000:]
        assert "sweeper sync" in log.read_text()
        assert "spooling writes" in log.read_text()
        assert (sweep_dir / SPOOL).is_file()
        refused = subprocess.run([str(VENV_BIN / "sweeper"), "sync", str(sweep_dir)], capture_output=True, text=True)
        assert refused.returncode == 1 and "cannot reach" in refused.stderr + refused.stdout
        with mlflow_server(root, backend, port=port):
            synced = subprocess.run([str(VENV_BIN / "sweeper"), "sync", str(sweep_dir)], capture_output=True,
                                    text=True, timeout=120)
            assert synced.returncode == 0, synced.stdout + synced.stderr
            assert not (sweep_dir / SPOOL).exists()
            record_faults("tracking server down until the sweep ended, then sweeper sync", faults_injected=1,
                          trials_expected=4, trials_recorded=_assert_complete(url, "late", 4), duplicates=0)
