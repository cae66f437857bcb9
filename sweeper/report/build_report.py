"""Build a sweep's report from its records: compute every section, write the files, log them to MLflow.

:func:`build_report` needs no MLflow (it takes :class:`~sweeper.analysis.runs.SweepRecords`,
which a test can build by hand); :func:`log_report` writes the files as artifacts of the
sweep's parent run through :class:`~sweeper.record.tracking.MLflowTracker`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from sweeper.analysis.calibration import replicate_columns, searcher_predictions
from sweeper.analysis.expected_max import ExpectedMax, expected_max
from sweeper.report import sections
from sweeper.report.checklist import ChecklistItem, fill_checklist
from sweeper.report.document import Block, Heading, OutputDir, Paragraph, render_html, render_markdown
from sweeper.report.filtering import TrialFilter, TrialSelection, parse_filter, select_trials
from sweeper.report.groups import PairedConditions, QRAGroup, paired_conditions, qra_groups
from sweeper.report.outputs import REPORT_ARTIFACT_DIR, report_artifact_dir
from sweeper.report.ranking import RERUN_OF_TAG, RankingStability, ranking_section, ranking_stability, replicate_params
from sweeper.report.request import (
    SWEEP_BOUNDS,
    ReportError,
    check_request,
    no_trial_finished,
    resolve_bounds,
    unbounded_score_hint,
)
from sweeper.report.summary import ReportFindings, finite, summary
from sweeper.report.surrogate import SurrogateCurve, SurrogateUnavailable, surrogate_curve, unit_points
from sweeper.report.trial_points import trial_points
from sweeper.search.warping import MetricBounds

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.analysis.runs import SweepRecords
    from sweeper.record.tracking import MLflowTracker

__all__ = [
    "ARTIFACT_DIR", "SWEEP_BOUNDS", "ArtifactsNotReplaced", "Report", "ReportError", "SurrogateRequest",
    "build_report", "log_files", "log_report", "no_trial_finished", "resolve_bounds", "trial_points",
    "unbounded_score_hint",
]

ARTIFACT_DIR = REPORT_ARTIFACT_DIR  # an unfiltered report's; a filtered one has its own (Report.artifact_dir)


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
        ranking: For a sweep of listed configurations, how stable their order is over replicates, or None.
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
    ranking: RankingStability | None = None

    @property
    def markdown(self) -> Path:
        """``report.md``."""
        return self.out_dir / "report.md"

    @property
    def html(self) -> Path:
        """``report.html``."""
        return self.out_dir / "report.html"


@dataclass(frozen=True)
class SurrogateRequest:
    """How to compute the surrogate curve (:func:`build_report`'s arguments of the same names).

    Attributes:
        ask: None: when the strategy is not ``random``; True: always; False: never.
        n_points: i.i.d. points ``M`` per set.
        n_samples: Posterior samples ``S``.
        n_point_sets: Independent point sets the samples are spread over.
        seed: Seed of the points, the samples and the GP restarts.
    """

    ask: bool | None
    n_points: int
    n_samples: int
    n_point_sets: int
    seed: int


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
    metric, mode, known = check_request(records, metric, mode, group_by)
    rule = parse_filter(trial_filter) if isinstance(trial_filter, str) else trial_filter
    selection = select_trials(records, metric, rule)
    kept = trials[selection.kept]
    values = kept[f"metric.{metric}"].to_numpy(dtype=np.float64) if len(kept) else np.array([])
    bounds = resolve_bounds(records, metric, bounds, values)
    out = OutputDir(out_dir)
    out.csv("trials.csv", trials.assign(finished=selection.finished, filtered=selection.filtered, kept=selection.kept))
    found = _findings(records, metric=metric, mode=mode, rule=rule, group_by=group_by, selection=selection,
                      kept=kept, values=values, bounds=bounds, known=known, scale_min=scale_min,
                      surrogate=SurrogateRequest(surrogate, n_points, n_samples, n_point_sets, seed))
    blocks = _page(records, out, found)
    content = summary(records, found)
    content["build_s"] = time.perf_counter() - started
    out.text("summary.json", json.dumps(finite(content), indent=2, default=str, allow_nan=False))
    out.text("report.md", render_markdown(blocks))
    out.text("report.html", render_html(blocks, f"Sweep report: {records.experiment}", out.path))
    content["files"] = [p.name for p in out.files]
    out.commit()
    return Report(out_dir=out.path, files=tuple(out.files), metric=metric, mode=mode, strategy=records.strategy,
                  biased=found.biased, curves=found.curves, surrogate=found.surrogate,
                  surrogate_note=found.surrogate_note, qra_groups=found.groups, comparisons=found.comparisons,
                  checklist=found.checklist, summary=content, artifact_dir=report_artifact_dir(rule),
                  ranking=found.ranking)


def _findings(records: SweepRecords, *, metric: str, mode: str, rule: TrialFilter | None, group_by: str | None,
              selection: TrialSelection, kept: pd.DataFrame, values: npt.NDArray[np.float64],
              bounds: MetricBounds | None, known: list[str], scale_min: float,
              surrogate: SurrogateRequest) -> ReportFindings:
    """Compute every section's numbers: the curves, the surrogate, QRA, paired conditions, the checklist."""
    maximize = mode == "max"
    biased = records.strategy != "random"
    curves = sections.curves_by_group(kept, metric, maximize, group_by)
    overall = expected_max(values, durations_s=_durations(kept), maximize=maximize) if len(kept) else None
    sur, sur_note = sweep_surrogate_curve(records, kept, values, metric=metric, maximize=maximize, bounds=bounds,
                                     biased=biased, request=surrogate)
    measurands = [metric, *(m for m in known if m != metric and kept[f"metric.{m}"].notna().any())]
    groups = qra_groups(kept, measurands, scale_min=scale_min, replicates=replicate_params(records))
    comparisons, pair_notes = paired_conditions(kept, metric)
    best = _best(kept, metric, maximize, records)
    checklist = fill_checklist(records, metric=metric, mode=mode, kept=kept, n_filtered=int(selection.filtered.sum()),
                               best=best, figure="expected_max_trials.png" if curves else None)
    hint = unbounded_score_hint(records.trials[selection.finished], metric, bounds)
    return ReportFindings(metric=metric, mode=mode, rule=rule, group_by=group_by, selection=selection, kept=kept,
                          values=values, biased=biased, curves=curves, overall=overall, surrogate=sur,
                          surrogate_note=sur_note, measurands=measurands, groups=groups, comparisons=comparisons,
                          pair_notes=pair_notes, best=best, checklist=checklist, bounds_hint=hint,
                          ranking=ranking_stability(records, kept, metric, maximize, scale_min))


def sweep_surrogate_curve(records: SweepRecords, kept: pd.DataFrame, values: npt.NDArray[np.float64], *, metric: str,
                     maximize: bool, bounds: MetricBounds | None, biased: bool,
                     request: SurrogateRequest) -> tuple[SurrogateCurve | None, str | None]:
    """The surrogate curve, or None and why there is none."""
    if request.ask is False or (request.ask is None and not biased):
        return None, ("the sweep drew its trials at random, so the empirical curve is already unbiased"
                      if not biased else "not asked for")
    space = records.space
    if space is not None and space.joint:
        return None, ("the sweep ran a list of configurations (hydra.sweeper.configurations), not a search of its "
                      "space: there is no random search over it to estimate")
    try:
        X = unit_points(space, trial_points(kept, records))
        assert space is not None  # else unit_points raised SurrogateUnavailable
        return surrogate_curve(X, values, maximize=maximize, n_points=request.n_points, n_samples=request.n_samples,
                               n_point_sets=request.n_point_sets, seed=request.seed, categories=space.categories(),
                               bounds=bounds, space=space, replicate_columns=replicate_columns(space),
                               prospective=searcher_predictions(kept, metric)), None
    except SurrogateUnavailable as exc:
        return None, str(exc)


def _page(records: SweepRecords, out: OutputDir, f: ReportFindings) -> list[Block]:
    """The report's blocks, each section writing its CSVs and figures to ``out`` on the way."""
    trials = records.trials
    blocks: list[Block] = [Heading(f"Sweep report: {records.experiment}", 1), Paragraph(
        f"Sweep run `{records.parent_run_id}` of experiment `{records.experiment}` at `{records.tracking_uri}`; "
        f"strategy `{records.strategy}`; metric `{f.metric}` ({f.mode}); {len(f.kept)} of {len(trials)} trials "
        f"count (finished{', passing the filter' if f.rule else ''}). "
        f"Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')}.")]
    blocks += _cautions(records, f)
    blocks += sections.expected_max_section(out, f.curves, f.surrogate, f.values, metric=f.metric,
                                            maximize=f.mode == "max", group_by=f.group_by) if len(f.values) else [
        Heading("Expected best score vs budget (Dodge et al. 2019)"), Paragraph("No finished trial counts.")]
    if f.biased or f.surrogate is not None:
        blocks += sections.surrogate_section(out, f.surrogate, f.surrogate_note, f.overall, metric=f.metric,
                                             strategy=records.strategy)
    blocks += ranking_section(out, f.ranking, metric=f.metric, rerun_of=records.parent_tags.get(RERUN_OF_TAG))
    blocks += sections.qra_section(out, f.groups, f.measurands)
    blocks += sections.environment_section(out, f.comparisons, f.pair_notes, metric=f.metric)
    blocks += sections.failures_section(out, records.failed(), trials[f.selection.filtered], rule=f.rule,
                                        metric=f.metric)
    blocks += sections.checklist_section(f.checklist)
    return blocks


def _cautions(records: SweepRecords, f: ReportFindings) -> list[Block]:
    """The cautions that open the report: an unfinished sweep, unbounded scores, a biased curve, a filter."""
    blocks: list[Block] = []
    if records.unfinished:
        blocks.append(Paragraph(f"**Caution: {records.unfinished}.**"))
    if f.bounds_hint:
        blocks.append(Paragraph(f"**Caution: {f.bounds_hint}**"))
    if f.biased:
        blocks.append(Paragraph(
            f"**Caution: the empirical expected-max estimator assumes i.i.d. random draws from the search space, "
            f"but this sweep's trials came from {_phases(f.kept, records.strategy)}, so the empirical curve below is "
            f"biased. "
            + ("The surrogate-based curve estimates what random search would have found.**"
               if f.surrogate is not None else
               f"No surrogate-based curve could be computed ({f.surrogate_note}): read the empirical curve as a "
               f"description of these trials only, not of the search space.**")))
    if f.rule is not None:
        blocks.append(Paragraph(f"**Filter `{f.rule.text}`: {f.n_filtered} finished trial(s) that do not "
                                f"satisfy it are excluded from every statistic.**"))
    return blocks


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
