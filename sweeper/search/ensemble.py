"""An equal-weight mixture of GP fits, one per posterior draw of the hyperparameters: the
analysis GP of :mod:`sweeper.search.hyperposterior`, answering as a single fit does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtr, ndtri

from sweeper.search.design import as_generator
from sweeper.search.gp import GPFit
from sweeper.search.hyper_vector import pack, parameter_names, parameter_slots
from sweeper.search.kernels import CategoryFactor
from sweeper.search.warping import OutputWarp

#: Bisection steps of a mixture's quantile: the bracket shrinks 2^-50, below float64 resolution of a metric's range.
_BISECTIONS = 50


def _back(member: GPFit, g: NDArray[np.float64]) -> NDArray[np.float64]:
    """A member's modelled value ``g`` in the metric's units."""
    return g if member.warp is None else member.warp.inverse(g)


def _cdf(member: GPFit, y: NDArray[np.float64], mean: NDArray[np.float64], sd: NDArray[np.float64]
         ) -> NDArray[np.float64]:
    """``P(Y <= y)`` under a member's predictive, Gaussian ``(mean, sd)`` on its modelled scale."""
    g = y if member.warp is None else member.warp.exact(y)
    p: NDArray[np.float64] = ndtr((g - mean) / np.maximum(sd, 1e-300))
    return p


