"""Fixtures for integration tests: the real Hydra command line, a real local Ray, real MLflow."""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

TOY_APP = REPO / "tests" / "integration" / "apps" / "toy.py"
SVM_APP = REPO / "experiments" / "svm.py"

# ------------------------------------------------------------------ running in parallel
# make test runs these tests and the unit tests on two pytest-xdist workers with --dist loadscope,
# then the ones marked ``serial`` alone (make test-integration: these tests alone, then those).
# loadscope keeps each module's tests on one worker, so its module fixtures (a Ray cluster, a
# PostgreSQL, an MLflow server, a sweep) start once. (--dist loadgroup with per-module
# xdist_group marks, used before, grouped nothing under pytest 9.2 and pytest-xdist 3.8: a
# module's fixtures were set up again on each worker that got one of its tests.) Only
# test_cluster_readme joins a cluster by ``ray.address=auto`` (the machine's "current cluster"):
# services.ray_cluster keeps the clusters of other tests out of that role. tests/conftest.py
# orders the modules (the longest first, those that mostly wait last, beside unit modules).


@dataclass
class Sweep:
    """A finished command-line sweep and where it left its records."""

    proc: subprocess.CompletedProcess[str]
    sweep_dir: Path
    tracking_uri: str

    @property
    def output(self) -> str:
        return self.proc.stdout + self.proc.stderr

    def runs(self, experiment: str) -> tuple[Any, list[Any]]:
        """The sweep's parent run and its child runs (sorted by trial index)."""
        from mlflow.tracking import MlflowClient

        client = MlflowClient(self.tracking_uri)
        exp = client.get_experiment_by_name(experiment)
        assert exp is not None, f"no experiment {experiment!r}:\n{self.output}"
        runs = client.search_runs([exp.experiment_id], max_results=5000)
        parents = [r for r in runs if r.data.tags.get("sweeper.role") == "sweep"]
        assert len(parents) == 1, f"expected one sweep run, found {len(parents)}"
        children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
        children.sort(key=lambda r: int(r.data.tags["sweeper.trial_index"]))
        return parents[0], children


class SharedRay:
    """One Ray head per test process, started on first use, that command-line sweeps join.

    Starting a local Ray costs a sweep about 5 s and as many CPU-seconds (its GCS, raylet,
    dashboard, agents and monitor); the sweeps of the suite that test what a sweep records, not
    how it starts Ray, join this head instead (``ray.address=<head> ray.working_dir=null``, as on
    a cluster whose nodes have the code). It has the 2 CPUs the local Rays get, is never the
    machine's "current cluster" (tests that start their own join theirs by ``auto``), and stops
    with the session.
    """

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._cluster: Any = None

    def join(self) -> tuple[list[str], dict[str, str]]:
        """The overrides and environment variables a sweep joins the head with."""
        if self._cluster is None:
            from tests.integration.services import ray_cluster

            # No sweep of the suite that joins it forwards its workers' output (ray.log_to_driver=false).
            self._cluster = self._stack.enter_context(ray_cluster({"shared": {}}, cpus_per_node=2, log_monitor=False))
        return [f"ray.address={self._cluster.address}", "ray.working_dir=null"], self._cluster.client_env

    def close(self) -> None:
        self._stack.close()


SHARED_RAY = SharedRay()


class StoreTemplate:
    """An empty SQLite MLflow store with MLflow's schema in place, made once per test process.

    MLflow builds a new SQLite store by running its whole chain of schema migrations (alembic),
    about 2 CPU-seconds in the sweep's driver and again in its writer process on 2 busy cores; a
    copy of a store that has been through them opens in milliseconds. A copy is the same store
    a first sweep makes (the schema; no experiment but MLflow's Default, whose artifact location
    no test reads): tests that need a store to be absent, or to be made by the sweep, ask for a
    fresh one (``fresh_store=True``).
    """

    def __init__(self) -> None:
        self._path: Path | None = None

    def copy_to(self, db: Path) -> None:
        """Put an empty migrated store at ``db`` unless a store is there already."""
        import shutil
        import tempfile

        if db.exists():
            return
        if self._path is None:
            from mlflow.tracking import MlflowClient

            path = Path(tempfile.mkdtemp(prefix="mlflow-template-")) / "mlruns.db"
            MlflowClient(f"sqlite:///{path}").search_experiments()  # runs the migrations
            self._path = path
        shutil.copyfile(self._path, db)


STORE_TEMPLATE = StoreTemplate()


@pytest.fixture(scope="session", autouse=True)
def _stop_the_shared_ray() -> Iterator[None]:
    yield
    SHARED_RAY.close()


#: The override of the sweeps whose tests are not about trials running side by side: one at a time, their
#: trials share one Ray worker process instead of two (a worker costs about 2 CPU-seconds to start, 4 with
#: PyTorch, and the suite is CPU-bound on 2 cores).
ONE_AT_A_TIME = "ray.max_concurrent_trials=1"

