"""Is the GP behind a curve or a map calibrated? The verdict of its predictive checks, in words.

A map is drawn from a GP that interpolates between trials, and its band is only as honest as
the GP's uncertainty. Three checks look at that uncertainty from different sides:

* **leave-one-out** (:func:`sweeper.search.loo.loo_check`): each trial predicted from the others;
  it tests interpolation between the points the sweep has seen;
* **leave-one-configuration-out**: every replicate of a configuration left out at once, so a
  seed's copies cannot vouch for each other;
* **prospective** (:func:`prospective_check`): each trial the searcher chose by the GP was
  predicted (its result's predictive quantiles, mean and sd) before it ran. IVR sends trials where the GP knows
  least, so these are predictions into regions no trial had visited: what the two checks
  above cannot see (Dawid 1984's prequential principle: judge a forecaster by forecasts made
  before the outcome). The forecasts judge the map's model only when they were made from
  comparable evidence: those of a fit on fewer than half the map's trials (the first batch
  after the Sobol design, whose 8 points cannot place a cliff) are not scored.

The verdict shown next to a curve or a map is the worst of the checks that have enough
trials (:class:`Calibration`): ``failed`` when any judged check's 95 % intervals hold fewer
than 85 % of what it predicted, too few to be chance (:attr:`sweeper.search.loo.PredictiveCheck.ok`;
a single maximum-likelihood fit gets no allowance for chance, :func:`calibration`), ``too few
trials`` when none can be judged. Measured against
the truth of real maps in ``bench/calibration.py`` (bench/README.md §7).

References:
    Dawid, A. P. (1984). Statistical theory: the prequential approach. JRSS A 147.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtr, ndtri

from sweeper.search.loo import ADVICE, LOCO, LOO, MIN_TRIALS, PROSPECTIVE, PredictiveCheck, score_pit
from sweeper.search.suggestion import PREDICTED_PROBS

_ORDER = {"failed": 3, "passed": 2, "conservative": 1}
#: A result this close to an outer recorded quantile, relative to its size or the interval's width, is on it.
QUANTILE_SLACK = 1e-9
#: A prediction is scored when its model was fitted on at least this share of the judged model's trials.
#: NOTE: docs/decisions/0069-prospective-check-scores-comparable-forecasts.md
COMPARABLE_EVIDENCE = 0.5


def prospective_check(y: ArrayLike, mean: ArrayLike, sd: ArrayLike, made_from: ArrayLike | None = None,
                      n_model: int | None = None, quantiles: Sequence[Sequence[float] | None] | None = None
                      ) -> PredictiveCheck | None:
    """Score the searcher's predictions ``(mean, sd)`` of the trials it chose against their results ``y``.

    ``quantiles``, one row per prediction (None where not recorded): each prediction's
    quantiles at :data:`~sweeper.search.suggestion.PREDICTED_PROBS`, the model's own distribution; a result
    is inside its 95 % (68 %) interval exactly when it lies between the recorded ends
    (:func:`quantile_pit`). A prediction without them (sweeps from before they were recorded) is read as
    a Gaussian in the metric's units: ``u = Phi((y - mean) / sd)``, which misplaces the interval, both ways,
    where a bounded metric's predictive is skewed near its bound
    (NOTE: docs/decisions/0082-prospective-check-reads-the-models-quantiles.md). A prediction with
    ``sd = 0`` holds only its own value. Trials without a finite prediction or result are left out;
    None when none is left.

    ``made_from``: how many trials each prediction's model was fitted on (NaN where not recorded:
    always scored); ``n_model``: the judged model's trials. A prediction made from fewer than
    ``COMPARABLE_EVIDENCE`` of them judges another, weaker model (a fit on the Sobol design alone
    misses cliffs the final map has found), so it is not scored, unless that would leave fewer than
    ``MIN_TRIALS``: then the ``MIN_TRIALS`` made from the most trials are (with any made from as many; all
    of them, when there are fewer).
    """
    y, mean, sd = (np.asarray(a, dtype=np.float64) for a in (y, mean, sd))
    made = np.full(y.shape, np.nan) if made_from is None else np.asarray(made_from, dtype=np.float64)
    unknown = (math.nan,) * len(PREDICTED_PROBS)
    q = np.array([unknown if row is None else row for row in ([None] * y.size if quantiles is None else quantiles)],
                 dtype=np.float64).reshape(y.size, len(PREDICTED_PROBS))
    ok = np.isfinite(y) & np.isfinite(mean) & np.isfinite(sd) & (sd >= 0)
    if not ok.any():
        return None
    y, mean, sd, made, q = y[ok], mean[ok], sd[ok], made[ok], q[ok]
    below: float = 0 if n_model is None else math.ceil(COMPARABLE_EVIDENCE * n_model)
    if np.count_nonzero(~(made < below)) < MIN_TRIALS:  # keep the MIN_TRIALS latest (all, when fewer)
        below = min(below, float(np.sort(np.nan_to_num(made, nan=np.inf))[::-1][min(MIN_TRIALS, made.size) - 1]))
    early = made < below  # NaN (not recorded) compares False: always scored
    y, mean, sd, q = y[~early], mean[~early], sd[~early], q[~early]
    with np.errstate(divide="ignore", invalid="ignore"):
        off = np.where(y == mean, 0.0, np.sign(y - mean) * np.inf)  # sd 0 holds only its own value
        z = np.where(sd > 0, (y - mean) / np.where(sd > 0, sd, 1.0), off)
    recorded: NDArray[np.bool_] = np.all(np.isfinite(q), axis=1)
    pit = np.where(recorded, quantile_pit(y, np.where(recorded[:, None], q, 0.0)), ndtr(z))
    check = score_pit(pit, mean, y, PROSPECTIVE)
    return replace(check, earlier=int(early.sum()), earlier_below=int(below)) if early.any() else check


def quantile_pit(y: ArrayLike, quantiles: ArrayLike) -> NDArray[np.float64]:
    """``P(Y <= y)`` of each result ``y`` under a predictive known by its ``quantiles`` at ``PREDICTED_PROBS``.

    Exact at the quantiles, so a result's place inside or outside the central 68 % and 95 % intervals is
    the model's own; between them the standardised residual ``Phi^-1(u)`` is interpolated linearly in
    ``y``, and beyond the outer ones it goes on with the outer interval's slope (a Gaussian tail of that
    width): the residual's size past the 95 % interval is an estimate. Quantiles that coincide (a
    prediction with no spread) hold only their own value.
    """
    y = np.asarray(y, dtype=np.float64)
    q = np.asarray(quantiles, dtype=np.float64).reshape(y.size, len(PREDICTED_PROBS))
    knots = ndtri(np.asarray(PREDICTED_PROBS))
    z = np.array([np.interp(v, row, knots) for v, row in zip(y, q, strict=True)])
    for end, inner in ((0, 1), (-1, -2)):
        past = (y < q[:, end]) if end == 0 else (y > q[:, end])
        width = q[:, end] - q[:, inner]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            slope = np.where(width != 0, (knots[end] - knots[inner]) / width, np.inf)
            tail = knots[end] + (y - q[:, end]) * slope
        z = np.where(past, tail, z)
    # On an end is inside (whatever ndtr(ndtri(p)) rounds to), and so is a result within rounding of one: a
    # quantile found by bisection can stop an ulp short of a bound where the model holds mass of its own (a
    # member's ceiling at 1.0, whose warp gives exactly 1.0 only far out in its tail).
    slack = QUANTILE_SLACK * np.maximum(np.abs(y), q[:, -1] - q[:, 0])
    inside = (y >= q[:, 0] - slack) & (y <= q[:, -1] + slack)
    pit: NDArray[np.float64] = np.where(inside, np.clip(ndtr(z), PREDICTED_PROBS[0], PREDICTED_PROBS[-1]), ndtr(z))
    return pit


def sweep_prospective_check(suggestions: Iterable[Any], results: Mapping[int, float], *,
                            single_fit: bool) -> PredictiveCheck | None:
    """:func:`prospective_check` of a sweep's own suggestions (``predicted_mean``, ``predicted_sd``) and results.

    Judged as forecasts of a model of every finite result (``predicted_from`` says what each was made from).
    ``single_fit``: the predictions came from one maximum-likelihood fit (no declared bounds), judged
    without the allowance for chance, as :func:`calibration` judges that model.
    """
    chosen = [s for s in suggestions
              if s.predicted_mean is not None and s.predicted_sd is not None and s.index in results]
    finite = sum(math.isfinite(v) for v in results.values())
    if not chosen:
        return None
    y, mean, sd, made_from = np.array([(results[s.index], s.predicted_mean, s.predicted_sd,
                                        math.nan if s.predicted_from is None else s.predicted_from)
                                       for s in chosen]).T
    check = prospective_check(y, mean, sd, made_from, n_model=finite,
                              quantiles=[s.predicted_quantiles for s in chosen])
    return replace(check, max_surprise=1.0) if check is not None and single_fit else check


@dataclass(frozen=True)
class Calibration:
    """The predictive checks of one GP and their joint verdict (see the module docstring)."""

    checks: tuple[PredictiveCheck, ...]
    #: Whether the GP modelled the metric inside declared bounds (None: not known); shapes the advice.
    bounded: bool | None = None

    def check(self, kind: str) -> PredictiveCheck | None:
        return next((c for c in self.checks if c.kind == kind), None)

    @property
    def judged(self) -> list[PredictiveCheck]:
        return [c for c in self.checks if c.judged]

    def verdict(self) -> str:
        """``failed``, ``passed``, ``conservative`` (every judged check) or ``too few trials``."""
        judged = self.judged
        if not judged:
            return "too few trials"
        return max((c.verdict() for c in judged), key=_ORDER.__getitem__)

    @property
    def ok(self) -> bool:
        return self.verdict() != "failed"

    def sentence(self, what: str) -> str:
        """The verdict in words for a reader of ``what`` (e.g. "these maps"), with each check's numbers."""
        parts = "; ".join(c.numbers() + ("" if c.judged else " (too few to judge)") for c in self.checks)
        verdict = self.verdict()
        if verdict == "failed":
            failed = ", ".join(c.kind for c in self.judged if not c.ok)
            return (f"**Warning: the GP behind {what} failed its {failed} check (its 95 % intervals held fewer "
                    f"than 85 % of the results, too few to be chance): it is overconfident, so {what} cannot be "
                    f"trusted as drawn.** {self.advice()} Checks: {parts}.")
        if verdict == "too few trials":
            return f"Too few trials to judge the GP behind {what} by its predictive checks. Checks: {parts}."
        wide = " (wider than they need be: conservative)" if verdict == "conservative" else ""
        return (f"The GP behind {what} passed its predictive checks{wide}: its uncertainty is consistent with how "
                f"it predicts trials it was not given. Checks: {parts}.")

    def advice(self) -> str:
        """What would help when the verdict is ``failed``: bounds first when the metric has none."""
        if self.bounded:
            return ("What would help: more trials (the checks' failures sit where the GP had least data); another "
                    "kernel (--kernel).")
        return ADVICE

    def metrics(self, prefix: str) -> dict[str, float]:
        """Every check's metrics (``<prefix>loo_coverage95``, ...) and ``<prefix>calibration_failed`` (0/1)."""
        out: dict[str, float] = {}
        for c in self.checks:
            out.update(c.metrics(prefix))
        verdict = self.verdict()
        if verdict != "too few trials":
            out[f"{prefix}calibration_failed"] = float(verdict == "failed")
        return out

    def summary(self, what: str) -> dict[str, Any]:
        """For ``summary.json``: the overall ``verdict``, the sentence, and each check with its own ``verdict``."""
        return {"verdict": self.verdict(), "sentence": self.sentence(what),
                "checks": {c.kind: c.summary() for c in self.checks}}


def calibration(model: Any, replicate_columns: Sequence[int] = (),
                prospective: PredictiveCheck | None = None) -> Calibration:
    """The leave-one-out and leave-one-configuration-out checks of ``model``, with ``prospective`` when given.

    A single maximum-likelihood fit (the analysis of a metric without declared bounds) is judged by the
    85 % threshold alone, without the allowance for chance: such fits often draw maps that hold too little
    of the truth, so a shortfall there is more likely the model than luck. The posterior mixture of a
    bounded metric keeps the allowance. NOTE: docs/decisions/0010-single-fit-checks-without-chance.md
    """
    from sweeper.search.loo import loo_check

    checks = [loo_check(model, replicate_columns), loo_check(model, replicate_columns, by_configuration=True)]
    if prospective is not None:
        checks.append(prospective)
    if len(getattr(model, "members", (model,))) == 1:
        checks = [replace(c, max_surprise=1.0) for c in checks]
    return Calibration(tuple(checks), bounded=getattr(model, "warp", None) is not None)


__all__ = ["LOCO", "LOO", "PROSPECTIVE", "Calibration", "calibration", "prospective_check", "quantile_pit",
           "sweep_prospective_check"]
