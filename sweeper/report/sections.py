"""The report's sections: each computes its numbers, writes its CSVs and figures, returns its blocks.

Every number shown in a section is also written to a CSV (full precision) by that section,
so tests and readers can check the report against the API.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sweeper.analysis.environment_effects import ConditionComparison
from sweeper.analysis.expected_max import ExpectedMax, expected_max
from sweeper.analysis.qra import QRA
from sweeper.report.checklist import ChecklistItem
from sweeper.report.document import Block, Bullets, Figure, Heading, OutputDir, Paragraph, cell, table
from sweeper.report.filtering import TrialFilter
from sweeper.report.groups import PairedConditions, QRAGroup
from sweeper.report.surrogate import SurrogateCurve
from sweeper.search.gp import describe_hyperparameters

if TYPE_CHECKING:
    import pandas as pd

MAX_GROUP_TABLES = 20  # QRA groups shown in full; every group is in the CSVs
ERROR_CHARS = 200


def budget_grid(n_max: int) -> list[int]:
    """Budgets 1, 2, 5, 10, 20, 50, ... up to and including ``n_max``.

    Example:
        >>> budget_grid(30)
        [1, 2, 5, 10, 20, 30]
    """
    grid, scale = [], 1
    while scale <= n_max:
        grid += [m * scale for m in (1, 2, 5) if m * scale <= n_max]
        scale *= 10
    return grid if grid and grid[-1] == n_max else [*grid, n_max]


@dataclass(frozen=True)
class Target:
    """A score to reach, named for the reader."""

    name: str
    value: float


def targets(values: np.ndarray, maximize: bool) -> list[Target]:
    """The best observed score less 1 % (more for losses) and the median of the kept trials."""
    best = float(values.max() if maximize else values.min())
    off = 0.01 * abs(best)
    return [Target("best observed − 1 %" if maximize else "best observed + 1 %",
                   best - off if maximize else best + off),
            Target("median", float(np.median(values)))]


def _reach(mean: np.ndarray, target: float, maximize: bool) -> int | None:
    hit = mean >= target if maximize else mean <= target
    return int(np.argmax(hit)) + 1 if hit.any() else None


def expected_max_section(out: OutputDir, curves: Mapping[str, ExpectedMax], surrogate: SurrogateCurve | None,
                         overall: np.ndarray, *, metric: str, maximize: bool, group_by: str | None) -> list[Block]:
    """Curves of each group, their table at 1, 2, 5, 10, ... trials and the budgets to reach targets."""
    import pandas as pd

    from sweeper.analysis.plotting import plot_expected_max

    blocks: list[Block] = [Heading("Expected best score vs budget (Dodge et al. 2019)")]
    if not curves:
        return [*blocks, Paragraph("No finished trial with a finite value: no curve to draw.")]
    rows = [{"group": g, "n": int(n), "mean": float(m), "std": float(s),
             "budget_s": float(n * c.mean_duration_s) if c.mean_duration_s is not None else math.nan}
            for g, c in curves.items() for n, m, s in zip(c.n, c.mean, c.std, strict=True)]
    out.csv("expected_max.csv", pd.DataFrame(rows))
    n_top = max(c.n_trials for c in curves.values())
    log_x = n_top >= 50
    label = f" per value of `{group_by}`" if group_by else ""
    fig = plot_expected_max(curves, log_x=log_x, title=f"Expected best {metric} of n random trials")
    out.figure("expected_max_trials.png", fig)
    blocks += [Paragraph(f"Expected best `{metric}` of n trials drawn from this sweep's finished trials{label} "
                         f"(with replacement, the paper's eq. 8), ±1 sd shaded and clipped to the observed range."),
               Figure("expected_max_trials.png", f"Expected best {metric} vs number of trials")]
    if all(c.mean_duration_s is not None for c in curves.values()):
        out.figure("expected_max_seconds.png", plot_expected_max(curves, unit="seconds", log_x=log_x,
                                                                 title=f"Expected best {metric} vs time"))
        blocks.append(Figure("expected_max_seconds.png",
                             f"Expected best {metric} vs budget in seconds (n × mean trial duration)"))
    names = list(curves)
    header = ["n", *(f"{g}: mean ± sd" for g in names)]
    if surrogate is not None:
        header.append("GP surrogate: mean [band]")
    body = []
    for n in budget_grid(n_top):
        row: list[Any] = [n]
        for g in names:
            c = curves[g]
            row.append(f"{c.mean[n - 1]:.6g} ± {c.std[n - 1]:.3g}" if n <= c.n_trials else None)
        if surrogate is not None:
            s = surrogate.curve
            row.append(f"{s.mean[n - 1]:.6g} [{s.low[n - 1]:.6g}, {s.high[n - 1]:.6g}]" if n <= s.n.size else None)
        body.append(row)
    blocks.append(table(header, body))
    reach_rows = []
    for t in targets(overall, maximize):
        for g, c in curves.items():
            trials = c.budget_to_reach(t.value)
            seconds = c.budget_to_reach(t.value, unit="seconds") if c.mean_duration_s is not None else None
            reach_rows.append({"group": g, "target": t.name, "target_value": t.value, "trials": trials,
                               "seconds": seconds})
        if surrogate is not None:
            reach_rows.append({"group": "GP surrogate", "target": t.name, "target_value": t.value,
                               "trials": _reach(np.asarray(surrogate.curve.mean), t.value, maximize), "seconds": None})
    out.csv("budget_to_reach.csv", pd.DataFrame(reach_rows))
    blocks += [Paragraph("Budget to reach a target: the smallest n whose expected best score reaches it "
                         "(— : not within the observed number of trials)."),
               table(["curve", "target", "value", "trials", "seconds"],
                     [[r["group"], r["target"], r["target_value"], r["trials"], r["seconds"]] for r in reach_rows])]
    return blocks


def surrogate_section(out: OutputDir, surrogate: SurrogateCurve | None, skipped: str | None,
                      empirical: ExpectedMax | None, *, metric: str, strategy: str) -> list[Block]:
    """The GP surrogate's expected-max curve beside the empirical one, or why there is none."""
    import pandas as pd

    from sweeper.analysis.plotting import plot_expected_max

    blocks: list[Block] = [Heading("Surrogate-based curve: random search under the sweep's GP")]
    if surrogate is None:
        return [*blocks, Paragraph(f"Not computed: {skipped}.")]
    s = surrogate.curve
    out.csv("surrogate_expected_max.csv", pd.DataFrame({"n": s.n, "mean": s.mean, "low": s.low, "high": s.high,
                                                        "within_std": s.within_std}))
    curves: dict[str, Any] = {"GP surrogate (random search)": s}
    if empirical is not None:
        curves = {f"empirical ({strategy} trials)": empirical, **curves}
    out.figure("surrogate_expected_max.png", plot_expected_max(curves, log_x=s.n.size >= 50,
                                                               title=f"Expected best {metric}: empirical vs GP"))
    subset = (f" (a seeded random subset of {surrogate.n_fit} of the {surrogate.n_finished} finished trials)"
              if surrogate.n_fit < surrogate.n_finished else f" ({surrogate.n_fit} finished trials)")
    hp = surrogate.hyperparameters
    draws = hp.get("posterior", {}).get("draws", 1)
    scale = ("" if surrogate.bounds is None else
             f" It modelled `{metric}` inside its declared bounds {surrogate.bounds.text()}, warped onto the real "
             f"line (a learned Kumaraswamy-logit warp), so the curve and its band stay inside them.")
    blocks += [
        Paragraph(
            f"A GP (Matern-5/2, coregionalized over categorical dims) was fitted to the sweep's trials{subset}, "
            f"averaged over {draws} posterior draws of its hyperparameters.{scale} {surrogate.n_samples} joint "
            f"posterior samples of `{metric}` were drawn at i.i.d. uniform points of the space "
            f"({surrogate.n_point_sets} independent sets of {surrogate.n_points} points, seed {surrogate.seed}), and "
            f"each sample's expected-max curve computed. The line is their mean; the band holds {100 * s.level:g} % "
            f"of them: the GP's uncertainty (its hyperparameters' included) plus the Monte Carlo error of "
            f"{surrogate.n_points} points. It estimates the true curve of random search; it does not include the "
            f"sampling error of a finite sweep's own empirical curve."),
    ]
    if surrogate.calibration is not None:
        blocks.append(Paragraph(surrogate.calibration.sentence("this curve")))
    blocks += [
        Paragraph(f"GP hyperparameters (standardised scale): {describe_hyperparameters(hp)}."),
        Figure("surrogate_expected_max.png", "Empirical expected-max curve vs the GP surrogate's, with its band"),
    ]
    return blocks


