"""Compare two or more sweeps: which one's expected best score is ahead at each budget, and how sure.

Dodge et al. (2019) put the expected-max curves of several models, each from its own sweep, on
one axis and read off which wins at each budget. :func:`compare_sweeps` does that for sweeps
recorded in MLflow: each sweep's curve as ``sweeper report`` chooses it (empirical for a random
sweep, the GP surrogate's for any other; :mod:`sweeper.report.compare_curves`), and at each budget
the probability that each sweep's expected max is the highest.

The probability. The sweeps are independent, so draw ``d`` of every sweep's curve together is
a draw of all of them; ``P(best)`` of a sweep at budget ``n`` is the share of draws in which its
curve is the highest there (ties shared). With two sweeps it is the probability that A's
expected max exceeds B's. The leader at ``n`` is the sweep with the highest ``P(best)``; the
verdict says how sure:

* ``ahead``: ``P >= 0.95``;
* ``probably ahead``: ``0.8 <= P < 0.95``;
* ``too close to call``: ``P < 0.8``;
* ``tied``: every draw of every sweep is the same number (constant metrics).

The order changes where a sweep called ahead (``P >= 0.8``) is followed by another one called
ahead: the change lies between the last budget of the one and the first of the other, and is
placed at the first budget from which the new leader's curve stays the best of all (where the
drawn lines cross).

NOTE: docs/decisions/0040-compare-probability.md
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from sweeper.report.compare_curves import DRAWS, SweepCurve, budgets, empirical_curve, surrogate_draws
from sweeper.report.compare_request import CompareError, CompareUsageError, Request
from sweeper.report.request import SWEEP_BOUNDS

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.analysis.runs import SweepRecords
    from sweeper.search.warping import MetricBounds

__all__ = ["AHEAD", "PROBABLY", "CompareError", "CompareUsageError", "Comparison", "OrderChange", "Standing",
           "compare_sweeps", "default_labels", "order_changes", "rank", "segments", "verdict"]

#: ``P(best)`` at or above which a leader is ``ahead``; at or above :data:`PROBABLY`, ``probably ahead``.
AHEAD = 0.95
PROBABLY = 0.8


@dataclass(frozen=True)
class Standing:
    """Who is ahead at one budget.

    Attributes:
        n: The budget, in trials.
        p_best: Each sweep's probability of the highest expected max there, by label.
        leader: The sweep with the highest ``p_best`` (the first, when several share it).
        verdict: ``ahead``, ``probably ahead``, ``too close to call`` or ``tied``.
        best_curve: The sweep whose curve (the drawn line) is best there.
    """

    n: int
    p_best: dict[str, float]
    leader: str
    verdict: str
    best_curve: str

    @property
    def p(self) -> float:
        """The leader's ``P(best)``."""
        return self.p_best[self.leader]

    @property
    def called(self) -> bool:
        """Whether a leader is named with ``P >= PROBABLY``."""
        return self.verdict in ("ahead", "probably ahead")


@dataclass(frozen=True)
class OrderChange:
    """A change of the leader between two budgets where each was called ahead.

    Attributes:
        before: The leader up to ``low``.
        after: The leader from ``high`` on.
        n: The first budget from which ``after``'s curve stays above ``before``'s (below, for ``min``).
        low: The last budget ``before`` was called ahead.
        high: The first budget ``after`` was called ahead.
    """

    before: str
    after: str
    n: int
    low: int
    high: int


@dataclass(frozen=True)
class Comparison:
    """The sweeps' curves and, per budget up to the smallest sweep's size, who is ahead.

    Attributes:
        metric: The compared metric.
        mode: ``max`` or ``min``.
        bounds: The metric's bounds the surrogate curves respect, or None.
        curves: Each sweep's curve, in the order the sweeps were given.
        standings: One per budget ``1..n_common`` (log-spaced beyond :data:`~.compare_curves.MAX_BUDGETS`).
        changes: Where the order changes.
        cautions: What the reader must know first (a biased curve, a constant metric, an unfinished sweep).
        draws: Draws per sweep and budget.
        seed: Seed of the draws (and of the surrogate curves).
    """

    metric: str
    mode: str
    bounds: MetricBounds | None
    curves: list[SweepCurve]
    standings: list[Standing]
    changes: list[OrderChange]
    cautions: list[str]
    draws: int
    seed: int

    @property
    def n_common(self) -> int:
        """The largest budget every sweep's curve reaches: the smallest sweep's finished trials."""
        return min(c.n_trials for c in self.curves)


