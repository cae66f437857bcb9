"""The Hydra plugin is discovered, and light imports stay light."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_hydra_discovers_the_multiverse_sweeper() -> None:
    from hydra.core.plugins import Plugins
    from hydra.plugins.sweeper import Sweeper

    names = [p.__name__ for p in Plugins.instance().discover(Sweeper)]
    assert "MultiverseSweeper" in names


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    return set(out.stdout.split())


def test_plugin_scan_imports_nothing_heavy() -> None:
    """Hydra imports every plugin module at every start: they must not pull in Ray & co."""
    mods = _loaded_after("import hydra_plugins.multiverse_sweeper.config, "
                         "hydra_plugins.multiverse_sweeper.multiverse_sweeper")
    assert not mods & {"ray", "mlflow", "GPy", "scipy", "torch"}


def test_the_package_and_log_metrics_import_without_ray_or_mlflow() -> None:
    """At run time: the package's names load their modules lazily. (That the search imports no Ray or
    MLflow at all, nor a worker's modules MLflow, is a contract of `lint-imports`, in pyproject.toml.)"""
    mods = _loaded_after("import sweeper; from sweeper import log_metrics")
    assert not mods & {"ray", "mlflow", "torch", "GPy"}


def test_a_gp_fit_and_the_multiverse_analysis_load_no_gpy() -> None:
    """The fit's objective is numpy (sweeper.search.marginal_likelihood): neither GPy's import (0.6 s) nor its
    parameter framework is on a sweep's or an analysis's path; GPy is the tests' reference only."""
    mods = _loaded_after("import numpy as np; from sweeper.search.gp_fit import fit_gp; "
                         "import sweeper.analysis.multiverse; "
                         "fit_gp(np.random.default_rng(0).random((12, 2)), np.arange(12.0), seed=0, categories={1: 2})")
    assert not mods & {"GPy", "paramz"}


def test_console_script_answers() -> None:
    out = subprocess.run([sys.executable, "-m", "sweeper.cli", "--version"], capture_output=True, text=True,
                         check=True, cwd=REPO)
    import sweeper

    assert out.stdout.strip() == sweeper.__version__



def test_the_gitignore_the_docs_give_users_is_the_repository_s_and_ignores_every_output() -> None:
    """docs/writing-a-sweep.md gives users .gitignore lines for what sweeps and the commands write; they are
    the repository's own, and git ignores each output with them (the SQLite store's -wal/-shm companions too)."""
    import re
    import subprocess

    docs = (REPO / "docs" / "writing-a-sweep.md").read_text(encoding="utf-8")
    given = re.search(r"```gitignore\n(.*?)```", docs, re.S).group(1).split()
    ours = (REPO / ".gitignore").read_text(encoding="utf-8")
    block = ours[ours.index("repositories get the same lines"):ours.index("# END sweep outputs")].splitlines()[1:]
    assert given == block
    outputs = ["mlruns.db", "mlruns.db-wal", "mlruns.db-shm", "mlruns/1/a/artifacts/x.txt", "multirun/2026/x.yaml",
               "outputs/2026/x.log", "report-svm-breast-cancer/report.md", "multiverse-svm-matern52-ard/map.csv",
               "sub/dir/mlruns.db-wal"]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *outputs], cwd=REPO, capture_output=True,
                             text=True).stdout.split()
    assert ignored == outputs


def test_the_sweeper_loads_before_ray_starts_without_scipy_ray_or_mlflow() -> None:
    """What the driver imports before it starts Ray is on the critical path of every sweep's first trial:
    scipy.stats alone was a second of it (its statistics are needed once the trials are done), MLflow is
    imported beside Ray's start (sweeper.run.sweep_start)."""
    mods = _loaded_after("import sweeper.run.hydra_sweeper")
    assert not mods & {"scipy", "ray", "mlflow", "GPy", "torch"}, mods & {"scipy", "ray", "mlflow", "GPy", "torch"}


def test_the_thread_beside_ray_imports_what_the_first_suggestion_needs() -> None:
    """The first Sobol point needs scipy.stats (``qmc``, 0.5 CPU-s): imported in Tune's loop once Ray was up, it
    delayed every sweep's first trial (10.8 -> 9.6 s, decision 0056's last section). ``import_tune_run``, run beside
    ``ray.init``, imports it, so the first suggestion of an ivr sweep loads no scipy module of its own."""
    code = (
        "import sys\nfrom sweeper.search.grammar import parse_specs\n"
        "from sweeper.search.settings import PolicySettings\n"
        "space = parse_specs({'x': 'interval(0, 1)', 'k': 'choice(a, b)'})  # the sweep's validation, before Ray\n"
        "from sweeper.run.sweep_start import import_tune_run; import_tune_run(); before = set(sys.modules)\n"
        "from sweeper.search.policy import MultiversePolicy\n"
        "settings = PolicySettings(strategy='ivr', num_trials=16, n_initial=8, batch_size=4)\n"
        "first = MultiversePolicy(space, settings).ask()\n"
        "print(first.phase, ' '.join(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    phase, *new = out.stdout.split()
    assert phase == "sobol"
    assert not [m for m in new if m.split(".")[0] in {"scipy", "sklearn", "ray", "mlflow", "torch"}], new
