"""The tracking server goes away during a sweep: nothing is lost.

Real parts: PostgreSQL, ``mlflow server`` (cluster/mlflow/serve.sh), two sweeps through the
Hydra command line on the session's Ray head, side by side, each with a server of its own. A
server process is stopped while trials run and started again on the same port; in the second
case it stays away until the sweep has ended, and ``sweeper sync`` sends what was spooled.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.integration.conftest import SHARED_RAY, TOY_APP, child_runs, record_faults, runs_by_index, trial_tags
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
        assert run.data.tags["sweeper.status"] == "FINISHED" and trial_tags(client, run)["sweeper.host"]
        assert "conditions.json" in [a.path for a in client.list_artifacts(run.info.run_id)]
    parent = client.get_run(runs[0].data.tags["mlflow.parentRunId"])
    assert parent.info.status == "FINISHED"
    assert parent.data.metrics["num_finished"] == num_trials
    assert "optimization_results.yaml" in [a.path for a in client.list_artifacts(parent.info.run_id)]
    return len(by_index)


def test_writes_wait_out_an_outage_and_a_sync_sends_what_the_sweep_left(tmp_path: Path) -> None:
    """Two sweeps side by side, each logging to a tracking server of its own (one PostgreSQL, a database
    each): "outage" loses its server mid-sweep and gets it back; "late" loses its server just after its run
    is created, until after the sweep has ended."""
    with postgres_server() as pg, contextlib.ExitStack() as stack:
        servers: dict[str, tuple[Path, str, int]] = {}  # sweep -> the server's folder, backend store, port

        def serve(name: str) -> contextlib.AbstractContextManager:
            """The sweep's server, started (again: the same folder, store and port)."""
            root, backend, port = servers[name]
            return mlflow_server(root, backend, port=port)

        up: dict[str, contextlib.ExitStack] = {}
        for name in ("outage", "late"):
            servers[name] = (tmp_path / f"server-{name}", pg.create_database(name), free_port())
            up[name] = stack.enter_context(contextlib.ExitStack())
            up[name].enter_context(serve(name))
        url = {name: f"http://127.0.0.1:{port}" for name, (_, _, port) in servers.items()}

        proc, sweep_dir, log = _sweep(tmp_path, url["outage"], 8, "outage")
        # The late sweep waits out the outage for 1.5 s, not 15 (retrying each write, then at each close of
        # its writers).
        late, late_dir, late_log = _sweep(tmp_path, url["late"], 4, "late", SWEEPER_MLFLOW_RETRY_DELAYS_S="0.5,1")
        # 2. The server goes away and stays away until the sweep has ended.
        _wait(lambda: "MLflow: experiment" in late_log.read_text(), "the late sweep's run created", late_log)
        up["late"].close()
        # 1. The server goes away mid-sweep for longer than the retries last, then comes back.
        _wait(lambda: _finished(url["outage"], "outage") >= 2, "two trials finished", log)
        up["outage"].close()
        _wait(lambda: (sweep_dir / SPOOL).is_file(), "writes spooled while the server is away", log, 120)
        stack.enter_context(serve("outage"))

        # While the first sweep sends its spool and ends: the second has ended with its server away, and
        # says so: how many writes of which trials wait, the command that sends them, a status that is not 0.
        assert late.wait(400) == 74, late_log.read_text()[-4000:]  # RECORDS_INCOMPLETE_EXIT_STATUS
        said = late_log.read_text()
        assert "spooling writes" in said and "Finished 4 trials" not in said and "Ran 4 trials (0 failed)" in said
        assert re.search(r"the MLflow records of 4 trial\(s\) \(#0, #1, #2, #3\) and the sweep's run are "
                         r"incomplete: \d+ write\(s\) wait in .*mlflow_spool.jsonl: send them with "
                         rf"`sweeper sync {re.escape(str(late_dir))}`", said), said[-3000:]
        assert (late_dir / SPOOL).is_file()
        refused = subprocess.run([str(VENV_BIN / "sweeper"), "sync", str(late_dir)], capture_output=True, text=True)
        assert refused.returncode == 1 and "cannot reach" in refused.stderr + refused.stdout
        stack.enter_context(serve("late"))
        synced = subprocess.run([str(VENV_BIN / "sweeper"), "sync", str(late_dir)], capture_output=True, text=True,
                                timeout=120)
        assert synced.returncode == 0, synced.stdout + synced.stderr
        assert not (late_dir / SPOOL).exists()
        record_faults("tracking server down until the sweep ended, then sweeper sync", faults_injected=1,
                      trials_expected=4, trials_recorded=_assert_complete(url["late"], "late", 4), duplicates=0)

        assert proc.wait(300) == 0, log.read_text()[-4000:]
        assert not (sweep_dir / SPOOL).exists()
        assert "spooling writes" in log.read_text() and "spooled writes were sent" in log.read_text()
        record_faults("tracking server stopped mid-sweep, restarted", faults_injected=1, trials_expected=8,
                      trials_recorded=_assert_complete(url["outage"], "outage", 8), duplicates=0)
