"""GP fits of a bounded metric: the warp's shapes and the GP's hyperparameters, learned together.

:func:`fit_bounded_gp` is :func:`sweeper.search.gp_fit.fit_gp` on ``warp(y)`` (see
:mod:`sweeper.search.warping`) with the warp's two Kumaraswamy shapes ``(a, b)`` chosen by the
same criterion as the hyperparameters: the marginal likelihood of the *original* values,
``log p(z | X) - n log s + sum_i log w'(y_i)`` (Snelson et al. 2004, eq. 6; ``s`` the
standardising sd), plus a LogNormal(0, 1) prior on each shape that keeps them near the
plain logit unless the data say otherwise (a MAP estimate of the warp).

It alternates (coordinate ascent, each step raising the objective):

1. fit the GP's hyperparameters on the current warp (:func:`sweeper.search.gp_fit.fit_gp`: restarts,
   subsets and warm starts as usual);
2. with the covariance fixed, maximise over ``(log a, log b)``: only ``z`` changes, so each
   evaluation is two triangular solves against the fit's Cholesky factor (``O(n^2)``);

until the shapes move by less than ``SHAPE_TOL`` in log units (at most ``rounds`` refits).
A metric with one bound has a fixed warp (a log of the distance to it): one fit.

References:
    Snelson, E., Rasmussen, C. E., Ghahramani, Z. (2004). Warped Gaussian Processes. NIPS 16.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.linalg
import scipy.optimize
from numpy.typing import ArrayLike, NDArray

from sweeper.search.gp import GPFit
from sweeper.search.gp_fit import fit_gp
from sweeper.search.gp_linalg import solve_lower
from sweeper.search.warping import SHAPE_BOUNDS, MetricBounds, OutputWarp

log = logging.getLogger(__name__)

_LOG_2PI = math.log(2 * math.pi)
#: sd of the LogNormal(0, sd) prior on each Kumaraswamy shape (the same in sweeper.search.hyperposterior).
SHAPE_PRIOR_SD = 1.0
#: Stop alternating once both shapes move by less than this (log units).
SHAPE_TOL = 0.05
#: Refits of the hyperparameters after the first, at most.
MAX_ROUNDS = 3


def shape_log_prior(log_a: float, log_b: float, sd: float = SHAPE_PRIOR_SD) -> float:
    """Log density (up to a constant) of the shapes' LogNormal(0, sd) priors, in log units."""
    return -0.5 * (log_a * log_a + log_b * log_b) / sd**2


def warped_log_likelihood(warp: OutputWarp, y: NDArray[np.float64], L: NDArray[np.float64]) -> float:
    """``log p(y)`` of original values under a GP on standardised ``warp(y)`` with covariance factor ``L``.

    ``log N(z; 0, L L^T) - n log s + sum log w'(y)``, ``z = (w(y) - mean) / s`` (the data's own
    mean and sd, as :func:`sweeper.search.gp_fit.fit_gp` standardises).
    """
    g, log_jacobian = warp.forward_and_log_jacobian(y)
    standardised = standardise(g)
    if standardised is None:
        return -math.inf
    s, z = standardised
    return standardised_log_likelihood(z, s, L, float(np.sum(log_jacobian)))


def standardise(g: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]] | None:
    """The sd of warped values ``g`` and ``g`` standardised by its own mean and sd; None where the warped
    likelihood is ``-inf`` (a value not finite, or none spread)."""
    if not np.all(np.isfinite(g)):
        return None
    s = float(np.std(g))
    if not s > 0:
        return None
    return s, (g - np.mean(g)) / s


def standardised_log_likelihood(z: NDArray[np.float64], s: float, L: NDArray[np.float64],
                                log_jacobian: float) -> float:
    """:func:`warped_log_likelihood` from the standardised values ``z``, their sd ``s`` and ``sum log w'(y)``."""
    v = solve_lower(L, z)
    n = z.shape[0]
    ll = -0.5 * float(v @ v) - float(np.sum(np.log(np.diag(L)))) - 0.5 * n * _LOG_2PI
    log_p: float = ll - n * math.log(s) + log_jacobian
    return log_p


