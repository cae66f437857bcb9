"""Every way a sweep is stopped says what happened: Ctrl-C and SIGTERM to its process group.

The signals are real and go to the sweep's whole process group, as a terminal's Ctrl-C or
``kill -TERM -PGID`` send them. One sweep is stopped twice and then completed:

1. Ctrl-C (SIGINT) while trials run: exit 130; the trials in flight and the sweep's run are
   KILLED with ``sweeper.status=INTERRUPTED``; the console's last line says how to go on, and
   Ray's ``Tuner.restore`` hint is not shown; ``sweeper trials`` says the sweep was interrupted.
2. ``sweeper resume`` on a local Ray, then SIGTERM to its group: the local Ray's processes
   sit in groups of their own (sweeper.run.ray_connect), so the driver stops in order: exit
   75, the sweep's run KILLED with ``sweeper.status=PREEMPTED``.
3. ``sweeper resume`` again completes the sweep: one FINISHED run per trial, the trials that
   ended before a stop not run again.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.integration.conftest import SHARED_RAY, STORE_TEMPLATE, TOY_APP, child_runs, record_faults, runs_by_index

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NUM_TRIALS = 10
VENV_BIN = Path(sys.executable).parent


def _started(cmd: list[str], log: Path, cwd: Path, env: dict[str, str]) -> subprocess.Popen:
    """``cmd`` in a process group of its own, as a terminal runs a command, its output in ``log``."""
    with open(log, "w") as out:
        return subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", **env})


def _signal_mid_sweep(proc: subprocess.Popen, log: Path, client: MlflowClient, sig: int, finished: int) -> None:
    """Send ``sig`` to the group once ``finished`` trials are FINISHED in MLflow and one is running."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        time.sleep(0.3)
        assert proc.poll() is None, f"the sweep ended before the signal:\n{log.read_text()[-4000:]}"
        if "Ray:" not in log.read_text():
            continue  # the store is open and Ray is up once the sweep prints its Ray line
        statuses = collections.Counter(r.info.status for r in child_runs(client, "toy"))
        if statuses["FINISHED"] >= finished and statuses["RUNNING"] >= 1:
            os.killpg(proc.pid, sig)
            return
    os.killpg(proc.pid, signal.SIGKILL)
    raise AssertionError(f"never saw {finished} finished and 1 running trial:\n{log.read_text()[-4000:]}")


def _sweep_run(client: MlflowClient) -> object:
    runs = client.search_runs([client.get_experiment_by_name("toy").experiment_id], "tags.`sweeper.role` = 'sweep'")
    assert len(runs) == 1
    return runs[0]


def _last_line(log: Path) -> str:
    return [line for line in log.read_text().splitlines() if line.strip()][-1]