def _without_restatements(frame: pd.DataFrame) -> tuple[list[str], list[tuple[Any, ...]]]:
    """A group's table for the page: a condition that repeats an earlier column value for value (the
    threads a library reports, restating ``env.threads``) is left out; ``conditions.csv`` keeps them all."""
    shown: list[str] = []
    for column in frame.columns:
        if not any(frame[column].astype(str).equals(frame[other].astype(str)) for other in shown):
            shown.append(column)
    return shown, list(frame[shown].itertuples(index=False, name=None))


def _scale_min(groups: Sequence[QRAGroup]) -> float:
    """The scale minimum the groups' QRA subtracted (0 when none was computed)."""
    return next((r.scale_min for g in groups for r in g.results.values() if isinstance(r, QRA)), 0.0)


def qra_section(out: OutputDir, groups: Sequence[QRAGroup], measurands: Sequence[str]) -> list[Block]:
    """Belz's conditions-of-measurement table and the QRA line of each group of repeated measurements."""
    import pandas as pd

    blocks: list[Block] = [Heading("Reproducibility: QRA of repeated measurements (Belz et al. 2022)")]
    blocks.append(Paragraph(
        "Trials measured the same **object** when every param that is not an environment condition (`env.*`, "
        "`seed`) is equal; each metric is a **measurand**. CV* is the small-sample corrected coefficient of "
        f"variation, in percent (scale minimum {_scale_min(groups):g}, set by --scale-min); std is unbiased (c4), "
        "with its 95 % confidence interval. n counts "
        "distinct measurements: results bit-identical under the same seed are one measurement repeated and count "
        "once; a measurand equal in every measurement is `constant` and gets no CV* (no spread is not precision)."))
    qra_rows, condition_rows = [], []
    for g in groups:
        obj = ", ".join(f"{k}={v}" for k, v in g.object.items()) or "every trial (no other param varies)"
        qra_rows += [{"group": g.number, "object": obj, "measurand": m, **_qra_row(r, g.table[m])}
                     for m, r in g.results.items()]
        condition_rows.append(g.table.assign(group=g.number))
    columns = ["group", "object", "measurand", "n", "n_trials", "mean", "std", "ci_low", "ci_high", "cv", "cv_star",
               "status", "note", "error"]
    out.csv("qra.csv", pd.DataFrame(qra_rows, columns=columns))
    conditions = pd.concat(condition_rows, ignore_index=True) if condition_rows else pd.DataFrame(columns=["group"])
    out.csv("conditions.csv", conditions[["group", *[c for c in conditions.columns if c != "group"]]])
    if not groups:
        return [*blocks, Paragraph(
            "No two finished trials measured the same object: every trial differs in some param that is not an "
            "environment condition, so there is nothing to assess. To make a group, sweep only environment "
            "conditions with the hyperparameters fixed, e.g. `hydra.sweeper.params={} x=0.3 "
            "'env.seed=range(0,5)'` (or `+seed=range(0,5)` if the config has no seed key).")]
    fixed = [m for m in measurands if any(g.results.get(m) is not None for g in groups)
             and all(isinstance(r, QRA) and r.status == "fixed" for g in groups if (r := g.results.get(m)) is not None)]
    if fixed:
        blocks.append(Paragraph(", ".join(f"`{m}`" for m in fixed) + " take(s) one value in every trial of the sweep: "
                                "constants of the configuration, not measurements, so no CV* is shown for them."))
    for g in groups[:MAX_GROUP_TABLES]:
        blocks += _group_blocks(g, [m for m in measurands if m not in fixed])
    if len(groups) > MAX_GROUP_TABLES:
        blocks.append(Paragraph(f"{len(groups) - MAX_GROUP_TABLES} more groups are in `qra.csv` and "
                                f"`conditions.csv`."))
    return blocks


