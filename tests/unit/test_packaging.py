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
    mods = _loaded_after("import hydra_plugins.multiverse_sweeper.config, hydra_plugins.multiverse_sweeper.multiverse_sweeper")
    assert not mods & {"ray", "mlflow", "GPy", "scipy", "torch"}


def test_the_package_and_log_metrics_import_without_ray_or_mlflow() -> None:
    """At run time: the package's names load their modules lazily. (That the search imports no Ray or
    MLflow at all, nor a worker's modules MLflow, is a contract of `lint-imports`, in pyproject.toml.)"""
    mods = _loaded_after("import sweeper; from sweeper import log_metrics")
    assert not mods & {"ray", "mlflow", "torch", "GPy"}


def test_console_script_answers() -> None:
    out = subprocess.run([sys.executable, "-m", "sweeper.cli", "--version"], capture_output=True, text=True,
                         check=True, cwd=REPO)
    import sweeper

    assert out.stdout.strip() == sweeper.__version__

