"""Fitting the GP: type-II maximum likelihood (or MAP) of the hyperparameters with seeded
restarts, on all observations or a seeded subset of them, then the exact posterior.

The surrogate's modelling assumptions are in :mod:`sweeper.search.gp`; GPy's model (boxes,
starts, building, reading back) in :mod:`sweeper.search.gp_model`.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sweeper.search.design import as_generator
from sweeper.search.gp import GPY_JITTER, GPFit
from sweeper.search.gp_model import (
    INIT_NOISE,
    NOISE_MAX,
    TermLayout,
    build_model,
    read_terms,
    start_values,
    term_layout,
    values_from_fit,
)
from sweeper.search.kernels import category_labels, kernel_family
from sweeper.search.warping import OutputWarp

log = logging.getLogger(__name__)

#: Observations of each category kept in a hyperparameter subset however rare it is (:func:`fit_subset`).
MIN_PER_CATEGORY = 3


def _standardize(y: NDArray[np.float64]) -> tuple[float, float]:
    mean = float(np.mean(y))
    std = float(np.std(y)) if y.shape[0] > 1 else 0.0
    if not np.isfinite(std) or std <= 0.0:
        std = 1.0
    return mean, std


def _check_data(X: Any, y: Any) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must have shape (n, d) with n, d >= 1; got shape {X.shape}")
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},) to match X; got shape {y.shape}")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise ValueError("X and y must be finite; drop failed trials before fitting the GP")
    return X, y


def fit_gp(
    X: NDArray[np.float64],
    y: NDArray[np.float64],
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
    """Fit a GP by maximum marginal likelihood with seeded restarts.

    The covariance is a sum of terms (default: one term over every column); each is a
    stationary kernel (``kernel``) over its continuous columns times an intrinsic
    coregionalization factor ``B = W Wᵀ + diag(kappa)`` of rank ``rank`` for each of its
    categorical columns (see :mod:`sweeper.search.kernels`). When a term has factors, its
    stationary variance is fixed to 1: the factors carry the scale.

    Restart 0 starts from lengthscale 0.3, variance 1, noise 1e-2, ``W = 0.5``, ``kappa
    = 0.5``; each further restart draws its lengthscales log-uniformly in ``[0.05, 2]`` and
    ``W`` normal with sd 0.5 from ``seed`` (never from numpy's global RNG, unlike GPy's
    ``optimize_restarts``), so the same data and seed give bit-identical hyperparameters.
    A restart that fails numerically is skipped. With ``n == 1`` there is nothing to
    learn: the starting hyperparameters are kept.

    Scale: each likelihood evaluation costs ``O(n^3)`` and an optimisation needs tens to
    hundreds of them, so above ``max_fit_points`` observations the restarts run on a
    seeded uniform random subset of that many (:func:`fit_subset`; "subset of data",
    Rasmussen & Williams 2006 §8.3.3; a strong baseline in Chalupka, Williams & Murray
    2013, JMLR 14). While ``n <= refine_max_points``, the best of them is then refined by
    one more L-BFGS-B run on all observations, from whichever restart's optimum has the
    highest likelihood on all of them: it starts in the right basin and converges
    in tens of evaluations, where the restarts on all of them would need hundreds (a
    subset's optimum alone maps Hartmann-6 at n = 1000 about 20 % worse than the full
    fit; see bench/scale.py). The returned GP conditions on *every* observation exactly
    (one ``O(n^3)`` Cholesky: about 3 s at ``n = 5000`` on one core), and its
    ``log_likelihood`` is that of all the data. At or below ``max_fit_points`` (or with
    ``None``) nothing changes: every observation is fitted, bit-identically to a call
    without it.

    Warm start (``init``): the first restart starts from ``init``'s hyperparameters (e.g.
    the previous fit of a sweep, on fewer observations), and the other ``n_restarts - 1``
    follow the usual sequence (the fixed start, then random ones). A refit after a few more
    results converges from it in a handful of L-BFGS-B iterations; the fixed start guards
    against the warm one staying in a basin the new results have left (see
    :class:`sweeper.search.policy.MultiversePolicy`). Above ``max_fit_points`` with a refinement,
    the warm start skips the subset: it is scored on all observations next to the other
    restarts' subset optima, and the refinement starts from the best of them (usually the
    warm one, which then converges in a few iterations). An ``init`` of another layout
    (dimension, categories, terms, rank, kernel) is ignored.

    Lengthscale prior (``lengthscale_prior=(mu, sigma)``): the lengthscales of continuous
    columns get a ``LogNormal(mu, sigma)`` prior and the fit maximises the posterior (MAP)
    instead of the likelihood; see :func:`dimension_scaled_prior`. Restarts are then ranked
    by likelihood plus log prior; ``log_likelihood`` stays the likelihood alone.

    Args:
        X: Inputs in the unit cube, shape ``(n, d)``, ``n >= 1``.
        y: Outputs in original units, shape ``(n,)``, finite.
        seed: Seed of the restarts (see :func:`sweeper.search.design.as_generator`).
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
    if n_restarts < 1:
        raise ValueError(f"n_restarts must be >= 1; got {n_restarts!r}")
    if not 0.0 < noise_floor < NOISE_MAX:
        raise ValueError(f"noise_floor must be in (0, {NOISE_MAX}); got {noise_floor!r}")
    if rank < 1:
        raise ValueError(f"rank must be >= 1; got {rank!r}")
    if max_fit_points is not None and (isinstance(max_fit_points, bool) or int(max_fit_points) != max_fit_points
                                       or max_fit_points < 2):
        raise ValueError(f"max_fit_points must be an int >= 2 or None; got {max_fit_points!r}")
    if refine_max_points is not None and (isinstance(refine_max_points, bool)
                                          or int(refine_max_points) != refine_max_points or refine_max_points < 1):
        raise ValueError(f"refine_max_points must be an int >= 1 or None; got {refine_max_points!r}")
    if lengthscale_prior is not None:
        mu, sigma = (float(v) for v in lengthscale_prior)
        if not (np.isfinite(mu) and np.isfinite(sigma) and sigma > 0):
            raise ValueError(f"lengthscale_prior must be (mu, sigma) with sigma > 0, finite; got {lengthscale_prior!r}")
        lengthscale_prior = (mu, sigma)
    family, ard = kernel_family(kernel)
    layout = term_layout(X.shape[1], dict(categories or {}), terms)
    warm = None if init is None else values_from_fit(init, layout, family, ard, rank, noise_floor)
    rng = as_generator(seed)
    if warp is not None:
        outside = [v for v in y if not warp.bounds.contains(float(v))]
        if outside:
            raise ValueError(f"{len(outside)} output(s) outside the warp's bounds {warp.bounds.text()}, "
                             f"e.g. {outside[0]!r}")
    g = y if warp is None else warp.forward(y)
    y_mean, y_std = _standardize(g)
    z = (g - y_mean) / y_std
    subset = None
    if max_fit_points is not None and X.shape[0] > max_fit_points:
        subset = fit_subset(X.shape[0], int(max_fit_points), rng, category_labels(X, categories))
    X_fit, z_fit = (X, z) if subset is None else (X[subset], z[subset])
    optima: list[list[NDArray[np.float64]]] = []
    refine = subset is not None and refine_max_points is not None and X.shape[0] <= refine_max_points
    if refine and warm is not None:
        # The warm start (an optimum for most of these observations) goes straight to the
        # refinement on all of them, next to the other starts' optima on the subset.
        best = None
        if n_restarts > 1:
            best = _maximise_likelihood(X_fit, z_fit, noise_floor, layout, family, ard, rank, n_restarts - 1,
                                        max_iters, rng, optima, None, lengthscale_prior)
        refined = _refine(X, z, noise_floor, layout, family, ard, rank, [warm, *optima], max_iters,
                          lengthscale_prior)
        if refined is None and best is None:  # nothing else to fall back on: the subset from the warm start
            best = _maximise_likelihood(X_fit, z_fit, noise_floor, layout, family, ard, rank, 1, max_iters, rng,
                                        optima, warm, lengthscale_prior)
        ll, values = refined if refined is not None else best  # type: ignore[misc]
    else:
        ll, values = _maximise_likelihood(X_fit, z_fit, noise_floor, layout, family, ard, rank, n_restarts,
                                          max_iters, rng, optima, warm, lengthscale_prior)
        if refine:
            refined = _refine(X, z, noise_floor, layout, family, ard, rank, optima, max_iters, lengthscale_prior)
            if refined is not None:  # else keep the subset's optimum
                ll, values = refined
    fitted_terms, noise = read_terms(values, layout, family)
    gp = GPFit(
        terms=fitted_terms, noise_variance=noise + GPY_JITTER, y_mean=y_mean, y_std=y_std,
        log_likelihood=ll, X=X.copy(), y=y.copy(), kernel_name=kernel, warp=warp,
    )
    if subset is not None:
        # The subset's likelihood would not compare with other fits of the same data; the
        # full data's comes from the factor just computed (frozen dataclass, set once here).
        object.__setattr__(gp, "log_likelihood", gp.log_marginal_likelihood())
        log.debug("GP hyperparameters fitted on %d of %d observations", subset.shape[0], X.shape[0])
    return gp


