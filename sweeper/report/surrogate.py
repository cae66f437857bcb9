"""The surrogate-based expected-max curve: what random search would have found, from the sweep's GP.

Dodge et al.'s estimator assumes the trials were i.i.d. uniform draws from the space. A
Sobol, IVR or UCB sweep breaks that: its points are spread out or pulled towards good
regions, so its empirical curve describes those points, not random search. Instead, fit
the sweep's GP to its finished trials, draw i.i.d. uniform points in the space, and draw
joint posterior samples of the objective at them (so the GP's own uncertainty is carried
through); each sample is a Monte Carlo stand-in for the score distribution of random
search, and :func:`sweeper.analysis.surrogate_expected_max` turns them into curves.

Two choices differ from the simplest recipe (one set of ``M`` points for all samples):

* The ``S`` samples are spread over ``n_point_sets`` independent sets of ``M`` points. With a
  single set, its Monte Carlo error (about ``sd(f) / sqrt(M)`` at ``n = 1``) is the same in
  every sample, so the band would leave it out; with several sets the band covers it too.
* The band is the surrogate's uncertainty about the *true* curve of random search. The
  *empirical* curve of a random sweep of ``N`` trials has its own sampling error, about
  ``sd(f) / sqrt(N)``, usually larger, so it may lie outside this band even when the GP
  is right. To compare with it, ask for ``n_points=N`` and one set per sample
  (``n_point_sets=n_samples``): the band is then that of an ``N``-trial random sweep's
  empirical curve.

Categorical dimensions are modelled by coregionalization, as in the sweeper's own search
(the i.i.d. points draw every category with equal probability). Given the ``space``, every
point is snapped to a value a trial could take (:func:`sweeper.analysis.multiverse.snap`:
integer, log-integer and grid dims, seeds among them, to their values; a categorical
coordinate already means its category), so the curve never reads the GP between legal
values, where it knows nothing. The GP is fitted on at most ``max_fit_points`` trials (a
seeded random subset beyond that).

The GP is the analysis model of :func:`sweeper.search.hyperposterior.fit_posterior`: with the
metric's declared bounds it models the warped metric (:mod:`sweeper.search.warping`), so every
sample, and so every point of the curve and its band, lies inside them; and it averages
over the posterior of its hyperparameters, so the band carries their uncertainty too. Each
point set draws its samples from its own share of the posterior draws. The curve carries the
GP's predictive checks (:mod:`sweeper.search.calibration`).

NOTE: docs/decisions/0021-surrogate-curve.md

References:
    Dodge, J., Gururangan, S., Card, D., Schwartz, R., & Smith, N. A. (2019). Show Your
    Work: Improved Reporting of Experimental Results. EMNLP-IJCNLP 2019.
    Bell, S. J., Kampman, O. P., Dodge, J., & Lawrence, N. D. (2022). Modeling the Machine
    Learning Multiverse. NeurIPS 2022.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sweeper.analysis.expected_max import SurrogateExpectedMax, surrogate_expected_max
from sweeper.blas import one_blas_thread
from sweeper.search.calibration import Calibration, calibration
from sweeper.search.design import as_generator, random_design
from sweeper.search.loo import PredictiveCheck
from sweeper.search.space import SearchSpace
from sweeper.search.warping import MetricBounds

MIN_FIT_POINTS = 4


class SurrogateUnavailable(ValueError):
    """The surrogate curve cannot be computed for this sweep; the message says why."""


@dataclass(frozen=True)
class SurrogateCurve:
    """The surrogate-based expected-max curve and how it was made.

    Attributes:
        curve: The curve with its band (``mean``, ``low``, ``high``), budgets ``1..n_max``.
        n_fit: Trials the GP was fitted on.
        n_finished: Finished trials available for the fit.
        hyperparameters: The GP's fitted hyperparameters (standardised scale).
        n_points: Points ``M`` per set.
        n_samples: Posterior samples ``S``.
        n_point_sets: Independent point sets the samples are spread over.
        seed: Seed of the points, the samples and the GP restarts.
        calibration: The GP's predictive checks and their verdict (:mod:`sweeper.search.calibration`).
        bounds: The metric's declared bounds the GP respected, or None.
    """

    curve: SurrogateExpectedMax
    n_fit: int
    n_finished: int
    hyperparameters: dict[str, Any]
    n_points: int
    n_samples: int
    n_point_sets: int
    seed: int
    calibration: Calibration | None = None
    bounds: MetricBounds | None = None


def unit_points(space: SearchSpace | None, points: Sequence[Mapping[str, Any]]) -> NDArray[np.float64]:
    """Map trial points to the unit cube, or raise :class:`SurrogateUnavailable` saying why not."""
    if space is None:
        raise SurrogateUnavailable("the sweep's search space could not be read (no search_space.json "
                                   "artifact and no space.* params)")
    if space.d == 0:
        raise SurrogateUnavailable("the sweep has no search dimension (every override was fixed)")
    try:
        return space.to_unit(points)
    except (KeyError, ValueError) as exc:
        raise SurrogateUnavailable(f"a trial's point does not fit the recorded space: {exc}") from None


def _points(space: SearchSpace | None, m: int, d: int, seed: list[int]) -> NDArray[np.float64]:
    """``m`` i.i.d. uniform points, snapped to the space's legal values when it is known."""
    from sweeper.analysis.multiverse import snap

    U = random_design(m, d, seed)
    return U if space is None else snap(space, U)


