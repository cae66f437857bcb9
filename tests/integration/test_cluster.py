"""The cluster path, with every component real and on this machine.

A Ray head and a worker node (two ``ray start`` raylets, token authentication on, a custom
resource each), PostgreSQL, and ``mlflow server`` started by ``cluster/mlflow/serve.sh``
with proxied artifacts. One sweep through the Hydra command line, launched from a folder
the nodes have never seen, joins the cluster with ``ray.address=...`` and logs to the
server over HTTP; the tests then read what landed where: node tags in MLflow, rows in
PostgreSQL, files in the server's artifact store, and the MLflow UI in Debian's Chromium.

The last test kills the worker node mid-trial (it was test_worker_death.py, on a cluster of its
own of the same shape): no test after it may need that node.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.documented import documented, run_documented
from tests.integration.conftest import TEST_ARTIFACTS, child_runs, record_faults, runs_by_index, trial_tags
from tests.integration.services import (
    MLflowServer,
    Postgres,
    RayCluster,
    http_status,
    mlflow_server,
    postgres_server,
    ray_cluster,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

APP_DIR = Path(__file__).parent / "apps" / "cluster" / "app"
NUM_TRIALS = 6
EXPERIMENT = "cluster"
SCREENSHOTS = TEST_ARTIFACTS


@dataclass
class ClusterSweep:
    proc: subprocess.CompletedProcess[str]
    launch_dir: Path
    server: MLflowServer
    parent: Any
    children: list[Any]


@pytest.fixture(scope="module")
def postgres():
    with postgres_server() as server:
        yield server


@pytest.fixture(scope="module")
def tracking_server(postgres: Postgres, tmp_path_factory):
    """The tracking server as docs/clusters.md sets it up: its user and database, made by its ``psql``
    command (on the test's PostgreSQL, as its superuser), then its ``serve.sh`` command (on that port)."""
    root = tmp_path_factory.mktemp("mlflow-server")
    create = documented("sudo -u postgres psql -c \"CREATE USER mlflow PASSWORD 'change-me'\" "
                        '-c "CREATE DATABASE mlflow OWNER mlflow"')
    as_superuser = f"{postgres.bin_dir / 'psql'} -h 127.0.0.1 -p {postgres.port} -U {postgres.user} -d postgres"
    done = run_documented(create.replace("sudo -u postgres psql", as_superuser), root,
                          env={"PGPASSWORD": postgres.password}, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    serve = documented("MLFLOW_BACKEND_STORE_URI=postgresql+psycopg://mlflow:change-me@127.0.0.1:5432/mlflow "
                       "cluster/mlflow/serve.sh")
    backend = serve.split()[0].split("=", 1)[1].replace(":5432/", f":{postgres.port}/")
    with mlflow_server(root, backend, command=serve.replace(":5432/", f":{postgres.port}/")) as server:
        yield server


@pytest.fixture(scope="module")
def cluster():
    with ray_cluster({"node_a": {"slot": 1}, "node_b": {"slot": 1}}) as c:
        yield c


@pytest.fixture(scope="module")
def cluster_sweep(cluster: RayCluster, tracking_server: MLflowServer, tmp_path_factory) -> ClusterSweep:
    """The sweep, launched as a user would from a folder holding only the task's code."""
    launch = tmp_path_factory.mktemp("launch")
    shutil.copytree(APP_DIR, launch / "app")
    cmd = [
        sys.executable, "app/sweep_app.py", "--multirun",
        f"ray.address={cluster.address}", f"mlflow.tracking_uri={tracking_server.url}",
        "ray.resources_per_trial.custom={slot: 1}",  # one trial per node at a time
        f"hydra.sweep.dir={launch / 'multirun'}", f"hydra.sweeper.num_trials={NUM_TRIALS}",
        # The first two trials wait for each other, one on each node: else, when node_b's worker starts later
        # than node_a's first trial ends, Tune gives node_b's trial to node_a's free worker (reuse_actors).
        f"meet_dir={tmp_path_factory.mktemp('meet')}",
    ]
    # No PYTHONPATH: the nodes can import the task's sibling module only from the upload.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(cluster.client_env, PYTHONUNBUFFERED="1")
    proc = subprocess.run(cmd, cwd=launch, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_server.url)
    exp = client.get_experiment_by_name(EXPERIMENT)
    assert exp is not None, proc.stderr[-3000:]
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("sweeper.role") == "sweep"]
    assert len(parents) == 1
    children = sorted((r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id),
                      key=lambda r: int(r.data.tags["sweeper.trial_index"]))
    return ClusterSweep(proc, launch, tracking_server, parents[0], children)


def test_trials_ran_on_both_nodes_and_say_which(cluster_sweep: ClusterSweep, cluster: RayCluster) -> None:
    from mlflow.tracking import MlflowClient

    names = cluster.node_ids()  # Ray node id -> node_a | node_b
    client = MlflowClient(cluster_sweep.server.url)
    # The node differs between trials, so each trial records its own; the host they share is on the sweep's run.
    placed = [names.get(r.data.tags["sweeper.ray.node_id"]) for r in cluster_sweep.children]
    assert len(placed) == NUM_TRIALS
    assert set(placed) == {"node_a", "node_b"}, placed
    assert "sweeper.host" not in cluster_sweep.children[0].data.tags
    for run in cluster_sweep.children:
        tags = trial_tags(client, run)
        assert tags["sweeper.ray.node_ip"] and tags["sweeper.host"] == socket.gethostname()


def test_task_code_reached_the_nodes_by_upload(cluster_sweep: ClusterSweep) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(cluster_sweep.server.url)
    for run in cluster_sweep.children:
        assert run.data.metrics["shipped"] == 1.0, "the task's sibling module did not come from the working_dir upload"
        assert trial_tags(client, run)["sweeper.code.shipped_from"].endswith(str(cluster_sweep.launch_dir))
    assert "code from" in cluster_sweep.proc.stderr + cluster_sweep.proc.stdout


def test_every_run_is_in_postgresql(cluster_sweep: ClusterSweep, postgres: Postgres) -> None:
    rows = postgres.query("mlflow", (
        "SELECT r.status, count(*) FROM runs r JOIN experiments e ON e.experiment_id = r.experiment_id "
        f"WHERE e.name = '{EXPERIMENT}' GROUP BY r.status"))
    assert dict(rows) == {"FINISHED": NUM_TRIALS + 1}
    params = postgres.query("mlflow", (
        "SELECT p.key, count(*) FROM params p JOIN runs r ON r.run_uuid = p.run_uuid "
        "JOIN tags t ON t.run_uuid = r.run_uuid AND t.key = 'mlflow.parentRunId' "
        f"WHERE t.value = '{cluster_sweep.parent.info.run_id}' AND p.key IN ('x', 'y') GROUP BY p.key"))
    assert dict(params) == {"x": NUM_TRIALS, "y": NUM_TRIALS}
    for run in cluster_sweep.children:
        assert run.info.status == "FINISHED"
        assert {"score", "shipped"} <= set(run.data.metrics)


def test_artifacts_go_through_the_server_to_its_store(cluster_sweep: ClusterSweep) -> None:
    store = cluster_sweep.server.artifacts
    for run in [cluster_sweep.parent, *cluster_sweep.children]:
        assert run.info.artifact_uri.startswith("mlflow-artifacts:"), run.info.artifact_uri
    for run in cluster_sweep.children:
        assert list(store.rglob(f"{run.info.run_id}/artifacts/conditions.json")), run.info.run_id
    assert list(store.rglob(f"{cluster_sweep.parent.info.run_id}/artifacts/optimization_results.yaml"))


def _listening_addresses(port: int) -> set[str]:
    """Local addresses of sockets listening on ``port`` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


def test_tracking_server_listens_on_loopback_only(tracking_server: MLflowServer) -> None:
    port = int(tracking_server.url.rsplit(":", 1)[1])
    assert _listening_addresses(port) == {"0100007F"}  # 127.0.0.1, little-endian hex


def test_basic_auth_as_the_readme_sets_it_up(postgres: Postgres, tmp_path, monkeypatch) -> None:
    """docs/clusters.md's sign-in recipe, command by command: the server with basic auth, the admin
    creating alice with curl, and alice's exported credentials, which the sweeper's tracker uses."""
    backend = postgres.create_database("mlflow_auth_backend")
    serve = documented("MLFLOW_AUTH=1 MLFLOW_AUTH_ADMIN_PASSWORD='a-long-admin-password' "
                       "MLFLOW_BACKEND_STORE_URI=... cluster/mlflow/serve.sh")
    with mlflow_server(tmp_path / "server", backend, command=serve.replace("=...", f"={backend}")) as server:
        search = f"{server.url}/api/2.0/mlflow/experiments/search?max_results=1"
        assert http_status(search) == 401
        create_alice = documented("""curl -u admin:'a-long-admin-password' -H 'Content-Type: application/json' """
                                  """-d '{"username": "alice", "password": "alices-long-password"}' """
                                  """http://127.0.0.1:5000/api/2.0/mlflow/users/create""")
        done = run_documented(create_alice.replace("http://127.0.0.1:5000", server.url), tmp_path, timeout=60)
        assert done.returncode == 0 and '"username": "alice"' in done.stdout.replace('":"', '": "'), done.stdout
        sign_in = documented("export MLFLOW_TRACKING_USERNAME=alice MLFLOW_TRACKING_PASSWORD='alices-long-password'")
        exported = run_documented(f"{sign_in} && env | grep ^MLFLOW_TRACKING_", tmp_path, timeout=30).stdout
        credentials = dict(line.split("=", 1) for line in exported.splitlines())
        assert set(credentials) == {"MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"}
        from sweeper.record.tracking import MLflowTracker

        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "alice")
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "wrong")
        with pytest.raises(Exception, match="401|Unauthorized|credentials"):
            MLflowTracker(server.url, "alices")
        for key, value in credentials.items():
            monkeypatch.setenv(key, value)
        tracker = MLflowTracker(server.url, "alices")
        run_id = tracker.start_run("signed-in", params={"a": 1})
        tracker.finish(run_id)
        assert tracker.client.get_run(run_id).data.params == {"a": "1"}


