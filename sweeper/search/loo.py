"""Predictive checks of a fitted GP: does it predict trials it was not given?

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

Leaving one trial out cannot see replicates: a trial whose bit-identical copy (the same
configuration under another seed or condition, a task that ignores its seed) stays in the fit
is predicted perfectly. So a trial leaves **together with its copies** (the same values of
every dim that is not a replicate dim, ``env.*`` or a seed, and the bit-identical result),
and counts once; and the **leave-one-configuration-out** check leaves every replicate of a
configuration out at once (the block form of eq. 5.12: the held-out block's predictive is
``z_S - (K^-1_SS)^-1 [K^-1 z]_S`` with covariance ``(K^-1_SS)^-1``; Sundararajan & Keerthi
2001). Neither sees regions no trial visited: that is the prospective check's job
(:mod:`sweeper.search.calibration`).

The verdict (:attr:`PredictiveCheck.ok`): a check fails when its 95 % intervals hold fewer
than ``MIN_COVERAGE95`` = 85 % of the measurements **and** so few that a calibrated model would
hold that few with probability under ``MAX_SURPRISE`` = 1 % (the count inside is
Binomial(n, 0.95)). At 24 predictions that is 19 or fewer (79 %; 20 of 24 happens 12 % of the
time by chance), at 32 it is 26 or fewer; from about 60 on the 85 % threshold alone decides.
Below ``MIN_TRIALS`` = 10 distinct measurements no verdict is given. Intervals that hold
everything while the 68 % ones hold more than 95 % are flagged as conservative, not failed.

References:
    Rasmussen, C. E., Williams, C. K. I. (2006). Gaussian Processes for Machine Learning.
    MIT Press, §5.4.2.
    Dawid, A. P. (1984). Statistical theory: the prequential approach. JRSS A 147 (the
    probability integral transform as a calibration check).
    Sundararajan, S., Keerthi, S. S. (2001). Predictive approaches for choosing
    hyperparameters in Gaussian processes. Neural Computation 13(5).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import scipy.linalg
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtr, ndtri
from scipy.stats import binom

from sweeper.search.gp import GPFit

#: Below this share of trials inside their 95 % leave-one-out intervals the check fails.
MIN_COVERAGE95 = 0.85
#: ... and so few that a calibrated model holds that few with at most this probability.
MAX_SURPRISE = 0.01
#: Fewest trials for a verdict.
MIN_TRIALS = 10
#: Fewest configurations for a leave-one-configuration-out verdict.
MIN_CONFIGURATIONS = 5
_Q68 = (0.15865525393145707, 0.8413447460685429)
_Q95 = (0.025, 0.975)


class _Mixture(Protocol):
    @property
    def members(self) -> tuple[GPFit, ...]: ...


#: The checks, by the key they carry in summaries and metric names.
LOO, LOCO, PROSPECTIVE = "leave-one-out", "leave-one-configuration-out", "prospective"
_SHORT = {LOO: "loo", LOCO: "loco", PROSPECTIVE: "prospective"}
_WHAT = {LOO: "each trial predicted from the others, its bit-identical copies left out with it",
         LOCO: "each configuration predicted with all its replicates left out",
         PROSPECTIVE: "each trial the searcher chose, predicted before it ran"}


def loo_gaussian(gp: GPFit, groups: Sequence[NDArray[np.intp]] | None = None
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Leave-one-out (or leave-group-out) predictive mean and sd of every trial on ``gp``'s modelled scale.

    R&W eq. 5.12 from the fit's Cholesky factor: ``O(n^3)`` once, no refit. ``groups``: index
    arrays that leave together (the block form, see the module docstring); None: one by one.
    """
    n = gp.X.shape[0]
    K_inv = scipy.linalg.cho_solve((gp.cholesky, True), np.eye(n), check_finite=False)
    z = gp.standardized()
    alpha = K_inv @ z
    d = np.diag(K_inv)
    mean = z - alpha / d
    sd = 1.0 / np.sqrt(d)
    for g in groups or ():
        if g.size > 1:
            block = np.linalg.inv(K_inv[np.ix_(g, g)])
            mean[g] = z[g] - block @ alpha[g]
            sd[g] = np.sqrt(np.maximum(np.diag(block), 1e-300))
    return gp.y_mean + gp.y_std * mean, gp.y_std * sd


