"""``import sweeper.analysis`` must stay light: no Ray, no MLflow, no matplotlib, no pyplot."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

_SCRIPT = """
import sys
import sweeper.analysis
import sweeper.analysis.plotting
heavy = sorted(m for m in ("ray", "mlflow", "matplotlib", "GPy", "torch") if m in sys.modules)
assert not heavy, heavy
from sweeper.analysis import expected_max
from sweeper.analysis.plotting import plot_expected_max
plot_expected_max({"a": expected_max([0.1, 0.2, 0.4])})
assert "matplotlib.pyplot" not in sys.modules
assert "ray" not in sys.modules and "mlflow" not in sys.modules
"""


def test_import_leaves_ray_mlflow_and_pyplot_out() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


def test_reexports_are_the_functions_not_the_modules() -> None:
    import sweeper.analysis as analysis
    import sweeper.analysis.expected_max  # noqa: F401 - importing it must not shadow the function

    assert callable(analysis.expected_max)
    assert callable(analysis.qra)
    assert callable(analysis.compare_conditions)