def best_shapes(gp: GPFit, warp: OutputWarp, prior_sd: float = SHAPE_PRIOR_SD) -> tuple[float, float]:
    """The shapes ``(a, b)`` that maximise the warped likelihood plus prior with ``gp``'s covariance fixed.

    L-BFGS-B over ``(log a, log b)`` inside :data:`~sweeper.search.warping.SHAPE_BOUNDS`, from the
    current shapes and from the plain logit; the better optimum wins.
    """
    y, L = gp.y, gp.cholesky
    box = [(math.log(SHAPE_BOUNDS[0]), math.log(SHAPE_BOUNDS[1]))] * 2

    def loss(t: NDArray[np.float64]) -> float:
        value = warped_log_likelihood(warp.with_shapes(math.exp(t[0]), math.exp(t[1])), y, L)
        return 1e300 if not math.isfinite(value) else -(value + shape_log_prior(t[0], t[1], prior_sd))

    best = (loss(np.log([warp.a, warp.b])), math.log(warp.a), math.log(warp.b))
    for start in {(math.log(warp.a), math.log(warp.b)), (0.0, 0.0)}:
        with np.errstate(all="ignore"):
            res = scipy.optimize.minimize(loss, np.array(start), method="L-BFGS-B", bounds=box)
        if np.isfinite(res.fun) and res.fun < best[0]:
            best = (float(res.fun), float(res.x[0]), float(res.x[1]))
    return math.exp(best[1]), math.exp(best[2])


def fit_bounded_gp(
    X: ArrayLike, y: ArrayLike, bounds: MetricBounds, *, shapes: Sequence[float] | None = None,
    rounds: int = MAX_ROUNDS, shape_prior_sd: float = SHAPE_PRIOR_SD, **fit_kwargs: Any,
) -> GPFit:
    """Fit the GP of a bounded metric with its warp learned (see the module docstring).

    Args:
        X: Inputs in the unit cube, ``(n, d)``.
        y: Outputs in original units, inside ``bounds``, ``(n,)``.
        bounds: The metric's declared bounds.
        shapes: Starting ``(a, b)`` (e.g. the previous fit's); default the plain logit.
        rounds: Most refits of the hyperparameters after the first.
        shape_prior_sd: sd of the shapes' LogNormal(0, sd) prior (the searcher's default, 1;
            the analysis starts its sampler from the MAP under its own, wider prior).
        **fit_kwargs: Passed to :func:`sweeper.search.gp_fit.fit_gp` (``seed``, ``categories``, ``init``, ...).
            Later rounds start warm from the previous round's fit with 2 restarts.

    Returns:
        The fit, with ``gp.warp`` its learned warp.

    Raises:
        ValueError: Malformed data, or an output outside ``bounds``.
        RuntimeError: Every restart of a fit failed.
    """
    y = np.asarray(y, dtype=np.float64)
    a, b = (1.0, 1.0) if shapes is None else (float(shapes[0]), float(shapes[1]))
    warp = OutputWarp.for_data(bounds, y, a, b)
    gp = fit_gp(X, y, warp=warp, **fit_kwargs)
    if not warp.two_sided:
        return gp
    refit = {**fit_kwargs, "n_restarts": min(2, int(fit_kwargs.get("n_restarts", 3)))}
    for _ in range(rounds):
        a, b = best_shapes(gp, warp, shape_prior_sd)
        moved = max(abs(math.log(a / warp.a)), abs(math.log(b / warp.b)))
        if moved < SHAPE_TOL:
            break
        warp = warp.with_shapes(a, b)
        gp = fit_gp(X, y, warp=warp, **{**refit, "init": gp})
    log.debug("bounded GP: %s; %s", warp.describe(), gp.describe())
    return gp
