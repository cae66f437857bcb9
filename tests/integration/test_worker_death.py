"""A worker node dies mid-trial: the trial is retried on the node left, nothing is lost or doubled.

The fault is real: a two-node Ray cluster (two `ray start` raylets), a sweep through the
Hydra command line with ``ray.max_failures=2``, and the second node's whole process group
(raylet and the worker running a trial) SIGKILLed while both nodes run a trial.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.integration.conftest import child_runs, record_faults, runs_by_index
from tests.integration.services import ray_cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

APP_DIR = Path(__file__).parent / "apps" / "cluster" / "app"
NUM_TRIALS = 4


def _children(client: MlflowClient) -> list:
    return child_runs(client, "cluster")


def test_a_dead_node_costs_one_attempt_and_the_sweep_completes(tmp_path: Path) -> None:
    shutil.copytree(APP_DIR, tmp_path / "app")
    tracking_uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    with ray_cluster({"node_a": {"slot": 1}, "node_b": {"slot": 1}}) as cluster:
        cmd = [sys.executable, "app/sweep_app.py", "--multirun", f"ray.address={cluster.address}",
               f"mlflow.tracking_uri={tracking_uri}", "ray.resources_per_trial.custom={slot: 1}",
               "ray.max_failures=2", f"hydra.sweep.dir={tmp_path / 'multirun'}",
               f"hydra.sweeper.num_trials={NUM_TRIALS}", "hydra.sweeper.n_initial=2", "hold_s=8"]
        env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **cluster.client_env}
        log = tmp_path / "sweep.log"
        with open(log, "w") as out:
            proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
        client = None  # MlflowClient() creates a new store's tables at once: not before the sweep has
        deadline = time.monotonic() + 240
        while True:  # both nodes busy: one of the two running trials is on node_b
            time.sleep(0.5)
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()[-4000:]
            if "MLflow: experiment" not in log.read_text():
                continue
            client = client or MlflowClient(tracking_uri)
            if sum(r.info.status == "RUNNING" for r in _children(client)) >= 2:
                break
        node_b = next(n for n in cluster.nodes if n.name == "node_b")
        os.killpg(node_b.proc.pid, signal.SIGKILL)
        assert proc.wait(400) == 0, log.read_text()[-4000:]
        names = {node_id: name for node_id, name in cluster.node_ids().items()}  # only node_a is left

    runs = _children(client)
    by_index = runs_by_index(runs)
    assert sorted(by_index) == list(range(NUM_TRIALS))
    for index, attempts in by_index.items():
        assert [r.info.status for r in attempts].count("FINISHED") == 1, (index, [r.info.status for r in attempts])
    failed = [r for r in runs if r.info.status == "FAILED"]
    assert len(failed) >= 1, "no attempt failed: the node died after its trial"
    for attempt in failed:
        assert attempt.data.tags["sweeper.error"].startswith("retried:"), attempt.data.tags["sweeper.error"]
        retry = next(r for r in by_index[int(attempt.data.tags["sweeper.trial_index"])] if r.info.status == "FINISHED")
        assert names.get(retry.data.tags["sweeper.ray.node_id"]) == "node_a"  # ran on the node left
    assert len(runs) == NUM_TRIALS + len(failed)
    assert f"Finished {NUM_TRIALS} trials (0 failed)" in log.read_text()
    record_faults("worker node SIGKILL mid-trial, ray.max_failures=2", faults_injected=1,
                  trials_expected=NUM_TRIALS, trials_recorded=len(by_index), failed_attempts_recorded=len(failed),
                  duplicates=sum([r.info.status for r in a].count("FINISHED") - 1 for a in by_index.values()))
