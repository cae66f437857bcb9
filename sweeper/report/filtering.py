"""User rules that keep trials, e.g. ``train_acc >= 0.99``: parsed once, applied to the trial table.

A rule is ``<metric> <op> <number>`` with ``op`` one of ``>= > <= < == !=``. It says which
trials to **keep**: a finished trial for which it does not hold (or that lacks the metric)
is *filtered*: kept in MLflow and in the report's tables, marked, and left out of every
statistic (Bell et al. 2022 keep only models that fit their training data this way).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.analysis.runs import SweepRecords

OPERATORS: dict[str, Callable[[NDArray[np.float64], float], NDArray[np.bool_]]] = {
    ">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt, "==": operator.eq, "!=": operator.ne,
}
FORM = '"<metric> <op> <number>" with <op> one of >=, >, <=, <, ==, != (e.g. "train_acc >= 0.99")'
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_RULE = re.compile(rf"\s*([A-Za-z_][A-Za-z0-9_.\-/]*)\s*(>=|<=|==|!=|>|<)\s*({_NUMBER})\s*")


class FilterError(ValueError):
    """A filter expression is malformed or names a metric the sweep does not have."""


@dataclass(frozen=True)
class TrialFilter:
    """A parsed rule ``metric op value`` (see :func:`parse_filter`)."""

    metric: str
    op: str
    value: float
    text: str

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.value:g}"

    def keep(self, trials: pd.DataFrame) -> NDArray[np.bool_]:
        """Return, per row of the trial table, whether the rule holds (False where the metric is missing).

        Raises:
            FilterError: If no trial has the metric.
        """
        column = f"metric.{self.metric}"
        if column not in trials:
            known = sorted(c[len("metric."):] for c in trials.columns if c.startswith("metric."))
            raise FilterError(f"filter {self.text!r}: no trial has the metric {self.metric!r}; "
                              f"the trials have {known}")
        values = trials[column].to_numpy(dtype=np.float64, na_value=np.nan)
        with np.errstate(invalid="ignore"):
            holds = OPERATORS[self.op](values, self.value)
        return np.asarray(holds & np.isfinite(values), dtype=bool)


def parse_filter(text: str) -> TrialFilter:
    """Parse ``<metric> <op> <number>``.

    Args:
        text: e.g. ``"train_acc >= 0.99"`` or ``"loss<0.5"``.

    Returns:
        The :class:`TrialFilter`.

    Raises:
        FilterError: Naming the expression and the accepted form.

    Example:
        >>> parse_filter("train_acc >= 0.99")
        TrialFilter(metric='train_acc', op='>=', value=0.99, text='train_acc >= 0.99')
    """
    match = _RULE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise FilterError(f"invalid filter {text!r}: expected {FORM}")
    metric, op, number = match.groups()
    value = float(number)
    return TrialFilter(metric=metric, op=op, value=value, text=text)


@dataclass(frozen=True)
class TrialSelection:
    """Which rows of a sweep's trial table count: boolean masks, one entry per row.

    Attributes:
        finished: FINISHED with a finite value of the metric.
        kept: Finished and satisfying the rule (all finished ones without a rule).
        filtered: Finished but not satisfying the rule.
    """

    finished: NDArray[np.bool_]
    kept: NDArray[np.bool_]
    filtered: NDArray[np.bool_]


def select_trials(records: SweepRecords, metric: str, rule: TrialFilter | None) -> TrialSelection:
    """Split a sweep's trials into kept and filtered by ``rule`` (failed ones are in neither)."""
    trials = records.trials
    finished = np.asarray(trials.index.isin(records.finished(metric).index), dtype=bool)
    passes = rule.keep(trials) if rule is not None else np.ones(len(trials), dtype=bool)
    return TrialSelection(finished, finished & passes, finished & ~passes)
