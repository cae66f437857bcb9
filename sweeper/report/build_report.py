"""Build a sweep's report from its records: compute every section, write the files, log them to MLflow.

:func:`build_report` needs no MLflow (it takes :class:`~sweeper.analysis.runs.SweepRecords`,
which a test can build by hand); :func:`log_report` writes the files as artifacts of the
sweep's parent run through :class:`~sweeper.record.tracking.MLflowTracker`.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sweeper.analysis.calibration import replicate_columns, searcher_predictions
from sweeper.analysis.expected_max import ExpectedMax, expected_max
from sweeper.analysis.qra import QRA
from sweeper.report import sections
from sweeper.report.checklist import ChecklistItem, fill_checklist
from sweeper.report.document import Block, Heading, OutputDir, Paragraph, render_html, render_markdown
from sweeper.report.filtering import TrialFilter, parse_filter, select_trials
from sweeper.report.groups import PairedConditions, QRAGroup, paired_conditions, qra_groups
from sweeper.report.outputs import REPORT_ARTIFACT_DIR, report_artifact_dir
from sweeper.report.surrogate import SurrogateCurve, SurrogateUnavailable, surrogate_curve, unit_points
from sweeper.search.direction import bounds_hint
from sweeper.search.space import FloatDim
from sweeper.search.warping import MetricBounds

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.analysis.runs import SweepRecords
    from sweeper.record.tracking import MLflowTracker

ARTIFACT_DIR = REPORT_ARTIFACT_DIR  # an unfiltered report's; a filtered one has its own (Report.artifact_dir)
#: ``bounds=SWEEP_BOUNDS``: the bounds the sweep declared for its metric (none for another metric).
SWEEP_BOUNDS = "sweep"


class ReportError(ValueError):
    """The report cannot be built as asked (unknown metric or group-by param); the message says why."""


class ArtifactsNotReplaced(RuntimeError):
    """The store kept files of an earlier report in the folder a new one was logged to (it cannot delete)."""

    def __init__(self, artifact_dir: str, stale: Sequence[str]) -> None:
        self.artifact_dir, self.stale = artifact_dir, list(stale)
        super().__init__(f"the MLflow store cannot delete artifacts, so {len(self.stale)} file(s) of an earlier "
                         f"report stay in {artifact_dir}/ beside the new one: {', '.join(self.stale[:5])}"
                         f"{' ...' if len(self.stale) > 5 else ''}. Delete them in the store by hand.")


@dataclass(frozen=True)
class Report:
    """A written report: where its files are and the key numbers behind them.

    Attributes:
        out_dir: The folder holding every file.
        files: Every file written, in order (figures, CSVs, ``summary.json``, ``report.md``,
            ``report.html``).
        metric: The reported metric.
        mode: ``max`` or ``min``.
        strategy: The sweep's strategy.
        biased: Whether the report warns that the empirical expected-max curve is biased
            (the trials were not i.i.d. random draws).
        curves: The empirical expected-max curve of each group.
        surrogate: The GP surrogate's curve, or None.
        surrogate_note: Why there is no surrogate curve, when there is none.
        qra_groups: The groups of repeated measurements with their QRA.
        comparisons: Paired comparisons of two-valued environment conditions.
        checklist: Dodge's checklist as filled from the records.
        summary: The content of ``summary.json``.
        artifact_dir: Its MLflow artifact folder, ``report`` or ``report-filtered-<hash>``
            (:mod:`sweeper.report.outputs`).
    """

    out_dir: Path
    files: tuple[Path, ...]
    metric: str
    mode: str
    strategy: str
    biased: bool
    curves: dict[str, ExpectedMax]
    surrogate: SurrogateCurve | None
    surrogate_note: str | None
    qra_groups: list[QRAGroup]
    comparisons: list[PairedConditions]
    checklist: list[ChecklistItem]
    summary: dict[str, Any] = field(repr=False)
    artifact_dir: str = ARTIFACT_DIR

    @property
    def markdown(self) -> Path:
        """``report.md``."""
        return self.out_dir / "report.md"

    @property
    def html(self) -> Path:
        """``report.html``."""
        return self.out_dir / "report.html"


def build_report(
    records: SweepRecords,
    *,
    metric: str | None = None,
    mode: str | None = None,
    group_by: str | None = None,
    trial_filter: str | TrialFilter | None = None,
    out_dir: Path,
    surrogate: bool | None = None,
    n_points: int = 1000,
    n_samples: int = 200,
    n_point_sets: int = 10,
    seed: int = 0,
    scale_min: float = 0.0,
    bounds: MetricBounds | str | None = SWEEP_BOUNDS,
) -> Report:
    """Write a sweep's report (Markdown, HTML, PNGs, CSVs, JSON) to ``out_dir``.

    Args:
        records: The sweep, from :func:`~sweeper.analysis.runs.load_sweep` or built by hand.
        metric: The metric to report; default the sweep's.
        mode: ``max`` or ``min``; default the sweep's.
        group_by: A param (e.g. ``model``): one expected-max curve per value.
        trial_filter: A rule ``<metric> <op> <number>`` that finished trials must satisfy
            to count (see :mod:`sweeper.report.filtering`).
        out_dir: Where to write; replaced as a whole once every file is written (an earlier
            report there is deleted, a failure leaves it intact; see
            :class:`~sweeper.report.document.OutputDir`).
        surrogate: Compute the GP surrogate curve: None (default) when the strategy is
            not ``random``; True also for random sweeps (a cross-check); False never.
        n_points: i.i.d. points ``M`` per set for the surrogate curve.
        n_samples: Posterior samples ``S`` for the surrogate curve.
        n_point_sets: Independent point sets the samples are spread over.
        seed: Seed of the surrogate curve (points, samples, GP restarts).
        scale_min: Lowest possible score of the metrics, for QRA's CV*.
        bounds: The metric's bounds for the surrogate's GP: ``SWEEP_BOUNDS`` (default) takes
            what the sweep declared (``hydra.sweeper.metric_bounds``) when reporting its own
            metric; a :class:`~sweeper.search.warping.MetricBounds` (``--bounds``) or None overrides it.

    Returns:
        The :class:`Report`.

    Raises:
        ReportError: Unknown metric or group-by param, or an invalid mode.
        FilterError: A malformed filter, or one naming an unknown metric.
        OutputDirError: ``out_dir`` is a file or a folder that is not an earlier report.
    """
    started = time.perf_counter()
    trials = records.trials
    metric = metric or records.metric
    mode = mode or records.mode
    if mode not in ("max", "min"):
        raise ReportError(f"mode must be 'max' or 'min'; got {mode!r}")
    maximize = mode == "max"
    known = sorted(c[len("metric."):] for c in trials.columns if c.startswith("metric."))
    if f"metric.{metric}" not in trials and (trials["status"] == "FINISHED").any():
        raise ReportError(f"no trial has the metric {metric!r}; the trials have {known}. Pass --metric with one "
                          f"of them.")
    if group_by is not None and f"param.{group_by}" not in trials:
        params = sorted(c[len("param."):] for c in trials.columns if c.startswith("param."))
        raise ReportError(f"--group-by {group_by!r}: no trial has that param; the trials have {params}.")
    if group_by is not None and _continuous(records, group_by):
        discrete = [d.name for d in records.space.dims if not isinstance(d, FloatDim)] if records.space else []
        raise ReportError(f"--group-by {group_by!r}: {group_by} is a continuous dim, so every trial has a value of "
                          f"its own and each group would hold one trial. Group by a categorical or integer param"
                          + (f" ({', '.join(discrete)})" if discrete else "") + ", or use `sweeper multiverse` to "
                          f"see how the metric depends on {group_by}.")
    rule = parse_filter(trial_filter) if isinstance(trial_filter, str) else trial_filter
    selection = select_trials(records, metric, rule)
    finished, kept_mask, filtered_mask = selection.finished, selection.kept, selection.filtered
    kept = trials[kept_mask]
    values = kept[f"metric.{metric}"].to_numpy(dtype=np.float64) if len(kept) else np.array([])
    bounds = resolve_bounds(records, metric, bounds, values)
    out = OutputDir(out_dir)
    out.csv("trials.csv", trials.assign(finished=finished, filtered=filtered_mask, kept=kept_mask))

    biased = records.strategy != "random"
    curves = sections.curves_by_group(kept, metric, maximize, group_by)
    overall = expected_max(values, durations_s=_durations(kept), maximize=maximize) if len(kept) else None
    sur, sur_note = None, None
    if surrogate is False or (surrogate is None and not biased):
        sur_note = ("the sweep drew its trials at random, so the empirical curve is already unbiased"
                    if not biased else "not asked for")
    else:
        try:
            X = unit_points(records.space, trial_points(kept, records))
            sur = surrogate_curve(X, values, maximize=maximize, n_points=n_points, n_samples=n_samples,
                                  n_point_sets=n_point_sets, seed=seed, categories=records.space.categories(),
                                  bounds=bounds, space=records.space,
                                  replicate_columns=replicate_columns(records.space),
                                  prospective=searcher_predictions(kept, metric))
        except SurrogateUnavailable as exc:
            sur_note = str(exc)

    measurands = [metric, *(m for m in known if m != metric and kept[f"metric.{m}"].notna().any())]
    groups = qra_groups(kept, measurands, scale_min=scale_min)
    comparisons, pair_notes = paired_conditions(kept, metric)
    best = _best(kept, metric, maximize, records)
    checklist = fill_checklist(records, metric=metric, mode=mode, kept=kept, n_filtered=int(filtered_mask.sum()),
                               best=best, figure="expected_max_trials.png" if curves else None)

    blocks: list[Block] = [Heading(f"Sweep report: {records.experiment}", 1), Paragraph(
        f"Sweep run `{records.parent_run_id}` of experiment `{records.experiment}` at `{records.tracking_uri}`; "
        f"strategy `{records.strategy}`; metric `{metric}` ({mode}); {len(kept)} of {len(trials)} trials count "
        f"(finished{', passing the filter' if rule else ''}). Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')}.")]
    if records.unfinished:
        blocks.append(Paragraph(f"**Caution: {records.unfinished}.**"))
    hint = unbounded_score_hint(trials[finished], metric, bounds)
    if hint:
        blocks.append(Paragraph(f"**Caution: {hint}**"))
    if biased:
        blocks.append(Paragraph(
            f"**Caution: the empirical expected-max estimator assumes i.i.d. random draws from the search space, "
            f"but this sweep's trials came from {_phases(kept, records.strategy)}, so the empirical curve below is "
            f"biased. "
            + ("The surrogate-based curve estimates what random search would have found.**" if sur is not None else
               f"No surrogate-based curve could be computed ({sur_note}): read the empirical curve as a "
               f"description of these trials only, not of the search space.**")))
    if rule is not None:
        blocks.append(Paragraph(f"**Filter `{rule.text}`: {int(filtered_mask.sum())} finished trial(s) that do not "
                                f"satisfy it are excluded from every statistic.**"))
    blocks += sections.expected_max_section(out, curves, sur, values, metric=metric, maximize=maximize,
                                            group_by=group_by) if len(values) else [
        Heading("Expected best score vs budget (Dodge et al. 2019)"), Paragraph("No finished trial counts.")]
    if biased or sur is not None:
        blocks += sections.surrogate_section(out, sur, sur_note, overall, metric=metric, strategy=records.strategy)
    blocks += sections.qra_section(out, groups, measurands)
    blocks += sections.environment_section(out, comparisons, pair_notes, metric=metric)
    blocks += sections.failures_section(out, records.failed(), trials[filtered_mask], rule=rule, metric=metric)
    blocks += sections.checklist_section(checklist)

    summary = _summary(records, metric=metric, mode=mode, rule=rule, group_by=group_by, kept=kept, values=values,
                       n_filtered=int(filtered_mask.sum()), biased=biased, curves=curves, sur=sur, sur_note=sur_note,
                       groups=groups, comparisons=comparisons, best=best, checklist=checklist)
    summary["bounds_hint"] = hint
    summary["build_s"] = time.perf_counter() - started
    out.text("summary.json", json.dumps(_finite(summary), indent=2, default=_json_default, allow_nan=False))
    out.text("report.md", render_markdown(blocks))
    out.text("report.html", render_html(blocks, f"Sweep report: {records.experiment}", out.path))
    summary["files"] = [p.name for p in out.files]
    out.commit()
    return Report(out_dir=out.path, files=tuple(out.files), metric=metric, mode=mode, strategy=records.strategy,
                  biased=biased, curves=curves, surrogate=sur, surrogate_note=sur_note, qra_groups=groups,
                  comparisons=comparisons, checklist=checklist, summary=summary,
                  artifact_dir=report_artifact_dir(rule))


def no_trial_finished(records: SweepRecords) -> str:
    """What to say when no trial of the sweep finished: how many failed and the most common error."""
    failed = records.failed()
    errors = failed["error"].dropna() if "error" in failed else []
    common = errors.value_counts() if len(errors) else None
    why = "" if common is None else f"; the most common error ({common.iloc[0]} of them): {common.index[0]}"
    return (f"no trial of sweep {records.parent_run_id} finished ({len(records.trials)} trials, {len(failed)} failed"
            f"{why}): there is nothing to analyse. `sweeper trials --experiment {records.experiment}` lists them; "
            f"each failed trial's log holds its traceback.")


def _continuous(records: SweepRecords, name: str) -> bool:
    """Whether ``name`` is a float interval of the sweep's space (a value per trial: no groups)."""
    dims = {d.name: d for d in records.space.dims} if records.space is not None else {}
    return isinstance(dims.get(name), FloatDim)


