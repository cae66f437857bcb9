"""What a comparison of sweeps asks, checked against their records: one metric, mode and bounds for all.

Two curves on one axis mean something only when they measure the same thing the same way: the
same metric, the same direction (``max`` or ``min``) and, for the GP surrogate curves, the same
bounds. Where the sweeps differ, :class:`CompareUsageError` names what differs in each sweep and
the option that settles it; a sweep with too few finished trials raises :class:`CompareError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sweeper.report.filtering import select_trials
from sweeper.report.request import SWEEP_BOUNDS, ReportError, no_trial_finished, resolve_bounds
from sweeper.search.warping import MetricBounds

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.analysis.runs import SweepRecords


class CompareError(ValueError):
    """The sweeps' records cannot give a comparison (too few finished trials); the message says why."""


class CompareUsageError(CompareError):
    """The sweeps named cannot be compared as asked (fewer than two, one twice, differing metric, mode or
    bounds); the message names the difference and the option that settles it."""


def _metrics(records: SweepRecords) -> set[str]:
    """The metrics the sweep's trials recorded."""
    return {c[len("metric."):] for c in records.trials.columns if c.startswith("metric.")}


def _who(sweeps: Sequence[SweepRecords], values: Sequence[object]) -> str:
    """``sweep 3f2a9c1d (svm): acc; sweep 8b7e0a11 (mlp): f1``."""
    return "; ".join(f"sweep {r.parent_run_id[:8]} ({r.experiment}): {v}" for r, v in zip(sweeps, values,
                                                                                         strict=True))


@dataclass(frozen=True)
class Request:
    """The metric, mode and bounds every compared sweep is read with.

    Attributes:
        metric: The compared metric.
        mode: ``max`` or ``min``.
        bounds: The metric's bounds (for the surrogate curves and to clip draws), or None.
    """

    metric: str
    mode: str
    bounds: MetricBounds | None

    @property
    def maximize(self) -> bool:
        return self.mode == "max"

    @classmethod
    def check(cls, sweeps: Sequence[SweepRecords], *, metric: str | None, mode: str | None,
              bounds: MetricBounds | str | None = SWEEP_BOUNDS) -> Request:
        """The request every sweep agrees on, or :class:`CompareUsageError` saying what differs and the fix.

        Raises:
            CompareUsageError: Fewer than two sweeps, a sweep given twice, an unknown mode, or sweeps whose
                metric, mode or declared bounds differ (and no option settles it).
        """
        if len(sweeps) < 2:
            raise CompareUsageError(f"a comparison needs two or more sweeps; got {len(sweeps)}. Name each with "
                                    f"--experiment NAME (its latest sweep) or --run ID, e.g. --experiment A "
                                    f"--experiment B")
        ids = [r.parent_run_id for r in sweeps]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise CompareUsageError(f"sweep {twice[0]} is named twice: a sweep compared with itself says nothing. "
                                    f"Name each sweep once (--experiment NAME names its latest sweep, --run ID "
                                    f"another one)")
        metric = _metric(sweeps, metric)
        mode = _mode(sweeps, mode, metric)
        return cls(metric=metric, mode=mode, bounds=_bounds(sweeps, metric, bounds))

    def kept(self, records: SweepRecords) -> pd.DataFrame:
        """The sweep's finished trials with a finite value of the metric.

        Raises:
            CompareError: None finished (the most common error named), or only one.
        """
        selection = select_trials(records, self.metric, None)
        kept = records.trials[selection.kept]
        if len(kept) == 0:
            finished = bool((records.trials["status"] == "FINISHED").any()) if len(records.trials) else False
            raise CompareError(f"sweep {records.parent_run_id} ({records.experiment}): no trial finished with a "
                               f"finite {self.metric}, so it has no curve to compare" if finished
                               else no_trial_finished(records))
        if len(kept) < 2:
            raise CompareError(f"sweep {records.parent_run_id} ({records.experiment}) has 1 finished trial "
                               f"({len(records.trials)} in all): one score has no expected-max curve beyond n = 1 "
                               f"and no uncertainty to weigh. Compare sweeps of two or more finished trials (more "
                               f"give surer answers)")
        return kept

    def cautions(self, records: SweepRecords) -> list[str]:
        """An unfinished sweep."""
        return [f"{records.experiment} ({records.parent_run_id[:8]}): {records.unfinished}"] if records.unfinished \
            else []


def _metric(sweeps: Sequence[SweepRecords], metric: str | None) -> str:
    """The asked metric, which every sweep must have recorded; else the sweeps' own, which must agree."""
    recorded = [_metrics(r) for r in sweeps]
    common = sorted(set.intersection(*recorded))
    if metric is not None:
        missing = [r for r, m in zip(sweeps, recorded, strict=True) if metric not in m]
        if missing:
            raise CompareUsageError(f"--metric {metric}: {_who(missing, ['no trial recorded it'] * len(missing))}. "
                                    + (f"Every sweep recorded {', '.join(common)}." if common else
                                       "The sweeps share no metric."))
        return metric
    own = [r.metric for r in sweeps]
    if len(set(own)) > 1:
        fix = (f"Compare one metric every sweep recorded: --metric {common[0]}"
               + (f" (they all have {', '.join(common)})" if len(common) > 1 else "") if common else
               "They share no metric, so their curves cannot go on one axis")
        raise CompareUsageError(f"the sweeps optimised different metrics ({_who(sweeps, own)}). {fix}")
    return own[0]


def _mode(sweeps: Sequence[SweepRecords], mode: str | None, metric: str) -> str:
    """The asked mode, else the sweeps' own, which must agree."""
    if mode is not None:
        if mode not in ("max", "min"):
            raise CompareUsageError(f"--mode must be max or min; got {mode!r}")
        return mode
    own = [r.mode for r in sweeps]
    if len(set(own)) > 1:
        raise CompareUsageError(f"the sweeps optimised {metric} in opposite directions ({_who(sweeps, own)}): pass "
                                f"--mode max or --mode min to say which is better")
    if own[0] not in ("max", "min"):
        raise CompareUsageError(f"the sweeps' recorded mode {own[0]!r} is neither max nor min: pass --mode max or "
                                f"--mode min")
    return own[0]


def _bounds(sweeps: Sequence[SweepRecords], metric: str, bounds: MetricBounds | str | None) -> MetricBounds | None:
    """The asked bounds, else the ones the sweeps declared for the metric, which must agree; checked against
    every finished value."""
    column = f"metric.{metric}"
    values = [f[column].to_numpy(dtype=np.float64) if column in f else np.array([])
              for f in (r.finished(metric) for r in sweeps)]
    try:
        resolved = [resolve_bounds(r, metric, bounds, v) for r, v in zip(sweeps, values, strict=True)]
    except ReportError as exc:
        raise CompareUsageError(str(exc)) from None
    texts = [b.text() if b is not None else "none" for b in resolved]
    if len(set(texts)) > 1:
        raise CompareUsageError(f"the sweeps declared different bounds for {metric} ({_who(sweeps, texts)}), which "
                                f"shape the GP surrogate curves: pass one for all, e.g. --bounds 0 1, or --bounds "
                                f"null null for none")
    return resolved[0]
