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

Artifacts go under ``multiverse/<kernel>/`` on the sweep's parent run, so analyses with
different kernels (``--kernel``) sit side by side for the robustness check of the paper's
Fig. S6-S10.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from threadpoolctl import threadpool_limits

from sweeper.analysis.calibration import replicate_columns, searcher_predictions
from sweeper.analysis.map_view import MapTrials, draw_map, map_view
from sweeper.analysis.multiverse import MultiverseFit, fit_multiverse, interaction_tests, posterior_sensitivity
from sweeper.analysis.multiverse_plots import plot_correlation_heatmap, plot_sensitivity
from sweeper.report.build import (
    SWEEP_BOUNDS,
    ReportError,
    _finite,
    log_files,
    no_trial_finished,
    resolve_bounds,
    trial_points,
    unbounded_score_hint,
)
from sweeper.report.document import OutputDir
from sweeper.report.filtering import TrialFilter, parse_filter, select_trials
from sweeper.report.outputs import multiverse_artifact_dir
from sweeper.search.calibration import Calibration, calibration
from sweeper.search.gp_fit import fit_subset
from sweeper.search.interaction import CONCLUSIVE_LOG10, constant_metric_note
from sweeper.search.kernels import KERNELS, category_labels
from sweeper.search.loo import first_of_copies, replicate_groups
from sweeper.search.warping import MetricBounds

if TYPE_CHECKING:
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


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def _excluded_points(space: Any, points: list[dict[str, Any]]) -> np.ndarray:
    """Failed and filtered trials in the unit cube; one whose point cannot be read is not drawn."""
    rows = []
    for point in points:
        try:
            rows.append(space.to_unit([point])[0])
        except (KeyError, ValueError, TypeError):
            continue
    return np.array(rows).reshape(-1, space.d)


# One BLAS thread for the GP work, as in the searcher (sweeper.search.gp_batch.single_threaded_blas): threaded
# OpenBLAS on a busy machine slows small factorisations 5-20x (surrogate fit of a 10,000-trial
# report at load 8 on 2 cores: 74 s threaded, 3-5 s on one thread).
@threadpool_limits.wrap(limits=1, user_api="blas")
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
    import pandas as pd

    started = time.perf_counter()
    metric = metric or records.metric
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
    fit_rows = np.arange(len(y_in))
    if len(fit_rows) > max_fit_points:
        fit_rows = fit_subset(len(y_in), max_fit_points, [seed, 3], category_labels(U_in, space.categories()))
    fit = fit_multiverse(space, U_in[fit_rows], y_in[fit_rows], kernel=kernel, seed=seed, bounds=bounds)
    checks = calibration(fit.gp, replicate_columns(space), searcher_predictions(kept, metric))
    loo = checks.checks[0]
    out = OutputDir(out_dir)
    summary: dict[str, Any] = {
        "experiment": records.experiment, "parent_run_id": records.parent_run_id, "strategy": records.strategy,
        "metric": metric, "kernel": kernel, "filter": rule.text if rule else None, "others": others,
        "metric_bounds": None if bounds is None else bounds.as_list(),
        "trials": {"run": len(trials), "kept": len(kept), "failed": int(len(records.failed())),
                   "filtered": int(sel.filtered.sum()), "fit": int(fit_rows.size)},
        "hyperparameters": fit.gp.hyperparameters(), "log_likelihood": fit.gp.log_likelihood,
        "loo": {**loo.summary(), "sentence": loo.sentence("these maps")},
        "calibration": checks.summary("these maps"), "maps": [],
        "bounds_hint": unbounded_score_hint(trials[sel.finished], metric, bounds),
        "constant_metric": constant_metric_note(y_in)}
    once = first_of_copies(replicate_groups(fit.X, fit.y, replicate_columns(space))[0])  # the rows LOO scored
    out.csv("loo.csv", pd.DataFrame({"trial": kept["index"].to_numpy()[fit_rows][once],
                                     metric: fit.y[once], "loo_mean": loo.mean, "pit": loo.pit,
                                     "residual": loo.residuals}))
    _maps(out, fit, MapTrials(U_in, y_in, U_out), metric, others, resolution, seed, summary)
    _interactions(out, fit, kernel, seed, summary)
    summary["sensitivity"] = []
    if summary["constant_metric"] is None:  # else nothing depends on any choice: no index to estimate
        indices = posterior_sensitivity(fit, n_base=n_base, repeats=repeats, seed=seed)
        out.csv("sensitivity.csv", pd.DataFrame(indices.to_rows()))
        out.figure("sensitivity.png", plot_sensitivity(indices.names, indices.main, indices.total, indices.main_sd,
                                                       indices.total_sd, quantity=metric))
        summary["sensitivity"] = indices.to_rows()
    summary["coregionalization"] = {}
    for factor in fit.gp.factors:
        dim = space.dims[factor.column]
        corr = factor.correlation()
        labels = list(dim.choice_strings)  # type: ignore[union-attr]
        out.csv(f"coregionalization_{_slug(dim.name)}.csv", pd.DataFrame(corr, index=labels, columns=labels)
                .reset_index(names=dim.name))
        out.figure(f"coregionalization_{_slug(dim.name)}.png", plot_correlation_heatmap(corr, labels, name=dim.name))
        summary["coregionalization"][dim.name] = {"labels": labels, "correlation": corr.tolist(),
                                                  "B": factor.B.tolist()}
    summary["build_s"] = time.perf_counter() - started
    out.text("summary.json", json.dumps(_finite(summary), indent=2, default=str, allow_nan=False))
    out.text("multiverse.md", _markdown(records, summary))
    summary["files"] = [p.name for p in out.files]
    out.commit()
    return MultiverseReport(out.path, tuple(out.files), kernel, fit, summary, checks,
                            multiverse_artifact_dir(kernel, rule))