def test_a_server_open_to_the_network_admits_only_the_allowed_hosts(postgres: Postgres, tmp_path) -> None:
    serve = documented("MLFLOW_HOST=0.0.0.0 MLFLOW_BACKEND_STORE_URI=... cluster/mlflow/serve.sh "
                       "--allowed-hosts 'mlflow.lab.example:*,localhost:*,127.0.0.1:*,10.*'")
    backend = postgres.create_database("mlflow_open")
    with mlflow_server(tmp_path / "server", backend, command=serve.replace("=...", f"={backend}")) as server:
        port = int(server.url.rsplit(":", 1)[1])
        assert _listening_addresses(port) == {"00000000"}  # 0.0.0.0: every interface
        search = f"{server.url}/api/2.0/mlflow/experiments/search?max_results=1"
        assert http_status(search, {"Host": f"mlflow.lab.example:{port}"}) == 200
        assert http_status(search, {"Host": f"attacker.example:{port}"}) in (400, 403)  # DNS rebinding refused


def test_mlflow_ui_shows_the_sweep_and_a_trials_conditions(cluster_sweep: ClusterSweep) -> None:
    from tests.integration.mlflow_ui import check_artifact_image, check_experiment_page, check_run_page, chromium_page

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    parent, trial = cluster_sweep.parent, cluster_sweep.children[1]
    trial_names = [r.info.run_name for r in cluster_sweep.children]
    assert trial_names == [f"trial-{i:04d}" for i in range(NUM_TRIALS)]
    # The trial's page shows the conditions it does not share with every trial (the node, here), and where the
    # rest are; the sweep's page shows those, once, and names the ones that varied (sweeper.record.shared_conditions).
    from mlflow.tracking import MlflowClient

    client = MlflowClient(cluster_sweep.server.url)
    merged = trial_tags(client, trial)
    assert merged["sweeper.host"] and merged["sweeper.python"] and merged["sweeper.packages.sha256"]
    assert merged["sweeper.code.shipped_from"] and merged["sweeper.ray.node_ip"]
    assert "ray.node_id" in parent.data.tags["sweeper.varied_conditions"].split(", ")
    conditions = {k: trial.data.tags[k] for k in ("sweeper.ray.node_id", "sweeper.shared_conditions")}
    shared = {k: parent.data.tags[k] for k in ("sweeper.shared_conditions", "sweeper.varied_conditions")}
    # The user opens what the sweep printed at its end (issue 16): the runs table in the Model training view.
    printed = re.findall(r"the sweep's trials: (\S+)", cluster_sweep.proc.stdout + cluster_sweep.proc.stderr)
    assert printed == [f"{cluster_sweep.server.url}/#/experiments/{parent.info.experiment_id}/runs"
                       f"?workflowType=machine_learning"], printed
    sweep_run = re.findall(r"the sweep's run: +(\S+)", cluster_sweep.proc.stdout + cluster_sweep.proc.stderr)
    assert sweep_run == [printed[0].replace("/runs?", f"/runs/{parent.info.run_id}?")], sweep_run
    # The GP batch's live map (issue 19), as the sweep logged it through the tracking server.
    live = [a.path for a in client.list_artifacts(parent.info.run_id, "live")]
    assert live == ["live/batch_001_mean.png", "live/batch_001_sd.png"], live
    with chromium_page() as page:
        check_experiment_page(page, printed[0], parent.info.run_name, trial_names,
                              SCREENSHOTS / "mlflow-ui-experiment.png")
        check_run_page(page, cluster_sweep.server.url, trial.info.experiment_id, trial.info.run_id,
                       {k: trial.data.params[k] for k in ("x", "y")}, conditions,
                       SCREENSHOTS / "mlflow-ui-trial.png")
        check_run_page(page, cluster_sweep.server.url, parent.info.experiment_id, parent.info.run_id,
                       {"strategy": parent.data.params["strategy"]}, shared, SCREENSHOTS / "mlflow-ui-sweep.png")
        shown = check_artifact_image(page, sweep_run[0], "live", "batch_001_mean.png",
                                     SCREENSHOTS / "mlflow-ui-live-map.png")
    assert shown == [path.split("/", 1)[1] for path in live], shown
    assert (SCREENSHOTS / "mlflow-ui-trial.png").stat().st_size > 10_000
    assert (SCREENSHOTS / "mlflow-ui-live-map.png").stat().st_size > 10_000


