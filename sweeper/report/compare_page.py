"""A comparison written to a folder: ``compare.md`` and ``compare.html``, the figure, and every number as CSV/JSON.

Files (the folder is replaced as a whole, :class:`~sweeper.report.document.OutputDir`):

- ``compare.csv``: ``sweep, n, mean, low, high``: each sweep's curve and 95 % band per budget;
- ``ahead.csv``: per budget, the leader, its ``P(best)``, the verdict and every sweep's ``P(best)``;
- ``budget_to_reach.csv``: per sweep and target, the budget whose expected best reaches it;
- ``compare.png``: the curves with their bands;
- ``summary.json``: the request, the sweeps, who is ahead where, the order changes;
- ``compare.md``, ``compare.html``: the summary for a reader.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sweeper.report.compare import AHEAD, PROBABLY, Comparison, segments
from sweeper.report.compare_curves import LEVEL, SweepCurve
from sweeper.report.document import (
    Block,
    Bullets,
    Figure,
    Heading,
    OutputDir,
    Paragraph,
    render_html,
    render_markdown,
    table,
)
from sweeper.report.sections import budget_grid, targets
from sweeper.report.summary import finite

#: The comparison's MLflow artifact folder, in the comparison's own run.
COMPARE_ARTIFACT_DIR = "compare"


@dataclass(frozen=True)
class ComparisonFiles:
    """A written comparison: its folder and files, and the numbers behind them.

    Attributes:
        out_dir: The folder.
        files: Every file written, in order.
        comparison: What was compared and found.
        summary: The content of ``summary.json``.
        artifact_dir: Its MLflow artifact folder in the comparison's run.
    """

    out_dir: Path
    files: tuple[Path, ...]
    comparison: Comparison
    summary: dict[str, Any]
    artifact_dir: str = COMPARE_ARTIFACT_DIR

    @property
    def markdown(self) -> Path:
        return self.out_dir / "compare.md"


def write_comparison(comparison: Comparison, out_dir: Path) -> ComparisonFiles:
    """Write the comparison's files to ``out_dir``, replacing an earlier comparison or report there.

    Raises:
        OutputDirError: ``out_dir`` is a file, or a folder holding something else.
    """
    import pandas as pd

    from sweeper.report.compare_plot import plot_comparison

    out = OutputDir(out_dir)
    c = comparison
    out.csv("compare.csv", pd.DataFrame([{"sweep": k.label, "n": int(n), "mean": m, "low": lo, "high": hi}
                                         for k in c.curves
                                         for n, m, lo, hi in zip(k.n, k.mean, k.low, k.high, strict=True)]))
    out.csv("ahead.csv", pd.DataFrame([{"n": s.n, "leader": s.leader, "p_best": s.p, "verdict": s.verdict,
                                        **{f"p_best[{lab}]": p for lab, p in s.p_best.items()}}
                                       for s in c.standings]))
    reach = reach_rows(c)
    out.csv("budget_to_reach.csv", pd.DataFrame(reach))
    out.figure("compare.png", plot_comparison(c))
    content = summary(c, reach)
    out.text("summary.json", json.dumps(finite(content), indent=2, default=str, allow_nan=False))
    blocks = page(c, reach)
    out.text("compare.md", render_markdown(blocks))
    out.text("compare.html", render_html(blocks, f"Comparison: {c.metric}", out.path))
    out.commit()
    return ComparisonFiles(out_dir=out.path, files=tuple(out.files), comparison=c, summary=content)


def reach_rows(c: Comparison) -> list[dict[str, Any]]:
    """Per sweep and target (the best score seen in any sweep less 1 %, the median of all): the smallest budget
    whose expected best reaches it, and the same for the band's better and worse edges."""
    maximize = c.mode == "max"
    pooled = np.concatenate([k.values for k in c.curves])
    rows = []
    for t in targets(pooled, maximize):
        for k in c.curves:
            better, worse = (k.high, k.low) if maximize else (k.low, k.high)
            trials = _reach(k, k.mean, t.value, maximize)
            rows.append({"sweep": k.label, "target": t.name, "target_value": t.value, "trials": trials,
                         "trials_if_better": _reach(k, better, t.value, maximize),
                         "trials_if_worse": _reach(k, worse, t.value, maximize),
                         "seconds": None if trials is None or k.mean_duration_s is None
                         else trials * k.mean_duration_s})
    return rows


def _reach(curve: SweepCurve, values: np.ndarray, target: float, maximize: bool) -> int | None:
    """The smallest budget of ``curve`` at which ``values`` reach ``target``; None if none does."""
    hit = values >= target if maximize else values <= target
    return int(curve.n[int(np.argmax(hit))]) if hit.any() else None