def _maps(out: OutputDir, fit: MultiverseFit, trials: MapTrials, metric: str, others: str, resolution: int,
          seed: int, summary: dict[str, Any]) -> None:
    """Every pair of continuous dims (or the one, or the categories): figures, the grids as CSV, the summary."""
    import pandas as pd

    cont = fit.continuous
    pairs = [(i, j) for a, i in enumerate(cont) for j in cont[a + 1:]] if len(cont) >= 2 else [tuple(cont)]
    note = ("others at their centre" if others == "centre" else "others averaged over their range") \
        if len(cont) > 2 else ""
    for columns in pairs:
        view = map_view(fit, columns, others=others, resolution=resolution, seed=seed)
        figures = draw_map(view, fit.space, trials, metric, note=note)
        if view.contour is not None:
            cm = view.contour
            stem = f"{_slug(cm.x_dim)}_{_slug(cm.y_dim)}"
            for what, figure in figures.items():
                out.figure(f"map_{what}_{stem}.png", figure)
            gx, gy = np.meshgrid(cm.x_values, cm.y_values)
            out.csv(f"map_{stem}.csv", pd.concat([pd.DataFrame({
                "facet": label, cm.x_dim: gx.ravel(), cm.y_dim: gy.ravel(), "mean": cm.mean[label].ravel(),
                "sd": cm.sd[label].ravel(), "low": view.low[label].ravel(), "high": view.high[label].ravel(),
                "sd_latent": cm.sd_latent[label].ravel()})  # type: ignore[index]
                for label in cm.mean]))
            summary["maps"].append({"x": cm.x_dim, "y": cm.y_dim, "x_log": cm.x_log, "y_log": cm.y_log,
                                    "facets": list(cm.mean)})
        elif view.line is not None:
            x, x_log, mean, sd = view.line
            name = fit.space.names[columns[0]]
            out.figure(f"map_{_slug(name)}.png", figures["map"])
            out.csv(f"map_{_slug(name)}.csv", pd.concat([pd.DataFrame({
                "facet": k, name: x, "mean": mean[k], "sd": sd[k], "low": view.low[k], "high": view.high[k]})
                for k in mean]))
            summary["maps"].append({"x": name, "x_log": x_log, "facets": list(mean)})
        else:
            labels, mean, sd = view.categories  # type: ignore[misc]
            out.figure("categories.png", figures["map"])
            out.csv("categories.csv", pd.DataFrame({"facet": labels, "mean": mean, "sd": sd, "low": view.low,
                                                    "high": view.high}))
            summary["maps"].append({"facets": labels})