def fit_subset(
    n: int, size: int, seed: int | Sequence[int] | np.random.Generator | None,
    labels: Sequence[NDArray[np.intp]] = (),
) -> NDArray[np.intp]:
    """Which ``size`` of ``n`` observations to fit hyperparameters on: a seeded uniform draw.

    Uniform, not space-filling: the hyperparameters describe how fast the function varies
    over the distances the data actually has, and a uniform draw keeps the mix of near and
    far pairs (and so the noise and lengthscale evidence) of the whole set, only thinner;
    a maximin subset would drop exactly the close pairs that pin the noise down.

    Categories (``labels``: one category index per observation for each categorical
    column) are the exception: a category seen a few times in thousands of trials would
    often be missing from a uniform draw, and its row of the coregionalization matrix
    would then be fitted on nothing while the posterior conditions on its results. So up
    to ``MIN_PER_CATEGORY`` observations of every category present are drawn first, and
    the rest of the subset uniformly from the others. Without labels the draw is the
    plain uniform one.

    Returns:
        Sorted distinct indices into ``range(n)``, shape ``(min(size, n),)``.
    """
    if size >= n:
        return np.arange(n, dtype=np.intp)
    rng = as_generator(seed)
    if not labels:
        return np.sort(rng.choice(n, size=size, replace=False)).astype(np.intp)
    reserved: list[int] = []
    for column in labels:
        for level in np.unique(column):
            members = np.flatnonzero(column == level)
            reserved.extend(rng.choice(members, size=min(MIN_PER_CATEGORY, members.size), replace=False).tolist())
    kept = np.unique(np.asarray(reserved, dtype=np.intp))
    if kept.size >= size:  # more categories than the subset holds: a uniform draw among the reserved
        return np.sort(rng.choice(kept, size=size, replace=False)).astype(np.intp)
    rest = np.setdiff1d(np.arange(n, dtype=np.intp), kept)
    fill = rng.choice(rest, size=size - kept.size, replace=False)
    return np.sort(np.concatenate([kept, fill])).astype(np.intp)


