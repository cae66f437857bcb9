"""One map of a fitted multiverse GP: its numbers, the trials on it, and its figures.

What ``sweeper multiverse`` draws for each pair of continuous dims (or for the one continuous
dim, or for the category combinations when there is none), and what a running sweep draws
after each GP batch (:mod:`sweeper.analysis.live_map`): one piece of code for both, so the
live map is the map the analysis will show, on the trials so far.

A map over two dims is two figures, the posterior mean and the posterior sd (Bell et al.
2022, Fig. 1, 2, 4), a facet per category combination, the trials on top; over one dim or
none, one figure holds the mean with its ±2 sd.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from sweeper.analysis.multiverse import (
    CategoryMeans,
    ContourMap,
    LineMap,
    MultiverseFit,
    axis_values,
    category_facets,
    category_means,
    contour_map,
    line_map,
)
from sweeper.analysis.multiverse_plots import FacetPoints, plot_category_means, plot_contour_facets, plot_line_facets
from sweeper.search.space import SearchSpace

if TYPE_CHECKING:
    from matplotlib.figure import Figure


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
    """

    columns: tuple[int, ...]
    contour: ContourMap | None = None
    line: LineMap | None = None
    categories: CategoryMeans | None = None


def map_view(fit: MultiverseFit, columns: Sequence[int], *, others: str = "centre", resolution: int = 40,
             seed: int = 0) -> MapView:
    """The map of ``fit`` over the continuous dims ``columns`` (2, 1 or none).

    ``resolution``: grid points per axis of a map over two dims (one dim keeps
    :func:`~sweeper.analysis.multiverse.line_map`'s finer default); ``others`` and ``seed``: how the
    continuous dims left out are set (see :func:`~sweeper.analysis.multiverse.contour_map`).
    """
    columns = tuple(int(c) for c in columns)
    if len(columns) == 2:
        return MapView(columns, contour=contour_map(fit, *columns, resolution=resolution, others=others, seed=seed))
    if len(columns) == 1:
        return MapView(columns, line=line_map(fit, columns[0], others=others, seed=seed))
    if columns:
        raise ValueError(f"a map shows 2, 1 or 0 continuous dims; got columns {list(columns)}")
    return MapView((), categories=category_means(fit))


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
    dims = space.dims

    def shown(U: NDArray[np.float64], c: int) -> NDArray[np.float64]:
        return axis_values(dims[c], U[:, c])[0]  # type: ignore[arg-type]

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
    title = f"{metric}: posterior mean ± 2 sd{after}"
    if view.line is not None:
        x, x_log, mean, sd = view.line
        return {"map": plot_line_facets(x, mean, sd, x_name=space.names[view.columns[0]], x_log=x_log,
                                        quantity=metric, points=facet_points(space, trials, view.columns),
                                        title=title)}
    assert view.categories is not None
    labels, mean, sd = view.categories
    seen = {k: trials.scores[[facet_of(space, u) == k for u in trials.kept]] for k in labels}
    return {"map": plot_category_means(labels, mean, sd, quantity=metric, points=seen, title=title)}
