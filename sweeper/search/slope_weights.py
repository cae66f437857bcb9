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

#: :func:`metric_variance_weights` stay within ``exp(+-_LOG_WEIGHT_LIMIT)``: finite, positive, and a sum of
#: 1024 of them times a slope weight still finite.
_LOG_WEIGHT_LIMIT = 600.0
#: A member's sd (in units of its ``y_std``) below which a point counts as known: its weight is the delta method's.
_KNOWN_SD = 1e-12
#: The least variance ratio taken in logs (a metric variance of exactly 0: every node on the bound).
_TINY = 1e-300


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


def metric_variance_weights(member: GPFit, X_mc: NDArray[np.float64]) -> NDArray[np.float64]:
    """Each integration point's weight that turns a member's standardised variance into the metric's units.

    ``y_std^2 * Var[y] / Var[g]`` for the member's predictive ``g ~ N(m, s^2)`` on its modelled scale and
    ``y = warp^{-1}(g)``: the variance of the metric over the member's doubt, by 32-node Gauss-Hermite
    (:meth:`sweeper.search.warping.OutputWarp.moments`, as the maps' sd is computed), per unit of the
    modelled variance. Where ``s`` is nil it is the delta method's ``(y_std * dy/dg)^2`` at ``m``, with
    ``dy/dg = 1 / warp'(y)``; without a warp it is ``y_std^2`` everywhere. Summing IVR over a bounded
    mixture's members with these weights counts the variance each leaves on the scale the maps are drawn
    on: near a bound, where the warp stretches, a small modelled variance is a small one of the metric.
    Not the delta method alone: at a mean near the bound it counts a point the member knows little about
    as nearly known (its slope there is flat, though ``g`` may well lie where the warp is steep), so a
    plateau near the bound went undersampled and its band too narrow to hold the truth.
    NOTE: docs/decisions/0070-ivr-over-the-bounded-mixture.md,
    docs/decisions/0075-metric-variance-over-the-members-doubt.md
    """
    X_mc = np.asarray(X_mc, dtype=np.float64)
    log_scale = np.full(X_mc.shape[0], 2.0 * np.log(float(member.y_std)))
    if member.warp is not None:
        g, sd = member.predict_warped(X_mc)
        _, metric_sd = member.warp.moments(g, sd)
        known = sd <= _KNOWN_SD * float(member.y_std)
        ratio = (metric_sd / np.where(known, 1.0, sd)) ** 2
        slope = np.exp(-2.0 * member.warp.log_jacobian(member.warp.inverse(g)))
        log_scale += np.log(np.maximum(np.where(known, slope, ratio), _TINY))
    # In logs, and kept within e^+-600: an extreme warp's slope neither overflows nor vanishes (IVR needs w > 0).
    weights: NDArray[np.float64] = np.exp(np.clip(log_scale, -_LOG_WEIGHT_LIMIT, _LOG_WEIGHT_LIMIT))
    return weights