def _maximise_likelihood(
    X: NDArray[np.float64], z: NDArray[np.float64], noise_floor: float, layout: list[TermLayout],
    family: str, ard: bool, rank: int, n_restarts: int, max_iters: int, rng: np.random.Generator,
    optima: list[list[NDArray[np.float64]]] | None = None,
    warm: list[NDArray[np.float64]] | None = None,
    lengthscale_prior: tuple[float, float] | None = None,
) -> tuple[float, list[NDArray[np.float64]]]:
    """The best restart's log likelihood and parameter values (order of :func:`start_values`).

    Every successful restart's optimum is appended to ``optima`` when given. ``warm``
    replaces restart 0's fixed start. With a prior, restarts are ranked by likelihood plus
    log prior (the MAP objective); the likelihood alone is returned.
    """
    n, d = X.shape
    best: tuple[float, list[NDArray[np.float64]]] | None = None
    errors: list[str] = []
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # GPy/paramz warn on every overflow and re-constraint
        try:
            model = build_model(X, z, noise_floor, layout, family, ard, rank, lengthscale_prior)
        except np.linalg.LinAlgError as exc:
            raise RuntimeError(f"GP fit failed to start (n={n}, d={d}): {exc}") from exc
        for i in range(n_restarts):
            # With a warm start it comes first, then the usual sequence (fixed, random, ...).
            j = i if warm is None else i - 1
            start = warm if j < 0 else start_values(layout, ard, rank, max(INIT_NOISE, noise_floor), rng if j else None)
            try:
                model[:] = np.concatenate(start)
                if n > 1:
                    model.optimize(optimizer="lbfgsb", max_iters=max_iters, messages=False)
                ll = float(model.log_likelihood())
                score = ll + float(model.log_prior())
            except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
                errors.append(f"restart {i}: {type(exc).__name__}: {exc}")
                log.debug("GP restart %d failed: %s", i, exc)
                continue
            if not (np.isfinite(ll) and np.isfinite(score)):
                errors.append(f"restart {i}: non-finite log likelihood {ll}")
                continue
            log.debug("GP restart %d: log likelihood %.4f", i, ll)
            values = [np.array(p.values, dtype=np.float64) for p in model.flattened_parameters]
            if optima is not None:
                optima.append(values)
            if best is None or score > best[0]:
                best = (score, ll, values)
            if n == 1:
                break  # nothing to optimise: every restart would give the same fit
    if best is None:
        raise RuntimeError(
            f"GP fit failed in all {n_restarts} restarts (n={n}, d={d}): " + "; ".join(errors)
        )
    return best[1], best[2]


