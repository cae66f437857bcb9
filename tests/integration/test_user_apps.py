"""Plain Hydra apps, written the way people write them, run under the sweeper exactly as without it (issue 16).

Each app in ``tests/integration/user_apps/`` is copied to a fresh folder and run twice with
the same sweep over ``x=1,2``: with Hydra's basic launcher (a callback records what each job
returned) and with ``hydra/sweeper=multiverse`` (the grid strategy, two trials: MLflow holds
what each returned). The suite asserts the same returned values per ``x`` (``None`` is a
failed trial under the sweeper) and the same files in each job's folder. None of the apps
has an ``mlflow`` or ``ray`` block: the sweeper's defaults apply (experiment = the app's name,
MLflow in ``./mlruns.db``). The first app runs as a user's first sweep does, on a local Ray
that the sweep starts and with a store that it makes; the others join the session's shared
Ray head (a worker started elsewhere: the trials must still run in the launch directory) and
start from a copy of an empty store.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tests.integration.conftest import SHARED_RAY, STORE_TEMPLATE

pytestmark = pytest.mark.integration

APPS_DIR = Path(__file__).parent / "user_apps"
RETURNED = "returned.json"
#: What each app covers, and the sweeper settings it needs beyond the grid (its metric).
APPS: dict[str, dict[str, Any]] = {
    "module_state": {},  # lru_cache'd helper and module-level state; no mlflow block
    "structured": {"metric": "score"},  # dataclass config in the ConfigStore, an Enum field, a dict returned
    "groups": {},  # config groups, a defaults list, ${model.width}, ${oc.env:...}, ${hydra:job.name}
    # HydraConfig.get(), a file in hydra.runtime.output_dir, Python logging by getLogger(__name__) at DEBUG and
    # INFO, shown at DEBUG by Hydra's hydra.verbose=__main__ (issue 34)
    "runtime": {"args": ["hydra.verbose=__main__"]},
    "data_file": {},  # hydra.utils.to_absolute_path / get_original_cwd for a data file
    "sibling": {},  # a module next to the script, imported by it
    "failures": {},  # None for failure, a float otherwise
    "chdir": {},  # hydra.job.chdir=true, relative writes
    "instantiate": {},  # hydra.utils.instantiate of a class of the script (_target_: __main__.Model)
    "env_set": {},  # hydra.job.env_set read by the task
    "package": {"run": ["-m", "pkg.app"]},  # run as a module of a package, with a relative import
}


#: The app that runs exactly as a user's first sweep: its own local Ray, a new MLflow store.
AS_A_FIRST_SWEEP = "module_state"


def _run(folder: Path, *args: str, run: tuple[str, ...] = ("app.py",),
         env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           **(env_extra or {})}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run([sys.executable, *run, "--multirun", "x=1,2", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)


def _jobs(sweep_dir: Path) -> dict[int, Path]:
    """Each job's folder by its x (read from the overrides Hydra saved there)."""
    jobs = {}
    for overrides in sweep_dir.glob("*/.hydra/overrides.yaml"):
        x = [o for o in yaml.safe_load(overrides.read_text()) if o.startswith("x=")]
        assert len(x) == 1, (overrides, x)
        jobs[int(x[0].split("=")[1])] = overrides.parent.parent
    return jobs


def _files(job: Path) -> dict[str, str | None]:
    """The job folder's files; the app's own outputs with their text (Hydra's are compared by name)."""
    out: dict[str, str | None] = {}
    for f in sorted(job.rglob("*")):
        rel = f.relative_to(job).as_posix()
        if f.is_file() and rel != RETURNED:
            out[rel] = None if rel.startswith(".hydra/") or rel.endswith(".log") else f.read_text()
    return out


def _log_lines(job: Path) -> list[str]:
    """The job's log records without their time stamps: ``[__main__][INFO] - trained with x=1``."""
    return [line.split("]", 1)[1] for log in sorted(job.glob("*.log")) for line in log.read_text().splitlines()
            if line.startswith("[") and "]" in line]


def _in_order_within(lines: list[str], within: list[str]) -> bool:
    rest = iter(within)
    return all(any(line == other for other in rest) for line in lines)


@pytest.mark.parametrize("name", list(APPS))
def test_a_plain_hydra_app_runs_under_the_sweeper_as_under_the_basic_launcher(name: str, tmp_path: Path) -> None:
    basic_dir, sweep_dir = tmp_path / "basic", tmp_path / "sweeper"
    shutil.copytree(APPS_DIR / name, basic_dir)
    shutil.copytree(APPS_DIR / name, sweep_dir)

    settings = APPS[name]
    run = tuple(settings.get("run", ("app.py",)))
    basic = _run(basic_dir, "hydra.sweep.dir=multirun", *settings.get("args", []),
                 "++hydra.callbacks.record._target_=tests.integration.user_apps.record.RecordReturn", run=run)
    assert basic.returncode == 0, basic.stdout + basic.stderr
    basic_jobs = _jobs(basic_dir / "multirun")
    expected = {x: json.loads((job / RETURNED).read_text()) for x, job in basic_jobs.items()}
    assert set(expected) == {1, 2}

    # The others join the shared head and run one trial at a time: both in one Ray worker process, as the
    # basic launcher runs both jobs in one process (and a worker, about 2 CPU-seconds, fewer per app).
    ray, ray_env = ([], {}) if name == AS_A_FIRST_SWEEP else SHARED_RAY.join()
    ray = [f"+{o}" for o in (ray and [*ray, "ray.max_concurrent_trials=1"])]  # no ray block: new keys take +
    if name != AS_A_FIRST_SWEEP:
        STORE_TEMPLATE.copy_to(sweep_dir / "mlruns.db")
    swept = _run(sweep_dir, "hydra/sweeper=multiverse", "hydra.sweep.dir=multirun", "hydra.sweeper.strategy=grid",
                 "hydra.sweeper.num_trials=2", "hydra.sweeper.max_failure_rate=1",
                 f"hydra.sweeper.metric={settings.get('metric', 'objective')}", *settings.get("args", []), *ray,
                 run=run, env_extra=ray_env)
    output = swept.stdout + swept.stderr
    assert swept.returncode == 0, output
    sweeper_jobs = _jobs(sweep_dir / "multirun")
    assert set(sweeper_jobs) == {1, 2}, output

    # What each job returned: MLflow's records of the sweep (experiment named after the app).
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{sweep_dir / 'mlruns.db'}")
    experiment = client.get_experiment_by_name("app")
    assert experiment is not None, output
    trials = [r for r in client.search_runs([experiment.experiment_id]) if r.data.tags.get("sweeper.role") != "sweep"]
    got = {int(r.data.params["x"]): r for r in trials}
    assert set(got) == {1, 2}, output
    for x, value in expected.items():
        run = got[x]
        if value is None:
            assert run.info.status == "FAILED", run.data.tags
            continue
        assert run.info.status == "FINISHED", (x, run.data.tags.get("sweeper.error"))
        returned = value if isinstance(value, dict) else {settings.get("metric", "objective"): value}
        for key, v in returned.items():
            assert math.isclose(run.data.metrics[key], float(v), rel_tol=1e-12), (x, key, run.data.metrics)

    for x in (1, 2):
        assert _files(sweeper_jobs[x]) == _files(basic_jobs[x]), x
        # The job's log holds what the basic launcher's does, logger names and levels included (it may hold more:
        # what the job printed, a failed trial's traceback).
        assert _in_order_within(_log_lines(basic_jobs[x]), _log_lines(sweeper_jobs[x])), \
            (x, _log_lines(basic_jobs[x]), _log_lines(sweeper_jobs[x]))