def test_ray_client_address_runs_the_sweep_from_the_head_node(cluster: RayCluster, tracking_server: MLflowServer,
                                                              cluster_sweep: ClusterSweep, tmp_path) -> None:
    # Through ray://, Tune's loop runs on the head node; the sweep still ends with every record.
    # Trials of 0.2 s are shorter than a worker's start: with ray.reuse_actors=false each trial gets a new worker
    # on a free slot, so they spread over both nodes (with reuse, all of them may run on the first worker).
    shutil.copytree(APP_DIR, tmp_path / "app")
    cmd = [sys.executable, "app/sweep_app.py", "--multirun", f"ray.address={cluster.client_address}",
           f"mlflow.tracking_uri={tracking_server.url}", "mlflow.experiment_name=cluster-client",
           "ray.resources_per_trial.custom={slot: 1}", f"hydra.sweep.dir={tmp_path / 'multirun'}",
           "hydra.sweeper.num_trials=4", "hydra.sweeper.n_initial=2", "hold_s=0.2", "ray.reuse_actors=false"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(cluster.client_env)
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "Finished 4 trials (0 failed)" in proc.stdout + proc.stderr

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_server.url)
    exp = client.get_experiment_by_name("cluster-client")
    runs = client.search_runs([exp.experiment_id])
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == 4 and all(r.info.status == "FINISHED" for r in children)
    assert all(r.data.metrics["shipped"] == 1.0 for r in children)
    tags = [trial_tags(client, r) for r in children]
    assert len({t["sweeper.pid"] for t in tags}) == 4, "a worker ran two trials: ray.reuse_actors=false was ignored"
    names = cluster.node_ids()
    assert {names.get(t["sweeper.ray.node_id"]) for t in tags} == {"node_a", "node_b"}
    results = (tmp_path / "multirun" / "optimization_results.yaml").read_text()
    assert "num_finished: 4" in results, results


