"""The multiverse analysis (Bell et al. 2022): a GP over the decision space, and what it says.

Given a sweep's finished trials (points in its :class:`~sweeper.search.space.SearchSpace` and
their scores), this module fits the coregionalized GP of :mod:`sweeper.search.gp` and derives:

* **maps**: the posterior mean and sd over a pair of continuous dims, one facet per
  combination of categories, the other continuous dims at the centre of their range or
  averaged over it (the paper's Fig. 1, 2, 4) -- :func:`contour_map`;
* **interaction tests**: Bayes factors of an additive against a shared kernel, over all
  dims and per pair (eq. 8) -- :func:`interaction_tests`, :func:`bayes_factor`;
* **sensitivity**: Monte-Carlo Sobol main and total effects of the posterior mean
  (Fig. 3, 6) -- :func:`sensitivity`; the dims a single map is best drawn over --
  :func:`most_sensitive_continuous`;
* **coregionalization matrices** of the categorical dims (Fig. 5), on :attr:`MultiverseFit.gp`.

Everything is computed on the unit cube of the space; axes are mapped back to original
units (log axes where the dimension is log-scaled) only for display (:mod:`sweeper.analysis.map_axes`).
Integer and grid dims are predicted at the values a trial would run at (a step at each value), not
between them.

The GP is the analysis model of :func:`sweeper.search.hyperposterior.fit_posterior`: for a metric
with declared bounds, a mixture over posterior draws of the hyperparameters that models the
metric warped so its maps stay inside the bounds; without bounds, the single fit. A map's
``mean`` and ``sd`` are of the metric a new trial at that point would return (the GP's
uncertainty plus its noise, which on a real map stands for the small-scale roughness no
stationary kernel follows); ``sd_latent`` leaves the noise out.
NOTE: docs/decisions/0018-multiverse-map-model.md

Python API with fixed names: ``bayes_factor(X, y) -> float`` and
``sensitivity(X, y, names) -> {name: (main, total)}``.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sweeper.analysis.effect_test import effect_test
from sweeper.analysis.map_axes import axis_values, category_facets, continuous_dim, snap, values_at
from sweeper.analysis.sensitivity import SobolIndices, sobol_indices
from sweeper.search.design import random_design
from sweeper.search.ensemble import GPEnsemble
from sweeper.search.hyperposterior import fit_posterior
from sweeper.search.interaction import BayesFactor, interaction_bayes_factor
from sweeper.search.space import FloatDim, SearchSpace
from sweeper.search.warping import MetricBounds

#: Posterior draws the Sobol indices average over (each is evaluated at (d + 2) n_base points per repeat).
SENSITIVITY_DRAWS = 4


@dataclass(frozen=True)
class MultiverseFit:
    """The GP of one sweep's kept trials over its space.

    Attributes:
        space: The search space.
        gp: The fitted GP (coregionalized over the categorical dims), averaged over its
            hyperparameters' posterior draws; ``gp.point`` is the maximum-likelihood fit.
        X: The trials' points in the unit cube, shape ``(n, d)``.
        y: Their scores, shape ``(n,)``.
        bounds: The metric's declared bounds the GP respects, or None.
    """

    space: SearchSpace
    gp: GPEnsemble
    X: NDArray[np.float64]
    y: NDArray[np.float64]
    bounds: MetricBounds | None = None

    @property
    def continuous(self) -> list[int]:
        """Columns of the non-categorical dims."""
        return [i for i, dim in enumerate(self.space.dims) if not dim.is_categorical]


def fit_multiverse(
    space: SearchSpace, X: ArrayLike, y: ArrayLike, *, kernel: str = "matern52-ard", seed: int = 0,
    rank: int = 1, n_restarts: int = 3, bounds: MetricBounds | None = None, kept: int | None = None,
) -> MultiverseFit:
    """Fit the sweep's GP: ``X`` in the unit cube of ``space``, one coregionalization factor per choice dim.

    ``bounds``: the metric's declared bounds (the GP models it warped inside them); ``kept``:
    posterior draws of the hyperparameters (default :func:`sweeper.search.hyperposterior.members_for`;
    1 is the maximum-likelihood fit alone).
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    gp = fit_posterior(X, y, seed=seed, bounds=bounds, categories=space.categories(), kernel=kernel, rank=rank,
                       n_restarts=n_restarts, kept=kept)
    return MultiverseFit(space, gp, X, y, bounds)


