"""Do the decisions interact? A Bayes factor between an additive and a shared GP kernel.

Bell et al. (2022, §4, eq. 8) test whether the effect of one decision depends on another
by comparing two GP models of the same data: an *additive* kernel, a sum of one kernel
per dimension (no interaction can be expressed), and the *shared* kernel over all
dimensions (any interaction can). With each model's hyperparameters set by maximising its
marginal likelihood,

    K = p(D | additive) / p(D | shared),

so ``K > 1`` favours no interaction and ``K < 1`` favours interaction. The verdict says "no
interaction" at ``K > 10`` ("strong" on Jeffreys' scale) and "interaction" only at ``K < 1/100``
("decisive"); in between it is inconclusive. Against truths whose interactions are known
(``python -m bench interaction``), ``K < 1/10`` said "interaction" on 16 of 210 tests of truths
without one (a bounded map near its ceiling, a smooth additive one: each model's misfit favours
the shared kernel), ``K < 1/100`` on 5, and found 78 of the 84 real ones against 80. The sweeper
can stop once the verdict is conclusive at a threshold the user chooses
(``stop_on_bayes_factor``, the paper's termination condition), which applies both ways.

A pairwise test compares, for dims ``i`` and ``j``, a kernel that is additive over every
dimension with one that shares a single kernel over ``(i, j)`` and is additive over the
rest: it isolates the interaction of that pair.

Categorical dimensions enter both models as coregionalization factors (see
:mod:`sweeper.search.kernels`): alone in the additive model, multiplying the stationary kernel
in the shared one. Both models are fitted to the same standardised outputs, so their log
marginal likelihoods are comparable.

A bounded metric is modelled through a learned warp (:mod:`sweeper.search.warping`). Each model
then learns its own warp shapes, as it learns its own length scales, and the two are compared
by the likelihood of the metric's own values, the warp's Jacobian included (Snelson et al.
2004, eq. 6). Fixing both to the warp that suits the shared model biased the test towards it:
a nonlinear warp of an additive map is not additive. Where the truth had no interaction, 48 of
210 tests said "interaction" with one warp and 16 with each model's own, which found as many
real interactions (80 of 84; decision 0079).

References:
    Bell, S. J., Kampman, O. P., Dodge, J., & Lawrence, N. D. (2022). Modeling the Machine
    Learning Multiverse. NeurIPS 2022, eq. 8.
    Kass, R. E., & Raftery, A. E. (1995). Bayes factors. JASA 90(430), §3.2 (the scale).
    Duvenaud, D., Nickisch, H., & Rasmussen, C. E. (2011). Additive Gaussian processes.
    NeurIPS 2011.
    Snelson, E., Rasmussen, C. E., Ghahramani, Z. (2004). Warped Gaussian Processes. NIPS 16.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sweeper.search.bounded import fit_bounded_gp, warped_log_likelihood
from sweeper.search.gp_fit import fit_gp
from sweeper.search.warping import OutputWarp

#: ``log10 K`` above which the verdict is "no interaction" (K > 10).
NO_INTERACTION_LOG10 = 1.0
#: ``-log10 K`` beyond which the verdict is "interaction" (K < 1/100), where no threshold is chosen.
#: NOTE: docs/decisions/0085-interaction-needs-decisive-evidence.md
INTERACTION_LOG10 = 2.0
#: The verdicts that settle the question ("inconclusive" and "no evidence" do not): :meth:`BayesFactor.is_conclusive`.
CONCLUSIVE = ("interaction", "no interaction")
#: A metric whose spread is at most this times ``max(1, |mean|)`` is constant (rounding, not signal).
CONSTANT_RTOL = 1e-12


def constant_metric_note(y: NDArray[np.float64]) -> str | None:
    """The words for a metric constant over the trials, or None when it varies.

    With no spread, both GPs fit only noise and their likelihood ratio says nothing about
    interactions (Bell et al. 2022, eq. 8 compares explanations of a variation that is absent).
    """
    y = np.asarray(y, dtype=np.float64)
    if y.size == 0 or np.ptp(y) > CONSTANT_RTOL * max(1.0, abs(float(y.mean()))):
        return None
    return (f"the metric is constant over this sweep (value {float(y[0]):.6g} in all {y.size} trials): nothing "
            "depends on any choice, and no interaction, sensitivity or map can be estimated")


def _no_variation_note(X: NDArray[np.float64], dims: tuple[int, ...]) -> str | None:
    """Words for tested dims that took one value in every trial (nothing to interact with), or None."""
    fixed = [i for i in dims if np.ptp(X[:, i]) == 0.0]
    if not fixed:
        return None
    return (f"no evidence: dim(s) {', '.join(map(str, fixed))} took one value in every trial, so the trials cannot "
            "show an interaction with them; sweep them")


@dataclass(frozen=True)
class BayesFactor:
    """The additive-versus-shared Bayes factor of one test.

    Attributes:
        log10_K: ``log10 p(D | additive) - log10 p(D | shared)``.
        additive_log_likelihood: Optimised log marginal likelihood of the additive model (of
            the standardised values; with learned warps, of the metric's own values).
        shared_log_likelihood: The same of the shared model.
        dims: The dims tested: every dim (global test) or a pair.
        n: Observations used.
        note: Why the data hold no evidence (a constant metric, a dim with one value); then
            ``log10_K`` is 0 (K = 1: the data favour neither model), nothing was fitted and
            the verdict is ``"no evidence"``. Empty otherwise.
    """

    log10_K: float
    additive_log_likelihood: float
    shared_log_likelihood: float
    dims: tuple[int, ...]
    n: int
    note: str = ""

    @property
    def K(self) -> float:
        """The Bayes factor itself (``inf``/``0`` when it overflows)."""
        return 10.0**self.log10_K if self.log10_K < 300 else math.inf

    def verdict(self, threshold: float | None = None) -> str:
        """``"no interaction"`` if ``K > 10``, ``"interaction"`` if ``K < 1/100``, else ``"inconclusive"``; with a
        ``threshold`` (a user's ``stop_on_bayes_factor``), ``K > threshold`` and ``K < 1/threshold``.

        ``"no evidence"`` where the data cannot speak (see ``note``).
        """
        if self.note:
            return "no evidence"
        upper, lower = (NO_INTERACTION_LOG10, INTERACTION_LOG10) if threshold is None else (math.log10(threshold),) * 2
        if self.log10_K > upper:
            return "no interaction"
        if self.log10_K < -lower:
            return "interaction"
        return "inconclusive"

    def is_conclusive(self, threshold: float | None = None) -> bool:
        """Whether the verdict (at ``threshold``, see :meth:`verdict`) is one of :data:`CONCLUSIVE`."""
        return self.verdict(threshold) in CONCLUSIVE


def _model_log_likelihood(X: NDArray[np.float64], y: NDArray[np.float64], terms: list[list[int]],
                          warp: OutputWarp | None, learn_warp: bool, settings: dict[str, Any]) -> float:
    """The optimised log marginal likelihood of one model of a test.

    With ``learn_warp`` and a two-sided ``warp`` the model learns its own shapes from it and the likelihood is
    of ``y`` itself, the Jacobian included; otherwise ``warp`` (or none) is the model's, and the likelihood is
    of the standardised, warped values.
    """
    if warp is None or not (learn_warp and warp.two_sided):
        return fit_gp(X, y, terms=terms, warp=warp, **settings).log_likelihood
    gp = fit_bounded_gp(X, y, warp.bounds, shapes=(warp.a, warp.b), terms=terms, **settings)
    return warped_log_likelihood(gp.warp or warp, gp.y, gp.cholesky)


def interaction_bayes_factor(
    X: NDArray[np.float64],
    y: NDArray[np.float64],
    *,
    categories: Mapping[int, int] | None = None,
    pair: tuple[int, int] | None = None,
    kernel: str = "matern52-ard",
    seed: int | Sequence[int] = 0,
    n_restarts: int = 3,
    additive_log_likelihood: float | None = None,
    max_fit_points: int | None = None,
    refine_max_points: int | None = None,
    warp: OutputWarp | None = None,
    learn_warp: bool = True,
) -> BayesFactor:
    """Fit the additive and the shared GP to ``(X, y)`` and return their Bayes factor (eq. 8).

    Args:
        X: Points in the unit cube, shape ``(n, d)``, ``d >= 2``.
        y: Finite outputs, shape ``(n,)``.
        categories: Categorical columns -> number of categories (cell coding).
        pair: Test only this pair of dims (shared over the pair, additive elsewhere);
            None tests all dims at once.
        kernel: The stationary family of both models (:data:`sweeper.search.kernels.KERNELS`).
        seed: Seed of both fits' restarts.
        n_restarts: Optimiser restarts of each fit.
        additive_log_likelihood: The additive model's optimised log marginal likelihood
            from an earlier call on the same data, kernel and seed (the pairwise tests
            share it); None fits it.
        max_fit_points: Above this many results, both models' hyperparameters are fitted
            on the same seeded subset (categories kept) and their likelihoods taken on all
            results (:func:`sweeper.search.gp_fit.fit_gp`); None fits on all of them. A sweep's
            in-flight test passes its searcher's setting, so the test scales as the search does.
        refine_max_points: Up to this many results, a subset fit is refined on all of them.
        warp: The output warp of a bounded metric; None models ``y`` itself.
        learn_warp: With a two-sided ``warp``, each model learns its own shapes from
            ``warp``'s and the likelihoods are of ``y`` itself, the Jacobian included (see the
            module docstring); False keeps ``warp`` for both, and the likelihoods are of
            the same warped, standardised values.

    Returns:
        The :class:`BayesFactor`; with no evidence in the data (a constant ``y``, or a tested
        pair with a dim that took one value in every trial) ``log10_K = 0``, a ``note`` and
        the verdict ``"no evidence"``, without fitting.

    Raises:
        ValueError: Fewer than 2 dims, a malformed pair, or bad data.
        RuntimeError: If a GP fit fails in every restart.
    """
    X = np.asarray(X, dtype=np.float64)
    d = X.shape[1] if X.ndim == 2 else 0
    if d < 2:
        raise ValueError(f"an interaction needs at least 2 dimensions; X has shape {X.shape}")
    singles = [[i] for i in range(d)]
    if pair is None:
        shared: list[list[int]] = [list(range(d))]
        dims = tuple(range(d))
    else:
        i, j = (int(v) for v in pair)
        if i == j or not (0 <= i < d and 0 <= j < d):
            raise ValueError(f"pair must name two different dims in 0..{d - 1}; got {pair!r}")
        shared = [[i, j]] + [[k] for k in range(d) if k not in (i, j)]
        dims = (i, j)
    note = constant_metric_note(y) or _no_variation_note(X, dims if pair is not None else ())
    if note:
        return BayesFactor(0.0, math.nan, math.nan, dims, int(X.shape[0]), note=note)

    settings: dict[str, Any] = {"seed": seed, "n_restarts": n_restarts, "categories": categories, "kernel": kernel,
                                "max_fit_points": max_fit_points, "refine_max_points": refine_max_points}

    def log_likelihood(terms: list[list[int]]) -> float:  # both models: the same data, seed and settings
        return _model_log_likelihood(X, y, terms, warp, learn_warp, settings)

    if additive_log_likelihood is None:
        additive_log_likelihood = log_likelihood(singles)
    joint = log_likelihood(shared)
    log10_K = (additive_log_likelihood - joint) / math.log(10.0)
    return BayesFactor(log10_K, additive_log_likelihood, joint, dims, int(X.shape[0]))