def _refine(
    X: NDArray[np.float64], z: NDArray[np.float64], noise_floor: float, layout: list[TermLayout],
    family: str, ard: bool, rank: int, starts: list[list[NDArray[np.float64]]], max_iters: int,
    lengthscale_prior: tuple[float, float] | None = None,
) -> tuple[float, list[NDArray[np.float64]]] | None:
    """Optimise from the start with the highest likelihood on this data (None if all fail).

    Scoring every start first costs one factorisation each; optimising costs tens. The
    optimum that is best on a subset need not be best on all the data (a lengthscale
    that switches a dimension off fits 300 Hartmann-6 points, not 500), so the subset's
    restarts are re-ranked here before the one refinement.
    """
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            model = build_model(X, z, noise_floor, layout, family, ard, rank, lengthscale_prior)
            scored = []
            for start in starts:
                model[:] = np.concatenate(start)
                scored.append(float(model.log_likelihood()) + float(model.log_prior()))
            finite = [i for i, ll in enumerate(scored) if np.isfinite(ll)]
            if not finite:
                return None
            model[:] = np.concatenate(starts[max(finite, key=scored.__getitem__)])
            model.optimize(optimizer="lbfgsb", max_iters=max_iters, messages=False)
            ll = float(model.log_likelihood())
        except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
            log.debug("refining the GP fit on all %d observations failed: %s", X.shape[0], exc)
            return None
    if not np.isfinite(ll):
        return None
    return ll, [np.array(p.values, dtype=np.float64) for p in model.flattened_parameters]


def dimension_scaled_prior(d: int) -> tuple[float, float]:
    """``(mu, sigma)`` of the LogNormal lengthscale prior of Hvarfner et al. (2024) for ``d`` inputs.

    ``mu = sqrt(2) + log(d) / 2``, ``sigma = sqrt(3)`` on unit-cube inputs, BoTorch's default
    since 0.12 (whose ``SingleTaskGP`` the efficiency benchmark compares with). As a MAP
    penalty its mode is ``exp(mu - sigma^2)``: 0.29 for ``d = 2``, 0.5 for ``d = 6``; it
    keeps a lengthscale fitted on a handful of points from running off to the box's edge.

    Reference:
        Hvarfner, C., Hellsten, E. O., Nardi, L. (2024). Vanilla Bayesian Optimization
        Performs Great in High Dimensions. ICML 2024.
    """
    if d < 1:
        raise ValueError(f"d must be >= 1; got {d!r}")
    return float(np.sqrt(2.0) + 0.5 * np.log(d)), float(np.sqrt(3.0))
