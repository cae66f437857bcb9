"""Analyses of finished sweeps: pure numpy/scipy on exported scores, no Ray, no MLflow.

Each function returns a frozen dataclass of numbers; :mod:`sweeper.analysis.plotting`
draws them (matplotlib, imported only there). scipy is imported inside the functions
that need it, so importing this package costs only numpy.

- :func:`expected_max`: expected best score vs. budget (Dodge et al. 2019).
- :func:`qra`: coefficient of variation CV* of repeated measurements (Belz et al. 2022).
- :func:`compare_conditions`: paired tests between environment conditions (Crane 2018).
- :mod:`sweeper.analysis.multiverse`: the GP over the decision space and what it says:
  maps, Bayes-factor interaction tests, Sobol sensitivity (Bell et al. 2022); import it
  explicitly (``from sweeper.analysis.multiverse import bayes_factor, sensitivity``), it
  needs scipy.
- :func:`load_sweep`: a sweep's records from MLflow as :class:`SweepRecords` (a pandas
  trial table); MLflow and pandas are imported inside it only.
"""

from __future__ import annotations

# Each function shares its module's name: importing them here, eagerly, makes
# ``sweeper.analysis.expected_max`` the function (the import system sets the submodule
# attribute first, and this binding then replaces it once and for all).
from sweeper.analysis.environment_effects import (
    ConditionComparison,
    ConditionSummary,
    compare_conditions,
    summarize_conditions,
)
from sweeper.analysis.expected_max import (
    ExpectedMax,
    SurrogateExpectedMax,
    expected_max,
    surrogate_expected_max,
)
from sweeper.analysis.qra import QRA, qra, qra_table
from sweeper.analysis.runs import SweepNotFoundError, SweepRecords, load_sweep

__all__ = [
    "QRA",
    "ConditionComparison",
    "ConditionSummary",
    "ExpectedMax",
    "SurrogateExpectedMax",
    "SweepNotFoundError",
    "SweepRecords",
    "compare_conditions",
    "expected_max",
    "load_sweep",
    "qra",
    "qra_table",
    "summarize_conditions",
    "surrogate_expected_max",
]