def surrogate_curve(
    X: ArrayLike,
    y: ArrayLike,
    *,
    maximize: bool = True,
    n_max: int | None = None,
    n_points: int = 1000,
    n_samples: int = 200,
    n_point_sets: int = 10,
    seed: int = 0,
    max_fit_points: int = 300,
    level: float = 0.95,
    categories: Mapping[int, int] | None = None,
    bounds: MetricBounds | None = None,
    space: SearchSpace | None = None,
    replicate_columns: Sequence[int] = (),
    prospective: PredictiveCheck | None = None,
) -> SurrogateCurve:
    """Fit the GP to ``(X, y)`` and compute the expected-max curve of random search under it.

    Args:
        X: Finished trials' points in the unit cube, shape ``(N, d)``.
        y: Their scores, shape ``(N,)``, finite.
        maximize: ``False`` for losses.
        n_max: Largest budget; default ``N``.
        n_points: i.i.d. uniform points ``M`` per set.
        n_samples: Posterior samples ``S`` in all.
        n_point_sets: Independent point sets, ``1..S``; samples are split evenly over them.
        seed: Seeds the GP restarts, the points and the samples.
        max_fit_points: Largest number of trials the GP is fitted on.
        level: Coverage of the band.
        categories: Categorical columns of ``X`` -> number of choices (see :func:`sweeper.search.gp_fit.fit_gp`).
        bounds: The metric's declared bounds (the GP models it warped, inside them), or None.
        space: The sweep's search space: the points are snapped to its legal values (and
            ``categories`` defaults to its categorical columns). None: points stay continuous.
        replicate_columns: Columns whose replicates leave the checks together (``env.*``, seeds).
        prospective: The searcher's predictions of the trials, scored (joins the verdict).

    Returns:
        A :class:`SurrogateCurve`.

    Raises:
        SurrogateUnavailable: Fewer than 4 trials, or the GP fit fails.
        ValueError: Malformed settings.
    """
    from sweeper.search.hyperposterior import fit_posterior

    X, y, categories = _checked(X, y, n_samples=n_samples, n_point_sets=n_point_sets, space=space,
                                categories=categories)
    n = X.shape[0]
    if n < MIN_FIT_POINTS:
        raise SurrogateUnavailable(f"only {n} finished trial(s): the GP needs at least {MIN_FIT_POINTS}")
    fit_index = np.arange(n)
    if n > max_fit_points:
        fit_index = np.sort(as_generator([seed, 3]).choice(n, size=max_fit_points, replace=False))
    counts = np.full(n_point_sets, n_samples // n_point_sets)
    counts[: n_samples % n_point_sets] += 1
    with one_blas_thread():  # NOTE: docs/decisions/0002-one-blas-thread.md
        try:
            gp = fit_posterior(X[fit_index], y[fit_index], seed=seed, categories=categories, bounds=bounds)
        except (RuntimeError, ValueError) as exc:
            raise SurrogateUnavailable(f"the GP fit failed: {exc}") from None
        samples = np.vstack([
            gp.share(b, n_point_sets).sample_posterior(_points(space, n_points, X.shape[1], [seed, 1, b]), int(c),
                                                       [seed, 2, b])
            for b, c in enumerate(counts)
        ])  # (S, M)
        checks = calibration(gp, replicate_columns, prospective)
    curve = surrogate_expected_max(samples, n_max=n_max or n, maximize=maximize, level=level)
    return SurrogateCurve(curve=curve, n_fit=int(fit_index.size), n_finished=n,
                          hyperparameters=gp.hyperparameters(), n_points=n_points, n_samples=n_samples,
                          n_point_sets=n_point_sets, seed=seed, calibration=checks, bounds=bounds)


def _checked(X: ArrayLike, y: ArrayLike, *, n_samples: int, n_point_sets: int, space: SearchSpace | None,
             categories: Mapping[int, int] | None) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                                            Mapping[int, int] | None]:
    """``X`` and ``y`` as float arrays, checked against each other, the settings and the space; the
    categorical columns (default: the space's).

    Raises:
        ValueError: Malformed settings.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"X must be (N, d) and y (N,); got shapes {X.shape} and {y.shape}")
    if not 1 <= n_point_sets <= n_samples:
        raise ValueError(f"n_point_sets must be in 1..n_samples={n_samples}; got {n_point_sets}")
    if space is not None and space.d != X.shape[1]:
        raise ValueError(f"X has {X.shape[1]} columns but the space {space.d} dims")
    if space is not None and categories is None:
        categories = space.categories()
    return X, y, categories
