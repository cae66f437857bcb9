"""Where a map's points lie: the category facets of a space, and a continuous dim's axis in original units.

The maps of :mod:`sweeper.analysis.multiverse` are computed on the unit cube of the search space
(one facet per combination of categories) and drawn in original units; integer and grid dims
are predicted at the values a trial would run at (:func:`snap`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.typing import NDArray

from sweeper.search.space import ChoiceDim, Dimension, FloatDim, GridDim, IntDim, SearchSpace


def category_facets(space: SearchSpace) -> list[tuple[str, dict[int, float]]]:
    """One facet per combination of categories: its label and the unit coordinates that select it.

    A space without categorical dims has a single facet labelled ``""``.
    """
    cats = [(i, dim) for i, dim in enumerate(space.dims) if isinstance(dim, ChoiceDim)]
    facets = []
    for combo in itertools.product(*(range(len(dim.choices)) for _, dim in cats)):
        label = ", ".join(f"{dim.name}={dim.choice_strings[k]}" for (_, dim), k in zip(cats, combo, strict=True))
        facets.append((label, {i: (k + 0.5) / len(dim.choices) for (i, dim), k in zip(cats, combo, strict=True)}))
    return facets


def continuous_dim(space: SearchSpace, column: int) -> FloatDim | IntDim | GridDim:
    """The dim of ``column``, which must be continuous (float, integer or grid): the dims a map has axes for."""
    dim = space.dims[column]
    if isinstance(dim, ChoiceDim):
        raise ValueError(f"column {column} ({dim.name}) is categorical: a map's axis needs a continuous dim")
    return dim


def axis_values(dim: FloatDim | IntDim | GridDim, u: NDArray[np.float64]) -> tuple[NDArray[np.float64], bool]:
    """Unit coordinates of a continuous dim as display values in original units, and whether the axis is log.

    Integer and grid dims are shown continuously (the GP is continuous in them), so the
    values increase strictly with ``u``; a grid that does not increase is shown in unit coordinates.
    """
    u = np.asarray(u, dtype=np.float64)
    if isinstance(dim, FloatDim):
        if dim.log:
            return np.exp(np.log(dim.low) + u * (np.log(dim.high) - np.log(dim.low))), True
        return dim.low + u * (dim.high - dim.low), False
    if isinstance(dim, IntDim):
        if dim.log:
            a, b = math.log(dim.low - 0.5), math.log(dim.high + 0.5)
            return np.exp(a + u * (b - a)), True
        return dim.low - 0.5 + u * (dim.high - dim.low + 1), False
    values = np.asarray(dim.values, dtype=np.float64)
    if values.size < 2 or np.any(np.diff(values) <= 0):
        return u, False
    return np.interp(u * values.size - 0.5, np.arange(values.size), values), False


def snap(space: SearchSpace, U: NDArray[np.float64]) -> NDArray[np.float64]:
    """Unit points moved to the values a trial would run at (integer and grid dims; floats unchanged)."""
    discrete = [i for i, dim in enumerate(space.dims) if isinstance(dim, IntDim | GridDim)]
    if not discrete:
        return U
    out = U.copy()
    for i in discrete:
        out[:, i] = [_snapped(space.dims[i], float(u)) for u in U[:, i]]
    return out


def _snapped(dim: Dimension, u: float) -> float:
    """The unit coordinate of the value an integer or grid dim runs at for ``u`` (any other dim: ``u``)."""
    if isinstance(dim, IntDim):
        return dim.to_unit(dim.from_unit(u))
    if isinstance(dim, GridDim):
        return dim.to_unit(dim.from_unit(u))
    return u


def values_at(dim: FloatDim | IntDim | GridDim, u: NDArray[np.float64]) -> NDArray[np.float64]:
    """The values a trial runs at for unit coordinates ``u`` (floats: the display values)."""
    if isinstance(dim, FloatDim):
        return axis_values(dim, u)[0]
    return np.array([dim.from_unit(float(v)) for v in u], dtype=np.float64)
