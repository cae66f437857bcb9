"""Output warping: fit the GP to a monotone transform of the metric, predict in the metric's units.

Why: :func:`sweeper.gp.fit_gp` assumes the metric is a stationary Gaussian process with
Gaussian noise. Real hyperparameter maps often are not: an accuracy map has a plateau at
the majority-class rate and a cliff up to a ridge of good settings, so its values pile up
at both ends. A monotone transform that makes the marginal distribution of the values
closer to Gaussian lets one lengthscale fit both the plateau and the ridge (Snelson,
Rasmussen and Ghahramani 2004 learn the warp jointly; HEBO, Cowen-Rivers et al. 2022,
fits a power transform first, as done here).

Transforms (``PolicySettings.output_warping``):

- ``none``: the identity (the default);
- ``yeo-johnson``: standardise, then the Yeo-Johnson power transform (Yeo and Johnson
  2000) with its exponent ``lambda`` chosen by maximum likelihood (``scipy.stats.yeojohnson``);
  defined for any sign, and the identity at ``lambda = 1``;
- ``rank``: the rank-based inverse normal transform: the value of rank ``r`` among ``n``
  becomes the standard normal quantile of ``(r - 1/2) / n`` (ties share the mean rank);
  its inverse interpolates linearly between the observed pairs and is flat beyond them.

The GP is fitted to the transformed values; the acquisition works on that latent GP (IVR
depends on the hyperparameters only; a monotone increasing transform keeps UCB's order).
Predictions in the metric's units are the posterior mean and sd of ``g^-1(f)`` for
``f ~ N(mu, s^2)`` of the latent GP, by Gauss-Hermite quadrature (``GH_NODES`` nodes),
not ``g^-1(mu)``, which would be the posterior median.

References:
    Snelson, E., Rasmussen, C. E., Ghahramani, Z. (2004). Warped Gaussian processes. NIPS 16.
    Yeo, I.-K., Johnson, R. A. (2000). A new family of power transformations to improve
    normality or symmetry. Biometrika 87(4).
    Cowen-Rivers, A. I. et al. (2022). HEBO: pushing the limits of sample-efficient
    hyper-parameter optimisation. JAIR 74.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.special
import scipy.stats
from numpy.typing import NDArray

from sweeper.gp import GPFit, fit_gp

OUTPUT_WARPINGS = ("none", "yeo-johnson", "rank")
#: Gauss-Hermite nodes of the predictive mean and sd in the metric's units.
GH_NODES = 20
#: The Yeo-Johnson exponent is kept in [0, 2], where the transform maps onto all of R, so its
#: inverse exists everywhere (outside it, z beyond 1/|lam| or -1/(lam-2) has no preimage and
#: the Gauss-Hermite nodes of a wide posterior land there: the predicted mean blew up to 1e20
#: on Hartmann-6, whose values pile up at 0 with a tail down to -3.3).
LAMBDA_BOUNDS = (0.0, 2.0)


@dataclass(frozen=True)
class OutputWarping:
    """A monotone increasing map ``g`` of the metric, fitted to the observed values.

    Attributes:
        kind: One of :data:`OUTPUT_WARPINGS`.
        center: Mean of the observed values (``yeo-johnson``), original units.
        scale: Their standard deviation (``yeo-johnson``; 1 when it is 0), original units.
        lam: The Yeo-Johnson exponent.
        knots_y: Sorted distinct observed values (``rank``).
        knots_z: Their normal scores, increasing (``rank``).
    """

    kind: str
    center: float = 0.0
    scale: float = 1.0
    lam: float = 1.0
    knots_y: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    knots_z: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))

    @classmethod
    def fit(cls, kind: str, y: NDArray[np.float64]) -> OutputWarping:
        """Fit ``kind`` to finite observed values ``y`` (shape ``(n,)``, ``n >= 1``)."""
        y = np.asarray(y, dtype=np.float64)
        if kind not in OUTPUT_WARPINGS:
            raise ValueError(f"output warping must be one of {', '.join(OUTPUT_WARPINGS)}; got {kind!r}")
        if y.ndim != 1 or y.shape[0] < 1 or not np.all(np.isfinite(y)):
            raise ValueError(f"y must be a non-empty vector of finite values; got shape {y.shape}")
        distinct, counts = np.unique(y, return_counts=True)
        if kind == "none" or distinct.shape[0] < 3:  # too few values to fit a shape: identity
            return cls("none")
        if kind == "yeo-johnson":
            center, scale = float(np.mean(y)), float(np.std(y))
            _, lam = scipy.stats.yeojohnson((y - center) / scale)
            return cls(kind, center, scale, float(np.clip(lam, *LAMBDA_BOUNDS)))
        # The mean rank (1-based) of each distinct value among all n observations, ties averaged.
        mean_rank = np.cumsum(counts) - (counts - 1) / 2.0
        z = scipy.stats.norm.ppf((mean_rank - 0.5) / y.shape[0])
        return cls(kind, knots_y=distinct, knots_z=z)

    def forward(self, y: NDArray[np.float64]) -> NDArray[np.float64]:
        """``g(y)``: values in the metric's units to the scale the GP is fitted on."""
        y = np.asarray(y, dtype=np.float64)
        if self.kind == "yeo-johnson":
            return np.asarray(scipy.stats.yeojohnson((y - self.center) / self.scale, lmbda=self.lam))
        if self.kind == "rank":
            return np.interp(y, self.knots_y, self.knots_z)
        return y

    def inverse(self, z: NDArray[np.float64]) -> NDArray[np.float64]:
        """``g^-1(z)``: back to the metric's units (``rank``: flat beyond the observed values)."""
        z = np.asarray(z, dtype=np.float64)
        if self.kind == "yeo-johnson":
            return self.center + self.scale * _yeo_johnson_inverse(z, self.lam)
        if self.kind == "rank":
            return np.interp(z, self.knots_z, self.knots_y)
        return z