def _interactions(out: OutputDir, fit: MultiverseFit, kernel: str, seed: int, summary: dict[str, Any]) -> None:
    import pandas as pd

    thresholds = (f"K > 10^{CONCLUSIVE_LOG10:g}: no interaction; K < 10^-{CONCLUSIVE_LOG10:g}: interaction; "
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
    out.text("interaction.json", json.dumps(_finite(summary["interaction"]), indent=2, allow_nan=False))


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
    lines += ["## Interaction tests (Bayes factors)", ""]
    inter = s["interaction"]
    lines += ["| dims | log10 K | verdict |", "|---|---|---|"] + [
        f"| {r['dims']} | {r['log10_K']:.2f} | {r['verdict']} |" for r in inter.get("tests", [])]
    lines += ["", f"Thresholds: {inter['thresholds']}.", "", "## Sensitivity (Sobol indices of the posterior mean)",
              ""]
    lines += ["Not estimated: the metric is constant over this sweep."] if s["constant_metric"] else [
        "| dim | main | total | note |", "|---|---|---|---|"] + [
        f"| {r['name']} | {r['main']:.3f} ± {r['main_sd']:.3f} | {r['total']:.3f} ± {r['total_sd']:.3f} | "
        + (f"raw main {r['main_raw']:.4f}, total {r['total_raw']:.4f}: {r['flag']}" if r["flag"] else "") + " |"
        for r in s["sensitivity"]]
    for name, c in s["coregionalization"].items():
        lines += ["", f"## Coregionalization of {name}", "", "correlation between categories:", ""]
        lines += ["| | " + " | ".join(c["labels"]) + " |", "|---" * (len(c["labels"]) + 1) + "|"]
        lines += [f"| {a} | " + " | ".join(f"{v:.2f}" for v in r) + " |" for a, r in zip(c["labels"], c["correlation"])]
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
    lines += [f"![{p}]({p})" for p in _figures(s)]
    return "\n".join(lines) + "\n"


def _rule(cal: dict[str, Any]) -> str:
    """When a check fails, in words (:class:`sweeper.search.loo.PredictiveCheck`)."""
    loo = cal["checks"]["leave-one-out"]
    rule = (f"A check fails when fewer than {loo['threshold_coverage95']:.0%} of its results fall inside their "
            f"95 % intervals")
    if loo["max_surprise"] >= 1.0:
        return rule + " (a single maximum-likelihood fit: no allowance for chance)."
    return rule + f", and so few that a calibrated GP would do that with probability under {loo['max_surprise']:.0%}."


def _figures(s: dict[str, Any]) -> list[str]:
    names = []
    for m in s["maps"]:
        if "y" in m:
            stem = f"{_slug(m['x'])}_{_slug(m['y'])}"
            names += [f"map_mean_{stem}.png", f"map_sd_{stem}.png"]
        elif "x" in m:
            names.append(f"map_{_slug(m['x'])}.png")
        else:
            names.append("categories.png")
    return names


def log_multiverse(report: MultiverseReport, tracker: MLflowTracker, run_id: str | None = None) -> list[str]:
    """Log every file under the report's ``artifact_dir`` (``multiverse/<kernel>/``, or
    ``multiverse/<kernel>-filtered-<hash>/`` for a filtered one) on the sweep's parent run, replacing
    that folder, and the GP's predictive checks as ``multiverse_<kernel>_*`` metrics
    (``multiverse_<kernel>_filtered_<hash>_*`` for a filtered one, which must not overwrite the
    unfiltered maps' numbers); return the artifact paths."""
    run_id = run_id or report.summary["parent_run_id"]
    if report.calibration is not None:
        prefix = report.artifact_dir.replace("/", "_").replace("-filtered-", "_filtered_")
        tracker.log(run_id, metrics=report.calibration.metrics(f"{prefix}_"))
    return log_files(report.files, tracker, run_id, report.artifact_dir)