def _group_blocks(g: QRAGroup, measurands: Sequence[str]) -> list[Block]:
    """One group's heading, its conditions of measurement, and the QRA of each of its ``measurands``."""
    obj = ", ".join(f"`{k}={v}`" for k, v in g.object.items()) or "every trial"
    blocks: list[Block] = [
        Heading(f"Group {g.number}: {obj} ({g.n} measurements)", 3),
        Paragraph("Conditions of measurement that vary within the group: "
                  + (", ".join(f"`{c.split('.', 1)[1]}`" for c in g.conditions) or
                     "**none recorded**: the spread comes from something the records do not show.")),
        table(*_without_restatements(g.table))]
    lines: list[list[Any]] = []
    notes: list[str] = []
    for m in measurands:
        r = g.results.get(m)
        if r is None:
            continue
        if isinstance(r, QRA) and r.defined:
            lines.append([m, r.n, r.mean, r.std, f"[{r.std_ci[0]:.4g}, {r.std_ci[1]:.4g}]", r.cv_star])
        elif isinstance(r, QRA):
            lines.append([m, r.n, r.mean, r.std, "—", r.status])
        else:
            lines.append([m, "—", "—", "—", "—", f"undefined: {r}"])
        if isinstance(r, QRA) and r.note:
            notes.append(f"`{m}`: {r.note}.")
    blocks.append(table(["measurand", "n (distinct)", "mean", "std", "95 % CI of std", "CV*"], lines))
    return [*blocks, Bullets(tuple(notes))] if notes else blocks


