"""One map of a fitted multiverse GP: its numbers, the trials on it, and its figures.

What ``sweeper multiverse`` draws for each pair of continuous dims (or for the one continuous
dim, or for the category combinations when there is none), and what a running sweep draws
after each GP batch (:mod:`sweeper.analysis.live_map`): one piece of code for both, so the
live map is the map the analysis will show, on the trials so far.

A map over two dims is two figures, the posterior mean and the posterior sd (Bell et al.
2022, Fig. 1, 2, 4), a facet per category combination, the trials on top; over one dim or
none, one figure holds the mean with its 95 % band.

**The band** (:attr:`MapView.low`, :attr:`MapView.high`) is the central 95 % of the result a
new trial there would return, the model's own quantiles (:meth:`~sweeper.search.ensemble.GPEnsemble.band`):
``mean ± 1.96 sd`` without bounds; with the metric's bounds, the warp's inverse of the
Gaussian's quantiles on the modelled scale, so it stays inside them where ``mean ± 1.96 sd``
would not. The figures draw it and the map's CSV holds it (``low``, ``high``), the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from sweeper.analysis.map_axes import axis_values, category_facets, continuous_dim
from sweeper.analysis.multiverse import (
    CategoryMeans,
    ContourMap,
    LineMap,
    MultiverseFit,
    _facet_points,
    category_means,
    contour_map,
    line_map,
)
from sweeper.analysis.multiverse_plots import FacetPoints, plot_category_means, plot_contour_facets, plot_line_facets
from sweeper.search.space import SearchSpace

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The share of a new trial's results a map's band holds.
BAND_LEVEL = 0.95
#: Draws of the continuous dims left out when a map averages over them (``others="marginal"``).
N_MARGINAL = 64


@dataclass(frozen=True)
class MapTrials:
    """The trials drawn on a map, in the unit cube of the space.

    Attributes:
        kept: Points of the trials the GP models (dots), shape ``(n, d)``.
        scores: Their values of the metric, shape ``(n,)``.
        excluded: Points of failed or filtered trials (crosses), shape ``(m, d)``.
    """

    kept: NDArray[np.float64]
    scores: NDArray[np.float64]
    excluded: NDArray[np.float64]


@dataclass(frozen=True)
class MapView:
    """The numbers of one map: over two continuous dims (``contour``), one (``line``) or none (``categories``).

    Attributes:
        columns: The continuous dims mapped (their columns), 2, 1 or 0 of them.
        low: The lower end of the 95 % band, shaped as the view's ``mean`` (facet label -> grid
            or line; an array over the labels for ``categories``); ``high`` the upper end.
    """

    columns: tuple[int, ...]
    contour: ContourMap | None = None
    line: LineMap | None = None
    categories: CategoryMeans | None = None
    low: Any = None
    high: Any = None


def map_view(fit: MultiverseFit, columns: Sequence[int], *, others: str = "centre", resolution: int = 40,
             seed: int = 0, contour_band: bool = True) -> MapView:
    """The map of ``fit`` over the continuous dims ``columns`` (2, 1 or none).

    ``resolution``: grid points per axis of a map over two dims (one dim keeps
    :func:`~sweeper.analysis.multiverse.line_map`'s finer default); ``others`` and ``seed``: how the
    continuous dims left out are set (see :func:`~sweeper.analysis.multiverse.contour_map`).
    ``contour_band``: compute a two-dim map's band too; its figures draw mean and sd only, so
    only a map written to CSV needs it (a live map goes without). NOTE: docs/decisions/0019-live-map-without-band.md
    """
    columns = tuple(int(c) for c in columns)
    if len(columns) == 2:
        cm = contour_map(fit, *columns, resolution=resolution, others=others, n_marginal=N_MARGINAL, seed=seed)
        if not contour_band:
            return MapView(columns, contour=cm)
        t = np.linspace(0.0, 1.0, resolution)
        gx, gy = np.meshgrid(t, t)  # the grid contour_map predicts on
        low, high = _facet_bands(fit, np.column_stack([gx.ravel(), gy.ravel()]), columns, others, seed)
        shape = (resolution, resolution)
        return MapView(columns, contour=cm, low={k: v.reshape(shape) for k, v in low.items()},
                       high={k: v.reshape(shape) for k, v in high.items()})
    if len(columns) == 1:
        line = line_map(fit, columns[0], others=others, n_marginal=N_MARGINAL, seed=seed)
        low, high = _facet_bands(fit, np.linspace(0.0, 1.0, line.x.size)[:, None], columns, others, seed)
        return MapView(columns, line=line, low=low, high=high)
    if columns:
        raise ValueError(f"a map shows 2, 1 or 0 continuous dims; got columns {list(columns)}")
    categories = category_means(fit)
    P = np.full((len(categories.labels), fit.space.d), 0.5)  # the points category_means predicts at
    for row, (_, fixed) in enumerate(category_facets(fit.space)):
        P[row, list(fixed)] = list(fixed.values())
    band_low, band_high = fit.gp.band(P, BAND_LEVEL)
    return MapView((), categories=categories, low=band_low, high=band_high)


def _facet_bands(fit: MultiverseFit, U: NDArray[np.float64], free: Sequence[int], others: str, seed: int
                 ) -> tuple[dict[str, NDArray[np.float64]], dict[str, NDArray[np.float64]]]:
    """Per facet, the band's ends at the grid coordinates ``U`` of columns ``free``.

    At the points the map's mean is predicted at; where it averages over the other dims
    (``others="marginal"``), the ends are averaged over the same draws.
    """
    lows, highs = {}, {}
    for label, fixed in category_facets(fit.space):
        P, m = _facet_points(fit, U, fixed, others, free, N_MARGINAL, seed)
        low, high = fit.gp.band(P, BAND_LEVEL)
        lows[label], highs[label] = low.reshape(-1, m).mean(axis=1), high.reshape(-1, m).mean(axis=1)
    return lows, highs


def facet_of(space: SearchSpace, u: NDArray[np.float64]) -> str:
    """The facet label of a unit-cube point (its category combination)."""
    for label, fixed in category_facets(space):
        if all(abs(u[c] - v) < 1e-9 for c, v in fixed.items()):
            return label
    return ""


def facet_points(space: SearchSpace, trials: MapTrials, columns: Sequence[int]) -> dict[str, FacetPoints]:
    """The trials of each facet in display units: kept ones (dots) and failed or filtered ones (crosses).

    Over two dims both coordinates are the dims'; over one, the vertical one is the score (NaN
    for an excluded trial, which has none).
    """
    def shown(U: NDArray[np.float64], c: int) -> NDArray[np.float64]:
        return axis_values(continuous_dim(space, c), U[:, c])[0]

    out = {}
    for label, _ in category_facets(space):
        a = np.array([facet_of(space, u) == label for u in trials.kept], dtype=bool)
        b = np.array([facet_of(space, u) == label for u in trials.excluded], dtype=bool)
        kept, excluded = trials.kept[a], trials.excluded[b]
        if len(columns) == 2:
            i, j = columns
            out[label] = FacetPoints(shown(kept, i), shown(kept, j), shown(excluded, i), shown(excluded, j))
        else:
            out[label] = FacetPoints(shown(kept, columns[0]), trials.scores[a], shown(excluded, columns[0]),
                                     np.full(int(b.sum()), np.nan))
    return out


def draw_map(view: MapView, space: SearchSpace, trials: MapTrials, metric: str, *, note: str = "") -> dict[str, Figure]:
    """The map's figures by kind: ``mean`` and ``sd`` over two dims, else one ``map``.

    ``note``: said under the title, in parentheses (e.g. how the dims left out were set): on its own
    line, so a one-facet figure, a narrow one, does not cut it off.
    """
    after = f"\n({note})" if note else ""
    if view.contour is not None:
        cm, points = view.contour, facet_points(space, trials, view.columns)
        return {what: plot_contour_facets(
            cm.x, cm.y, grids, x_name=cm.x_dim, y_name=cm.y_dim, x_log=cm.x_log, y_log=cm.y_log,
            quantity=f"{what} of a trial's {metric}", points=points,
            title=f"{metric}: posterior {what} over {cm.x_dim} x {cm.y_dim}{after}")
            for what, grids in (("mean", cm.mean), ("sd", cm.sd))}
    title = f"{metric}: posterior mean and {BAND_LEVEL:.0%} band{after}"
    band = (view.low, view.high) if view.low is not None else None
    if view.line is not None:
        x, x_log, mean, sd = view.line
        return {"map": plot_line_facets(x, mean, sd, x_name=space.names[view.columns[0]], x_log=x_log,
                                        quantity=metric, points=facet_points(space, trials, view.columns),
                                        title=title, band=band)}
    assert view.categories is not None
    labels, means, sds = view.categories
    seen = {k: trials.scores[[facet_of(space, u) == k for u in trials.kept]] for k in labels}
    return {"map": plot_category_means(labels, means, sds, quantity=metric, points=seen, title=title, band=band)}
