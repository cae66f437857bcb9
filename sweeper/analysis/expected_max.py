"""Expected maximum validation performance as a function of the tuning budget.

Given the scores of ``N`` trials drawn i.i.d. from a search space (random search), the
expected best score of ``n`` such trials is estimated from the empirical distribution of
the ``N`` observed scores (Dodge et al. 2019, section 3, eq. 8)::

    E[V*_n] = sum_i v_(i) * ((i / N)^n - ((i - 1) / N)^n)        (v sorted ascending)

and its spread by the plug-in standard deviation ``sqrt(E[V*_n^2] - E[V*_n]^2)`` under the
same distribution (what the authors' ``expected_max_cond_n`` calls ``var`` but returns as
a square root). Tied scores are grouped: the empirical CDF jumps at a tied value by its
multiplicity, which gives the same numbers as the ungrouped sum above.

The sums are evaluated for every ``n = 1..N`` without an ``N x N`` matrix, to a documented
accuracy, by :mod:`sweeper.analysis.order_statistics` (``N = 10^6``, all budgets, in under
1 s); this module validates inputs, orients losses and wraps the curves.

References:
    Dodge, J., Gururangan, S., Card, D., Schwartz, R., & Smith, N. A. (2019). Show Your
    Work: Improved Reporting of Experimental Results. EMNLP-IJCNLP 2019, 2185-2194.
    https://aclanthology.org/D19-1224 (code: github.com/allenai/show-your-work).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sweeper.analysis.order_statistics import max_moments


@dataclass(frozen=True, eq=False)
class ExpectedMax:
    """Expected best score (and its spread) of ``n`` random trials, for ``n = 1..n_max``.

    Attributes:
        n: Budgets ``1..n_max`` in trials, shape ``(n_max,)``; ``mean[n - 1]`` belongs to ``n``.
        mean: Expected maximum (minimum if ``maximize=False``) of ``n`` trials, in the
            score's units, shape ``(n_max,)``; non-decreasing (non-increasing).
        std: Plug-in standard deviation of that best score, shape ``(n_max,)``. Where it
            is close to 0 it is accurate to about ``1e-8 * range`` (a square root of a
            difference of moments), elsewhere to about ``1e-13`` relative.
        values_sorted: The ``N`` observed scores, ascending, shape ``(N,)``.
        maximize: Whether higher scores are better.
        without_replacement: Whether the ``n`` trials were drawn without replacement.
        mean_duration_s: Mean wall-clock seconds per trial, or ``None`` if not given.
    """

    n: NDArray[np.int64]
    mean: NDArray[np.float64]
    std: NDArray[np.float64]
    values_sorted: NDArray[np.float64]
    maximize: bool = True
    without_replacement: bool = False
    mean_duration_s: float | None = None

    @property
    def n_trials(self) -> int:
        """Number ``N`` of observed trials."""
        return int(self.values_sorted.size)

    @property
    def budget_s(self) -> NDArray[np.float64] | None:
        """Budgets in seconds, ``n * mean_duration_s``, shape ``(n_max,)``; ``None`` without durations."""
        if self.mean_duration_s is None:
            return None
        return (self.n * self.mean_duration_s).astype(np.float64, copy=False)

    def budget_to_reach(
        self, target: float, unit: Literal["trials", "seconds"] = "trials"
    ) -> int | float | None:
        """Return the smallest budget whose expected best score reaches ``target``.

        Args:
            target: Score to reach (``>=`` when maximizing, ``<=`` when minimizing).
            unit: ``"trials"`` for the number of trials ``n``, or ``"seconds"`` for
                ``n * mean_duration_s``.

        Returns:
            ``n`` (int) or seconds (float); ``None`` if no budget up to ``n_max`` reaches
            it (e.g. the observed best itself, which the expected max only approaches).

        Raises:
            ValueError: If ``target`` is NaN, ``unit`` is unknown, or seconds are asked
                for without durations.

        Example:
            >>> em = expected_max([1.0, 2.0, 3.0, 4.0], durations_s=[10, 20, 30, 40])
            >>> em.budget_to_reach(3.0), em.budget_to_reach(3.0, unit="seconds")
            (2, 50.0)
        """
        if unit not in ("trials", "seconds"):
            raise ValueError(f"unit must be 'trials' or 'seconds'; got {unit!r}")
        if not np.isfinite(target):
            raise ValueError(f"target must be a finite score; got {target!r}")
        if unit == "seconds" and self.mean_duration_s is None:
            raise ValueError(
                "budget in seconds needs trial durations: pass durations_s to expected_max"
            )
        reached = self.mean >= target if self.maximize else self.mean <= target
        if not reached.any():
            return None
        n = int(self.n[int(np.argmax(reached))])
        if unit == "seconds":
            assert self.mean_duration_s is not None
            return n * self.mean_duration_s
        return n


@dataclass(frozen=True, eq=False)
class SurrogateExpectedMax:
    """Expected-max curve of a surrogate's posterior, with the posterior's uncertainty.

    Attributes:
        n: Budgets ``1..n_max`` in trials, shape ``(n_max,)``.
        mean: Mean over posterior samples of each sample's expected-max curve, ``(n_max,)``.
        low: Lower percentile ``100 (1 - level) / 2`` of the curves across samples, ``(n_max,)``.
        high: Upper percentile ``100 (1 + level) / 2`` across samples, ``(n_max,)``.
        within_std: Mean over samples of each curve's plug-in std (the spread of the best
            of ``n`` draws under one sample), ``(n_max,)``.
        level: Coverage of the ``[low, high]`` band, e.g. 0.95.
        n_samples: Number ``S`` of posterior samples.
        n_points: Number ``M`` of space points per sample.
        maximize: Whether higher scores are better.
    """

    n: NDArray[np.int64]
    mean: NDArray[np.float64]
    low: NDArray[np.float64]
    high: NDArray[np.float64]
    within_std: NDArray[np.float64]
    level: float
    n_samples: int
    n_points: int
    maximize: bool = True


def _as_scores(values: ArrayLike, name: str) -> NDArray[np.float64]:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional (one score per trial); got shape {x.shape}")
    if x.size == 0:
        raise ValueError(f"{name} is empty: need at least one finished trial")
    bad = ~np.isfinite(x)
    if bad.any():
        raise ValueError(
            f"{name} contains {int(bad.sum())} NaN or infinite value(s) out of {x.size}: "
            "drop failed trials first"
        )
    return x


def _check_n_max(n_max: int | None, n_trials: int, without_replacement: bool) -> int:
    if n_max is None:
        return n_trials
    if isinstance(n_max, bool) or not isinstance(n_max, (int, np.integer)) or n_max < 1:
        raise ValueError(f"n_max must be a positive int; got {n_max!r}")
    if without_replacement and n_max > n_trials:
        raise ValueError(
            f"n_max={n_max} exceeds the {n_trials} trials, impossible without replacement: "
            f"use n_max <= {n_trials} or without_replacement=False"
        )
    return int(n_max)



def expected_max(
    values: ArrayLike,
    *,
    without_replacement: bool = False,
    durations_s: ArrayLike | None = None,
    maximize: bool = True,
    n_max: int | None = None,
) -> ExpectedMax:
    """Estimate the expected best score of ``n`` random trials for every ``n = 1..n_max``.

    The estimate is unbiased only for i.i.d. draws from the search space (random search);
    for Sobol or GP-chosen trials it describes the observed scores, not the space.

    Args:
        values: Scores of the ``N`` finished trials, shape ``(N,)``; no NaN.
        without_replacement: Draw the ``n`` trials without replacement from the ``N``
            observed ones (then ``n_max <= N``). Default: with replacement, as in the paper.
        durations_s: Wall-clock seconds of each trial, shape ``(N,)``; enables budgets in
            seconds (``n * mean duration``).
        maximize: ``True`` for scores where higher is better; ``False`` for losses, which
            gives the expected minimum.
        n_max: Largest budget; default ``N``. May exceed ``N`` with replacement.

    Returns:
        The curve as an :class:`ExpectedMax`.

    Raises:
        ValueError: If ``values`` is empty, not 1-D, or has NaN/inf; if ``durations_s``
            does not match it or is negative; if ``n_max`` is invalid.

    Example:
        >>> em = expected_max([0.6, 0.7, 0.8, 0.9])
        >>> em.mean.round(4).tolist()
        [0.75, 0.8125, 0.8438, 0.8617]
        >>> float(expected_max([2.0, 1.0], maximize=False).mean[1])
        1.25
    """
    x = _as_scores(values, "values")
    n_max = _check_n_max(n_max, x.size, without_replacement)
    mean_duration_s: float | None = None
    if durations_s is not None:
        d = np.asarray(durations_s, dtype=np.float64)
        if d.shape != x.shape:
            raise ValueError(
                f"durations_s has shape {d.shape} but values has shape {x.shape}: "
                "give one duration per trial"
            )
        if not np.all(np.isfinite(d)) or np.any(d < 0):
            raise ValueError("durations_s must be finite and >= 0 seconds")
        mean_duration_s = float(d.mean())
    sign = 1.0 if maximize else -1.0
    oriented = np.sort(sign * x)  # maximize the oriented scores
    mean, std = max_moments(oriented, n_max, without_replacement)
    values_sorted = oriented if maximize else -oriented[::-1]
    n = np.arange(1, n_max + 1, dtype=np.int64)
    mean = sign * mean
    for arr in (n, mean, std, values_sorted):
        arr.setflags(write=False)
    return ExpectedMax(
        n=n,
        mean=mean,
        std=std,
        values_sorted=values_sorted,
        maximize=maximize,
        without_replacement=without_replacement,
        mean_duration_s=mean_duration_s,
    )


def surrogate_expected_max(
    predict_samples: ArrayLike,
    *,
    n_max: int | None = None,
    maximize: bool = True,
    level: float = 0.95,
) -> SurrogateExpectedMax:
    """Compute expected-max curves under each posterior sample of a surrogate model.

    Each row holds one posterior sample of the objective at the same ``M`` i.i.d. uniform
    points of the search space, so each row is a Monte Carlo stand-in for the score
    distribution of random search under that sample; its curve is computed with
    replacement (i.i.d. draws from the space). The spread across rows carries the
    surrogate's own uncertainty, which the band ``[low, high]`` shows.

    Args:
        predict_samples: Posterior samples, shape ``(S, M)``; ``S >= 1``, ``M >= 1``.
        n_max: Largest budget; default ``M``.
        maximize: ``False`` for losses (expected minimum).
        level: Coverage of the percentile band across samples, in ``(0, 1)``.

    Returns:
        A :class:`SurrogateExpectedMax`.

    Raises:
        ValueError: If the samples are not 2-D, empty or non-finite, or ``level`` is
            outside ``(0, 1)``.

    Example:
        >>> samples = [[0.0, 1.0], [1.0, 2.0], [2.0, 3.0]]
        >>> s = surrogate_expected_max(samples)
        >>> s.mean.tolist(), s.within_std.round(4).tolist()
        ([1.5, 1.75], [0.5, 0.433])
    """
    y = np.asarray(predict_samples, dtype=np.float64)
    if y.ndim != 2 or y.size == 0:
        raise ValueError(
            f"predict_samples must have shape (S, M) with S, M >= 1; got shape {y.shape}"
        )
    if not np.all(np.isfinite(y)):
        raise ValueError("predict_samples contains NaN or infinite values")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), e.g. 0.95; got {level!r}")
    n_samples, n_points = y.shape
    n_max = _check_n_max(n_max, n_points, False)
    sign = 1.0 if maximize else -1.0
    curves = np.empty((n_samples, n_max))  # (S, n_max)
    stds = np.empty((n_samples, n_max))
    for i, row in enumerate(y):
        curves[i], stds[i] = max_moments(np.sort(sign * row), n_max, False)
    curves *= sign
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(curves, [tail, 100.0 - tail], axis=0)
    n = np.arange(1, n_max + 1, dtype=np.int64)
    mean, within_std = curves.mean(axis=0), stds.mean(axis=0)
    for arr in (n, mean, low, high, within_std):
        arr.setflags(write=False)
    return SurrogateExpectedMax(
        n=n,
        mean=mean,
        low=low,
        high=high,
        within_std=within_std,
        level=float(level),
        n_samples=n_samples,
        n_points=n_points,
        maximize=maximize,
    )


__all__ = [
    "ExpectedMax",
    "SurrogateExpectedMax",
    "expected_max",
    "surrogate_expected_max",
]