def _phases(kept: Any, strategy: str) -> str:
    """Which phases produced the kept trials, with their counts: ```sobol` (8) and `ivr` (24)``."""
    counts = kept["phase"].value_counts() if "phase" in kept and kept["phase"].notna().any() else None
    if counts is None or not len(counts):
        return f"`{strategy}`"
    parts = [f"`{phase}` ({n})" for phase, n in counts.items()]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + f" and {parts[-1]}"


def log_report(report: Report, tracker: MLflowTracker, run_id: str | None = None) -> list[str]:
    """Log every file of ``report`` as an artifact of the sweep's parent run, under its
    :attr:`Report.artifact_dir` (``report/``, or ``report-filtered-<hash>/``), replacing that folder.

    Args:
        report: The built report.
        tracker: The MLflow writer of the sweep's store.
        run_id: The run to attach to; default the sweep's parent run.

    Returns:
        The artifact paths written, e.g. ``["report/report.md", ...]``.

    Raises:
        ArtifactsNotReplaced: The store kept files of an earlier report in that folder (see
            :meth:`~sweeper.record.tracking.MLflowTracker.clear_artifacts`); the new files are all logged.
    """
    run_id = run_id or report.summary["parent_run_id"]
    if report.surrogate is not None and report.surrogate.calibration is not None:
        filtered = report.artifact_dir[len(ARTIFACT_DIR) + 1:].replace("-", "_")  # "" or "filtered_<hash>"
        tracker.log(run_id, metrics=report.surrogate.calibration.metrics(f"surrogate_{filtered}_" if filtered
                                                                         else "surrogate_"))
    return log_files(report.files, tracker, run_id, report.artifact_dir)


