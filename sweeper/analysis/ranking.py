"""How stable a ranking of configurations is over replicates (seeds, environment conditions).

Each replicate (one seed, say) ranks the configurations by their score there. Three numbers summarise the
replicates where every configuration finished:

- how often each configuration is the best (a tie for the best shares the replicate: ``1/t`` each of ``t``),
  with the **Wilson score interval** of that proportion (Wilson 1927; Brown, Cai & DasGupta 2001 recommend it
  over the normal approximation for small ``n``)::

      p = wins / m,   z = Phi^-1(1/2 + confidence/2)
      centre = (p + z^2 / 2m) / (1 + z^2 / m)
      half   = z / (1 + z^2 / m) * sqrt(p (1 - p) / m + z^2 / 4m^2)

- each configuration's mean rank (1 = best; tied scores share the mean of their ranks);
- **Kendall's W**, the coefficient of concordance of the replicates' rankings (Kendall & Babington Smith 1939;
  with the correction for ties, Kendall 1948, eq. 6.19)::

      R_i = sum_j r_ij,  S = sum_i (R_i - mean R)^2
      W   = 12 S / (m^2 (n^3 - n) - m sum_j T_j),  T_j = sum over tie groups of replicate j of (t^3 - t)

  W = 1 when every replicate ranks the configurations alike, 0 when their rankings cancel out.

References:
    Wilson, E. B. (1927). Probable inference, the law of succession, and statistical inference. JASA 22, 209-212.
    Brown, L. D., Cai, T. T., & DasGupta, A. (2001). Interval estimation for a binomial proportion. Stat. Sci. 16.
    Kendall, M. G., & Babington Smith, B. (1939). The problem of m rankings. Ann. Math. Stat. 10(3), 275-287.
    Kendall, M. G. (1948). Rank Correlation Methods. Griffin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike, NDArray


def wilson_interval(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``successes / n`` (see the module docstring); NaNs for ``n = 0``.

    Example:
        >>> [round(x, 4) for x in wilson_interval(7, 10)]
        [0.3968, 0.8922]
    """
    if n <= 0:
        return math.nan, math.nan
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2.0 * n)) / denominator
    half = z / denominator * math.sqrt(max(p * (1.0 - p) / n + z * z / (4.0 * n * n), 0.0))
    return max(centre - half, 0.0), min(centre + half, 1.0)


def ranks(values: ArrayLike, maximize: bool) -> NDArray[np.float64]:
    """The rank of each configuration (rows) in each replicate (columns): 1 for the best, ties averaged."""
    from scipy.stats import rankdata

    v = np.asarray(values, dtype=np.float64)
    r: NDArray[np.float64] = rankdata(-v if maximize else v, method="average", axis=0).astype(np.float64)
    return r


def kendall_w(rank_matrix: ArrayLike) -> float:
    """Kendall's W of ``n`` configurations (rows) ranked by ``m`` replicates (columns), tie-corrected; NaN for
    ``n < 2``, ``m < 2``, or replicates that tie everything."""
    r = np.asarray(rank_matrix, dtype=np.float64)
    n, m = r.shape
    if n < 2 or m < 2:
        return math.nan
    totals = r.sum(axis=1)
    s = float(((totals - totals.mean()) ** 2).sum())
    ties = 0.0
    for column in r.T:
        _, counts = np.unique(column, return_counts=True)
        ties += float((counts.astype(np.float64) ** 3 - counts).sum())
    denominator = m * m * (n ** 3 - n) - m * ties
    return 12.0 * s / denominator if denominator > 0 else math.nan


@dataclass(frozen=True)
class RankCounts:
    """The rankings of ``n`` configurations over the complete replicates.

    Attributes:
        complete: Which replicates (columns) every configuration finished: those ranked.
        wins: Per configuration, the complete replicates where it was best (a tie for the best shared).
        mean_rank: Per configuration, its mean rank over them (NaN without any).
        best_ties: Complete replicates whose best was a tie.
        w: Kendall's W over them.
    """

    complete: NDArray[np.bool_]
    wins: NDArray[np.float64]
    mean_rank: NDArray[np.float64]
    best_ties: int
    w: float

    @property
    def m(self) -> int:
        """Complete replicates."""
        return int(self.complete.sum())


def rank_counts(values: ArrayLike, maximize: bool) -> RankCounts:
    """Rank the configurations (rows of ``values``) in each replicate (columns) where none is NaN."""
    v = np.asarray(values, dtype=np.float64)
    complete = np.all(np.isfinite(v), axis=0)
    kept = v[:, complete]
    n = v.shape[0]
    if kept.shape[1] == 0:
        return RankCounts(complete, np.zeros(n), np.full(n, math.nan), 0, math.nan)
    best = kept.max(axis=0) if maximize else kept.min(axis=0)
    winners = kept == best
    per_replicate = winners.sum(axis=0)
    r = ranks(kept, maximize)
    return RankCounts(complete, (winners / per_replicate).sum(axis=1), r.mean(axis=1), int((per_replicate > 1).sum()),
                      kendall_w(r))
