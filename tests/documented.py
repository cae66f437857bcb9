"""The shell commands the documents show, so tests run them as written (issue 16).

Every line of a fenced ``bash`` block in README.md, cluster/README.md and docs/**/*.md is a
documented command (continuation lines joined, a trailing ``# comment`` dropped). A test
that runs one takes it through :func:`documented`, which fails when the document no longer
shows it; tests/unit/test_documented_commands.py checks that every documented command is
taken by some test, or listed in :data:`NOT_RUN_HERE` with the reason it cannot run here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO

DOCUMENTS = ("README.md", "cluster/README.md", "docs/**/*.md")

_FENCE = re.compile(r"^```(?:bash|sh|shell)\n(.*?)^```", re.S | re.M)
_COMMENT = re.compile(r"(^|\s+)#\s.*$")


@dataclass(frozen=True)
class DocCommand:
    text: str
    where: str  # "README.md:114"


def documented_commands() -> list[DocCommand]:
    """Every command of every fenced shell block, in document order."""
    found = []
    for pattern in DOCUMENTS:
        for path in sorted(REPO.glob(pattern)):
            source = path.read_text(encoding="utf-8")
            for block in _FENCE.finditer(source):
                first_line = source.count("\n", 0, block.start(1)) + 1
                found += block_commands(block.group(1), f"{path.relative_to(REPO)}", first_line)
    return found


def block_commands(block: str, document: str = "", first_line: int = 1) -> list[DocCommand]:
    """The commands of one shell block: continuation lines joined, comments and blank lines dropped."""
    commands, pending, start = [], "", first_line
    for offset, line in enumerate(block.splitlines()):
        if not pending:
            start = first_line + offset
        line = _COMMENT.sub("", line).rstrip()
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        text = " ".join((pending + line).split())
        pending = ""
        if text:
            commands.append(DocCommand(text, f"{document}:{start}"))
    return commands


def documented(text: str) -> str:
    """``text``, after checking that a document shows this very command."""
    shown = {c.text for c in documented_commands()}
    assert text in shown, f"no document shows the command {text!r} any more: update the test that runs it"
    return text


#: Documented commands no test can run here (2 cores, no GPU, no network, no cluster
#: scheduler, no cloud account), with why, and what runs in their place.
NOT_RUN_HERE: dict[str, str] = {
    "make test": "it is this test suite: .ci/run runs it on every submission",
    "python experiments/train.py --multirun +experiment=optimizer_gap/paper data.root=/datasets":
        "paper scale: ResNet-18 on CIFAR-10 for GPU-hours; the CPU scale of the same experiment runs in "
        "test_experiments.py, and reading CIFAR files in tests/unit/test_train_data.py",
    # docs/clusters.md: a Docker daemon, root, Slurm, Kubernetes and AWS are not on the test machines.
    "cd cluster/mlflow": "part of the Docker Compose recipe (no Docker daemon on the test machines)",
    'echo "POSTGRES_PASSWORD=$(openssl rand -hex 16)" > .env': "part of the Docker Compose recipe",
    "docker compose up -d --build": "needs a Docker daemon and image downloads",
    "sudo apt-get install -y postgresql": "root and the system's package manager: scripts/install-test-services.sh "
                                          "installs PostgreSQL from apt for the tests",
    "pip install -e '.[server]'": "make install installs the same packages, pinned, from requirements.lock",
    "MLFLOW_ARTIFACTS_DESTINATION=s3://my-bucket/mlflow AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... "
    "MLFLOW_BACKEND_STORE_URI=... cluster/mlflow/serve.sh": "needs an S3 bucket and credentials",
    "source .venv/bin/activate": "the Slurm recipe: no Slurm on the test machines",
    "export MLFLOW_TRACKING_URI=http://mlflow.lab.example:5000": "the Slurm recipe",
    "sbatch --nodes=3 --gpus-per-node=2 cluster/slurm/sweep.sbatch python experiments/svm.py --multirun "
    "hydra/sweeper=multiverse ray.working_dir=null": "needs a Slurm cluster with GPUs",
    "kubectl apply -f cluster/kubernetes/raycluster.yaml": "needs a Kubernetes cluster with KubeRay",
    "kubectl apply -f cluster/kubernetes/rayjob.yaml": "needs a Kubernetes cluster with KubeRay",
    "kubectl logs -f job/multiverse-sweep-svm": "needs a Kubernetes cluster with KubeRay",
    "pip install boto3 && aws configure": "needs an AWS account",
    "ray up -y cluster/cloud/aws-gpu.yaml": "needs an AWS account",
    "SWEEP='python experiments/svm.py --multirun hydra/sweeper=multiverse ray.address=auto ray.working_dir=null'":
        "part of the AWS recipe",
    'ray exec cluster/cloud/aws-gpu.yaml --tmux "cd ~/multiverse-sweeper && $SWEEP ray.max_concurrent_trials=16 '
    'mlflow.tracking_uri=http://MLFLOW_HOST:5000"': "needs an AWS account",
    "ray attach cluster/cloud/aws-gpu.yaml --tmux": "needs an AWS account",
    "ray down -y cluster/cloud/aws-gpu.yaml": "needs an AWS account",
    # docs/gpu.md: the runs on the lent H100 (the test runs the script's CPU dry run and its tables).
    **dict.fromkeys([
        "python3 bench/gpu_check.py --out results.json --budget-s 400 --ray-timeout 150",
        "python3 bench/gpu_check.py --out results2.json --sections ray,determinism --workloads resnet18-synth32 "
        "--budget-s 330 --ray-timeout 180",
        "python3 bench/gpu_check.py --out results3.json --sections determinism --workloads resnet18-digits "
        "--modes reproducible,fast+amp --budget-s 110",
        "python3 bench/gpu_check.py --out results4.json --sections environment",
        "python bench/gpu_check.py --out results.json",
    ], "needs an NVIDIA GPU (and 11 minutes of one): the test runs the same script with --device cpu"),
    "python bench/checkpoint_gpu_check.py --out ckpt.json":
        "needs an NVIDIA GPU: tests/integration/test_checkpoints.py runs the same script with --device cpu --quick",
    "bash scripts/device_wheelhouse.sh": "downloads about 140 MB of Python 3.12 wheels for the lent GPU machine, "
                                         "whose image it fits; nothing here uses them",
    "bash scripts/device_reuse_check.sh":
        "runs on the lent GPU machine (its Python 3.12 image and the carried wheels): its sweep is the documented "
        "seeds/cpu command, run on the CPU in tests/integration/test_experiments.py; ray.reuse_actors=false runs in "
        "tests/integration/test_cluster.py",
    "bash scripts/device_checkpoint_check.sh --epochs 3 --kill-epochs 5 --train-images 10000":
        "runs on the lent GPU machine (its Python 3.12 image and the carried wheels): the check it runs is tested "
        "with --device cpu --quick in tests/integration/test_checkpoints.py",
}


def runs_by_tests(tests_root: Path | None = None) -> dict[str, list[str]]:
    """Command -> the test files that run it through ``documented("...")`` (read from their source)."""
    import ast

    claimed: dict[str, list[str]] = {}
    for path in sorted((tests_root or REPO / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "documented" and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                claimed.setdefault(node.args[0].value, []).append(path.name)
    return claimed


def run_documented(command: str, cwd: Path, *, env: dict[str, str] | None = None,
                   timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``command`` with bash in ``cwd``, as a user with the project's .venv activated would."""
    full_env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1",
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    full_env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout)
