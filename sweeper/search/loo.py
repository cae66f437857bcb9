"""Leave-one-out predictive checks of a fitted GP: does it predict the trials it has seen, one at a time?

A map or a curve is only as good as the GP behind it, and a reader cannot see the GP. The
check every conclusion carries is the closed-form leave-one-out predictive (Rasmussen &
Williams 2006, eq. 5.10-5.12): with the hyperparameters fixed, the prediction of trial
``i`` from all the others is Gaussian on the GP's scale with

    mean_i = z_i - [K^-1 z]_i / [K^-1]_ii,    var_i = 1 / [K^-1]_ii

(``K`` the covariance of the standardised outputs ``z``, noise included): ``n`` predictions
from one inverse, no refits. For a mixture of fits (:class:`sweeper.search.ensemble.GPEnsemble`)
each member's leave-one-out Gaussian is computed on its own scale and the mixture's
probability integral transform ``u_i = P(Y_i <= y_i | others)`` is their average; a warp
maps intervals to intervals, so ``u_i`` is the same on the metric's own scale. From the
``u_i``:

* **coverage** of the central 68 % and 95 % intervals: the share of trials with
  ``u_i`` in [0.16, 0.84] and [0.025, 0.975];
* **standardised residuals** ``z_i = Phi^-1(u_i)`` (N(0, 1) for a calibrated GP);
* **LOO RMSE** of the leave-one-out mean against the trial's value, in the metric's units.

The verdict (:attr:`LOOCheck.ok`): the 95 % intervals hold fewer than ``MIN_COVERAGE95`` =
85 % of the trials. For a calibrated GP the count inside is Binomial(n, 0.95): with 32
trials, 85 % or less happens with probability 0.6 % (27 of 32 or fewer), so a failed check
is a miscalibrated model, not bad luck; below ``MIN_TRIALS`` = 10 trials no verdict is
given (it would be: 8 of 10 happens 7.5 % of the time). Intervals that hold everything
while the 68 % ones hold more than 95 % are flagged as conservative, not failed.

References:
    Rasmussen, C. E., Williams, C. K. I. (2006). Gaussian Processes for Machine Learning.
    MIT Press, §5.4.2.
    Dawid, A. P. (1984). Statistical theory: the prequential approach. JRSS A 147 (the
    probability integral transform as a calibration check).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import scipy.linalg
from numpy.typing import NDArray
from scipy.special import ndtr, ndtri

from sweeper.search.gp import GPFit

#: Below this share of trials inside their 95 % leave-one-out intervals the check fails.
MIN_COVERAGE95 = 0.85
#: Fewest trials for a verdict.
MIN_TRIALS = 10
_Q68 = (0.15865525393145707, 0.8413447460685429)
_Q95 = (0.025, 0.975)


class _Mixture(Protocol):
    members: tuple[GPFit, ...]


def loo_gaussian(gp: GPFit) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Leave-one-out predictive mean and sd of every trial on ``gp``'s modelled scale (noise included).

    R&W eq. 5.12 from the fit's Cholesky factor: ``O(n^3)`` once, no refit.
    """
    n = gp.X.shape[0]
    K_inv = scipy.linalg.cho_solve((gp.cholesky, True), np.eye(n), check_finite=False)
    z = gp.standardized()
    d = np.diag(K_inv)
    mean = z - (K_inv @ z) / d
    sd = 1.0 / np.sqrt(d)
    return gp.y_mean + gp.y_std * mean, gp.y_std * sd