def compare_sweeps(sweeps: Sequence[SweepRecords], *, labels: Sequence[str] | None = None, metric: str | None = None,
                   mode: str | None = None, bounds: MetricBounds | str | None = SWEEP_BOUNDS,
                   surrogate: bool | None = None, draws: int = DRAWS, seed: int = 0) -> Comparison:
    """Compare the expected-max curves of two or more sweeps.

    Args:
        sweeps: The sweeps, from :func:`~sweeper.analysis.runs.load_sweep`; two or more, each once.
        labels: How to name each sweep; default its experiment (``experiment@run8`` where two share one).
        metric: The metric; default the sweeps' own (which must agree).
        mode: ``max`` or ``min``; default the sweeps' own (which must agree).
        bounds: The metric's bounds: ``SWEEP_BOUNDS`` (default) takes what the sweeps declared (which
            must agree); a :class:`~sweeper.search.warping.MetricBounds` or None overrides them.
        surrogate: The GP surrogate curve: None (default) for sweeps whose strategy is not random, as
            ``sweeper report`` chooses; True for every sweep; False for none.
        draws: Draws per sweep and budget behind each probability.
        seed: Seed of the draws and the surrogate curves.

    Returns:
        The :class:`Comparison`.

    Raises:
        CompareUsageError: Fewer than two sweeps, one given twice, or sweeps that differ in metric,
            mode or bounds (the message names what differs and the option that settles it).
        CompareError: A sweep with fewer than two finished trials.
    """
    request = Request.check(sweeps, metric=metric, mode=mode, bounds=bounds)
    names = list(labels) if labels is not None else default_labels(sweeps)
    kept = [request.kept(records) for records in sweeps]
    sizes = [len(k) for k in kept]
    grid = budgets(max(sizes), tuple(sizes))
    curves = [_curve(records, trials, name, grid[grid <= len(trials)], request, surrogate=surrogate, draws=draws,
                     seed=[seed, i])
              for i, (records, trials, name) in enumerate(zip(sweeps, kept, names, strict=True))]
    standings = rank(curves, request.maximize, min(sizes))
    cautions = [c for r in sweeps for c in request.cautions(r)] + _curve_cautions(curves, request.metric)
    return Comparison(metric=request.metric, mode=request.mode, bounds=request.bounds, curves=curves,
                      standings=standings, changes=order_changes(standings), cautions=cautions, draws=draws,
                      seed=seed)


def default_labels(sweeps: Sequence[SweepRecords]) -> list[str]:
    """Each sweep's experiment, or ``experiment@run8`` where two sweeps share an experiment."""
    experiments = [r.experiment for r in sweeps]
    return [e if experiments.count(e) == 1 else f"{e}@{r.parent_run_id[:8]}" for e, r in zip(experiments, sweeps,
                                                                                              strict=True)]


def _curve(records: SweepRecords, kept: pd.DataFrame, label: str, n: NDArray[np.int64], request: Request, *,
           surrogate: bool | None, draws: int, seed: list[int]) -> SweepCurve:
    """A sweep's curve at budgets ``n``: the surrogate's where ``sweeper report`` would draw it."""
    from sweeper.report.build_report import SurrogateRequest, sweep_surrogate_curve

    values = kept[f"metric.{request.metric}"].to_numpy(dtype=np.float64)
    durations = kept["duration_s"].to_numpy(dtype=np.float64)
    duration = float(durations.mean()) if np.all(np.isfinite(durations)) else None
    biased = records.strategy != "random"
    sur, note = sweep_surrogate_curve(records, kept, values, metric=request.metric, maximize=request.maximize,
                                 bounds=request.bounds, biased=biased,
                                 request=SurrogateRequest(surrogate, 1000, 200, 10, seed[0]))
    if sur is not None:
        return surrogate_draws(label, records, sur, values, n, bounds=request.bounds, durations=duration,
                               draws=draws, seed=seed)
    return empirical_curve(label, records, values, n, maximize=request.maximize, bounds=request.bounds,
                           durations=duration, kind="empirical, biased" if biased else "empirical",
                           note=note if biased or surrogate else None, draws=draws, seed=seed)


