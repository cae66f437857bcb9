"""Weights for IVR's integral where a stationary GP's map errs most: the slope of its fitted mean.

Plain integrated variance reduction (:mod:`sweeper.search.acquisition`) depends on where the
trials are, never on what they showed. On a real hyperparameter map the error of a stationary
GP's mean lies on the cliffs between a plateau and the rest, which the variance cannot see; the
slope of the fitted mean can. NOTE: docs/decisions/0062-slope-weighted-ivr.md
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from sweeper.search.gp import GPFit


def slope_weights(gp: GPFit, X_mc: NDArray[np.float64], strength: float, step: float = 1e-3) -> NDArray[np.float64]:
    """Weights for IVR's integral: ``1 + strength * s(u) / mean(s)``, ``s`` the squared slope of the posterior mean.

    ``s(u) = sum_c (l_c dmu/du_c)^2`` over the continuous columns of the GP's kernel terms, each
    derivative a central difference of ``step`` (one-sided at the cube's faces) in units of the
    column's lengthscale ``l_c``. A stationary GP's mean errs most where the map is steepest (a
    cliff between a plateau and the rest, an edge where the function rises fast), and the fitted
    posterior variance cannot see it: that depends on where the points are, not on what they
    showed. Weighting the variance by the slope spends trials there (in the spirit of Lam &
    Notz 2008's EIGF, whose criterion adds the local variation of the fit to its variance).
    ``strength`` 0 gives equal weights, Bell et al.'s plain IVR; the mean of ``s`` normalises
    the slope, so the weights do not depend on the metric's units. A flat mean (a constant map)
    gives equal weights too. NOTE: docs/decisions/0062-slope-weighted-ivr.md

    References:
        Lam, C. Q., Notz, W. I. (2008). Sequential adaptive designs in computer experiments
        for response surface model fit. Statistics and Applications 6.
    """
    X_mc = np.asarray(X_mc, dtype=np.float64)
    weights = np.ones(X_mc.shape[0])
    if strength <= 0.0 or X_mc.shape[0] == 0:
        return weights
    scale: dict[int, float] = {}
    for term in gp.terms:
        for c, ls in zip(term.columns, np.broadcast_to(term.lengthscales, (len(term.columns),)), strict=True):
            scale[c] = min(scale.get(c, np.inf), float(ls))
    slope = np.zeros(X_mc.shape[0])
    for c, ls in scale.items():
        up, down = X_mc.copy(), X_mc.copy()
        up[:, c] = np.minimum(X_mc[:, c] + step, 1.0)
        down[:, c] = np.maximum(X_mc[:, c] - step, 0.0)
        derivative = (gp.predict_mean(up) - gp.predict_mean(down)) / (up[:, c] - down[:, c])
        slope += (ls * derivative) ** 2
    mean = float(np.mean(slope))
    if not np.isfinite(mean) or mean <= 0.0:
        return weights
    return weights + strength * slope / mean