def resolve_bounds(records: SweepRecords, metric: str, bounds: MetricBounds | str | None,
                   values: np.ndarray) -> MetricBounds | None:
    """The bounds to model ``metric`` with (see :func:`build_report`), checked against the values.

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
    return bounds_hint(metric, values, bounded=bounds is not None)


def log_files(files: Sequence[Path], tracker: MLflowTracker, run_id: str, artifact_dir: str) -> list[str]:
    """Log files as artifacts of ``run_id`` in ``artifact_dir``, which is emptied first; return the artifact paths.

    The folder holds one report's files only: no file of an earlier report of the same kind
    outlives it (:meth:`~sweeper.record.tracking.MLflowTracker.clear_artifacts`). Where the
    store cannot delete, the new files are still logged, then ArtifactsNotReplaced names the stale ones.
    """
    stale = tracker.clear_artifacts(run_id, artifact_dir)
    written = []
    for path in files:
        if path.suffix == ".png":
            tracker.client.log_artifact(run_id, str(path), artifact_dir)
        else:
            tracker.log_text(run_id, path.read_text(encoding="utf-8"), f"{artifact_dir}/{path.name}")
        written.append(f"{artifact_dir}/{path.name}")
    left = sorted(set(stale) - set(written))
    if left:
        raise ArtifactsNotReplaced(artifact_dir, left)
    return written


def _durations(frame: Any) -> np.ndarray | None:
    d = frame["duration_s"].to_numpy(dtype=np.float64)
    return d if np.all(np.isfinite(d)) and np.all(d >= 0) else None


def trial_points(kept: Any, records: SweepRecords) -> list[dict[str, Any]]:
    """Each trial's point under the space's dimension names (MLflow keys replace odd characters by ``_``).

    Read column by column (``iterrows`` took 3 s for 10,000 trials); no space: empty points,
    which :func:`~sweeper.report.surrogate.unit_points` turns into its explanation.
    """
    import re

    if records.space is None:
        return [{} for _ in range(len(kept))]
    columns: dict[str, list[Any]] = {}
    for name, dim in zip(records.space.names, records.space.dims):
        key = f"param.{name}"
        if key not in kept.columns:
            key = "param." + re.sub(r"[^A-Za-z0-9_\-. /]", "_", name)
        values = kept[key].tolist() if key in kept.columns else [None] * len(kept)
        columns[name] = [_as_choice(dim, v) for v in values] if key in kept.columns else values
    if not columns:
        return [{} for _ in range(len(kept))]
    return [dict(zip(columns, cells)) for cells in zip(*columns.values())]


def _as_choice(dim: Any, value: Any) -> Any:
    """A recorded param as the dimension's own value: MLflow keeps text, so ``'False'`` means False."""
    choices = getattr(dim, "choices", None)
    if choices is None or any(value == c and type(value) is type(c) for c in choices):
        return value
    for choice, text in zip(choices, dim.choice_strings):
        if str(value) in (str(choice), text):
            return choice
    return value