# ----------------------------------------------------------------------------- maps
@dataclass(frozen=True)
class ContourMap:
    """Posterior mean and sd over a pair of continuous dims, per facet (rows over ``y``, columns over ``x``).

    Attributes:
        x_dim: Horizontal dim's name; ``y_dim`` the vertical one's.
        x: Grid of the horizontal dim in original units (for drawing: increasing), shape ``(g,)``; ``y`` likewise.
        x_log: Whether the horizontal axis is log-scaled; ``y_log`` likewise.
        mean: Facet label -> mean of a new trial's metric there, shape ``(g, g)``, original units.
        sd: Facet label -> its sd (the GP's uncertainty and noise), shape ``(g, g)``.
        others: ``centre`` or ``marginal``: how the other continuous dims were set.
        sd_latent: Facet label -> the GP's uncertainty about the latent function alone.
        x_values: The values predicted at along ``x``: ``x`` itself for a float dim, the
            value a trial would run at (an integer, a grid value) for the others; ``y_values`` likewise.
    """

    x_dim: str
    y_dim: str
    x: NDArray[np.float64]
    y: NDArray[np.float64]
    x_log: bool
    y_log: bool
    mean: dict[str, NDArray[np.float64]]
    sd: dict[str, NDArray[np.float64]]
    others: str
    sd_latent: dict[str, NDArray[np.float64]] | None = None
    x_values: NDArray[np.float64] | None = None
    y_values: NDArray[np.float64] | None = None


def _facet_points(fit: MultiverseFit, U: NDArray[np.float64], fixed: Mapping[int, float], others: str,
                  free: Sequence[int], n_marginal: int, seed: int) -> tuple[NDArray[np.float64], int]:
    """Points (``len(U) * m``, d) for the grid coordinates ``U`` on columns ``free``, in one facet."""
    d = fit.space.d
    rest = [c for c in fit.continuous if c not in free]
    m = n_marginal if others == "marginal" and rest else 1
    P = np.full((U.shape[0], m, d), 0.5)
    P[:, :, list(free)] = U[:, None, :]
    for c, v in fixed.items():
        P[:, :, c] = v
    if m > 1:
        P[:, :, rest] = random_design(m, len(rest), [seed, 7])[None, :, :]
    return snap(fit.space, P.reshape(-1, d)), m


def _predict_grid(fit: MultiverseFit, U: NDArray[np.float64], free: Sequence[int], others: str,
                  n_marginal: int, seed: int) -> tuple[dict[str, NDArray[np.float64]], ...]:
    """Per facet: mean and sd of a new trial's metric, and the latent sd, averaged over the other dims."""
    means, sds, latent = {}, {}, {}
    for label, fixed in category_facets(fit.space):
        P, m = _facet_points(fit, U, fixed, others, free, n_marginal, seed)
        mean, sd = fit.gp.predict(P, noise=True)
        means[label] = mean.reshape(-1, m).mean(axis=1)
        sds[label] = sd.reshape(-1, m).mean(axis=1)
        latent[label] = fit.gp.predict(P)[1].reshape(-1, m).mean(axis=1)
    return means, sds, latent


def contour_map(
    fit: MultiverseFit, x_dim: int, y_dim: int, *, resolution: int = 40, others: str = "centre",
    n_marginal: int = 64, seed: int = 0,
) -> ContourMap:
    """Posterior mean and sd over continuous dims ``x_dim`` and ``y_dim`` (column indices), per facet.

    Args:
        fit: The sweep's GP.
        x_dim: Column of the horizontal dim; ``y_dim`` of the vertical one.
        resolution: Grid points per axis.
        others: ``centre`` (other continuous dims at the middle of their range) or
            ``marginal`` (the mean and the sd are averaged over ``n_marginal`` uniform draws of them).
        n_marginal: Draws of the other dims when marginalising.
        seed: Seed of those draws.
    """
    if others not in ("centre", "marginal"):
        raise ValueError(f"others must be 'centre' or 'marginal'; got {others!r}")
    if {x_dim, y_dim} - set(fit.continuous) or x_dim == y_dim:
        raise ValueError(f"a contour map needs two different continuous dims; got columns {x_dim}, {y_dim}")
    t = np.linspace(0.0, 1.0, resolution)
    gx, gy = np.meshgrid(t, t)  # rows over y, columns over x
    U = np.column_stack([gx.ravel(), gy.ravel()])
    means, sds, latent = _predict_grid(fit, U, [x_dim, y_dim], others, n_marginal, seed)
    x_d, y_d = continuous_dim(fit.space, x_dim), continuous_dim(fit.space, y_dim)
    x, x_log = axis_values(x_d, t)
    y, y_log = axis_values(y_d, t)
    shape = (resolution, resolution)

    def grid(by_facet: dict[str, NDArray[np.float64]]) -> dict[str, NDArray[np.float64]]:
        return {k: v.reshape(shape) for k, v in by_facet.items()}

    return ContourMap(x_d.name, y_d.name, x, y, x_log, y_log, grid(means), grid(sds), others,
                      grid(latent), values_at(x_d, t), values_at(y_d, t))


