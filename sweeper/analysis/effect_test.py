"""Does the metric depend on the choices at all? A permutation test of the sweep's GP against a constant.

The maps and the Sobol indices (Bell et al. 2022, Fig. 3 and 6) draw and apportion whatever
variation the posterior mean has, and the interaction tests compare two models of it. Where the
metric depends on no choice (every difference is seed noise), the mean still wiggles, and its
indices still name a choice that "matters": on 32 trials of ``0.8 + N(0, 0.05)`` over three dims,
one dim got a main effect of 0.53 and a total of 0.91, with only Monte Carlo error beside them; on
32 such trials over a 3-level choice and two dims, the eq. 8 Bayes factor called 16 of 32 tests an
interaction (decision 0078). This test asks first whether there is anything to apportion.

The statistic is the log marginal likelihood of the shared GP (one kernel over every dim,
hyperparameters by type-II maximum likelihood) minus that of a constant with white noise,
both on the same standardised values: ``ln 1/K``, ``K = p(D | constant) / p(D | GP)``. The
constant's is ``-n/2 (ln 2 pi + 1)``: the standardised values have mean 0 and variance 1, the
noise variance's maximum-likelihood value. Read as a Bayes factor, ``K`` is not calibrated: the
GP has ``d + 1`` more hyperparameters, fitted to the noise, and it beat the constant by more than
10 : 1 on 27 % of pure-noise sweeps, 77 % of those with a choice dim (decision 0078). So the
null distribution is made by permutation (Good 2005, ch. 3): with no effect the scores are
exchangeable over the points, so each of ``P`` shuffles of the scores, fitted the same way, is a
draw of the statistic under the null, and ``p = (1 + #{shuffles fitting as well}) / (1 + P)`` is
exact whatever the optimiser finds. With 19 shuffles, an effect is shown (``p = 0.05``) when the
scores as measured fit better than every shuffle.

Bit-identical copies of a measurement (the same configuration and the same result, as a fixed
seed gives) count once, as in the leave-one-out check (:func:`sweeper.search.loo.replicate_groups`):
shuffling them apart would make any score look tied to its point. With 12 configurations of
noise measured twice each, the copies made the test show an effect; counted once, it does not.

Two limits keep its cost to seconds (a median of 0.5-2.6 s on 12-64 trials in decision 0078, through GPy;
0.6-1.1 s on 8-64 trials over three dims since the fit's objective is numpy, decision 0088):
hyperparameters are fitted with one optimiser start, the same fixed start for every fit, so the
procedure is the same for the scores and their shuffles; and at most :data:`MAX_TEST_POINTS`
trials, a seeded subset, are fitted. No shortcut skips the shuffles where the effect looks
large: pure noise over a choice dim reached ``log10 K = -4.2``, so no threshold on ``K`` is safe.

References:
    Good, P. I. (2005). Permutation, Parametric and Bootstrap Tests of Hypotheses, 3rd ed. Springer, ch. 3.
    Bell, S. J., Kampman, O. P., Dodge, J., & Lawrence, N. D. (2022). Modeling the Machine
    Learning Multiverse. NeurIPS 2022.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from sweeper.analysis.calibration import replicate_columns
from sweeper.search.design import as_generator
from sweeper.search.gp_fit import fit_gp, fit_subset
from sweeper.search.interaction import constant_metric_note
from sweeper.search.kernels import category_labels
from sweeper.search.loo import first_of_copies, replicate_groups
from sweeper.search.space import SearchSpace
from sweeper.search.warping import OutputWarp

#: Shuffles of the scores: the smallest p-value is 1 / (1 + PERMUTATIONS) = 0.05.
PERMUTATIONS = 19
#: The p-value at or below which the effect is shown.
ALPHA = 0.05
#: Most trials the test fits on (a seeded subset, categories kept): each fit costs O(n^3).
MAX_TEST_POINTS = 100


@dataclass(frozen=True)
class EffectTest:
    """Whether the metric depends on any choice: the GP against a constant, judged by permutation.

    Attributes:
        log10_K: ``log10 p(D | constant) - log10 p(D | GP)`` of the scores as measured (negative
            favours an effect); 0 for a constant metric.
        p_value: The permutation p-value, ``(1 + as_good) / (1 + permutations)``; None for a
            constant metric (nothing was fitted).
        permutations: Shuffles fitted (0 for a constant metric).
        as_good: Shuffles whose GP fitted at least as well as the scores' own.
        n: Measurements the test fitted on (bit-identical copies once; at most :data:`MAX_TEST_POINTS`).
        note: Why nothing was tested (a constant metric), else empty.
    """

    log10_K: float
    p_value: float | None
    permutations: int
    as_good: int
    n: int
    note: str = ""

    @property
    def shown(self) -> bool:
        """Whether the data show that the metric depends on some choice."""
        return self.p_value is not None and self.p_value <= ALPHA

    def verdict(self) -> str:
        """``"effect"`` or ``"not shown"``, with the shuffles that fitted as well and ``p``; else ``"no evidence"``."""
        if self.note:
            return "no evidence"
        return (f"{'effect' if self.shown else 'not shown'} ({self.as_good} of {self.permutations} shuffles fit as "
                f"well; p = {self.p_value:.2f})")

    def caution(self, metric: str) -> str | None:
        """Words for a report when no effect is shown, naming what not to read and what to do; None otherwise."""
        if self.shown or self.note:
            return None
        return (f"the data do not show that `{metric}` depends on any choice: a GP over the choices fits these "
                f"{self.n} scores no better than the same scores shuffled over the points ({self.as_good} of "
                f"{self.permutations} shuffles fit as well; p = {self.p_value:.2f}). The maps' shapes, the interaction "
                "verdicts and the Sobol indices describe what may be noise between seeds; they are not findings. "
                "Run more trials, or replicate seeds to measure the noise, before reading them")


def effect_test(space: SearchSpace, X: NDArray[np.float64], y: NDArray[np.float64], *,
                warp: OutputWarp | None = None, kernel: str = "matern52-ard", seed: int = 0,
                permutations: int = PERMUTATIONS) -> EffectTest:
    """Test whether ``y`` depends on the points ``X`` (unit cube of ``space``); see the module docstring.

    ``warp``: the output warp of a bounded metric (the analysis fit's), applied to every shuffle alike.

    Raises:
        ValueError: ``permutations`` is not a positive int.
    """
    if isinstance(permutations, bool) or not isinstance(permutations, int) or permutations < 1:
        raise ValueError(f"permutations must be a positive int; got {permutations!r}")
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    note = constant_metric_note(y)
    if note:
        return EffectTest(0.0, None, 0, 0, int(y.size), note=note)
    categories = space.categories()
    once = first_of_copies(replicate_groups(X, y, replicate_columns(space))[0])
    X, y = X[once], y[once]
    rng = as_generator([seed, 4])
    if y.size > MAX_TEST_POINTS:
        rows = fit_subset(y.size, MAX_TEST_POINTS, rng, category_labels(X, categories))
        X, y = X[rows], y[rows]
    n = int(y.size)
    constant = -0.5 * n * (math.log(2.0 * math.pi) + 1.0)

    def log10_k(scores: NDArray[np.float64]) -> float:
        gp = fit_gp(X, scores, seed=[seed, 5], n_restarts=1, categories=categories, kernel=kernel, warp=warp)
        return (constant - gp.log_likelihood) / math.log(10.0)

    observed = log10_k(y)
    as_good = sum(log10_k(rng.permutation(y)) <= observed for _ in range(permutations))
    return EffectTest(observed, (1 + as_good) / (1 + permutations), permutations, as_good, n)


__all__ = ["ALPHA", "MAX_TEST_POINTS", "PERMUTATIONS", "EffectTest", "effect_test"]
