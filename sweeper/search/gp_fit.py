"""Fitting the GP: type-II maximum likelihood (or MAP) of the hyperparameters with seeded
restarts, on all observations or a seeded subset of them, then the exact posterior on all.
The model's assumptions are in :mod:`sweeper.search.gp`, its parameters in :mod:`sweeper.search.gp_model`, its
objective in :mod:`sweeper.search.marginal_likelihood`.

Restarts: restart 0 starts from lengthscale 0.3, variance 1, noise 1e-2, ``W = 0.5``,
``kappa = 0.5``; each further restart draws its lengthscales log-uniformly in ``[0.05, 2]``
and ``W`` normal with sd 0.5 from the fit's seed (never from numpy's global RNG, unlike GPy's
``optimize_restarts``), so the same data and seed give bit-identical hyperparameters. A
restart that fails numerically is skipped. With ``n == 1`` there is nothing to learn: the
starting hyperparameters are kept.

Scale: each likelihood evaluation costs ``O(n^3)`` and an optimisation needs tens to hundreds
of them, so above ``max_fit_points`` observations the restarts run on a seeded uniform random
subset of that many (:func:`fit_subset`; "subset of data", Rasmussen & Williams 2006 §8.3.3;
a strong baseline in Chalupka, Williams & Murray 2013). While ``n <= refine_max_points``, the
best of them is then refined by one more L-BFGS-B run on all observations, from whichever
restart's optimum has the highest likelihood on all of them: it starts in the right basin and
converges in tens of evaluations, where restarts on all of them would need hundreds. The
returned GP conditions on *every* observation exactly (one ``O(n^3)`` Cholesky), and its
``log_likelihood`` is that of all the data. At or below ``max_fit_points`` (or with ``None``)
every observation is fitted, bit-identically to a call without it.
NOTE: docs/decisions/0003-gp-hyperparameters-on-a-subset.md

Warm start (``init``): the first restart starts from ``init``'s hyperparameters (e.g. the
previous fit of a sweep, on fewer observations), and the other ``n_restarts - 1`` follow the
usual sequence (the fixed start, then random ones). A refit after a few more results converges
from it in a handful of L-BFGS-B iterations; the fixed start guards against the warm one
staying in a basin the new results have left.
Above ``max_fit_points`` with a refinement, the warm start skips the subset: it is scored on
all observations next to the other restarts' subset optima, and the refinement starts from the
best of them (usually the warm one, which then converges in a few iterations). An ``init`` of
another layout (dimension, categories, terms, rank, kernel) is ignored.

Lengthscale prior (``lengthscale_prior=(mu, sigma)``): the lengthscales of continuous columns
get a ``LogNormal(mu, sigma)`` prior and the fit maximises the posterior (MAP) instead of the
likelihood (:func:`~sweeper.search.gp_model.dimension_scaled_prior`). Restarts are then ranked
by likelihood plus log prior; ``log_likelihood`` stays the likelihood alone.

References:
    Rasmussen, C. E., & Williams, C. K. I. (2006). Gaussian Processes for Machine Learning.
    MIT Press, §8.3.3 (subset of data).
    Chalupka, K., Williams, C. K. I., & Murray, I. (2013). A Framework for Evaluating
    Approximation Methods for Gaussian Process Regression. JMLR 14.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sweeper.search.design import as_generator
from sweeper.search.gp import GPY_JITTER, GPFit
from sweeper.search.gp_linalg import log_marginal_likelihood, posterior_factor, sum_of_terms
from sweeper.search.gp_model import (
    INIT_NOISE,
    NOISE_MAX,
    TermLayout,
    read_terms,
    start_values,
    term_layout,
    values_from_fit,
)
from sweeper.search.gp_model import dimension_scaled_prior as dimension_scaled_prior  # re-exported: its old home
from sweeper.search.gp_subset import fit_subset as fit_subset  # re-exported: its old home
from sweeper.search.kernels import KernelTerm, category_labels, kernel_family
from sweeper.search.marginal_likelihood import MarginalLikelihood, Values
from sweeper.search.warping import OutputWarp

log = logging.getLogger(__name__)

#: What a numerically failing restart or refinement raises.
_NUMERIC_ERRORS = (np.linalg.LinAlgError, ValueError, FloatingPointError)


def _standardize(y: NDArray[np.float64]) -> tuple[float, float]:
    mean = float(np.mean(y))
    std = float(np.std(y)) if y.shape[0] > 1 else 0.0
    if not np.isfinite(std) or std <= 0.0:
        std = 1.0
    return mean, std


def _check_data(X_in: ArrayLike, y_in: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    X = np.asarray(X_in, dtype=np.float64)
    y = np.asarray(y_in, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must have shape (n, d) with n, d >= 1; got shape {X.shape}")
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},) to match X; got shape {y.shape}")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise ValueError("X and y must be finite; drop failed trials before fitting the GP")
    return X, y


def _is_count(value: int | None, least: int) -> bool:
    """Whether ``value`` is None or an int (not a bool) of at least ``least``."""
    return value is None or not (isinstance(value, bool) or int(value) != value or value < least)


def _check_settings(
    n_restarts: int, noise_floor: float, rank: int, max_fit_points: int | None, refine_max_points: int | None,
    lengthscale_prior: tuple[float, float] | None,
) -> tuple[float, float] | None:
    """Raise ValueError on a malformed setting; the prior as two floats."""
    if n_restarts < 1:
        raise ValueError(f"n_restarts must be >= 1; got {n_restarts!r}")
    if not 0.0 < noise_floor < NOISE_MAX:
        raise ValueError(f"noise_floor must be in (0, {NOISE_MAX}); got {noise_floor!r}")
    if rank < 1:
        raise ValueError(f"rank must be >= 1; got {rank!r}")
    if not _is_count(max_fit_points, 2):
        raise ValueError(f"max_fit_points must be an int >= 2 or None; got {max_fit_points!r}")
    if not _is_count(refine_max_points, 1):
        raise ValueError(f"refine_max_points must be an int >= 1 or None; got {refine_max_points!r}")
    if lengthscale_prior is None:
        return None
    mu, sigma = (float(v) for v in lengthscale_prior)
    if not (np.isfinite(mu) and np.isfinite(sigma) and sigma > 0):
        raise ValueError(f"lengthscale_prior must be (mu, sigma) with sigma > 0, finite; got {lengthscale_prior!r}")
    return mu, sigma


def _check_warp(warp: OutputWarp | None, y: NDArray[np.float64]) -> None:
    if warp is None:
        return
    outside = [v for v in y if not warp.bounds.contains(float(v))]
    if outside:
        raise ValueError(f"{len(outside)} output(s) outside the warp's bounds {warp.bounds.text()}, "
                         f"e.g. {outside[0]!r}")


@dataclass(frozen=True)
class _ModelSpec:
    """The model a fit optimises: its layout, kernel, boxes, prior and optimiser budget."""

    layout: list[TermLayout]
    family: str
    ard: bool
    rank: int
    noise_floor: float
    max_iters: int
    lengthscale_prior: tuple[float, float] | None

    def build(self, X: NDArray[np.float64], z: NDArray[np.float64]) -> MarginalLikelihood:
        return MarginalLikelihood(X, z, self.layout, self.family, self.ard, self.rank, self.noise_floor,
                                  self.lengthscale_prior)

    def start(self, i: int, warm: Values | None, rng: np.random.Generator) -> Values:
        """Restart ``i``'s start: ``warm`` first when given, then the fixed start, then seeded random ones."""
        j = i if warm is None else i - 1
        if warm is not None and j < 0:
            return warm
        return start_values(self.layout, self.ard, self.rank, max(INIT_NOISE, self.noise_floor), rng if j else None)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence numpy's floating-point warnings (an exp overflows at the boxes' far ends) and SciPy's."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def fit_gp(
    X: ArrayLike,
    y: ArrayLike,
    *,
    seed: int | Sequence[int] | np.random.Generator | None,
    n_restarts: int = 3,
    noise_floor: float = 1e-6,
    max_iters: int = 500,
    categories: Mapping[int, int] | None = None,
    kernel: str = "matern52-ard",
    terms: Sequence[Sequence[int]] | None = None,
    rank: int = 1,
    max_fit_points: int | None = None,
    refine_max_points: int | None = None,
    init: GPFit | Mapping[str, Any] | None = None,
    lengthscale_prior: tuple[float, float] | None = None,
    warp: OutputWarp | None = None,
) -> GPFit:
    """Fit a GP by maximum marginal likelihood with seeded restarts (see the module docstring).

    The covariance is a sum of terms (default: one over every column), each a stationary kernel
    over its continuous columns times a coregionalization factor ``B = W Wᵀ + diag(kappa)`` per
    categorical column (:mod:`sweeper.search.kernels`); with factors, the stationary variance is 1.

    Args:
        X: Inputs in the unit cube, shape ``(n, d)``, ``n >= 1``.
        y: Outputs in original units, shape ``(n,)``, finite.
        seed: Seed of the restarts and the subset (see :func:`sweeper.search.design.as_generator`).
        n_restarts: Number of L-BFGS-B runs, ``>= 1``.
        noise_floor: Lower bound of the noise variance (standardised scale).
        max_iters: Iteration limit of each L-BFGS-B run.
        categories: Categorical columns: column -> number of categories ``k >= 2``;
            the category of a coordinate ``u`` is ``floor(u k)``.
        kernel: One of :data:`~sweeper.search.kernels.KERNELS`.
        terms: Groups of columns, one additive term each, together every column once;
            ``[[0], [1], ...]`` is the additive kernel of the interaction test.
        rank: Rank of every ``W``, ``>= 1``.
        max_fit_points: Most observations the restarts run on (``>= 2``), or None for all.
        refine_max_points: Most observations for which a subset fit is refined on all of
            them (None: never refine).
        init: A previous fit, or its :meth:`GPFit.hyperparameters`, to start the first
            restart from (None: the usual starts only).
        lengthscale_prior: ``(mu, sigma)`` of a LogNormal prior on every continuous
            lengthscale, ``sigma > 0`` (None: maximum likelihood).
        warp: A fixed output warp of a bounded metric: the GP models ``warp(y)`` (see
            :mod:`sweeper.search.warping`; :func:`sweeper.search.bounded.fit_bounded_gp` learns one).

    Returns:
        The fit with the highest log marginal likelihood found (on the subset, or on all
        of ``X`` after a refinement), whose posterior conditions on all of ``X``.

    Raises:
        ValueError: If the data or the settings are malformed.
        RuntimeError: If every restart fails numerically.
    """
    X, y = _check_data(X, y)
    prior = _check_settings(n_restarts, noise_floor, rank, max_fit_points, refine_max_points, lengthscale_prior)
    family, ard = kernel_family(kernel)
    layout = term_layout(X.shape[1], dict(categories or {}), terms)
    spec = _ModelSpec(layout, family, ard, rank, noise_floor, max_iters, prior)
    warm = None if init is None else values_from_fit(init, spec.layout, family, ard, rank, noise_floor)
    rng = as_generator(seed)
    _check_warp(warp, y)
    g = y if warp is None else warp.forward(y)
    y_mean, y_std = _standardize(g)
    z = (g - y_mean) / y_std
    subset = None
    if max_fit_points is not None and X.shape[0] > max_fit_points:
        subset = fit_subset(X.shape[0], int(max_fit_points), rng, category_labels(X, categories))
    refine = subset is not None and refine_max_points is not None and X.shape[0] <= refine_max_points
    ll, values = _optimise(spec, X, z, subset, refine, n_restarts, rng, warm)
    fitted_terms, noise = read_terms(values, spec.layout, family)
    noise_variance = noise + GPY_JITTER
    factor = None
    if subset is not None:
        factor, ll = _on_all_data(fitted_terms, noise_variance, X, z)
        log.debug("GP hyperparameters fitted on %d of %d observations", subset.shape[0], X.shape[0])
    return GPFit(terms=fitted_terms, noise_variance=noise_variance, y_mean=y_mean, y_std=y_std,
                 log_likelihood=ll, X=X.copy(), y=y.copy(), kernel_name=kernel, warp=warp, factor=factor)