@dataclass(frozen=True)
class GPEnsemble:
    """Equal-weight mixture of GP fits, one per posterior draw of the hyperparameters.

    The same questions as a :class:`~sweeper.search.gp.GPFit` (``predict``, ``sample_posterior``,
    ``predict_mean``), answered by the mixture in original units (inside the bounds of a
    bounded metric); ``point`` is the maximum-likelihood fit the sampler started from, whose
    hyperparameters, factors and likelihood describe the model in reports.

    Attributes:
        point: The maximum-likelihood (MAP for the warp) fit.
        members: One fit per kept draw (``(point,)`` when no sampling was done).
    """

    point: GPFit
    members: tuple[GPFit, ...]

    @property
    def X(self) -> NDArray[np.float64]:
        return self.point.X

    @property
    def y(self) -> NDArray[np.float64]:
        return self.point.y

    @property
    def dim(self) -> int:
        return self.point.dim

    @property
    def warp(self) -> OutputWarp | None:
        return self.point.warp

    @property
    def factors(self) -> tuple[CategoryFactor, ...]:
        return self.point.factors

    @property
    def log_likelihood(self) -> float:
        return self.point.log_likelihood

    def describe(self) -> str:
        return self.point.describe() + (f"; averaged over {len(self.members)} posterior draws"
                                        if len(self.members) > 1 else "")

    def hyperparameters(self) -> dict[str, Any]:
        """The point fit's hyperparameters plus the posterior's median and 90 % interval of each."""
        out = self.point.hyperparameters()
        if len(self.members) > 1:
            draws = np.array([pack(m) for m in self.members])
            logs = np.concatenate([np.full(s.size, s.log) for s in parameter_slots(self.point)])
            values = np.where(logs, np.exp(draws), draws)
            q = np.quantile(values, [0.05, 0.5, 0.95], axis=0)
            out["posterior"] = {"draws": len(self.members), "names": parameter_names(self.point),
                                "q05": q[0].tolist(), "median": q[1].tolist(), "q95": q[2].tolist()}
        return out

    def predict(self, X: ArrayLike, noise: bool = False) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Mixture mean and sd in original units, shape ``(a,)`` each (``noise``: a new trial's result)."""
        X = np.asarray(X, dtype=np.float64)
        first, second = np.zeros(X.shape[0]), np.zeros(X.shape[0])
        for m in self.members:
            mean, sd = m.predict(X, noise)
            first += mean
            second += sd * sd + mean * mean
        k = len(self.members)
        mean = first / k
        return mean, np.sqrt(np.maximum(second / k - mean * mean, 0.0))

    def predict_mean(self, X: ArrayLike) -> NDArray[np.float64]:
        return self.predict(X)[0]

    def band(self, X: ArrayLike, level: float = 0.95) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The central ``level`` interval of a new trial's result at ``X``: the mixture's own quantiles.

        ``mean ± 1.96 sd`` of the back-transformed values leaves a bounded metric's range near a
        bound; these quantiles do not. Each member's predictive is Gaussian on its modelled
        scale, so its quantile is the warp's inverse of ``mean + z sd`` there (``mean ± 1.96 sd``
        for an unbounded single fit). The mixture's quantile lies between its members' and is
        found by bisection on the average of their distribution functions (as the leave-one-out
        check averages them, :mod:`sweeper.search.loo`). Returns ``(low, high)``, each ``(a,)``.
        """
        tail = (1.0 - level) / 2.0
        low, high = self.quantiles(X, (tail, 1.0 - tail)).T
        return low, high

    def quantiles(self, X: ArrayLike, probs: Sequence[float]) -> NDArray[np.float64]:
        """The ``probs``-quantiles of a new trial's result at ``X`` under the mixture, shape ``(a, len(probs))``.

        One bisection for every point and level together: its cost is a call per member per step, whatever
        their number."""
        X = np.asarray(X, dtype=np.float64)
        k = len(probs)
        gauss = [(np.repeat(mean, k), np.repeat(sd, k)) for mean, sd in
                 (m.predict_warped(X, noise=True) for m in self.members)]
        return self._quantile(gauss, np.tile(np.asarray(probs, dtype=np.float64), X.shape[0])).reshape(-1, k)

    def _quantile(self, gauss: list[tuple[NDArray[np.float64], NDArray[np.float64]]], p: NDArray[np.float64]
                  ) -> NDArray[np.float64]:
        """The ``p``-quantiles (one level per entry) of the mixture of the members' predictives ``gauss`` (mean,
        sd on their scale)."""
        each = np.array([_back(m, mean + ndtri(p) * sd) for m, (mean, sd) in zip(self.members, gauss, strict=True)])
        if len(self.members) == 1:
            alone: NDArray[np.float64] = each[0]
            return alone
        low, high = each.min(axis=0), each.max(axis=0)
        for _ in range(_BISECTIONS):
            mid = 0.5 * (low + high)
            below = np.mean([_cdf(m, mid, mean, sd) for m, (mean, sd) in zip(self.members, gauss, strict=True)],
                            axis=0) < p
            low, high = np.where(below, mid, low), np.where(below, high, mid)
        quantile: NDArray[np.float64] = 0.5 * (low + high)
        return quantile

    def share(self, part: int, parts: int) -> GPEnsemble:
        """Members ``part, part + parts, ...``: one of ``parts`` disjoint shares (the whole when there are fewer).

        The surrogate curve draws each of its point sets from one share, so every member
        is factorised once on one set instead of on every set.
        """
        chosen = self.members[part::parts] if len(self.members) >= parts else self.members
        return GPEnsemble(self.point, tuple(chosen) or self.members)

    def sample_posterior(self, X: ArrayLike, n_samples: int,
                         seed: int | Sequence[int] | np.random.Generator | None) -> NDArray[np.float64]:
        """``n_samples`` joint draws of the latent function at ``X`` (original units), ``(S, a)``.

        Draw ``s`` comes from member ``s mod k`` after a seeded shuffle of the members, so a
        few samples use as many different hyperparameters as they can.
        """
        rng = as_generator(seed)
        order = rng.permutation(len(self.members))
        which = order[np.arange(int(n_samples)) % len(self.members)]
        out = np.empty((int(n_samples), np.asarray(X).shape[0]))
        for j in np.unique(which):
            rows = np.flatnonzero(which == j)
            out[rows] = self.members[j].sample_posterior(X, rows.size, rng)
        return out


def predictive_quantiles(gp: GPFit | GPEnsemble, X: ArrayLike, probs: Sequence[float]) -> NDArray[np.float64]:
    """The ``probs``-quantiles of a new trial's result at ``X``, shape ``(a, len(probs))``: the model's own
    distribution (a single fit's warped Gaussian, or the mixture's), not a Gaussian of its mean and sd."""
    model = gp if isinstance(gp, GPEnsemble) else GPEnsemble(gp, (gp,))
    return model.quantiles(X, probs)