@dataclass(frozen=True)
class PredictiveCheck:
    """One predictive check of a GP (see the module docstring), scored on distinct measurements.

    Attributes:
        kind: :data:`LOO`, :data:`LOCO` or :data:`PROSPECTIVE`.
        n: Distinct measurements scored (a bit-identical copy counts once).
        coverage68: Share inside their central 68 % intervals.
        coverage95: Share inside their central 95 % intervals.
        rmse: Root mean square error of the predicted means (metric units).
        max_abs_residual: Largest ``|z_i|``.
        pit: ``u_i`` of every scored measurement, shape ``(n,)``.
        residuals: ``z_i = Phi^-1(u_i)``, shape ``(n,)``.
        mean: The predicted mean of every scored measurement (metric units), shape ``(n,)``.
        n_total: Trials behind the ``n`` measurements.
        groups: Groups left out together (configurations for :data:`LOCO`).
        max_surprise: A shortfall below 85 % fails when a calibrated model shows it with at most this
            probability; 1.0 judges by the 85 % threshold alone (see :func:`sweeper.search.calibration.calibration`).
        earlier: Predictions left unscored because their model had too few trials to judge this one by
            (:func:`sweeper.search.calibration.prospective_check`); ``earlier_below`` its trial count.
    """

    n: int
    coverage68: float
    coverage95: float
    rmse: float
    max_abs_residual: float
    pit: NDArray[np.float64] = field(repr=False)
    residuals: NDArray[np.float64] = field(repr=False)
    mean: NDArray[np.float64] = field(repr=False)
    kind: str = LOO
    n_total: int | None = None
    groups: int | None = None
    max_surprise: float = MAX_SURPRISE
    earlier: int = 0
    earlier_below: int = 0

    @property
    def judged(self) -> bool:
        """Whether there are enough distinct measurements (and configurations) for a verdict."""
        return self.n >= MIN_TRIALS and (self.groups is None or self.groups >= MIN_CONFIGURATIONS)

    @property
    def inside95(self) -> int:
        """Measurements inside their 95 % intervals."""
        return round(self.coverage95 * self.n)

    @property
    def surprise(self) -> float:
        """``P(X <= inside95)`` for ``X ~ Binomial(n, 0.95)``: how rarely a calibrated model holds this few."""
        return float(binom.cdf(self.inside95, self.n, 0.95)) if self.n else 1.0

    @property
    def ok(self) -> bool:
        """False when the 95 % intervals hold fewer than 85 % of the measurements, and fewer than a calibrated
        model would hold with probability ``1 - MAX_SURPRISE`` (with enough measurements)."""
        return not self.judged or self.coverage95 >= MIN_COVERAGE95 or self.surprise >= self.max_surprise

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

    def numbers(self) -> str:
        """The check in words: what was predicted, how often the intervals held it."""
        copies = "" if not self.n_total or self.n_total == self.n else \
            f" ({self.n_total - self.n} bit-identical cop{'y' if self.n_total - self.n == 1 else 'ies'} counted once)"
        alone = " (no configuration was replicated: the same as leave-one-out)" \
            if self.kind == LOCO and self.groups == self.n_total else ""
        earlier = "" if not self.earlier else \
            f" ({self.earlier} earlier, made from fewer than {self.earlier_below} trials, not scored)"
        return (f"{self.kind} ({_WHAT[self.kind]}): {self.coverage95:.0%} of {self.n} inside their 95 % intervals, "
                f"{self.coverage68:.0%} inside their 68 % ones{copies}{earlier}, largest |z| "
                f"{self.max_abs_residual:.1f}{alone}")

    def sentence(self, what: str) -> str:
        """One sentence for a reader, next to ``what`` (e.g. "this map"): the numbers, and what helps if it failed."""
        numbers = (f"{self.kind} check of the GP behind {what}: {self.coverage95:.0%} of {self.n} trials inside "
                   f"their 95 % intervals, {self.coverage68:.0%} inside their 68 % ones (nominal 95 % and 68 %), "
                   f"RMSE {self.rmse:.3g}")
        if not self.judged:
            few = (f"{self.groups} configuration(s), fewer than {MIN_CONFIGURATIONS}" if self.n >= MIN_TRIALS
                   else f"{self.n} distinct measurement(s), fewer than {MIN_TRIALS}")
            return f"The {numbers}; too few trials to judge the model by it ({few})."
        if not self.ok:
            return (f"**Warning: the {numbers}. The GP is overconfident here, so {what} cannot be trusted as "
                    f"drawn.** {ADVICE}")
        if self.conservative:
            return f"The {numbers}: the intervals are wider than they need be (conservative)."
        return f"The {numbers}: the GP's uncertainty is consistent with how it predicts held-out trials."

    def metrics(self, prefix: str) -> dict[str, float]:
        """The check as MLflow metrics: ``<prefix><loo|loco|prospective>_coverage95`` and friends."""
        p = f"{prefix}{_SHORT[self.kind]}_"
        return {f"{p}coverage68": self.coverage68, f"{p}coverage95": self.coverage95, f"{p}rmse": self.rmse,
                f"{p}max_abs_residual": self.max_abs_residual, f"{p}n": float(self.n)}

    def summary(self) -> dict[str, Any]:
        return {"kind": self.kind, "n": self.n, "n_total": self.n_total if self.n_total is not None else self.n,
                "coverage68": self.coverage68, "coverage95": self.coverage95, "rmse": self.rmse,
                "max_abs_residual": self.max_abs_residual, "verdict": self.verdict(),
                "surprise": self.surprise, "threshold_coverage95": MIN_COVERAGE95, "max_surprise": self.max_surprise,
                "min_trials": MIN_TRIALS, "earlier_not_scored": self.earlier}