def test_ctrl_c_and_sigterm_stop_a_sweep_in_order_and_resume_completes_it(tmp_path: Path) -> None:
    STORE_TEMPLATE.copy_to(tmp_path / "mlruns.db")
    uri, sweep_dir, executions = f"sqlite:///{tmp_path / 'mlruns.db'}", tmp_path / "sweep", tmp_path / "executions.log"
    shared, shared_env = SHARED_RAY.join()
    client = MlflowClient(uri)

    # 1. Ctrl-C to the process group while trials run.
    first = tmp_path / "first.log"
    proc = _started([sys.executable, str(TOY_APP), "--multirun", "hydra/sweeper=multiverse",
                     f"hydra.sweep.dir={sweep_dir}", f"mlflow.tracking_uri={uri}", *shared,
                     f"hydra.sweeper.num_trials={NUM_TRIALS}",
                     # Each trial at least 1.5 s: the watcher below polls MLflow, and on a loaded machine trials of
                     # 0.25 s ended 5 more before its Ctrl-C landed, leaving the resume too few to signal in.
                     "hydra.sweeper.strategy=sobol", "hydra.sweeper.live_maps=false", "sleep_s=3", "sleep_min_s=1.5",
                     f"executions_log={executions}"], first, tmp_path, shared_env)
    _signal_mid_sweep(proc, first, client, signal.SIGINT, finished=3)
    assert proc.wait(120) == 130, first.read_text()[-4000:]
    runs = child_runs(client, "toy")
    ended_first = {int(r.data.tags["sweeper.trial_index"]) for r in runs if r.info.status == "FINISHED"}
    in_flight = [r for r in runs if r.info.status != "FINISHED"]
    assert in_flight and all(r.info.status == "KILLED" and r.data.tags["sweeper.status"] == "INTERRUPTED"
                             for r in in_flight), [(r.info.status, r.data.tags.get("sweeper.status")) for r in runs]
    parent = _sweep_run(client)
    assert (parent.info.status, parent.data.tags["sweeper.status"]) == ("KILLED", "INTERRUPTED")
    assert _last_line(first).endswith(f"Interrupted after {len(ended_first)} of {NUM_TRIALS} trials; continue with: "
                                      f"sweeper resume {sweep_dir}")
    said = first.read_text()
    assert "Tuner.restore" not in said and "Finished" not in said and "Traceback" not in said
    listed = subprocess.run([str(VENV_BIN / "sweeper"), "trials", "--experiment", "toy", "--tracking-uri", uri],
                            capture_output=True, text=True, timeout=120)
    assert f"Note: this sweep was interrupted (Ctrl-C) after {len(ended_first)} of {NUM_TRIALS} trials; continue it " \
           f"with: sweeper resume {sweep_dir}" in listed.stdout, listed.stdout + listed.stderr

    # 2. Resumed on a local Ray; SIGTERM to the process group while trials run.
    second = tmp_path / "second.log"
    proc = _started([str(VENV_BIN / "sweeper"), "resume", str(sweep_dir), "ray.address=null", "ray.num_cpus=2"],
                    second, tmp_path, {})
    _signal_mid_sweep(proc, second, client, signal.SIGTERM, finished=len(ended_first) + 2)
    assert proc.wait(180) == 75, second.read_text()[-4000:]  # stopped in order, to be requeued
    parent = _sweep_run(client)
    assert (parent.info.status, parent.data.tags["sweeper.status"]) == ("KILLED", "PREEMPTED")
    assert ("continue from their checkpoints" in _last_line(second)
            and f"sweeper resume {sweep_dir}" in _last_line(second))
    assert not [r for r in child_runs(client, "toy") if r.info.status == "RUNNING"]
    ended_second = {int(r.data.tags["sweeper.trial_index"]) for r in child_runs(client, "toy")
                    if r.info.status == "FINISHED"}

    # 3. Resumed to the end: nothing lost, nothing run twice that had ended.
    third = subprocess.run([str(VENV_BIN / "sweeper"), "resume", str(sweep_dir)], capture_output=True, text=True,
                           timeout=300, cwd="/", env={**os.environ, **shared_env})
    assert third.returncode == 0, (third.stdout + third.stderr)[-4000:]
    assert f"Finished {NUM_TRIALS} trials (0 failed)" in third.stdout + third.stderr
    runs = child_runs(client, "toy")
    by_index = runs_by_index(runs)
    assert sorted(by_index) == list(range(NUM_TRIALS))
    assert all(sum(r.info.status == "FINISHED" for r in attempts) == 1 for attempts in by_index.values())
    assert not [r for r in runs if r.info.status == "RUNNING"]
    parent = _sweep_run(client)
    assert parent.info.status == "FINISHED"
    ran = collections.Counter(int(line) for line in executions.read_text().split())
    assert all(ran[i] == 1 for i in ended_first), ran  # kept through both stops
    assert all(ran[i] <= 2 for i in ended_second), ran
    record_faults("Ctrl-C, then SIGTERM to the process group, then sweeper resume", faults_injected=2,
                  trials_expected=NUM_TRIALS, trials_recorded=len(by_index),
                  finished_runs=sum(r.info.status == "FINISHED" for r in runs),
                  duplicates=sum(sum(r.info.status == "FINISHED" for r in a) - 1 for a in by_index.values()),
                  killed_in_flight=sum(r.info.status == "KILLED" for r in runs))
