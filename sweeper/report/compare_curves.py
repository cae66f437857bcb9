"""Each compared sweep's expected-max curve with its uncertainty, as draws a comparison can rank.

A comparison asks, at each budget ``n``, how likely one sweep's expected best score of ``n``
random trials exceeds another's. That needs, per sweep and budget, a distribution of the
curve's value, not only a band; this module gives ``D`` draws of it per budget:

* **Random sweeps (empirical curve).** The curve is the estimate without replacement: the mean,
  over every ``n``-subset of the ``N`` finished trials, of its best score (Dodge et al. 2019,
  eq. 8 with the binomial weights of sampling without replacement). It is a U-statistic, so
  its expectation over sweeps is exactly the true expected max of ``n`` random trials for every
  ``n <= N``; the with-replacement curve that ``sweeper report`` draws (the paper's own) falls
  below the truth where ``n`` nears ``N``, more for the smaller sweep, which would tilt a
  comparison of sweeps of different sizes. The draws come from the Bayesian bootstrap
  (Rubin 1981): Dirichlet(1, ..., 1) weights over the trials are posterior draws of the score
  distribution, each giving an expected-max curve (eq. 8 with ``F`` the weighted CDF); each draw
  is shifted by the estimated bias of the with-replacement curve (without minus with), so the
  draws centre on the unbiased curve.
* **Model-guided sweeps (GP surrogate curve).** The curve and its band are ``sweeper report``'s
  (:mod:`sweeper.report.surrogate`, the GP's posterior, 95 %). The band's two halves are read
  as the two halves of a split normal around the mean (skewed where the metric's bounds
  squeeze it), and draws come from it; one standard normal per draw is shared by every budget,
  so each draw is a whole curve, as a posterior sample is.

What no draw can show: a score better than any trial found, except through the bias shift. A
sweep that never sampled a narrow optimum looks, to every estimate built from its trials, as if
it had none. The measured calibration is in the decision record.

NOTE: docs/decisions/0040-compare-probability.md

References:
    Dodge, J., Gururangan, S., Card, D., Schwartz, R., & Smith, N. A. (2019). Show Your Work:
    Improved Reporting of Experimental Results. EMNLP-IJCNLP 2019.
    Rubin, D. B. (1981). The Bayesian Bootstrap. The Annals of Statistics 9(1), 130-134.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from sweeper.analysis.expected_max import expected_max

if TYPE_CHECKING:
    from sweeper.analysis.runs import SweepRecords
    from sweeper.report.surrogate import SurrogateCurve
    from sweeper.search.warping import MetricBounds

#: Draws per sweep and budget: the Monte Carlo error of a probability is at most 0.016 (at 0.5), 0.007 at 0.95.
DRAWS = 1000
#: Coverage of the bands drawn and written.
LEVEL = 0.95
#: Budgets evaluated: every n up to this many, else at most this many log-spaced ones (and each sweep's N).
MAX_BUDGETS = 300
_LOG_TRUNCATION = float(np.log(1e-16))  # F^n below this in every draw: the term is dropped (error <= 1e-16 range)
_CHUNK = 1 << 21  # weights held at once (draws x trials), 16 MiB


@dataclass(frozen=True)
class SweepCurve:
    """One sweep's expected-max curve at the comparison's budgets, with draws of its uncertainty.

    Attributes:
        label: How the comparison names the sweep (its experiment, or ``experiment@run8``).
        records: The sweep.
        kind: ``empirical``, ``GP surrogate``, or ``empirical, biased`` (a model-guided sweep
            whose surrogate could not be computed: the curve describes its trials only).
        n: Budgets, ascending, up to the sweep's number of finished trials.
        mean: The curve at ``n``, in the metric's units.
        low: Lower edge of the 95 % band at ``n``.
        high: Upper edge of the 95 % band at ``n``.
        draws: Draws of the curve at ``n``, shape ``(D, len(n))``, in the metric's units.
        values: The finished trials' scores.
        mean_duration_s: Mean seconds per finished trial, or None when not recorded.
        note: Why the curve is not the surrogate one, for a model-guided sweep (or one asked for it); else None.
        surrogate: The GP surrogate curve, when that is the curve.
    """

    label: str
    records: SweepRecords
    kind: str
    n: NDArray[np.int64]
    mean: NDArray[np.float64]
    low: NDArray[np.float64]
    high: NDArray[np.float64]
    draws: NDArray[np.float64]
    values: NDArray[np.float64]
    mean_duration_s: float | None
    note: str | None = None
    surrogate: SurrogateCurve | None = None

    @property
    def n_trials(self) -> int:
        """Finished trials ``N``, the largest budget of the curve."""
        return int(self.values.size)


def budgets(largest: int, ends: tuple[int, ...] = ()) -> NDArray[np.int64]:
    """Every budget ``1..largest`` up to :data:`MAX_BUDGETS` of them, else at most that many log-spaced ones
    (every small one among them); the budgets in ``ends`` (each sweep's number of trials) included.

    Example:
        >>> budgets(5).tolist(), budgets(1000)[:3].tolist(), budgets(1000, (999,))[-3:].tolist()
        ([1, 2, 3, 4, 5], [1, 2, 3], [977, 999, 1000])
    """
    if largest <= MAX_BUDGETS:
        grid = np.arange(1, largest + 1)
    else:
        grid = np.unique(np.round(np.geomspace(1, largest, MAX_BUDGETS)).astype(np.int64))
    return np.union1d(grid, np.asarray([e for e in ends if 1 <= e <= largest], dtype=np.int64)).astype(np.int64)


def bootstrap_curves(values: NDArray[np.float64], n: NDArray[np.int64], *, draws: int = DRAWS,
                     seed: int | list[int] = 0) -> NDArray[np.float64]:
    """Bayesian-bootstrap draws of the expected max of ``n`` draws with replacement, shape ``(draws, len(n))``.

    Each draw weighs the ``N`` scores by Dirichlet(1, ..., 1) weights (normalised exponentials);
    with ``F_j`` the weight at or below the ``j``-th smallest score ``u_j``, its curve is
    ``u_N - sum_{j<N} (u_{j+1} - u_j) F_j^n`` (Dodge et al. 2019, eq. 8, summed by parts as in
    :mod:`sweeper.analysis.order_statistics`). Powers are carried from one budget to the next by
    multiplication; a term whose ``F_j^n`` is below 1e-16 in every draw is dropped.

    Args:
        values: Scores, higher is better (negate a loss), shape ``(N,)``.
        n: Budgets, ascending, ``>= 1``.
        draws: Number of draws ``D``.
        seed: Seed of the weights.

    Example:
        >>> curves = bootstrap_curves(np.array([0.0, 1.0]), np.array([1, 2]), draws=4000)
        >>> curves.mean(axis=0).round(1).tolist()  # the posterior mean of E[max of n]: 1/2, 2/3
        [0.5, 0.7]
    """
    u = np.sort(np.asarray(values, dtype=np.float64))
    du = np.diff(u)
    out = np.empty((draws, n.size))
    if not du.any():
        out[:] = u[-1]
        return out
    rng = np.random.default_rng(seed)
    rows = max(1, _CHUNK // u.size)
    for r0 in range(0, draws, rows):
        w = rng.standard_exponential((min(rows, draws - r0), u.size))
        above = np.cumsum(w[:, :0:-1], axis=1)[:, ::-1] / w.sum(axis=1, keepdims=True)  # weight above u_j, j < N
        f = 1.0 - above
        log_f = np.log1p(-above)  # ascending in j in every row
        ceiling = log_f.max(axis=0)
        power, first, done = np.ones_like(f), 0, 0
        for k, budget in enumerate(n.tolist()):
            keep = int(np.searchsorted(ceiling, _LOG_TRUNCATION / budget, side="right"))
            power, first = power[:, keep - first:], keep
            step = budget - done
            power = power * (f[:, first:] if step == 1 else np.exp(step * log_f[:, first:]))
            done = budget
            out[r0:r0 + w.shape[0], k] = u[-1] - power @ du[first:]
    return out


def empirical_curve(label: str, records: SweepRecords, values: NDArray[np.float64], n: NDArray[np.int64], *,
                    maximize: bool, bounds: MetricBounds | None, durations: float | None, kind: str = "empirical",
                    note: str | None = None, draws: int = DRAWS, seed: int | list[int] = 0) -> SweepCurve:
    """The curve without replacement, with Bayesian-bootstrap draws shifted onto it (module docstring)."""
    sign = 1.0 if maximize else -1.0
    unbiased = expected_max(values, without_replacement=True, maximize=maximize).mean[n - 1]
    plug_in = expected_max(values, maximize=maximize).mean[n - 1]
    oriented = bootstrap_curves(sign * values, n, draws=draws, seed=seed) + sign * (unbiased - plug_in)
    curve_draws = sign * oriented
    if bounds is not None:
        curve_draws = bounds.clip(curve_draws)
    low, high = _band(curve_draws)
    return SweepCurve(label=label, records=records, kind=kind, n=n, mean=unbiased, low=low, high=high,
                      draws=curve_draws, values=values, mean_duration_s=durations, note=note)


def surrogate_draws(label: str, records: SweepRecords, surrogate: SurrogateCurve, values: NDArray[np.float64],
                    n: NDArray[np.int64], *, bounds: MetricBounds | None, durations: float | None,
                    draws: int = DRAWS, seed: int | list[int] = 0) -> SweepCurve:
    """The GP surrogate's curve and band, with split-normal draws matching the band (module docstring)."""
    c = surrogate.curve
    mean, low, high = (np.asarray(a)[n - 1] for a in (c.mean, c.low, c.high))
    z_band = NormalDist().inv_cdf((1.0 + c.level) / 2.0)
    z = np.random.default_rng(seed).standard_normal((draws, 1))
    curve_draws = mean + np.where(z > 0, z * (high - mean), z * (mean - low)) / z_band
    if bounds is not None:
        curve_draws = bounds.clip(curve_draws)
    return SweepCurve(label=label, records=records, kind="GP surrogate", n=n, mean=mean, low=low, high=high,
                      draws=curve_draws, values=values, mean_duration_s=durations, surrogate=surrogate)


def _band(curve_draws: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The central :data:`LEVEL` interval of the draws at each budget."""
    tail = 100.0 * (1.0 - LEVEL) / 2.0
    low, high = np.percentile(curve_draws, [tail, 100.0 - tail], axis=0)
    return low, high