def _yeo_johnson_inverse(z: NDArray[np.float64], lam: float) -> NDArray[np.float64]:
    """Inverse of the Yeo-Johnson transform (Yeo and Johnson 2000, eq. 2.1 solved for y), ``0 <= lam <= 2``."""
    if not LAMBDA_BOUNDS[0] <= lam <= LAMBDA_BOUNDS[1]:
        raise ValueError(f"the Yeo-Johnson inverse is total only for lam in {LAMBDA_BOUNDS}; got {lam!r}")
    out = np.empty_like(z)
    pos = z >= 0
    zp, zn = z[pos], z[~pos]
    out[pos] = np.expm1(zp) if lam < 1e-8 else np.power(lam * zp + 1.0, 1.0 / lam) - 1.0
    out[~pos] = -np.expm1(-zn) if lam > 2.0 - 1e-8 else 1.0 - np.power(1.0 - (2.0 - lam) * zn, 1.0 / (2.0 - lam))
    return out


@dataclass(frozen=True)
class WarpedGP:
    """A GP fitted to ``g(y)`` and the warping ``g``: predictions in the metric's units.

    Attributes:
        latent: The GP on the warped scale; acquisition functions work on it.
        warping: The fitted ``g``.
    """

    latent: GPFit
    warping: OutputWarping

    def predict(self, X: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Posterior mean and sd of the metric (not of ``g``), shape ``(a,)`` each.

        Without warping this is exactly :meth:`GPFit.predict`.
        """
        mu, sd = self.latent.predict(X)
        if self.warping.kind == "none":
            return mu, sd
        t, w = scipy.special.roots_hermite(GH_NODES)  # int exp(-t^2) h(t) dt ~ sum w h(t)
        values = self.warping.inverse(mu[:, None] + np.sqrt(2.0) * sd[:, None] * t[None, :])  # (a, nodes)
        w = w / np.sqrt(np.pi)
        mean = values @ w
        var = np.maximum((values - mean[:, None]) ** 2 @ w, 0.0)
        return mean, np.sqrt(var)


def fit_warped_gp(X: NDArray[np.float64], y: NDArray[np.float64], *, warping: str = "none",
                  **fit_kwargs: Any) -> WarpedGP:
    """Fit ``warping`` to ``y``, then :func:`sweeper.gp.fit_gp` to ``g(y)`` (``fit_kwargs`` go to it)."""
    g = OutputWarping.fit(warping, np.asarray(y, dtype=np.float64))
    return WarpedGP(fit_gp(X, g.forward(y), **fit_kwargs), g)
