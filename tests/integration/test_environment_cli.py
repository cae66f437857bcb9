"""Environment conditions through the Hydra CLI: env.seed x env.threads swept, applied in workers, recorded.

A ``sobol`` sweep of 8 trials over ``env.seed in {0, 1}`` x ``env.threads in {1, 2}`` (two
cells each: Sobol's first 8 points fill every combination exactly twice) of a small torch
training run with ``env.deterministic=true``.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from sweeper.record.shared_conditions import merged_tags, shared_from_tags
from sweeper.report.groups import BOOKKEEPING_TAGS
from tests.conftest import REPO
from tests.integration.conftest import Sweep, run_cli

pytestmark = pytest.mark.integration

TORCH_APP = REPO / "tests" / "integration" / "apps" / "torchy.py"


@pytest.fixture(scope="module")
def env_sweep(tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    """The sweep of the module docstring, on a local Ray told there is one GPU (there is none here): its
    trials share it at 0.25 each (and half a CPU), four at a time, as a fractional-GPU sweep does."""
    tmp = tmp_path_factory.mktemp("env")
    sweep = run_cli(TORCH_APP, tmp, "env.seed=choice(0,1)", "env.threads=choice(1,2)", "env.deterministic=true",
                    "ray.num_gpus=1", "ray.resources_per_trial.gpu=0.25", "ray.resources_per_trial.cpu=0.5")
    assert sweep.proc.returncode == 0, sweep.output
    return sweep


def test_equal_environments_give_bit_identical_metrics_and_different_seeds_do_not(env_sweep: Sweep) -> None:
    _, runs = env_sweep.runs("torchy")
    assert len(runs) == 8 and all(r.info.status == "FINISHED" for r in runs)
    by_env: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in runs:
        key = (r.data.params["env.seed"], r.data.params["env.threads"])
        by_env.setdefault(key, []).append((r.data.metrics["loss"], r.data.metrics["weight_sum"]))
    assert sorted(by_env) == [("0", "1"), ("0", "2"), ("1", "1"), ("1", "2")]
    for key, results in by_env.items():
        assert len(results) == 2 and results[0] == results[1], key  # bit-identical, in separate trials
    assert by_env[("0", "1")][0] != by_env[("1", "1")][0]  # the seed matters


def trials(sweep: Sweep) -> list[tuple[Any, dict[str, Any]]]:
    """Each trial run and its tags, with the conditions all trials share put back from the sweep's run."""
    parent, runs = sweep.runs("torchy")
    shared = shared_from_tags(parent.data.tags)
    return [(r, merged_tags(r.data.tags, shared)) for r in runs]


def test_recorded_conditions_are_the_settings_read_back(env_sweep: Sweep) -> None:
    for r, tags in trials(env_sweep):
        params = r.data.params
        threads = params["env.threads"]
        assert tags["sweeper.env_in_force.torch_threads"] == threads
        assert r.data.metrics["torch_threads"] == float(threads)  # what the task itself saw
        assert {p.split("=")[1] for p in tags["sweeper.env_in_force.blas_threads"].split(",")} == {threads}
        assert tags["sweeper.env_in_force.seed"] == params["env.seed"] == tags["sweeper.seed"]
        assert tags["sweeper.env_in_force.deterministic"] == "true"
        on_cuda = _torch_has_gpu()  # the sweep's trials hold a quarter of a GPU each
        assert tags["sweeper.env_in_force.device"] == ("cuda" if on_cuda else "cpu")
        assert r.data.metrics["on_cuda"] == float(on_cuda)
        for key in ("host", "os", "python", "cpu.model", "cpu.count", "packages.sha256", "pkg.torch", "cuda.version",
                    "env_in_force.matmul_precision", "env_in_force.cudnn_enabled"):
            assert f"sweeper.{key}" in tags, key


def test_conditions_differ_exactly_in_the_swept_fields(env_sweep: Sweep) -> None:
    tags = {r.info.run_id: merged for r, merged in trials(env_sweep)}
    runs = env_sweep.runs("torchy")[1]

    def conditions(r) -> dict[str, str]:
        return {k[len("sweeper."):]: v for k, v in tags[r.info.run_id].items()
                if k.startswith("sweeper.") and k[len("sweeper."):] not in BOOKKEEPING_TAGS}

    allowed = {"seed", "env_in_force.seed", "env_in_force.torch_threads", "env_in_force.blas_threads",
               "env.OMP_NUM_THREADS", "env.MKL_NUM_THREADS", "env.OPENBLAS_NUM_THREADS"}
    allowed |= {k for k in conditions(runs[0]) if k.startswith("threads.")}
    for a, b in itertools.combinations(runs, 2):
        ca, cb = conditions(a), conditions(b)
        differing = {k for k in ca.keys() | cb.keys() if ca.get(k) != cb.get(k)}
        assert differing <= allowed, differing
        same_env = all(a.data.params[k] == b.data.params[k] for k in ("env.seed", "env.threads"))
        assert (not differing) == same_env, (differing, a.data.params, b.data.params)


def test_conditions_json_and_the_package_list_are_logged(env_sweep: Sweep) -> None:
    from mlflow.tracking import MlflowClient

    parent, runs = env_sweep.runs("torchy")
    client = MlflowClient(env_sweep.tracking_uri)
    record = json.loads(Path(client.download_artifacts(runs[0].info.run_id, "conditions.json")).read_text())
    assert set(record) == {"object", "measurand", "object_conditions", "measurement_method",
                           "measurement_procedure"}
    assert record["measurand"]["name"] == "loss" and record["measurand"]["value"] == runs[0].data.metrics["loss"]
    assert record["object"] == {"lr": 0.05, "steps": 20}
    assert record["object_conditions"]["environment_requested"]["env.threads"] in (1, 2)
    sha = trials(env_sweep)[0][1]["sweeper.packages.sha256"]
    listed = Path(client.download_artifacts(parent.info.run_id, f"packages/{sha}.txt")).read_text().splitlines()
    assert any(line.startswith("torch==2.14.1") for line in listed)


def test_a_bad_env_value_stops_the_sweep_before_any_trial(tmp_path: Path) -> None:
    sweep = run_cli(TORCH_APP, tmp_path, "env.device=choice(cpu,gpu)", "env.threads=0", fresh_store=True)
    assert sweep.proc.returncode == 2
    assert "env.threads=0 must be an integer >= 1" in sweep.output
    assert "env.device='gpu' must be one of auto, cpu, cuda (swept by env.device=" in sweep.output
    assert not (tmp_path / "mlruns.db").exists()  # nothing was recorded: no trial ran


def test_fractional_gpus_are_assigned_and_auto_falls_back_to_the_cpu(env_sweep: Sweep) -> None:
    # Ray set CUDA_VISIBLE_DEVICES for each trial of its one GPU, and env.device=auto (the default) still
    # ran on the CPU because torch sees no usable GPU: the path a CPU-only CI and a misconfigured node both take.
    runs = trials(env_sweep)
    assert len(runs) == 8
    for _, tags in runs:
        assert tags["sweeper.gpu.visible"] == "0"
        assert tags["sweeper.env_in_force.device"] == ("cuda" if _torch_has_gpu() else "cpu")


def _torch_has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()