def _on_all_data(
    terms: tuple[KernelTerm, ...], noise_variance: float, X: NDArray[np.float64], z: NDArray[np.float64],
) -> tuple[tuple[NDArray[np.float64], NDArray[np.float64]], float]:
    """The posterior's factor on all the data, and the log likelihood of all of it.

    A subset's likelihood would not compare with other fits of the same data; the full data's
    comes from the factor the posterior needs anyway.
    """
    factor = posterior_factor(sum_of_terms(terms, X, X), noise_variance, z)
    return factor, log_marginal_likelihood(z, *factor)


def _optimise(
    spec: _ModelSpec, X: NDArray[np.float64], z: NDArray[np.float64], subset: NDArray[np.intp] | None, refine: bool,
    n_restarts: int, rng: np.random.Generator, warm: Values | None,
) -> tuple[float, Values]:
    """The fitted log likelihood and values: restarts on ``subset`` (None: all), then the refinement on all."""
    X_fit, z_fit = (X, z) if subset is None else (X[subset], z[subset])
    if refine and warm is not None:
        return _refine_with_warm_start(spec, X, z, X_fit, z_fit, n_restarts, rng, warm)
    optima: list[Values] = []
    best = _maximise_likelihood(spec, X_fit, z_fit, n_restarts, rng, optima, warm)
    if refine:
        refined = _refine(spec, X, z, optima)
        if refined is not None:  # else keep the subset's optimum
            return refined
    return best