class LineMap(NamedTuple):
    """Mean and sd of a new trial's metric along one continuous dim, per facet.

    Attributes:
        x: Grid of the dim in original units, shape ``(g,)``.
        x_log: Whether its axis is log-scaled.
        mean: Facet label -> mean, shape ``(g,)``; ``sd`` likewise.
    """

    x: NDArray[np.float64]
    x_log: bool
    mean: dict[str, NDArray[np.float64]]
    sd: dict[str, NDArray[np.float64]]


def line_map(fit: MultiverseFit, dim: int, *, resolution: int = 100, others: str = "centre",
             n_marginal: int = 64, seed: int = 0) -> LineMap:
    """Mean and sd of a new trial's metric along one continuous dim, per facet: ``(x, x_log, mean, sd)``."""
    t = np.linspace(0.0, 1.0, resolution)
    means, sds, _ = _predict_grid(fit, t[:, None], [dim], others, n_marginal, seed)
    x, x_log = axis_values(continuous_dim(fit.space, dim), t)
    return LineMap(x, x_log, means, sds)


class CategoryMeans(NamedTuple):
    """Mean and sd of a new trial's metric in each category combination: ``(labels, mean, sd)``, each ``(k,)``."""

    labels: list[str]
    mean: NDArray[np.float64]
    sd: NDArray[np.float64]


def category_means(fit: MultiverseFit) -> CategoryMeans:
    """Mean and sd of a new trial's metric in each category combination (continuous dims at the centre)."""
    facets = category_facets(fit.space)
    P = np.full((len(facets), fit.space.d), 0.5)
    for row, (_, fixed) in enumerate(facets):
        for c, v in fixed.items():
            P[row, c] = v
    mean, sd = fit.gp.predict(P, noise=True)
    return CategoryMeans([label for label, _ in facets], mean, sd)


# ----------------------------------------------------------------------------- tests and sensitivity
@dataclass(frozen=True)
class InteractionTests:
    """Eq. 8 Bayes factors of a sweep: over all dims and for each pair of dims (names as keys)."""

    overall: BayesFactor
    pairs: dict[tuple[str, str], BayesFactor]


def interaction_tests(fit: MultiverseFit, *, kernel: str = "matern52-ard", seed: int = 0,
                      n_restarts: int = 3) -> InteractionTests:
    """Test all dims together, then every pair (the additive model is fitted once and shared).

    With bounds each model learns its own warp, starting from the analysis fit's
    (``fit.gp.warp``), and the likelihoods are of the metric's own values
    (:func:`sweeper.search.interaction.interaction_bayes_factor`).
    """
    categories = fit.space.categories()

    def test(pair: tuple[int, int] | None = None, additive: float | None = None) -> BayesFactor:
        return interaction_bayes_factor(fit.X, fit.y, categories=categories, pair=pair, kernel=kernel, seed=[seed, 1],
                                        n_restarts=n_restarts, additive_log_likelihood=additive, warp=fit.gp.warp)

    overall = test()
    names = fit.space.names
    pairs = {}
    if fit.space.d > 2:
        for i, j in itertools.combinations(range(fit.space.d), 2):
            pairs[(names[i], names[j])] = test((i, j), overall.additive_log_likelihood)
    elif fit.space.d == 2:
        pairs[(names[0], names[1])] = overall  # with two dims the pair test is the overall test
    return InteractionTests(overall, pairs)