def test_a_dead_node_costs_one_attempt_and_the_sweep_completes(cluster: RayCluster, tmp_path: Path) -> None:
    """A worker node dies mid-trial: the trial is retried on the node left, nothing is lost or doubled.

    The fault is real: a sweep through the Hydra command line with ``ray.max_failures=2`` on the
    module's two nodes, and the second node's whole process group (raylet and the worker running a
    trial) SIGKILLed while both nodes run a trial. The module's last test: node_b stays dead.
    """
    from mlflow.tracking import MlflowClient

    num_trials = 4
    shutil.copytree(APP_DIR, tmp_path / "app")
    tracking_uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    cmd = [sys.executable, "app/sweep_app.py", "--multirun", f"ray.address={cluster.address}",
           f"mlflow.tracking_uri={tracking_uri}", "ray.resources_per_trial.custom={slot: 1}",
           "ray.max_failures=2", f"hydra.sweep.dir={tmp_path / 'multirun'}",
           f"hydra.sweeper.num_trials={num_trials}", "hydra.sweeper.n_initial=2", "hold_s=8"]
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
        if sum(r.info.status == "RUNNING" for r in child_runs(client, EXPERIMENT)) >= 2:
            break
    node_b = next(n for n in cluster.nodes if n.name == "node_b")
    os.killpg(node_b.proc.pid, signal.SIGKILL)
    assert proc.wait(400) == 0, log.read_text()[-4000:]
    names = cluster.node_ids()  # only node_a is left

    runs = child_runs(client, EXPERIMENT)
    by_index = runs_by_index(runs)
    assert sorted(by_index) == list(range(num_trials))
    for index, attempts in by_index.items():
        assert [r.info.status for r in attempts].count("FINISHED") == 1, (index, [r.info.status for r in attempts])
    failed = [r for r in runs if r.info.status == "FAILED"]
    assert len(failed) >= 1, "no attempt failed: the node died after its trial"
    for attempt in failed:
        assert attempt.data.tags["sweeper.error"].startswith("retried:"), attempt.data.tags["sweeper.error"]
        retry = next(r for r in by_index[int(attempt.data.tags["sweeper.trial_index"])] if r.info.status == "FINISHED")
        assert names.get(trial_tags(client, retry)["sweeper.ray.node_id"]) == "node_a"  # ran on the node left
    assert len(runs) == num_trials + len(failed)
    assert f"Finished {num_trials} trials (0 failed)" in log.read_text()
    record_faults("worker node SIGKILL mid-trial, ray.max_failures=2", faults_injected=1,
                  trials_expected=num_trials, trials_recorded=len(by_index), failed_attempts_recorded=len(failed),
                  duplicates=sum([r.info.status for r in a].count("FINISHED") - 1 for a in by_index.values()))
