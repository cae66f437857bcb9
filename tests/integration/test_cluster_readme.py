"""docs/clusters.md's own Ray commands, run as written on this machine (issue 16).

The token, the head, a plain worker and a worker with a custom resource, ``ray status``, then
the README's three sweeps of ``experiments/svm.py``: ``ray.address=auto`` from the launch
folder, the same with a fraction of a GPU and the custom resource, and as a Ray job through
the head's dashboard. What a test must change is changed and said: the loopback address for
HEAD_IP and MLFLOW_HOST, free ports for 6379, 8265 and 5000 (the machine may use them), and
for each node's dashboard agent (Ray's fixed 52365, taken by any other Ray running beside),
``--block`` so that each node is a process group the test can stop (``ray stop`` would end
every Ray of the machine), one CPU per node, a GPU declared on the custom-resource node (this
machine has none), and fewer trials.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.documented import documented, run_documented
from tests.integration.conftest import trial_tags
from tests.integration.services import (
    RAY_STOP_SIGNAL,
    VENV_BIN,
    free_port,
    http_status,
    mlflow_server,
    postgres_server,
    process_group,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SMALL = "hydra.sweeper.num_trials=3 hydra.sweeper.n_initial=3 hydra.sweeper.batch_size=3"
def node() -> str:
    """What each node's ``ray start`` gets here; the job server needs the head's agent to listen."""
    return (f"--block --num-cpus=1 --object-store-memory=100000000 --disable-usage-stats "
            f"--dashboard-agent-listen-port={free_port()}")


def started(log: Path) -> bool:
    """Whether a node's ``ray start`` said its Ray runs: a file read, where each ``ray status`` a wait polls costs
    about 2 CPU-seconds, taken from the node starting beside it."""
    return "Ray runtime started." in log.read_text(errors="replace")


def _trials(tracking_uri: str, experiment: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=100)
    return [r for r in runs if "mlflow.parentRunId" in r.data.tags]


def test_the_cluster_readmes_ray_commands_and_sweeps(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    ports = {"6379": str(free_port()), "8265": str(free_port())}
    head_address = f"127.0.0.1:{ports['6379']}"
    env = {"HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0"}

    def as_here(command: str) -> str:
        for documented_port, port in ports.items():
            command = command.replace(f":{documented_port}", f":{port}").replace(f"={documented_port}", f"={port}")
        return command.replace("HEAD_IP", "127.0.0.1")

    generate = run_documented(documented("ray get-auth-token --generate"), tmp_path, env=env, timeout=120)
    token = generate.stdout.strip().splitlines()[-1] if generate.returncode == 0 else ""
    assert re.fullmatch(r"[0-9a-f]{32,}", token), generate.stdout + generate.stderr
    assert (home / ".ray" / "auth_token").read_text().strip() == token

    on_head = documented("export RAY_AUTH_MODE=token RAY_AUTH_TOKEN=$(ray get-auth-token --generate 2>/dev/null)")
    head = as_here(documented("ray start --head --port=6379")) + f" --dashboard-port={ports['8265']} {node()}"
    on_worker = documented("export RAY_AUTH_MODE=token RAY_AUTH_TOKEN=<the head's token>").replace(
        "<the head's token>", token)
    workers = [as_here(documented("ray start --address=HEAD_IP:6379")) + f" {node()}",
               as_here(documented("""ray start --address=HEAD_IP:6379 --resources='{"large_gpu": 1}'"""))
               + f" --num-gpus=1 {node()}"]
    node_env = {**os.environ, **env, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    logs = tmp_path / "logs"
    logs.mkdir()
    # The sweep's side: the token, as docs/clusters.md says for every node "and for the sweep".
    for_sweep = documented("export RAY_AUTH_MODE=token RAY_AUTH_TOKEN=...").replace("...", token)
    client_env = {**env, **dict(kv.split("=", 1) for kv in for_sweep.split()[1:])}
    with contextlib.ExitStack() as stack:
        # The head starts while PostgreSQL and the MLflow server do.
        proc = stack.enter_context(process_group(["bash", "-c", f"{on_head} && {head}"], logs / "head.log",
                                                 env=node_env, stop_signal=RAY_STOP_SIGNAL))
        postgres = stack.enter_context(postgres_server())
        server = stack.enter_context(mlflow_server(tmp_path / "mlflow", postgres.create_database("mlflow")))
        wait_until(lambda: started(logs / "head.log"), "the Ray head's `ray start`", 120, proc, logs / "head.log")
        wait_until(lambda: run_documented(f"ray status --address={head_address}", tmp_path, env=client_env,
                                          timeout=60).returncode == 0, "the Ray head", 120)
        dashboard = f"http://127.0.0.1:{ports['8265']}/api/version"
        wait_until(lambda: http_status(dashboard) is not None, "the head's dashboard (Ray's job server)", 120)
        mlflow_url = server.url
        # Before the workers join: on one machine every node unpacks packages into the head's session
        # folder, and a worker node unpacking the job's package again replaces the job driver's own
        # working directory under it (on a cluster each node has its own disk).
        submit = documented("ray job submit --address http://127.0.0.1:8265 --working-dir . -- python "
                            "experiments/svm.py --multirun hydra/sweeper=multiverse ray.address=auto "
                            "mlflow.tracking_uri=http://MLFLOW_HOST:5000")
        job = as_here(submit).replace("http://MLFLOW_HOST:5000", mlflow_url)
        for _ in range(30):
            proc = run_documented(f"{job} {SMALL} mlflow.experiment_name=svm-job hydra.sweep.dir={tmp_path / 'job'}",
                                  REPO, env=client_env, timeout=400)
            output = proc.stdout + proc.stderr
            # The dashboard answers before its node's agent does; Ray refuses the job, says to try again
            # later, and created nothing.
            if "No available agent to submit job" not in output:
                break
            time.sleep(2)
        assert proc.returncode == 0 and "Finished 3 trials (0 failed)" in output, output[-4000:]
        assert "succeeded" in output, output[-2000:]
        assert len(_trials(mlflow_url, "svm-job")) == 3

        status = as_here(documented("ray status --address=HEAD_IP:6379"))
        for i, worker in enumerate(workers):  # one at a time: three nodes starting at once overload 2 cores
            proc = stack.enter_context(process_group(["bash", "-c", f"{on_worker} && {worker}"],
                                                     logs / f"worker{i}.log", env=node_env,
                                                     stop_signal=RAY_STOP_SIGNAL))
            wait_until(lambda i=i: started(logs / f"worker{i}.log"), f"worker {i}'s `ray start`", 180, proc,
                       logs / f"worker{i}.log")
            wait_until(lambda i=i: run_documented(status, tmp_path, env=client_env, timeout=60).stdout.count(" node_")
                       == i + 2, f"{i + 2} Ray nodes in `ray status`", 180, proc, logs / f"worker{i}.log")
        shown = run_documented(status, tmp_path, env=client_env, timeout=60).stdout
        assert "large_gpu" in shown and "GPU" in shown, shown

        sweeps = {
            "auto": documented("python experiments/svm.py --multirun hydra/sweeper=multiverse ray.address=auto "
                               "mlflow.tracking_uri=http://127.0.0.1:5000"),
            "gpu": documented("python experiments/svm.py --multirun hydra/sweeper=multiverse ray.address=auto "
                              "mlflow.tracking_uri=http://127.0.0.1:5000 ray.resources_per_trial.gpu=0.25 "
                              "'ray.resources_per_trial.custom={large_gpu: 1}'"),
        }
        for name, command in sweeps.items():
            launched = command.replace("http://127.0.0.1:5000", mlflow_url)
            proc = run_documented(f"{launched} {SMALL} mlflow.experiment_name=svm-{name} "
                                  f"hydra.sweep.dir={tmp_path / name}", REPO, env=client_env, timeout=400)
            assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
            trials = _trials(mlflow_url, f"svm-{name}")
            assert len(trials) == 3 and all(r.info.status == "FINISHED" for r in trials), (
                [(r.data.tags.get("sweeper.trial_index"), r.info.status) for r in trials], proc.stdout[-3000:])

        # Trials asking for the custom resource ran on the one node that has it, with a quarter of its GPU.
        nodes_code = ("import json, ray; ray.init(address='auto', logging_level='ERROR'); print(json.dumps("
                      "{n['NodeID']: n['Resources'] for n in ray.nodes() if n['Alive']}))")
        listed = subprocess.run([sys.executable, "-c", nodes_code], capture_output=True, text=True, timeout=120,
                                env={**os.environ, **client_env})
        resources = json.loads(listed.stdout.strip().splitlines()[-1])
        large = [node for node, res in resources.items() if "large_gpu" in res]
        assert len(resources) == 3 and len(large) == 1, resources
        from mlflow.tracking import MlflowClient

        client = MlflowClient(mlflow_url)  # the node, as each trial recorded it or the sweep's run for all of them
        assert {trial_tags(client, r)["sweeper.ray.node_id"] for r in _trials(mlflow_url, "svm-gpu")} == set(large)