#: Settings of where Ray runs: a sweep that sets one itself starts its own local Ray.
_RAY_PLACEMENT = ("ray.address", "ray.num_cpus", "ray.num_gpus", "ray.working_dir")
#: The setting of live maps, off in the sweeps of run_cli and run_documented_sweep unless a test sets it.
LIVE_MAPS = "hydra.sweeper.live_maps"


def _kept_in(tmp_path: Path, local_ray: bool, fresh_store: bool,
             overrides: tuple[str, ...]) -> tuple[Path, str, list[str], dict[str, str]]:
    """Where a test's sweep keeps Hydra's outputs and its MLflow store, on which Ray it runs, and
    the overrides and environment that say so: a local Ray the sweep starts (``local_ray``, how a
    user's first sweep runs, or when the test sets where Ray runs) or the session's shared head;
    a store the sweep makes (``fresh_store``) or a copy of :data:`STORE_TEMPLATE`."""
    sweep_dir = tmp_path / "multirun"
    tracking_uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    if not fresh_store:
        STORE_TEMPLATE.copy_to(tmp_path / "mlruns.db")
    local_ray = local_ray or any(o.split("=", 1)[0] in _RAY_PLACEMENT for o in overrides)
    ray, env = (["ray.num_cpus=2"], {}) if local_ray else SHARED_RAY.join()
    # Live maps (issue 19) cost a GP sweep a painter process (~1 CPU-second to start) and ~0.3 s of CPU per
    # map: the sweeps run for other reasons go without; the tests of live maps ask for them (=true).
    live = [] if any(o.startswith(f"{LIVE_MAPS}=") for o in overrides) else [f"{LIVE_MAPS}=false"]
    return sweep_dir, tracking_uri, [f"hydra.sweep.dir={sweep_dir}", f"mlflow.tracking_uri={tracking_uri}", *ray,
                                     *live], env


def run_cli(app: Path, tmp_path: Path, *overrides: str, timeout: int = 300, local_ray: bool = False,
            fresh_store: bool = False) -> Sweep:
    """Run ``python APP --multirun hydra/sweeper=multiverse ...`` in a subprocess, as a user does."""
    sweep_dir, tracking_uri, kept, ray_env = _kept_in(tmp_path, local_ray, fresh_store, overrides)
    cmd = [sys.executable, str(app), "--multirun", "hydra/sweeper=multiverse", *kept, *overrides]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **ray_env}
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)
    return Sweep(proc, sweep_dir, tracking_uri)


def run_documented_sweep(command: str, tmp_path: Path, *overrides: str, timeout: int = 300,
                         local_ray: bool = False, fresh_store: bool = False) -> Sweep:
    """Run a documented sweep command as written, from the repository, with Hydra's outputs and
    the MLflow store in ``tmp_path`` (where the documented analysis commands then find them)."""
    from tests.documented import run_documented

    sweep_dir, tracking_uri, kept, ray_env = _kept_in(tmp_path, local_ray, fresh_store, overrides)
    proc = run_documented(" ".join([command, *map(shlex.quote, [*kept, *overrides])]), REPO, timeout=timeout,
                          env=ray_env)
    return Sweep(proc, sweep_dir, tracking_uri)


@pytest.fixture(scope="session")
def ray_local():
    """A real local Ray for in-process tests (2 CPUs, no dashboard), shut down at the end."""
    import ray

    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    ray.init(address="local", num_cpus=2, num_gpus=0, include_dashboard=False, object_store_memory=78_643_200,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})
    yield ray
    ray.shutdown()


#: Where tests leave files for people to look at (screenshots, the fault-injection tally).
TEST_ARTIFACTS = Path(os.environ.get("SWEEPER_TEST_ARTIFACTS", REPO / "test-artifacts"))


def record_faults(test: str, **numbers: int) -> None:
    """Append one fault-injection test's tally (faults, trials expected and recorded, duplicates)
    to test-artifacts/reliability.jsonl, the figures docs/reliability.md quotes."""
    import json

    TEST_ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with open(TEST_ARTIFACTS / "reliability.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"test": test, **numbers}) + "\n")


def child_runs(client: Any, experiment: str) -> list[Any]:
    """Every trial run (a run with a parent) of ``experiment``; empty while it does not exist."""
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=1000) if exp else []
    return [r for r in runs if "mlflow.parentRunId" in r.data.tags]


def runs_by_index(runs: list[Any]) -> dict[int, list[Any]]:
    """Trial runs grouped by ``sweeper.trial_index``: retries and killed attempts share an index."""
    grouped: dict[int, list[Any]] = {}
    for run in runs:
        grouped.setdefault(int(run.data.tags["sweeper.trial_index"]), []).append(run)
    return grouped


def trial_tags(client: Any, run: Any) -> dict[str, Any]:
    """A trial run's tags with the conditions all its sweep's trials share put back from the sweep's run
    (sweeper.record.shared_conditions): every condition the trial was measured under."""
    from sweeper.record.shared_conditions import merged_tags, shared_from_tags

    parent = client.get_run(run.data.tags["mlflow.parentRunId"])
    return merged_tags(run.data.tags, shared_from_tags(parent.data.tags))