def _qra_row(r: QRA | str, values: pd.Series) -> dict[str, Any]:
    """One row of ``qra.csv``: the QRA's numbers, status and note, or the error that prevented it."""
    if isinstance(r, QRA):
        return {"n": r.n, "n_trials": r.n if r.n_total is None else r.n_total, "mean": r.mean, "std": r.std,
                "ci_low": r.std_ci[0], "ci_high": r.std_ci[1], "cv": r.cv, "cv_star": r.cv_star,
                "status": r.status, "note": r.note, "error": ""}
    n = int(np.isfinite(values).sum())
    return {"n": n, "n_trials": n, "mean": math.nan, "std": math.nan, "ci_low": math.nan, "ci_high": math.nan,
            "cv": math.nan, "cv_star": math.nan, "status": "error", "note": r, "error": r}


def environment_section(out: OutputDir, comparisons: Sequence[PairedConditions], notes: Sequence[str],
                        *, metric: str) -> list[Block]:
    """Crane's paired tests and per-condition spread for each two-valued environment param."""
    import pandas as pd

    from sweeper.analysis.plotting import plot_condition_distributions

    blocks: list[Block] = [Heading("Environment conditions (Crane 2018)")]
    stats, summaries = [], []
    for p in comparisons:
        c = p.comparison
        stats.append({"condition": p.condition, "a": c.names[0], "b": c.names[1], "measurand": p.measurand,
                      "n_pairs": c.n, "n_pairs_total": c.n if c.n_total is None else c.n_total,
                      "n_nonzero": c.n_nonzero, "mean_difference": c.mean_difference,
                      "wilcoxon_statistic": c.wilcoxon_statistic, "wilcoxon_p": c.wilcoxon_p,
                      "zero_method": c.zero_method, "t_statistic": c.t_statistic, "t_p": c.t_p,
                      "kendall_tau": c.kendall_tau, "kendall_p": c.kendall_p, "spearman_rho": c.spearman_rho,
                      "spearman_p": c.spearman_p, "notes": "; ".join(c.notes)})
        summaries += [{"condition": p.condition, "value": s.name, "n": s.n, "mean": s.mean, "sd": s.sd,
                       "min": s.min, "max": s.max, "range": s.range} for s in p.summaries.values()]
    out.csv("environment.csv", pd.DataFrame(stats))
    out.csv("environment_summary.csv", pd.DataFrame(summaries))
    if not comparisons:
        text = ("No environment param (`env.*`) takes exactly two values on trials that can be paired (same seed, "
                "same other params), so there is no paired comparison. Sweep e.g. `env.threads=1,2` together with "
                "`env.seed=range(0,5)` to get one.")
        return [*blocks, Paragraph(text), *([Bullets(tuple(notes))] if notes else [])]
    blocks.append(Paragraph(
        "Paired on every other param (seed included): Wilcoxon signed-rank (zeros dropped, `zero_method=wilcox`), "
        "paired t-test, and the rank agreement of the runs (Kendall's τ-b, Spearman's ρ). A pair whose scores repeat "
        "another's bit-identically under the same seed counts once; under 3 distinct pairs no p-value is given."))
    for p in comparisons:
        c = p.comparison
        name = p.condition.replace(".", "_").replace("/", "_")
        out.figure(f"environment_{name}.png", plot_condition_distributions(p.scores, ylabel=metric,
                                                                            title=f"{metric} by {p.condition}"))
        blocks += [
            Heading(f"`{p.condition}`: {c.names[0]} vs {c.names[1]} ({_pairs_text(c)})", 3),
            table(["statistic", "value", "p"], [
                ["mean difference (a − b)", c.mean_difference, None], ["pairs that differ", c.n_nonzero, None],
                ["Wilcoxon signed-rank", c.wilcoxon_statistic, c.wilcoxon_p], ["paired t", c.t_statistic, c.t_p],
                ["Kendall τ-b", c.kendall_tau, c.kendall_p], ["Spearman ρ", c.spearman_rho, c.spearman_p]]),
            table(["condition", "n", "mean", "sd", "min", "max", "range"],
                  [[s.name, s.n, s.mean, s.sd, s.min, s.max, s.range] for s in p.summaries.values()]),
            *([Bullets(c.notes)] if c.notes else []),
            Figure(f"environment_{name}.png", f"{metric} under each value of {p.condition}"),
        ]
    return [*blocks, *([Bullets(tuple(notes))] if notes else [])]


