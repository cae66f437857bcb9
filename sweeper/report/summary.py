"""A report's ``summary.json``: what it is built from, and its content."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from sweeper.analysis.qra import QRA
from sweeper.report.ranking import ranking_summary

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.analysis.expected_max import ExpectedMax
    from sweeper.analysis.runs import SweepRecords
    from sweeper.report.checklist import ChecklistItem
    from sweeper.report.filtering import TrialFilter, TrialSelection
    from sweeper.report.groups import PairedConditions, QRAGroup
    from sweeper.report.ranking import RankingStability
    from sweeper.report.surrogate import SurrogateCurve


@dataclass(frozen=True)
class ReportFindings:
    """What a report states: the request as resolved, and the numbers of every section.

    The page (:func:`sweeper.report.build_report.build_report`) and ``summary.json`` (:func:`summary`)
    are both written from it.

    Attributes:
        metric: The reported metric.
        mode: ``max`` or ``min``.
        rule: The filter the counted trials satisfy, or None.
        group_by: The param with one expected-max curve per value, or None.
        selection: Which trials are finished, kept and filtered (boolean masks over the trials).
        kept: The trials that count: finished and satisfying the rule.
        values: Their values of the metric.
        biased: Whether the empirical curve is biased (the trials were not i.i.d. random draws).
        curves: The empirical expected-max curve of each group.
        overall: The empirical curve of all kept trials together, or None when none is kept.
        surrogate: The GP surrogate's curve, or None.
        surrogate_note: Why there is no surrogate curve, when there is none.
        measurands: The metrics QRA assesses, the reported one first.
        groups: The groups of repeated measurements with their QRA.
        comparisons: Paired comparisons of two-valued environment conditions.
        pair_notes: Why a condition could not be compared.
        best: The best kept trial (index, run id, value, params), or None.
        checklist: Dodge's checklist as filled from the records.
        bounds_hint: The caution for a score in [0, 1] modelled without bounds, or None.
        ranking: For a sweep of listed configurations, how stable their order is over the replicates, or None.
    """

    metric: str
    mode: str
    rule: TrialFilter | None
    group_by: str | None
    selection: TrialSelection
    kept: pd.DataFrame
    values: npt.NDArray[np.float64]
    biased: bool
    curves: dict[str, ExpectedMax]
    overall: ExpectedMax | None
    surrogate: SurrogateCurve | None
    surrogate_note: str | None
    measurands: list[str]
    groups: list[QRAGroup]
    comparisons: list[PairedConditions]
    pair_notes: list[str]
    best: dict[str, Any] | None
    checklist: list[ChecklistItem]
    bounds_hint: str | None
    ranking: RankingStability | None = None

    @property
    def n_filtered(self) -> int:
        """Finished trials the rule excluded."""
        return int(self.selection.filtered.sum())


def summary(records: SweepRecords, f: ReportFindings) -> dict[str, Any]:
    """The content of ``summary.json`` (before :func:`finite`), in its keys' order."""
    values, kept = f.values, f.kept
    return {
        "experiment": records.experiment, "tracking_uri": records.tracking_uri,
        "parent_run_id": records.parent_run_id, "strategy": records.strategy, "metric": f.metric,
        "mode": f.mode, "filter": f.rule.text if f.rule else None, "group_by": f.group_by,
        "metric_bounds": None if f.surrogate is None or f.surrogate.bounds is None else f.surrogate.bounds.as_list(),
        "empirical_curve_biased": f.biased, "unfinished": records.unfinished,
        "trials": {"planned": records.settings.get("num_trials"), "run": int(len(records.trials)),
                   "kept": int(len(kept)), "failed": int(len(records.failed())), "filtered": f.n_filtered},
        "metric_mean": float(values.mean()) if values.size else None,
        "metric_sd": float(values.std(ddof=1)) if values.size > 1 else None,
        "mean_duration_s": float(np.nanmean(kept["duration_s"])) if len(kept) else None,
        "best": f.best,
        "expected_max": {g: {"n_trials": c.n_trials, "mean_at_n": float(c.mean[-1]), "mean_duration_s":
                             c.mean_duration_s} for g, c in f.curves.items()},
        "surrogate": _surrogate(f.surrogate),
        "surrogate_note": f.surrogate_note,
        "qra": [{"group": g.number, "object": g.object, "n": g.n,
                 "conditions": [c.split(".", 1)[1] for c in g.conditions],
                 "results": {m: (r.__dict__ if isinstance(r, QRA) else {"error": r}) for m, r in g.results.items()}}
                for g in f.groups],
        "environment": [{"condition": p.condition, "values": list(p.values), "n_pairs": p.comparison.n,
                         "n_pairs_total": p.comparison.n_total,
                         "wilcoxon_p": p.comparison.wilcoxon_p, "t_p": p.comparison.t_p,
                         "kendall_tau": p.comparison.kendall_tau, "spearman_rho": p.comparison.spearman_rho}
                        for p in f.comparisons],
        "checklist": {i.item: i.value for i in f.checklist},
        "not_recorded": [i.item for i in f.checklist if not i.recorded],
        "bounds_hint": f.bounds_hint,
        "ranking": ranking_summary(f.ranking),
    }


def _surrogate(sur: SurrogateCurve | None) -> dict[str, Any] | None:
    """The surrogate curve's settings, fit and numbers at the largest budget."""
    if sur is None:
        return None
    return {
        "n_fit": sur.n_fit, "n_points": sur.n_points, "n_samples": sur.n_samples,
        "n_point_sets": sur.n_point_sets, "seed": sur.seed, "hyperparameters": sur.hyperparameters,
        "mean_at_n": float(sur.curve.mean[-1]), "band_at_n": [float(sur.curve.low[-1]), float(sur.curve.high[-1])],
        "loo": None if sur.calibration is None else sur.calibration.checks[0].summary(),
        "calibration": None if sur.calibration is None else sur.calibration.summary("this curve")}


def finite(value: Any) -> Any:
    """A summary with NaN and inf as None (JSON has no NaN), numpy scalars as Python ones."""
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