@dataclass(frozen=True)
class LOOCheck:
    """Leave-one-out check of one fitted GP (see the module docstring).

    Attributes:
        n: Trials checked.
        coverage68: Share inside their central 68 % intervals.
        coverage95: Share inside their central 95 % intervals.
        rmse: Root mean square error of the leave-one-out means (metric units).
        max_abs_residual: Largest ``|z_i|``.
        pit: ``u_i`` of every trial, shape ``(n,)``.
        residuals: ``z_i = Phi^-1(u_i)``, shape ``(n,)``.
        loo_mean: Leave-one-out mean of every trial (metric units), shape ``(n,)``.
    """

    n: int
    coverage68: float
    coverage95: float
    rmse: float
    max_abs_residual: float
    pit: NDArray[np.float64] = field(repr=False)
    residuals: NDArray[np.float64] = field(repr=False)
    loo_mean: NDArray[np.float64] = field(repr=False)

    @property
    def judged(self) -> bool:
        """Whether there are enough trials for a verdict."""
        return self.n >= MIN_TRIALS

    @property
    def ok(self) -> bool:
        """False when the 95 % intervals hold fewer than 85 % of the trials (with enough trials)."""
        return not self.judged or self.coverage95 >= MIN_COVERAGE95

    @property
    def conservative(self) -> bool:
        return self.judged and self.coverage95 >= 1.0 and self.coverage68 > 0.95

    def verdict(self) -> str:
        """``passed``, ``failed``, ``conservative`` or ``too few trials``."""
        if not self.judged:
            return "too few trials"
        if not self.ok:
            return "failed"
        return "conservative" if self.conservative else "passed"

    def sentence(self, what: str) -> str:
        """One sentence for a reader, next to ``what`` (e.g. "this map"): the numbers, and what helps if it failed."""
        numbers = (f"leave-one-out check of the GP behind {what}: {self.coverage95:.0%} of {self.n} trials inside "
                   f"their 95 % intervals, {self.coverage68:.0%} inside their 68 % ones (nominal 95 % and 68 %), "
                   f"LOO RMSE {self.rmse:.3g}")
        if not self.judged:
            return f"The {numbers}; too few trials (fewer than {MIN_TRIALS}) to judge the model by it."
        if not self.ok:
            return (f"**Warning: the {numbers}. The GP is overconfident here, so {what} is not to be trusted as "
                    f"drawn.** What would help: more trials; declaring the metric's bounds "
                    f"(hydra.sweeper.metric_bounds, or --bounds LOW HIGH); another kernel (--kernel).")
        if self.conservative:
            return f"The {numbers}: the intervals are wider than they need be (conservative)."
        return f"The {numbers}: the GP's uncertainty is consistent with how it predicts held-out trials."

    def metrics(self, prefix: str) -> dict[str, float]:
        """The check as MLflow metrics: ``<prefix>loo_coverage95`` and friends."""
        return {f"{prefix}loo_coverage68": self.coverage68, f"{prefix}loo_coverage95": self.coverage95,
                f"{prefix}loo_rmse": self.rmse, f"{prefix}loo_max_abs_residual": self.max_abs_residual,
                f"{prefix}loo_n": float(self.n)}

    def summary(self) -> dict[str, Any]:
        return {"n": self.n, "coverage68": self.coverage68, "coverage95": self.coverage95, "rmse": self.rmse,
                "max_abs_residual": self.max_abs_residual, "verdict": self.verdict(),
                "threshold_coverage95": MIN_COVERAGE95}


def loo_check(model: GPFit | _Mixture) -> LOOCheck:
    """The leave-one-out check of a fit or of a mixture of fits (every member on its own scale)."""
    members = (model,) if isinstance(model, GPFit) else tuple(model.members)
    y = members[0].y
    pit = np.zeros(y.shape[0])
    first = np.zeros(y.shape[0])
    for m in members:
        mean, sd = loo_gaussian(m)
        g = m.modelled()
        pit += ndtr((g - mean) / sd)
        first += mean if m.warp is None else m.warp.moments(mean, sd)[0]
    pit /= len(members)
    loo_mean = first / len(members)
    eps = 1e-12
    residuals = ndtri(np.clip(pit, eps, 1.0 - eps))
    inside = lambda q: float(np.mean((pit >= q[0]) & (pit <= q[1])))  # noqa: E731
    return LOOCheck(n=int(y.shape[0]), coverage68=inside(_Q68), coverage95=inside(_Q95),
                    rmse=float(math.sqrt(np.mean((loo_mean - y) ** 2))),
                    max_abs_residual=float(np.max(np.abs(residuals))), pit=pit, residuals=residuals,
                    loo_mean=loo_mean)
