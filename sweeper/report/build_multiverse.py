"""``sweeper multiverse``: a sweep's multiverse analysis as files, logged to its MLflow run.

Reads the sweep's trials (any tracking URI), keeps the finished ones that satisfy the
user's rule, fits the coregionalized GP and writes, for the chosen kernel:

============================================  ==========================================
file                                          content
============================================  ==========================================
``map_mean_<x>_<y>.png``, ``map_sd_...png``   posterior mean / sd over each pair of
                                              continuous dims, a facet per category
                                              combination, trials on top (Fig. 1, 2, 4)
``map_<x>_<y>.csv``                           the grids behind them (long format)
``map_<x>.png`` / ``categories.png`` (+CSV)   the same for 1 or 0 continuous dims
``bayes_factors.csv``, ``interaction.json``   eq. 8 Bayes factors: all dims, every pair
                                              (``summary.json``'s ``effect``: whether the
                                              metric depends on any choice at all)
``sensitivity.png``, ``sensitivity.csv``      Sobol main and total effects (Fig. 3, 6)
``coregionalization_<dim>.png`` / ``.csv``    category correlation of each choice dim (Fig. 5)
``loo.csv``                                   the GP's leave-one-out check, trial by trial
``summary.json``, ``multiverse.md``           every number above, and a readable summary
============================================  ==========================================

A map's CSV has, per grid point: ``facet``, the two dims (the values a trial there runs at),
``mean`` and ``sd`` of the metric a new trial there would return, ``low`` and ``high`` (the
95 % band the figures draw, :mod:`sweeper.analysis.map_view`) and ``sd_latent`` (the GP's
uncertainty about the latent function alone; see :mod:`sweeper.analysis.multiverse`).
With the metric's declared bounds (``hydra.sweeper.metric_bounds``, or ``--bounds``) the GP
models it warped and every mean and band lies inside them, where ``mean ± 1.96 sd`` may not. The GP's
predictive checks (:mod:`sweeper.search.calibration`: leave-one-out, leave-one-configuration-out,
and the searcher's own predictions of the trials it chose) go into ``summary.json``
(``calibration``: a ``verdict`` per check and overall), ``multiverse.md`` next to the maps (with
a warning in words when the verdict is ``failed``) and onto the sweep's run as
``multiverse_<kernel>_{loo,loco,prospective}_*`` and ``multiverse_<kernel>_calibration_failed``.
Whether the sampler's chains draw the same map (:mod:`sweeper.analysis.chain_agreement`) goes into
``summary.json`` (``chains``), a caution in ``multiverse.md`` where they do not, and ``..._chains_rhat``.

Artifacts go under ``multiverse/<kernel>/`` on the sweep's parent run, so analyses with
different kernels (``--kernel``) sit side by side for the robustness check of the paper's
Fig. S6-S10.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from sweeper.analysis.calibration import replicate_columns, searcher_predictions
from sweeper.analysis.chain_agreement import chain_agreement
from sweeper.analysis.effect_test import effect_test
from sweeper.analysis.map_view import MapTrials
from sweeper.analysis.multiverse import MultiverseFit, fit_multiverse, interaction_tests, posterior_sensitivity
from sweeper.analysis.multiverse_plots import plot_correlation_heatmap, plot_sensitivity
from sweeper.blas import one_blas_thread
from sweeper.report.build_report import log_files
from sweeper.report.document import OutputDir
from sweeper.report.filtering import TrialFilter, TrialSelection, parse_filter, select_trials
from sweeper.report.multiverse_maps import figure_names, slug, write_maps
from sweeper.report.outputs import multiverse_artifact_dir
from sweeper.report.request import (
    SWEEP_BOUNDS,
    ReportError,
    no_trial_finished,
    resolve_bounds,
    unbounded_score_hint,
)
from sweeper.report.summary import finite
from sweeper.report.trial_points import trial_points
from sweeper.search.calibration import Calibration, calibration
from sweeper.search.gp_fit import fit_subset
from sweeper.search.interaction import INTERACTION_LOG10, NO_INTERACTION_LOG10, constant_metric_note
from sweeper.search.kernels import KERNELS, category_labels
from sweeper.search.loo import PredictiveCheck, first_of_copies, replicate_groups
from sweeper.search.space import ChoiceDim, SearchSpace
from sweeper.search.warping import MetricBounds

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.analysis.runs import SweepRecords
    from sweeper.record.tracking import MLflowTracker

MIN_TRIALS = 4


@dataclass(frozen=True)
class MultiverseReport:
    """The written analysis: its folder, files, the fit and the key numbers (``summary``)."""

    out_dir: Path
    files: tuple[Path, ...]
    kernel: str
    fit: MultiverseFit
    summary: dict[str, Any] = field(repr=False)
    calibration: Calibration | None = None
    #: Its MLflow artifact folder, ``multiverse/<kernel>[-filtered-<hash>]`` (:mod:`sweeper.report.outputs`).
    artifact_dir: str = ""


def _excluded_points(space: SearchSpace, points: list[dict[str, Any]]) -> npt.NDArray[np.float64]:
    """Failed and filtered trials in the unit cube; one whose point cannot be read is not drawn."""
    rows = []
    for point in points:
        try:
            rows.append(space.to_unit([point])[0])
        except (KeyError, ValueError, TypeError):
            continue
    return np.array(rows).reshape(-1, space.d)


def build_multiverse(
    records: SweepRecords, *, out_dir: Path, metric: str | None = None, trial_filter: str | TrialFilter | None = None,
    kernel: str = "matern52-ard", others: str = "centre", resolution: int = 40, seed: int = 0,
    max_fit_points: int = 500, n_base: int = 1024, repeats: int = 10, bounds: MetricBounds | str | None = SWEEP_BOUNDS,
) -> MultiverseReport:
    """Fit the sweep's GP and write every map, test and matrix listed in the module docstring.

    ``bounds``: as for :func:`sweeper.report.build_report` (default: the sweep's own, for its metric).

    Raises:
        ReportError: Unknown metric or kernel, no readable space, or too few kept trials.
        FilterError: A malformed filter or one naming an unknown metric.
    """
    with one_blas_thread():  # NOTE: docs/decisions/0002-one-blas-thread.md
        started = time.perf_counter()
        metric = metric or records.metric
        data = _modelled(records, metric, trial_filter, kernel, resolution, bounds)
        space = data.space
        fit_rows = np.arange(len(data.y_in))
        if len(fit_rows) > max_fit_points:
            fit_rows = fit_subset(len(data.y_in), max_fit_points, [seed, 3],
                                  category_labels(data.U_in, space.categories()))
        fit = fit_multiverse(space, data.U_in[fit_rows], data.y_in[fit_rows], kernel=kernel, seed=seed,
                             bounds=data.bounds)
        checks = calibration(fit.gp, replicate_columns(space), searcher_predictions(data.kept, metric))
        out = OutputDir(out_dir)
        summary = _summary(records, data, fit, checks, metric=metric, kernel=kernel, others=others,
                           n_fit=int(fit_rows.size))
        agreement = chain_agreement(fit.gp, space, seed)
        summary["chains"] = agreement and {**agreement.summary(), "caution": agreement.caution("these maps")}
        _loo_csv(out, fit, checks.checks[0], data.kept["index"].to_numpy()[fit_rows], metric)
        write_maps(out, fit, MapTrials(data.U_in, data.y_in, data.U_out), metric, others, resolution, seed, summary)
        _interactions(out, fit, kernel, seed, summary)
        _effect(fit, metric, kernel, seed, summary)
        _sensitivity(out, fit, metric, n_base, repeats, seed, summary)
        _coregionalization(out, fit, summary)
        summary["build_s"] = time.perf_counter() - started
        out.text("summary.json", json.dumps(finite(summary), indent=2, default=str, allow_nan=False))
        out.text("multiverse.md", _markdown(records, summary))
        summary["files"] = [p.name for p in out.files]
        out.commit()
        return MultiverseReport(out.path, tuple(out.files), kernel, fit, summary, checks,
                                multiverse_artifact_dir(kernel, data.rule))


@dataclass(frozen=True)
class _Modelled:
    """The trials a multiverse analysis models, checked against the request.

    Attributes:
        space: The sweep's search space (at least one dim).
        rule: The user's filter, or None.
        selection: Which trials count (:func:`~sweeper.report.filtering.select_trials`).
        kept: The kept trials' rows.
        U_in: The kept trials' points in the unit cube, shape ``(n, d)``.
        y_in: Their values of the metric, shape ``(n,)``.
        U_out: The failed and filtered trials' points that can be read, shape ``(m, d)``.
        bounds: The metric's bounds the GP models it inside, or None.
    """

    space: SearchSpace
    rule: TrialFilter | None
    selection: TrialSelection
    kept: pd.DataFrame
    U_in: npt.NDArray[np.float64]
    y_in: npt.NDArray[np.float64]
    U_out: npt.NDArray[np.float64]
    bounds: MetricBounds | None


def _modelled(records: SweepRecords, metric: str, trial_filter: str | TrialFilter | None, kernel: str,
              resolution: int, bounds: MetricBounds | str | None) -> _Modelled:
    """The trials to model, or ReportError saying why there are none (checks in the order a user meets them)."""
    space = _mapped_space(records, metric, kernel)
    trials = records.trials
    rule = parse_filter(trial_filter) if isinstance(trial_filter, str) else trial_filter
    sel = select_trials(records, metric, rule)
    kept, excluded = trials[sel.kept], trials[~sel.kept]
    if len(kept) < MIN_TRIALS:
        raise ReportError(f"only {len(kept)} trial(s) finished{' and passed the filter' if rule else ''}: the GP "
                          f"needs at least {MIN_TRIALS}")
    if resolution < 2:
        raise ReportError(f"--resolution {resolution} is too small: a map needs at least 2 points per axis")
    try:
        U_in = space.to_unit(trial_points(kept, records))
    except (KeyError, ValueError) as exc:
        raise ReportError(f"a trial's point does not fit the sweep's recorded search space: {exc}") from None
    y_in = kept[f"metric.{metric}"].to_numpy(dtype=np.float64)
    bounds = resolve_bounds(records, metric, bounds, y_in)
    U_out = _excluded_points(space, trial_points(excluded, records))
    return _Modelled(space, rule, sel, kept, U_in, y_in, U_out, bounds)


def _mapped_space(records: SweepRecords, metric: str, kernel: str) -> SearchSpace:
    """The sweep's space, once the kernel, the space, a finished trial and the metric are known to exist."""
    if kernel not in KERNELS:
        raise ReportError(f"--kernel {kernel!r} is unknown: choose one of {', '.join(KERNELS)}")
    space = records.space
    if space is None or space.d == 0:
        raise ReportError("the sweep's search space cannot be read (no search_space.json artifact and no space.* "
                          "params) or has no dimension: there is nothing to map")
    trials = records.trials
    if not (trials["status"] == "FINISHED").any():
        raise ReportError(no_trial_finished(records))
    if f"metric.{metric}" not in trials:
        known = sorted(c[len("metric."):] for c in trials.columns if c.startswith("metric."))
        raise ReportError(f"no trial has the metric {metric!r}; the trials have {known}. Pass --metric with one.")
    return space


def _summary(records: SweepRecords, data: _Modelled, fit: MultiverseFit, checks: Calibration, *, metric: str,
             kernel: str, others: str, n_fit: int) -> dict[str, Any]:
    """The summary's numbers known once the GP is fitted; the maps, tests and indices add theirs."""
    trials, loo = records.trials, checks.checks[0]
    return {
        "experiment": records.experiment, "parent_run_id": records.parent_run_id, "strategy": records.strategy,
        "metric": metric, "kernel": kernel, "filter": data.rule.text if data.rule else None, "others": others,
        "metric_bounds": None if data.bounds is None else data.bounds.as_list(),
        "trials": {"run": len(trials), "kept": len(data.kept), "failed": int(len(records.failed())),
                   "filtered": int(data.selection.filtered.sum()), "fit": n_fit},
        "hyperparameters": fit.gp.hyperparameters(), "log_likelihood": fit.gp.log_likelihood,
        "loo": {**loo.summary(), "sentence": loo.sentence("these maps")},
        "calibration": checks.summary("these maps"), "maps": [],
        "bounds_hint": unbounded_score_hint(trials[data.selection.finished], metric, data.bounds),
        "constant_metric": constant_metric_note(data.y_in)}


def _loo_csv(out: OutputDir, fit: MultiverseFit, loo: PredictiveCheck, fitted: npt.NDArray[Any], metric: str) -> None:
    """``loo.csv``: each trial the leave-one-out check scored (one of a set of copies); ``fitted``: the fit's trials."""
    import pandas as pd

    once = first_of_copies(replicate_groups(fit.X, fit.y, replicate_columns(fit.space))[0])  # the rows LOO scored
    out.csv("loo.csv", pd.DataFrame({"trial": fitted[once], metric: fit.y[once], "loo_mean": loo.mean, "pit": loo.pit,
                                     "residual": loo.residuals}))


def _sensitivity(out: OutputDir, fit: MultiverseFit, metric: str, n_base: int, repeats: int, seed: int,
                 summary: dict[str, Any]) -> None:
    """Sobol indices of the posterior mean, unless the metric is constant (nothing depends on any choice)."""
    import pandas as pd

    summary["sensitivity"] = []
    if summary["constant_metric"] is None:
        indices = posterior_sensitivity(fit, n_base=n_base, repeats=repeats, seed=seed)
        out.csv("sensitivity.csv", pd.DataFrame(indices.to_rows()))
        out.figure("sensitivity.png", plot_sensitivity(indices.names, indices.main, indices.total, indices.main_sd,
                                                       indices.total_sd, quantity=metric))
        summary["sensitivity"] = indices.to_rows()


def _effect(fit: MultiverseFit, metric: str, kernel: str, seed: int, summary: dict[str, Any]) -> None:
    """Whether the metric depends on any choice (:mod:`sweeper.analysis.effect_test`); a caution where not shown."""
    test = effect_test(fit.space, fit.X, fit.y, warp=fit.gp.warp, kernel=kernel, seed=seed)
    summary["effect"] = {"log10_K": test.log10_K, "p_value": test.p_value, "permutations": test.permutations,
                         "as_good": test.as_good, "n": test.n, "verdict": test.verdict(),
                         "caution": test.caution(metric)}


def _coregionalization(out: OutputDir, fit: MultiverseFit, summary: dict[str, Any]) -> None:
    """The correlation between the categories of each choice dim, as the GP's coregionalization learned it."""
    import pandas as pd

    summary["coregionalization"] = {}
    for factor in fit.gp.factors:
        dim = fit.space.dims[factor.column]
        assert isinstance(dim, ChoiceDim)  # only a choice dim has a coregionalization factor
        corr = factor.correlation()
        labels = list(dim.choice_strings)
        out.csv(f"coregionalization_{slug(dim.name)}.csv", pd.DataFrame(corr, index=labels, columns=labels)
                .reset_index(names=dim.name))
        out.figure(f"coregionalization_{slug(dim.name)}.png", plot_correlation_heatmap(corr, labels, name=dim.name))
        summary["coregionalization"][dim.name] = {"labels": labels, "correlation": corr.tolist(),
                                                  "B": factor.B.tolist()}


def _interactions(out: OutputDir, fit: MultiverseFit, kernel: str, seed: int, summary: dict[str, Any]) -> None:
    import pandas as pd

    thresholds = (f"K > 10^{NO_INTERACTION_LOG10:g}: no interaction; K < 10^-{INTERACTION_LOG10:g}: interaction; "
                  "in between: inconclusive (K = p(D | additive) / p(D | shared), Bell et al. 2022 eq. 8)")
    if fit.space.d < 2:
        summary["interaction"] = {"note": "one dimension: nothing can interact", "thresholds": thresholds}
        out.text("interaction.json", json.dumps(summary["interaction"], indent=2))
        return
    tests = interaction_tests(fit, kernel=kernel, seed=seed)

    def row(dims: str, bf: Any) -> dict[str, Any]:
        return {"dims": dims, "K": bf.K, "log10_K": bf.log10_K, "verdict": bf.verdict(),
                "additive_log_likelihood": bf.additive_log_likelihood,
                "shared_log_likelihood": bf.shared_log_likelihood, "n": bf.n}

    rows = [row("all", tests.overall)] + [row(f"{a} x {b}", bf) for (a, b), bf in tests.pairs.items()]
    out.csv("bayes_factors.csv", pd.DataFrame(rows))
    summary["interaction"] = {"thresholds": thresholds, "tests": rows}
    out.text("interaction.json", json.dumps(finite(summary["interaction"]), indent=2, allow_nan=False))


def _markdown(records: SweepRecords, s: dict[str, Any]) -> str:
    t = s["trials"]
    lines = [f"# Multiverse analysis: {records.experiment} ({s['kernel']})", "",
             f"Sweep run `{s['parent_run_id']}`, strategy `{s['strategy']}`, metric `{s['metric']}`. "
             f"{t['kept']} of {t['run']} trials modelled ({t['failed']} failed, {t['filtered']} filtered"
             f"{' by `' + s['filter'] + '`' if s['filter'] else ''}; GP fitted on {t['fit']}).", ""]
    if s["constant_metric"]:
        lines += [f"**Caution: {s['constant_metric']}.**", ""]
    if s["bounds_hint"]:
        lines += [f"**Caution: {s['bounds_hint']}**", ""]
    effect = s["effect"]
    for caution in (effect["caution"], s["chains"] and s["chains"]["caution"]):
        lines += [f"**Caution: {caution}.**", ""] if caution else []
    lines += ["## Interaction tests (Bayes factors)", ""]
    inter = s["interaction"]
    lines += ["| dims | log10 K | verdict |", "|---|---|---|",
              f"| any effect (the GP against a constant) | {effect['log10_K']:.2f} | {effect['verdict']} |"] + [
        f"| {r['dims']} | {r['log10_K']:.2f} | {r['verdict']} |" for r in inter.get("tests", [])]
    lines += ["", f"Thresholds: {inter['thresholds']}. The first row asks whether the metric depends on any choice "
              "at all; its p-value comes from refitting the GP to the scores shuffled over the points."]
    caution = "Not findings: no effect of any choice is shown (see the caution above)."
    not_findings = [caution] if effect["caution"] else []
    lines += ["", *not_findings, "", "## Sensitivity (Sobol indices of the posterior mean)", "", *not_findings]
    lines += [""] if not_findings else []
    lines += ["Not estimated: the metric is constant over this sweep."] if s["constant_metric"] else [
        "| dim | main | total | note |", "|---|---|---|---|"] + [
        f"| {r['name']} | {r['main']:.3f} ± {r['main_sd']:.3f} | {r['total']:.3f} ± {r['total_sd']:.3f} | "
        + (f"raw main {r['main_raw']:.4f}, total {r['total_raw']:.4f}: {r['flag']}" if r["flag"] else "") + " |"
        for r in s["sensitivity"]]
    for name, c in s["coregionalization"].items():
        lines += ["", f"## Coregionalization of {name}", "", "correlation between categories:", ""]
        lines += ["| | " + " | ".join(c["labels"]) + " |", "|---" * (len(c["labels"]) + 1) + "|"]
        lines += [f"| {a} | " + " | ".join(f"{v:.2f}" for v in r) + " |"
                  for a, r in zip(c["labels"], c["correlation"], strict=True)]
    cal = s["calibration"]
    lines += ["", "## Maps", "",
              f"Mean and sd of the `{s['metric']}` a new trial at each point would return"
              + (f", modelled inside its bounds {MetricBounds(*s['metric_bounds']).text()}" if s["metric_bounds"]
                 else "") + ".", "",
              cal["sentence"], "", "| predictive check | verdict | inside 95 % | inside 68 % | RMSE | largest residual "
              "| measurements |", "|---|---|---|---|---|---|---|"] + [
        f"| {kind} | {c['verdict']} | {c['coverage95']:.0%} | {c['coverage68']:.0%} | {c['rmse']:.4g} | "
        f"{c['max_abs_residual']:.2f} | {c['n']} |" for kind, c in cal["checks"].items()] + [
        "", f"Overall: **{cal['verdict']}** (the worst of the checks with enough trials). {_rule(cal)}", ""]
    lines += [f"![{p}]({p})" for p in figure_names(s)]
    return "\n".join(lines) + "\n"


def _rule(cal: dict[str, Any]) -> str:
    """When a check fails, in words (:class:`sweeper.search.loo.PredictiveCheck`)."""
    loo = cal["checks"]["leave-one-out"]
    rule = (f"A check fails when fewer than {loo['threshold_coverage95']:.0%} of its results fall inside their "
            f"95 % intervals")
    if loo["max_surprise"] >= 1.0:
        return rule + " (a single maximum-likelihood fit: no allowance for chance)."
    return rule + f", and so few that a calibrated GP would do that with probability under {loo['max_surprise']:.0%}."


def log_multiverse(report: MultiverseReport, tracker: MLflowTracker, run_id: str | None = None) -> list[str]:
    """Log every file under the report's ``artifact_dir`` (``multiverse/<kernel>/``, or
    ``multiverse/<kernel>-filtered-<hash>/`` for a filtered one) on the sweep's parent run, replacing
    that folder, and the GP's predictive checks as ``multiverse_<kernel>_*`` metrics
    (``multiverse_<kernel>_filtered_<hash>_*`` for a filtered one, which must not overwrite the
    unfiltered maps' numbers), with the effect test's ``..._effect_p`` and ``..._effect_log10_K`` and the chains'
    ``..._chains_rhat``; return the artifact paths."""
    run_id = run_id or report.summary["parent_run_id"]
    prefix = report.artifact_dir.replace("/", "_").replace("-filtered-", "_filtered_")
    if report.calibration is not None:
        tracker.log(run_id, metrics=report.calibration.metrics(f"{prefix}_"))
    effect = report.summary["effect"]
    if effect["p_value"] is not None:  # None: a constant metric, nothing tested
        tracker.log(run_id, metrics={f"{prefix}_effect_p": effect["p_value"],
                                     f"{prefix}_effect_log10_K": effect["log10_K"]})
    if report.summary["chains"] and math.isfinite(report.summary["chains"]["rhat"]):  # None: one fit, one draw
        tracker.log(run_id, metrics={f"{prefix}_chains_rhat": report.summary["chains"]["rhat"]})
    return log_files(report.files, tracker, run_id, report.artifact_dir)