def _refine_with_warm_start(
    spec: _ModelSpec, X: NDArray[np.float64], z: NDArray[np.float64], X_fit: NDArray[np.float64],
    z_fit: NDArray[np.float64], n_restarts: int, rng: np.random.Generator, warm: Values,
) -> tuple[float, Values]:
    """The warm start (an optimum for most of these observations) goes straight to the refinement on all
    of them, next to the other starts' optima on the subset."""
    optima: list[Values] = []
    best = None
    if n_restarts > 1:
        best = _maximise_likelihood(spec, X_fit, z_fit, n_restarts - 1, rng, optima, None)
    refined = _refine(spec, X, z, [warm, *optima])
    if refined is not None:
        return refined
    if best is None:  # nothing else to fall back on: the subset from the warm start
        best = _maximise_likelihood(spec, X_fit, z_fit, 1, rng, optima, warm)
    return best


def _maximise_likelihood(
    spec: _ModelSpec, X: NDArray[np.float64], z: NDArray[np.float64], n_restarts: int, rng: np.random.Generator,
    optima: list[Values], warm: Values | None,
) -> tuple[float, Values]:
    """The best restart's log likelihood and parameter values (order of :func:`start_values`).

    Every successful restart's optimum is appended to ``optima``. ``warm`` replaces restart
    0's fixed start. With a prior, restarts are ranked by likelihood plus log prior (the MAP
    objective); the likelihood alone is returned.
    """
    n, d = X.shape
    best: tuple[float, float, Values] | None = None  # (score, log likelihood, values)
    errors: list[str] = []
    with _quiet():
        model = spec.build(X, z)
        for i in range(n_restarts):
            start = spec.start(i, warm, rng)
            try:
                ll, score, values = _run_restart(spec, model, start, optimise=n > 1)
            except _NUMERIC_ERRORS as exc:
                errors.append(f"restart {i}: {type(exc).__name__}: {exc}")
                log.debug("GP restart %d failed: %s", i, exc)
                continue
            if not (np.isfinite(ll) and np.isfinite(score)):
                errors.append(f"restart {i}: non-finite log likelihood {ll}")
                continue
            log.debug("GP restart %d: log likelihood %.4f", i, ll)
            optima.append(values)
            if best is None or score > best[0]:
                best = (score, ll, values)
            if n == 1:
                break  # nothing to optimise: every restart would give the same fit
    if best is None:
        raise RuntimeError(f"GP fit failed in all {n_restarts} restarts (n={n}, d={d}): " + "; ".join(errors))
    return best[1], best[2]