def posterior_sensitivity(fit: MultiverseFit, *, n_base: int = 1024, repeats: int = 10,
                          seed: int = 0) -> SobolIndices:
    """Sobol main and total effects of the GP posterior mean over the unit cube (categories uniform).

    The mean in the metric's units (inside its bounds), averaged over ``SENSITIVITY_DRAWS``
    of the posterior draws; integer and grid dims at the values a trial would run at.
    """
    model = fit.gp.share(0, max(1, len(fit.gp.members) // SENSITIVITY_DRAWS))
    return sobol_indices(lambda U: model.predict(snap(fit.space, U))[0], fit.space.d, names=fit.space.names,
                         n_base=n_base, repeats=repeats, seed=[seed, 2])


def most_sensitive_continuous(fit: MultiverseFit, k: int = 2, *, n_base: int = 256, repeats: int = 2,
                              seed: int = 0) -> tuple[int, ...]:
    """The ``k`` continuous dims (columns, in space order) with the largest total Sobol effects on the posterior mean.

    The dims a map of the fit is best drawn over: what is left out moves the mean least. A
    space with at most ``k`` continuous dims has them all, and no effects are computed. The
    effects only rank the dims here, so a few hundred base points do (a total effect of the
    posterior mean is rarely close to another's; ties go to the earlier column).
    """
    continuous = fit.continuous
    if len(continuous) <= k:
        return tuple(continuous)
    total = posterior_sensitivity(fit, n_base=n_base, repeats=repeats, seed=seed).total
    ranked = sorted(continuous, key=lambda c: (-total[c], c))
    return tuple(sorted(ranked[:k]))


# ----------------------------------------------------------------------------- the fixed-name API
def _unit_columns(X: ArrayLike, space: SearchSpace | None) -> NDArray[np.float64]:
    """Rows in original units to the unit cube: through ``space`` if given, else each column's observed range."""
    if space is not None:
        return space.to_unit([dict(zip(space.names, row, strict=True)) for row in np.asarray(X, dtype=object)])
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2:
        raise ValueError(f"X must have shape (n, d); got shape {A.shape}")
    low, high = A.min(axis=0), A.max(axis=0)
    unit: NDArray[np.float64] = (A - low) / np.where(high > low, high - low, 1.0)
    return unit


def bayes_factor(X: ArrayLike, y: ArrayLike, *, space: SearchSpace | None = None, kernel: str = "matern52-ard",
                 seed: int = 0, n_restarts: int = 3) -> float:
    """``K = p(D | additive) / p(D | shared)`` (Bell et al. eq. 8): > 1 favours no interaction.

    Args:
        X: Points, shape ``(n, d)``, ``d >= 2``: in original units (each column is rescaled
            to its observed range, so pass ``log10`` of log-scaled dims) or the unit cube;
            with ``space``, rows of values of its dims (categories as their choices).
        y: Scores, shape ``(n,)``.
        space: Optional search space that maps ``X`` to the unit cube (log scales and
            categorical dims handled).
        kernel: Stationary family of both models.
        seed: Seed of the optimiser restarts.
        n_restarts: Restarts of each fit.

    Returns:
        ``K`` (``inf`` if it overflows a float).
    """
    cats = space.categories() if space is not None else None
    bf = interaction_bayes_factor(_unit_columns(X, space), np.asarray(y, dtype=np.float64), categories=cats,
                                  kernel=kernel, seed=seed, n_restarts=n_restarts)
    return bf.K


def sensitivity(X: ArrayLike, y: ArrayLike, names: Sequence[str], *, space: SearchSpace | None = None,
                kernel: str = "matern52-ard", seed: int = 0, n_base: int = 2048,
                repeats: int = 10) -> dict[str, tuple[float, float]]:
    """Sobol ``(main, total)`` effect of each dim on the GP fitted to ``(X, y)`` (Bell et al. Fig. 3).

    ``X`` as for :func:`bayes_factor`; ``names`` names its columns. Where the data do not show
    that ``y`` depends on any column (:func:`sweeper.analysis.effect_test.effect_test`), the
    indices apportion what may be noise, and a ``UserWarning`` says so.
    """
    U = _unit_columns(X, space)
    if len(names) != U.shape[1]:
        raise ValueError(f"names has {len(names)} entries but X has {U.shape[1]} columns")
    space = space or SearchSpace(tuple(FloatDim(str(n), 0.0, 1.0) for n in names))
    fit = fit_multiverse(space, U, y, kernel=kernel, seed=seed)
    caution = effect_test(space, fit.X, fit.y, warp=fit.gp.warp, kernel=kernel, seed=seed).caution("y")
    if caution:
        warnings.warn(caution, UserWarning, stacklevel=2)
    indices = posterior_sensitivity(fit, n_base=n_base, repeats=repeats, seed=seed)
    return dict(zip(names, indices.as_dict().values(), strict=True))


__all__ = [
    "SENSITIVITY_DRAWS",
    "CategoryMeans",
    "ContourMap",
    "InteractionTests",
    "LineMap",
    "MultiverseFit",
    "axis_values",
    "bayes_factor",
    "category_facets",
    "category_means",
    "continuous_dim",
    "contour_map",
    "fit_multiverse",
    "interaction_tests",
    "line_map",
    "most_sensitive_continuous",
    "posterior_sensitivity",
    "sensitivity",
    "snap",
]
