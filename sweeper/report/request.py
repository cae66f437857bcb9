"""What the analysis commands are asked for, checked against a sweep's records.

``sweeper report`` and ``sweeper multiverse`` name a metric, a mode, a param to group by and the
metric's bounds; each is checked here, and a request the records cannot answer raises
:class:`ReportError` saying what exists instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from sweeper.search.direction import bounds_hint
from sweeper.search.space import FloatDim
from sweeper.search.warping import MetricBounds

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.analysis.runs import SweepRecords

#: ``bounds=SWEEP_BOUNDS``: the bounds the sweep declared for its metric (none for another metric).
SWEEP_BOUNDS = "sweep"


class ReportError(ValueError):
    """The report cannot be built as asked (unknown metric or group-by param); the message says why."""


def check_request(records: SweepRecords, metric: str | None, mode: str | None,
                  group_by: str | None) -> tuple[str, str, list[str]]:
    """The metric and mode to report (default: the sweep's) and every metric the trials have.

    Raises:
        ReportError: An invalid mode, a metric no trial has, or a group-by param that is
            unknown or continuous.
    """
    trials = records.trials
    metric = metric or records.metric
    mode = mode or records.mode
    if mode not in ("max", "min"):
        raise ReportError(f"mode must be 'max' or 'min'; got {mode!r}")
    known = sorted(c[len("metric."):] for c in trials.columns if c.startswith("metric."))
    if f"metric.{metric}" not in trials and (trials["status"] == "FINISHED").any():
        raise ReportError(f"no trial has the metric {metric!r}; the trials have {known}. Pass --metric with one "
                          f"of them.")
    if group_by is not None:
        _check_group_by(records, group_by)
    return metric, mode, known


def _check_group_by(records: SweepRecords, group_by: str) -> None:
    """Raise ReportError unless ``group_by`` is a recorded param that is not a continuous dim."""
    trials = records.trials
    if f"param.{group_by}" not in trials:
        params = sorted(c[len("param."):] for c in trials.columns if c.startswith("param."))
        raise ReportError(f"--group-by {group_by!r}: no trial has that param; the trials have {params}.")
    if _continuous(records, group_by):
        discrete = [d.name for d in records.space.dims if not isinstance(d, FloatDim)] if records.space else []
        raise ReportError(f"--group-by {group_by!r}: {group_by} is a continuous dim, so every trial has a value of "
                          f"its own and each group would hold one trial. Group by a categorical or integer param"
                          + (f" ({', '.join(discrete)})" if discrete else "") + ", or use `sweeper multiverse` to "
                          f"see how the metric depends on {group_by}.")


def _continuous(records: SweepRecords, name: str) -> bool:
    """Whether ``name`` is a float interval of the sweep's space (a value per trial: no groups)."""
    dims = {d.name: d for d in records.space.dims} if records.space is not None else {}
    return isinstance(dims.get(name), FloatDim)


def no_trial_finished(records: SweepRecords) -> str:
    """What to say when no trial of the sweep finished: how many failed and the most common error."""
    failed = records.failed()
    errors = failed["error"].dropna() if "error" in failed else None
    common = errors.value_counts() if errors is not None and len(errors) else None
    why = "" if common is None else f"; the most common error ({common.iloc[0]} of them): {common.index[0]}"
    return (f"no trial of sweep {records.parent_run_id} finished ({len(records.trials)} trials, {len(failed)} failed"
            f"{why}): there is nothing to analyse. `sweeper trials --experiment {records.experiment}` lists them; "
            f"each failed trial's log holds its traceback.")


def resolve_bounds(records: SweepRecords, metric: str, bounds: MetricBounds | str | None,
                   values: npt.NDArray[np.float64]) -> MetricBounds | None:
    """The bounds to model ``metric`` with, checked against its values.

    Raises:
        ReportError: The sweep's recorded bounds cannot be read, or a kept value lies outside
            the bounds (a sweep recorded without them, analysed with ``--bounds`` that it breaks).
    """
    if isinstance(bounds, str):
        if bounds != SWEEP_BOUNDS:
            raise ValueError(f"bounds must be MetricBounds, None or {SWEEP_BOUNDS!r}; got {bounds!r}")
        try:
            bounds = records.bounds if metric == records.metric else None
        except ValueError as exc:
            raise ReportError(f"the sweep's recorded metric_bounds cannot be read ({exc}); pass --bounds LOW HIGH "
                              f"(or --bounds null null)") from None
    if bounds is not None:
        outside = [float(v) for v in values if not bounds.contains(float(v))]
        if outside:
            raise ReportError(f"{len(outside)} kept trial(s) have {metric} outside the bounds {bounds.text()}, e.g. "
                              f"{outside[0]:g}: pass --bounds that hold every value (or --bounds null null), or "
                              f"--filter them out")
    return bounds


def unbounded_score_hint(finished: pd.DataFrame, metric: str, bounds: MetricBounds | None) -> str | None:
    """The caution for a score in [0, 1] modelled without bounds (see :func:`~sweeper.search.direction.bounds_hint`).

    ``finished``: the finished trials, filtered ones included: every value they returned counts.
    """
    column = f"metric.{metric}"
    values = finished[column].dropna().to_numpy(dtype=np.float64) if column in finished else np.array([])
    return bounds_hint(metric, values.tolist(), bounded=bounds is not None)