def rank(curves: Sequence[SweepCurve], maximize: bool, n_common: int) -> list[Standing]:
    """Each sweep's probability of the highest expected max at every budget up to ``n_common``."""
    common = curves[0].n[curves[0].n <= n_common]
    sign = 1.0 if maximize else -1.0
    stacked = np.stack([sign * c.draws[:, np.searchsorted(c.n, common)] for c in curves])  # (k, D, G)
    best = stacked.max(axis=0)
    is_best = stacked == best
    p_best = (is_best / is_best.sum(axis=0)).mean(axis=1)  # (k, G), ties shared
    tied = np.all(stacked == stacked[:1, :1], axis=(0, 1))
    means = np.stack([sign * c.mean[np.searchsorted(c.n, common)] for c in curves])  # (k, G)
    labels = [c.label for c in curves]
    standings = []
    for g, n in enumerate(common.tolist()):
        leader = int(np.argmax(p_best[:, g]))
        standings.append(Standing(n=int(n), p_best={lab: float(p_best[i, g]) for i, lab in enumerate(labels)},
                                  leader=labels[leader], verdict=verdict(float(p_best[leader, g]), bool(tied[g])),
                                  best_curve=labels[int(np.argmax(means[:, g]))]))
    return standings


def verdict(p: float, tied: bool = False) -> str:
    """How sure a leader with ``P(best) = p`` is (the module docstring's thresholds).

    Example:
        >>> verdict(0.97), verdict(0.9), verdict(0.6), verdict(0.5, tied=True)
        ('ahead', 'probably ahead', 'too close to call', 'tied')
    """
    if tied:
        return "tied"
    return "ahead" if p >= AHEAD else "probably ahead" if p >= PROBABLY else "too close to call"


def order_changes(standings: Sequence[Standing]) -> list[OrderChange]:
    """Where one sweep called ahead is followed by another called ahead (the module docstring)."""
    changes = []
    called = [(i, s) for i, s in enumerate(standings) if s.called]
    for (i, before), (j, after) in zip(called, called[1:], strict=False):
        if before.leader == after.leader:
            continue
        start = j
        while start > i + 1 and standings[start - 1].best_curve == after.leader:
            start -= 1
        changes.append(OrderChange(before=before.leader, after=after.leader, n=standings[start].n, low=before.n,
                                   high=after.n))
    return changes


def segments(standings: Sequence[Standing]) -> list[tuple[str, str, int, int, float, float]]:
    """Runs of budgets with the same leader and verdict: ``(leader, verdict, first n, last n, min P, max P)``.

    ``too close to call`` and ``tied`` runs merge whoever leads in them (the leader is then ``""``).
    """
    runs: list[tuple[str, str, int, int, float, float]] = []
    for s in standings:
        leader = s.leader if s.called else ""
        if runs and runs[-1][0] == leader and runs[-1][1] == s.verdict:
            who, what, first, _, lo, hi = runs[-1]
            runs[-1] = (who, what, first, s.n, min(lo, s.p), max(hi, s.p))
        else:
            runs.append((leader, s.verdict, s.n, s.n, s.p, s.p))
    return runs


def _curve_cautions(curves: Sequence[SweepCurve], metric: str) -> list[str]:
    """A biased curve, a constant metric."""
    out = []
    for c in curves:
        if c.kind == "empirical, biased":
            out.append(f"{c.label}'s trials came from `{c.records.strategy}`, not random search, and it has no GP "
                       f"surrogate curve ({c.note}): its curve describes its trials, not random search in its space, "
                       f"so the comparison is biased")
        if np.ptp(c.values) == 0:
            out.append(f"{c.label}'s {metric} is {c.values[0]:.6g} in all {c.n_trials} finished "
                       f"trials: its curve is flat, with no uncertainty the trials can show. Check that the task "
                       f"uses its params (`sweeper trials --experiment {shlex.quote(c.records.experiment)} --run "
                       f"{c.records.parent_run_id} --tracking-uri {c.records.tracking_uri}`)")
    return out