def _pairs_text(c: ConditionComparison) -> str:
    """``8 pairs``, or ``8 distinct pairs of 16`` when duplicated pairs were counted once."""
    total = c.n if c.n_total is None else c.n_total
    return f"{c.n} pairs" if total == c.n else f"{c.n} distinct pairs of {total}"


def failures_section(out: OutputDir, failed: pd.DataFrame, filtered: pd.DataFrame, *, rule: TrialFilter | None,
                     metric: str) -> list[Block]:
    """Failed trials with their errors, and the trials the filter excluded."""
    columns = ["index", "run_id", "status", "phase", "batch", "duration_s", "error"]
    out.csv("failures.csv", failed[columns])
    blocks: list[Block] = [Heading("Failures and filtered trials"),
                           Paragraph(f"{len(failed)} trial(s) failed (an exception, a non-finite or missing "
                                     f"`{metric}`, or a dead worker); they are left out of every statistic.")]
    if len(failed):
        blocks.append(table(["trial", "status", "phase", "error"], [
            [r.index, r.status, r.phase, _short(r.error)] for r in failed.itertuples()]))
    if rule is not None:
        cols = ["index", "run_id", *(f"metric.{m}" for m in dict.fromkeys([rule.metric, metric])
                                     if f"metric.{m}" in filtered)]
        out.csv("filtered.csv", filtered[cols])
        blocks.append(Paragraph(f"Filter `{rule.text}`: {len(filtered)} finished trial(s) do not satisfy it and are "
                                f"excluded from the statistics (kept in MLflow and marked `filtered` in "
                                f"`trials.csv`)."))
        if len(filtered):
            blocks.append(table(["trial", *cols[2:]], [list(r) for r in filtered[["index", *cols[2:]]]
                                                       .itertuples(index=False, name=None)]))
    return blocks


def checklist_section(items: Sequence[ChecklistItem]) -> list[Block]:
    """Dodge et al.'s checklist as a table, then what the records lack."""
    missing = [i.item for i in items if not i.recorded]
    return [Heading("Reporting checklist (Dodge et al. 2019)"),
            table(["item", "from the records"], [[i.item, i.value if i.recorded else "**not recorded**"]
                                                  for i in items]),
            Paragraph("**Not recorded** (say these in the paper yourself): " + (", ".join(missing) or "nothing") + ".")]


def _short(error: object) -> str:
    text = cell(error).splitlines()[0] if cell(error) else "—"
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


def curves_by_group(kept: pd.DataFrame, metric: str, maximize: bool, group_by: str | None) -> dict[str, ExpectedMax]:
    """One expected-max curve per value of ``param.<group_by>`` (or one for all kept trials)."""
    from sweeper.report.groups import natural_key, value_text

    if not len(kept):
        return {}
    if group_by is None:
        parts = {"all trials": kept}
    else:
        texts = kept[f"param.{group_by}"].map(value_text)
        parts = {f"{group_by}={v}": kept[(texts == v).to_numpy()]
                 for v in sorted(set(texts), key=lambda t: (natural_key(t), t))}
    curves = {}
    for label, part in parts.items():
        durations = part["duration_s"].to_numpy(dtype=np.float64)
        ok = np.all(np.isfinite(durations)) and np.all(durations >= 0)
        curves[label] = expected_max(part[f"metric.{metric}"].to_numpy(dtype=np.float64),
                                     durations_s=durations if ok else None, maximize=maximize)
    return curves
