"""Whether the analysis sampler's chains draw the same map: a posterior with more than one mode, said out loud.

The analysis GP of a bounded metric averages over its hyperparameters' posterior, drawn by
``CHAINS`` slice-sampling chains (:mod:`sweeper.search.hyperposterior`). Where the trials leave
that posterior with two modes of similar weight, chains settle in different ones, and the map
shown is their average. On the demo's own map (a diagonal cliff that an axis-aligned kernel
cannot draw), one such mode ignores ``C`` and ripples in ``gamma`` with a lengthscale of 0.04: the
average shows stripes the truth does not have. That mode is the posterior's, not a stranded
chain's: with twice as many chains more of them fall into it (decision 0080). Neither mode can
be chosen from the trials alone, so the analysis says that its map is unsettled.

The measure is Gelman and Rubin's potential scale reduction (Gelman et al. 2013, BDA3 §11.4,
eq. 11.4) of each chain's draws of the posterior mean of the metric, at ``POINTS`` Sobol points of
the space (legal values): ``R = sqrt(((m - 1) / m W + B) / W)``, ``W`` the mean within-chain
variance and ``B`` the variance between the chains' means (``m`` draws per chain). One mode: the
chains' means differ by their draws' own spread, ``R`` near 1; two modes: the means part, and
``R`` grows. The median over the points is the statistic: where every chain agrees (the
plateau of a bounded metric) ``W`` and ``B`` are both near zero and one point's ``R`` says nothing.
``R`` is a ratio, so with many trials (each member sure of its map) chains 0.01 apart pass 1.2
(the same sweep at 56 trials: 1.17-1.30). The chains are said to draw different maps only when,
besides, their mean maps differ by more than a trial's own noise (the root mean square over the
points of each): a gap no trial could see is not a second reading.

NOTE: docs/decisions/0080-chains-that-draw-different-maps.md

References:
    Gelman, A., Rubin, D. B. (1992). Inference from Iterative Simulation Using Multiple
    Sequences. Statistical Science 7(4).
    Gelman, A., Carlin, J. B., Stern, H. S., Dunson, D. B., Vehtari, A., Rubin, D. B. (2013).
    Bayesian Data Analysis, 3rd ed., §11.4.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from sweeper.analysis.map_axes import snap
from sweeper.search.design import sobol_design
from sweeper.search.ensemble import GPEnsemble
from sweeper.search.hyperposterior import CHAINS
from sweeper.search.space import SearchSpace

#: Points of the space the chains' maps are compared at.
POINTS = 256
#: The median potential scale reduction above which, with their maps further apart than a trial's noise, the chains
#: are said to draw different maps.
#: NOTE: docs/decisions/0080-chains-that-draw-different-maps.md
RHAT_LIMIT = 1.2


@dataclass(frozen=True)
class ChainAgreement:
    """How far the sampler's chains agree on the map.

    Attributes:
        chains: Chains compared.
        draws: Draws per chain.
        rhat: Median over the points of the potential scale reduction of the map's mean.
        spread: Root mean square over the points of the sd between the chains' mean maps, metric units.
        noise: Root mean square over the points of a trial's noise sd (the mixture's predictive sd with noise
            and without, in quadrature), metric units.
        worst: The point (original units, by dim name) where the chains' mean maps differ most, and by how much.
    """

    chains: int
    draws: int
    rhat: float
    spread: float
    noise: float
    worst: tuple[dict[str, object], float]

    @property
    def agree(self) -> bool:
        return self.rhat <= RHAT_LIMIT or self.spread <= self.noise

    def caution(self, what: str) -> str | None:
        """A sentence for the report when the chains disagree, else None."""
        if self.agree:
            return None
        where, gap = self.worst
        at = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in where.items())
        return (f"the {self.chains} chains of the GP's hyperparameter sampler draw different maps (median potential "
                f"scale reduction {self.rhat:.2f}, above {RHAT_LIMIT}): their mean maps differ by {self.spread:.3g} on "
                f"average, more than a trial's noise ({self.noise:.3g}), and by {gap:.3g} at {at}. The trials leave "
                f"more than one reading of the metric open, and {what} show their average, which can have shapes "
                f"that no reading has (stripes, bumps). What would help: more trials, first near that point")

    def summary(self) -> dict[str, object]:
        where, gap = self.worst
        return {"chains": self.chains, "draws": self.draws, "rhat": self.rhat, "rhat_limit": RHAT_LIMIT,
                "spread": self.spread, "noise": self.noise, "worst_point": where, "worst_gap": gap,
                "agree": self.agree}


def potential_scale_reduction(draws: NDArray[np.float64]) -> NDArray[np.float64]:
    """BDA3 eq. 11.4 per column: ``draws`` shaped ``(chains, draws, points)``, at least two of each.

    Where no chain varies (every member predicts the same there), 1 if the chains are equal too, else infinite."""
    m = draws.shape[1]
    within = draws.var(axis=1, ddof=1).mean(axis=0)
    between = draws.mean(axis=1).var(axis=0, ddof=1)
    pooled = (m - 1) / m * within + between
    ratio = np.divide(pooled, within, out=np.where(between > 0, np.inf, 1.0), where=within > 0)
    rhat: NDArray[np.float64] = np.sqrt(ratio)
    return rhat


def chain_agreement(gp: GPEnsemble, space: SearchSpace, seed: int = 0) -> ChainAgreement | None:
    """How far the chains of ``gp``'s sampler agree, or None where nothing was sampled or a chain has one draw.

    The members of :func:`sweeper.search.hyperposterior.fit_posterior` come chain by chain, in ``CHAINS``
    consecutive runs of equal size (the first ones one longer where the count does not divide).
    """
    members = gp.members
    per_chain = len(members) // CHAINS
    if per_chain < 2:
        return None
    U = snap(space, sobol_design(POINTS, space.d, seed))
    means = np.array([member.predict_mean(U) for member in members])
    chains = [means[rows[:per_chain]] for rows in np.array_split(np.arange(len(members)), CHAINS)]
    draws = np.stack(chains)
    rhat = potential_scale_reduction(draws)
    chain_means = draws.mean(axis=1)
    gaps = chain_means.max(axis=0) - chain_means.min(axis=0)
    i = int(np.argmax(gaps))
    point = space.from_unit(U[i:i + 1])[0]
    noise = np.sqrt(np.mean(np.maximum(gp.predict(U, noise=True)[1] ** 2 - gp.predict(U)[1] ** 2, 0.0)))
    return ChainAgreement(CHAINS, per_chain, float(np.median(rhat)),
                          float(np.sqrt(np.mean(chain_means.var(axis=0, ddof=1)))), float(noise),
                          (point, float(gaps[i])))