def _best(kept: Any, metric: str, maximize: bool, records: SweepRecords) -> dict[str, Any] | None:
    if not len(kept):
        return None
    values = kept[f"metric.{metric}"].to_numpy(dtype=np.float64)
    row = kept.iloc[int(np.argmax(values) if maximize else np.argmin(values))]
    names = records.space.names if records.space is not None else []
    params = {n: row.get(f"param.{n}") for n in names} or {
        c[len("param."):]: row[c] for c in kept.columns if c.startswith("param.")}
    return {"index": int(row["index"]), "run_id": row["run_id"], "value": float(row[f"metric.{metric}"]),
            "params": params}


def _summary(records: SweepRecords, **k: Any) -> dict[str, Any]:
    values: np.ndarray = k["values"]
    sur: SurrogateCurve | None = k["sur"]
    return {
        "experiment": records.experiment, "tracking_uri": records.tracking_uri,
        "parent_run_id": records.parent_run_id, "strategy": records.strategy, "metric": k["metric"],
        "mode": k["mode"], "filter": k["rule"].text if k["rule"] else None, "group_by": k["group_by"],
        "metric_bounds": None if sur is None or sur.bounds is None else sur.bounds.as_list(),
        "empirical_curve_biased": k["biased"], "unfinished": records.unfinished,
        "trials": {"planned": records.settings.get("num_trials"), "run": int(len(records.trials)),
                   "kept": int(len(k["kept"])), "failed": int(len(records.failed())), "filtered": k["n_filtered"]},
        "metric_mean": float(values.mean()) if values.size else None,
        "metric_sd": float(values.std(ddof=1)) if values.size > 1 else None,
        "mean_duration_s": float(np.nanmean(k["kept"]["duration_s"])) if len(k["kept"]) else None,
        "best": k["best"],
        "expected_max": {g: {"n_trials": c.n_trials, "mean_at_n": float(c.mean[-1]), "mean_duration_s":
                             c.mean_duration_s} for g, c in k["curves"].items()},
        "surrogate": None if sur is None else {
            "n_fit": sur.n_fit, "n_points": sur.n_points, "n_samples": sur.n_samples,
            "n_point_sets": sur.n_point_sets, "seed": sur.seed, "hyperparameters": sur.hyperparameters,
            "mean_at_n": float(sur.curve.mean[-1]), "band_at_n": [float(sur.curve.low[-1]), float(sur.curve.high[-1])],
            "loo": None if sur.calibration is None else sur.calibration.checks[0].summary(),
            "calibration": None if sur.calibration is None else sur.calibration.summary("this curve")},
        "surrogate_note": k["sur_note"],
        "qra": [{"group": g.number, "object": g.object, "n": g.n, "conditions": [c.split(".", 1)[1] for c in g.conditions],
                 "results": {m: (r.__dict__ if isinstance(r, QRA) else {"error": r}) for m, r in g.results.items()}}
                for g in k["groups"]],
        "environment": [{"condition": p.condition, "values": list(p.values), "n_pairs": p.comparison.n,
                         "n_pairs_total": p.comparison.n_total,
                         "wilcoxon_p": p.comparison.wilcoxon_p, "t_p": p.comparison.t_p,
                         "kendall_tau": p.comparison.kendall_tau, "spearman_rho": p.comparison.spearman_rho}
                        for p in k["comparisons"]],
        "checklist": {i.item: i.value for i in k["checklist"]},
        "not_recorded": [i.item for i in k["checklist"] if not i.recorded],
    }


def _finite(value: Any) -> Any:
    """The summary with NaN and inf as None (JSON has no NaN), numpy scalars as Python ones."""
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _json_default(value: Any) -> Any:
    return str(value)