def _run_restart(
    spec: _ModelSpec, model: MarginalLikelihood, start: Values, *, optimise: bool,
) -> tuple[float, float, Values]:
    """Optimise from ``start``: the log likelihood, the objective (plus the log prior) and the values there."""
    values = model.maximise(start, spec.max_iters) if optimise else [v.copy() for v in start]
    ll, lp = model.evaluate(values)
    return ll, ll + lp, values


def _refine(
    spec: _ModelSpec, X: NDArray[np.float64], z: NDArray[np.float64], starts: list[Values],
) -> tuple[float, Values] | None:
    """Optimise from the start with the highest likelihood on this data (None if all fail).

    Scoring every start first costs one factorisation each; optimising costs tens. The
    optimum that is best on a subset need not be best on all the data, so the subset's
    restarts are re-ranked here before the one refinement.
    """
    with _quiet():
        try:
            model = spec.build(X, z)
            scored = [sum(_score(model, start)) for start in starts]
            finite = [i for i, ll in enumerate(scored) if np.isfinite(ll)]
            if not finite:
                return None
            values = model.maximise(starts[max(finite, key=scored.__getitem__)], spec.max_iters)
            ll = model.evaluate(values)[0]
        except _NUMERIC_ERRORS as exc:
            log.debug("refining the GP fit on all %d observations failed: %s", X.shape[0], exc)
            return None
    if not np.isfinite(ll):
        return None
    return ll, values


def _score(model: MarginalLikelihood, values: Values) -> tuple[float, float]:
    """``(log likelihood, log prior)`` of ``values``; ``-inf`` where the covariance does not factorise."""
    try:
        return model.evaluate(values)
    except np.linalg.LinAlgError:
        return -np.inf, 0.0