#: What helps when a check fails.
ADVICE = ("What would help: more trials; declaring the metric's bounds (hydra.sweeper.metric_bounds, or "
          "--bounds LOW HIGH); another kernel (--kernel).")


def score_pit(pit: ArrayLike, mean: ArrayLike, y: ArrayLike, kind: str, *, n_total: int | None = None,
              groups: int | None = None) -> PredictiveCheck:
    """A :class:`PredictiveCheck` from the probability integral transforms ``pit`` of results ``y`` (predicted
    ``mean``)."""
    pit = np.asarray(pit, dtype=np.float64)
    mean = np.asarray(mean, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    eps = 1e-12
    residuals = ndtri(np.clip(pit, eps, 1.0 - eps))

    def inside(q: tuple[float, float]) -> float:
        return float(np.mean((pit >= q[0]) & (pit <= q[1]))) if pit.size else math.nan

    return PredictiveCheck(n=int(pit.size), coverage68=inside(_Q68), coverage95=inside(_Q95),
                           rmse=float(math.sqrt(np.mean((mean - y) ** 2))) if y.size else math.nan,
                           max_abs_residual=float(np.max(np.abs(residuals))) if y.size else math.nan,
                           pit=pit, residuals=residuals, mean=mean, kind=kind, n_total=n_total, groups=groups)


def replicate_groups(X: ArrayLike, y: ArrayLike, replicate_columns: Sequence[int] = ()
                     ) -> tuple[list[NDArray[np.intp]], list[NDArray[np.intp]]]:
    """``(copies, configurations)``: index groups of trials that leave together.

    A configuration is the trials' values of every column not in ``replicate_columns`` (the
    ``env.*`` and seed dims): its replicates leave together in :data:`LOCO`. Copies are the
    replicates of one configuration with the bit-identical result: one measurement repeated,
    which leaves together and counts once in :data:`LOO`.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    keep = [c for c in range(X.shape[1]) if c not in set(replicate_columns)]
    configs: dict[bytes, list[int]] = {}
    copies: dict[tuple[bytes, bytes], list[int]] = {}
    for i in range(X.shape[0]):
        key = np.ascontiguousarray(X[i, keep]).tobytes()
        configs.setdefault(key, []).append(i)
        copies.setdefault((key, y[i].tobytes()), []).append(i)
    return _as_arrays(copies), _as_arrays(configs)


def _as_arrays(groups: Mapping[Any, list[int]]) -> list[NDArray[np.intp]]:
    """Each group's indices as an array, in the order the groups were first seen."""
    return [np.asarray(v, dtype=np.intp) for v in groups.values()]


def first_of_copies(copies: Sequence[NDArray[np.intp]]) -> NDArray[np.intp]:
    """The rows a check scores: the first of each set of bit-identical copies (:func:`replicate_groups`), in order."""
    return np.array(sorted(int(c[0]) for c in copies), dtype=np.intp)


def loo_check(model: GPFit | _Mixture, replicate_columns: Sequence[int] = (), *,
              by_configuration: bool = False) -> PredictiveCheck:
    """The leave-one-out (``by_configuration``: leave-one-configuration-out) check of a fit or a mixture.

    Each member of a mixture on its own scale, their probability integral transforms averaged;
    every group of bit-identical copies scored once (see :func:`replicate_groups`).
    """
    members = (model,) if isinstance(model, GPFit) else tuple(model.members)
    y = members[0].y
    copies, configs = replicate_groups(members[0].X, y, replicate_columns)
    groups = configs if by_configuration else copies
    pit = np.zeros(y.shape[0])
    first = np.zeros(y.shape[0])
    for m in members:
        mean, sd = loo_gaussian(m, groups)
        g = m.modelled()
        pit += ndtr((g - mean) / sd)
        first += mean if m.warp is None else m.warp.moments(mean, sd)[0]
    pit /= len(members)
    first /= len(members)
    once = first_of_copies(copies)
    return score_pit(pit[once], first[once], y[once], LOCO if by_configuration else LOO, n_total=int(y.shape[0]),
                     groups=len(configs) if by_configuration else None)