def summary(c: Comparison, reach: list[dict[str, Any]]) -> dict[str, Any]:
    """The content of ``summary.json``."""
    return {
        "metric": c.metric, "mode": c.mode, "bounds": None if c.bounds is None else c.bounds.as_list(),
        "draws": c.draws, "seed": c.seed, "level": LEVEL, "thresholds": {"ahead": AHEAD, "probably_ahead": PROBABLY},
        "sweeps": [{"label": k.label, "experiment": k.records.experiment, "run_id": k.records.parent_run_id,
                    "tracking_uri": k.records.tracking_uri, "strategy": k.records.strategy, "curve": k.kind,
                    "finished": k.n_trials, "trials": len(k.records.trials), "mean_duration_s": k.mean_duration_s,
                    "at_n_common": float(k.mean[np.searchsorted(k.n, c.n_common)]), "note": k.note}
                   for k in c.curves],
        "n_common": c.n_common,
        "segments": [{"leader": who or None, "verdict": what, "from_n": a, "to_n": b, "p_min": lo, "p_max": hi}
                     for who, what, a, b, lo, hi in segments(c.standings)],
        "order_changes": [vars(ch) for ch in c.changes],
        "budget_to_reach": reach, "cautions": c.cautions,
    }


def verdict_lines(c: Comparison) -> list[str]:
    """One line per run of budgets with the same verdict, then one per order change."""
    lines = []
    for who, what, a, b, lo, hi in segments(c.standings):
        span = f"n = {a}" if a == b else f"n = {a}–{b}"
        p = f"{lo:.2f}" if round(lo, 2) == round(hi, 2) else f"{lo:.2f}–{hi:.2f}"
        if what == "tied":
            lines.append(f"{span}: tied (every sweep's curve is the same constant)")
        elif who:
            lines.append(f"{span}: {who} {what} (P(best) = {p})")
        else:
            lines.append(f"{span}: too close to call (the likeliest leader's P(best) = {p})")
    for ch in c.changes:
        lines.append(f"the order changes at n ≈ {ch.n}: {ch.before} is ahead up to n = {ch.low}, {ch.after} from "
                     f"n = {ch.high}")
    return lines


def page(c: Comparison, reach: list[dict[str, Any]]) -> list[Block]:
    """The blocks of ``compare.md`` and ``compare.html``."""
    blocks: list[Block] = [
        Heading(f"Comparison: expected best {c.metric} ({c.mode}) of {len(c.curves)} sweeps", 1),
        Paragraph(f"Generated {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; budgets compared up to n = {c.n_common} "
                  f"(the smallest sweep's finished trials)."),
        table(["sweep", "experiment", "sweep run", "strategy", "finished / trials", "curve", "mean s per trial"],
              [[k.label, k.records.experiment, f"`{k.records.parent_run_id}`", k.records.strategy,
                f"{k.n_trials} / {len(k.records.trials)}", k.kind, k.mean_duration_s] for k in c.curves]),
        *[Paragraph(f"**Caution: {text}.**") for text in c.cautions],
        Heading("Who is ahead"), Bullets(tuple(verdict_lines(c))),
        Figure("compare.png", f"Expected best {c.metric} vs number of trials, with 95 % bands"),
    ]
    grid = sorted(set(budget_grid(c.n_common)) | {ch.n for ch in c.changes})
    by_n = {s.n: s for s in c.standings}
    rows = []
    for n in (n for n in grid if n in by_n):
        s = by_n[n]
        cells = [_at(k, n) for k in c.curves]
        rows.append([n, *cells, s.leader if s.verdict != "tied" else "—", f"{s.p:.3f}", s.verdict])
    blocks.append(table(["n", *(f"{k.label}: mean [95 % band]" for k in c.curves), "leader", "P(best)", "verdict"],
                        rows))
    blocks += [Heading("Budget to reach a target"),
               Paragraph("The smallest n whose expected best reaches the target, on the curve and on the better and "
                         "worse edges of its band (— : not within the sweep's finished trials)."),
               table(["sweep", "target", "value", "trials", "trials (band's better edge)", "trials (worse edge)",
                      "seconds"], [[r["sweep"], r["target"], r["target_value"], r["trials"], r["trials_if_better"],
                                    r["trials_if_worse"], r["seconds"]] for r in reach]),
               Heading("How to read this"), Paragraph(_READING.format(ahead=AHEAD, probably=PROBABLY))]
    return blocks


def _at(curve: SweepCurve, n: int) -> str:
    i = int(np.searchsorted(curve.n, n))
    return f"{curve.mean[i]:.6g} [{curve.low[i]:.6g}, {curve.high[i]:.6g}]"


_READING = (
    "Each curve is the expected best score of n trials drawn at random from that sweep's space: for a random "
    "sweep, estimated from its finished trials without replacement (unbiased for every n up to its number of "
    "trials); for a model-guided sweep, from its GP surrogate, as `sweeper report` draws it. The bands hold 95 % of "
    "the curve's uncertainty: a Bayesian bootstrap of the trials for an empirical curve, the GP's posterior for a "
    "surrogate curve. P(best) is the probability, under those uncertainties (the sweeps independent), that a "
    "sweep's expected best at that budget is the highest; with two sweeps, that it exceeds the other's. A leader "
    "is called ahead at P ≥ {ahead}, probably ahead at P ≥ {probably}, and the budget is too close to call below. "
    "No estimate from a sweep's trials can show a score better than any of them found: a sweep that missed a "
    "narrow optimum looks as if it had none, so read a call at budgets near a sweep's number of trials with that "
    "in mind."
)
