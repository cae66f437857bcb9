"""Figures of the multiverse analysis: GP posterior maps, coregionalization, sensitivity.

Every function only draws: it takes plain numpy arrays computed elsewhere (the GP fit
and the Sobol indices) and returns a new ``matplotlib.figure.Figure`` on its own Agg
canvas (see :func:`sweeper.analysis.plotting._new_figure`; pyplot is never imported).
Save with ``fig.savefig("map.png")``. Every function raises
:class:`~sweeper.errors.MissingDependencyError` when matplotlib is missing, and
``ValueError`` naming the argument and the shapes when inputs disagree.

References:
    Bell, S. J., Kampman, O. P., Dodge, J., & Lawrence, N. D. (2022). Modeling the
    Machine Learning Multiverse. NeurIPS 2022 (Fig. 1, 2, 4: posterior mean maps with
    the evaluated universes on top; Fig. 5: coregionalization matrices; Fig. 3, 6:
    main and total Sobol effects).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sweeper.analysis.plotting import _new_figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Keyword arguments of ``Axes.plot`` / ``Line2D`` for the trials a GP models, and for failed or filtered ones.
_INCLUDED: dict[str, Any] = {"marker": "o", "markerfacecolor": "white", "markeredgecolor": "black",
                             "markeredgewidth": 0.7, "markersize": 5, "linestyle": "none"}
_EXCLUDED: dict[str, Any] = {"marker": "x", "color": "black", "markersize": 5, "linestyle": "none"}


def _vector(name: str, values: ArrayLike, size: int | None = None) -> NDArray[np.float64]:
    """Return ``values`` as a float vector, or raise naming ``name`` and the shapes."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or (size is not None and arr.size != size):
        want = "(n,)" if size is None else f"({size},)"
        raise ValueError(f"{name} must have shape {want}; got {arr.shape}")
    return arr


@dataclass(frozen=True)
class FacetPoints:
    """Trials drawn on top of one facet, in the axes' original units.

    For 2-D contour facets the ``*_y`` arrays are the vertical coordinate; for 1-D line
    facets they are the metric values, and an excluded value may be NaN (a failed trial
    has no score): it is drawn as a cross at the bottom of the axes.
    """

    included_x: NDArray[np.float64]  # (n_in,) drawn as white dots with a black edge
    included_y: NDArray[np.float64]  # (n_in,)
    excluded_x: NDArray[np.float64]  # (n_out,) failed or filtered trials: black crosses
    excluded_y: NDArray[np.float64]  # (n_out,)

    def __post_init__(self) -> None:
        for kind in ("included", "excluded"):
            px = _vector(f"{kind}_x", getattr(self, f"{kind}_x"))
            py = _vector(f"{kind}_y", getattr(self, f"{kind}_y"), px.size)
            object.__setattr__(self, f"{kind}_x", px)
            object.__setattr__(self, f"{kind}_y", py)


def _check_points(points: Mapping[str, Any] | None, facets: Sequence[str]) -> None:
    unknown = sorted(set(points or {}) - set(facets))
    if unknown:
        raise ValueError(f"points has facet labels {unknown} not among the facets {list(facets)}")


def _check_log(name: str, values: NDArray[np.float64], log: bool) -> None:
    if log and not np.all(values > 0):
        raise ValueError(f"{name} must be > 0 on a log axis; got min {values.min()!r}")


def _trial_legend(fig: Figure, has_in: bool, has_out: bool) -> None:
    """Add one figure legend for the trial markers (proxies: facets may lack a kind)."""
    from matplotlib.lines import Line2D  # matplotlib is optional

    handles = ([Line2D([], [], label="trial", **_INCLUDED)] if has_in else []) + (
        [Line2D([], [], label="failed/filtered", **_EXCLUDED)] if has_out else []
    )
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize="small")


def plot_contour_facets(
    x: ArrayLike, y: ArrayLike, grids: Mapping[str, ArrayLike], *,
    x_name: str, y_name: str, x_log: bool, y_log: bool, quantity: str,
    points: Mapping[str, FacetPoints] | None = None, cmap: str = "viridis", levels: int = 15,
    title: str | None = None, max_columns: int = 4,
) -> Figure:
    """Draw a GP posterior quantity over two continuous dims, one facet per category.

    Filled contours with thin contour lines, the evaluated trials on top, as in Bell et
    al. (2022), Fig. 1, 2 and 4. Every facet shares one colour scale (and one colorbar)
    spanning the global min and max of all grids, so facets compare by colour.

    Args:
        x: ``(gx,)`` increasing grid values of the horizontal dim, original units.
        y: ``(gy,)`` increasing grid values of the vertical dim.
        grids: Facet label -> values of shape ``(gy, gx)``; one facet per combination of
            the categorical dims (a single ``""`` facet when there is none).
        x_name, y_name, x_log, y_log: Axis labels (the dim names) and log scales.
        quantity: Colorbar label, e.g. ``"posterior mean of test_acc"``.
        points: Facet label -> trials drawn on that facet.
        cmap, levels, title, max_columns: Colormap, colour bands, figure title, facets per row.

    Returns:
        The figure: one axes per facet, in ``grids`` order, then the colorbar's axes.

    Raises:
        ValueError: On empty ``grids``, mismatched shapes, all-NaN grids, non-positive
            values on a log axis, or ``points`` for an unknown facet.
    """
    xs, ys, zs = _contour_inputs(x, y, grids, x_log=x_log, y_log=y_log, levels=levels, max_columns=max_columns)
    _check_points(points, list(zs))
    lo, hi = _colour_range(zs)
    bounds = np.linspace(lo, hi, levels + 1)  # the same bands on every facet

    ncols = min(len(zs), max_columns)
    nrows = math.ceil(len(zs) / ncols)
    fig = _new_figure((3.3 * ncols + 1.3, 2.9 * nrows + 0.8))
    grid_axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False).ravel()
    for ax in grid_axes[len(zs):]:
        ax.remove()
    axes: list[Axes] = list(grid_axes[: len(zs)])
    has_in = has_out = False
    filled: list[Any] = []  # one contour set per facet; all share ``bounds``
    for ax, (label, z) in zip(axes, zs.items(), strict=True):
        filled.append(ax.contourf(xs, ys, z, levels=bounds, cmap=cmap, vmin=lo, vmax=hi))
        ax.contour(xs, ys, z, levels=bounds, colors="black", linewidths=0.3, alpha=0.4)
        pts = (points or {}).get(label)
        if pts is not None:
            ax.plot(pts.included_x, pts.included_y, zorder=3, **_INCLUDED)
            ax.plot(pts.excluded_x, pts.excluded_y, zorder=3, **_EXCLUDED)
            has_in, has_out = has_in or pts.included_x.size > 0, has_out or pts.excluded_x.size > 0
        ax.set(xscale="log" if x_log else "linear", yscale="log" if y_log else "linear",
               xlim=(xs[0], xs[-1]), ylim=(ys[0], ys[-1]), xlabel=x_name, ylabel=y_name)
        if label or len(zs) > 1:
            ax.set_title(label, fontsize="medium")
    fig.colorbar(filled[0], ax=axes, label=quantity)  # shared scale: any facet's
    _trial_legend(fig, has_in, has_out)
    if title:
        fig.suptitle(title)
    return fig


def _contour_inputs(x: ArrayLike, y: ArrayLike, grids: Mapping[str, ArrayLike], *, x_log: bool, y_log: bool,
                    levels: int, max_columns: int
                    ) -> tuple[NDArray[np.float64], NDArray[np.float64], dict[str, NDArray[np.float64]]]:
    """:func:`plot_contour_facets`' axes and grids as float arrays, checked against each other and the options."""
    xs, ys = _vector("x", x), _vector("y", y)
    for name, v, log in (("x", xs, x_log), ("y", ys, y_log)):
        if v.size < 2 or not np.all(np.diff(v) > 0):
            raise ValueError(f"{name} must be strictly increasing with >= 2 values; got {v}")
        _check_log(name, v, log)
    if not grids:
        raise ValueError("grids is empty: pass at least one facet label -> (gy, gx) values")
    if levels < 2 or max_columns < 1:
        raise ValueError(f"levels must be >= 2 and max_columns >= 1; got {levels}, {max_columns}")
    zs = {str(k): np.asarray(v, dtype=np.float64) for k, v in grids.items()}
    for label, z in zs.items():
        if z.shape != (ys.size, xs.size):
            want = (ys.size, xs.size)
            raise ValueError(f"grids[{label!r}] must have shape (len(y), len(x)) = {want}; got {z.shape}")
    return xs, ys, zs


def _colour_range(zs: Mapping[str, NDArray[np.float64]]) -> tuple[float, float]:
    """The colour scale every facet shares: the grids' finite min and max, widened for a constant surface."""
    finite = np.concatenate([z[np.isfinite(z)] for z in zs.values()])
    if finite.size == 0:
        raise ValueError("grids hold no finite value")
    lo, hi = float(finite.min()), float(finite.max())
    if hi - lo <= 1e-12 * max(1.0, abs(lo)):  # a constant surface: widen the scale
        lo, hi = lo - 1e-3 * max(1.0, abs(lo)), hi + 1e-3 * max(1.0, abs(hi))
    return lo, hi

def plot_line_facets(
    x: ArrayLike, mean: Mapping[str, ArrayLike], sd: Mapping[str, ArrayLike], *,
    x_name: str, x_log: bool, quantity: str,
    points: Mapping[str, FacetPoints] | None = None, title: str | None = None,
    band: tuple[Mapping[str, ArrayLike], Mapping[str, ArrayLike]] | None = None,
) -> Figure:
    """Draw the posterior over a single continuous dim, one line per category.

    The 1-D analogue of :func:`plot_contour_facets` (Bell et al. 2022, Fig. 1): each
    facet's posterior mean with its band (``band``, else +/-2 sd), its trials as dots of the
    same colour and failed or filtered trials as black crosses (at the bottom when they have no score).

    Args:
        x: ``(gx,)`` grid values of the dim, original units.
        mean: Facet label -> posterior mean, shape ``(gx,)``.
        sd: Facet label -> posterior sd, shape ``(gx,)``; the same labels as ``mean``.
        x_name, x_log: x axis label and log scale.
        quantity: y axis label.
        points: Facet label -> trials (``included_y``/``excluded_y`` are metric values).
        title: Axes title.
        band: ``(low, high)``, each facet label -> the band's ends, shape ``(gx,)``: the
            model's own interval (inside a bounded metric's range); None: ``mean ± 2 sd``.

    Returns:
        The figure, with one axes.

    Raises:
        ValueError: On empty or mismatched ``mean``/``sd``, wrong shapes, non-positive
            ``x`` on a log axis, or ``points`` for an unknown facet.
    """
    xs = _vector("x", x)
    _check_log("x", xs, x_log)
    if not mean or list(mean) != list(sd):
        raise ValueError(f"mean and sd need the same non-empty labels; got {list(mean)}, {list(sd)}")
    _check_points(points, list(mean))
    fig = _new_figure((6.4, 4.2))
    ax = fig.add_subplot()
    has_out = False
    for label in mean:
        m = _vector(f"mean[{label!r}]", mean[label], xs.size)
        s = _vector(f"sd[{label!r}]", sd[label], xs.size)
        (line,) = ax.plot(xs, m, label=str(label) or "posterior mean")
        color = line.get_color()
        low, high = (m - 2 * s, m + 2 * s) if band is None else (
            _vector(f"low[{label!r}]", band[0][label], xs.size), _vector(f"high[{label!r}]", band[1][label], xs.size))
        ax.fill_between(xs, low, high, color=color, alpha=0.2, linewidth=0)
        pts = (points or {}).get(label)
        if pts is None:
            continue
        ax.plot(pts.included_x, pts.included_y, **{**_INCLUDED, "markerfacecolor": color}, zorder=3)
        scored = np.isfinite(pts.excluded_y)
        ax.plot(pts.excluded_x[scored], pts.excluded_y[scored], zorder=3, **_EXCLUDED)
        # no score: a cross at 3% of the axes height (x in data, y in axes coordinates)
        ax.plot(pts.excluded_x[~scored], np.full((~scored).sum(), 0.03),
                transform=ax.get_xaxis_transform(), zorder=3, **_EXCLUDED)
        has_out = has_out or pts.excluded_x.size > 0
    handles, _ = ax.get_legend_handles_labels()  # the facet lines
    if has_out:
        from matplotlib.lines import Line2D  # matplotlib is optional

        handles.append(Line2D([], [], label="failed/filtered", **_EXCLUDED))
    ax.legend(handles=handles, loc="best", fontsize="small")
    ax.set(xscale="log" if x_log else "linear", xlabel=x_name, ylabel=quantity, title=title or "")
    ax.grid(True, alpha=0.3)
    return fig


def plot_category_means(
    labels: Sequence[str], mean: ArrayLike, sd: ArrayLike, *, quantity: str,
    points: Mapping[str, ArrayLike] | None = None, title: str | None = None,
    band: tuple[ArrayLike, ArrayLike] | None = None,
) -> Figure:
    """Draw the posterior of each category combination as a point with a bar: its band, else +/-2 sd.

    For a space with categorical dims only; each combination's observed values are
    jittered beside its bar (fixed seed: the same data give the same figure).

    Args:
        labels: ``(k,)`` category combination labels.
        mean, sd: ``(k,)`` posterior mean and sd per combination.
        quantity: y axis label.
        points: Label -> observed values of that combination, shape ``(n_c,)``.
        title: Axes title.
        band: ``(low, high)``, each ``(k,)``: the model's own interval per combination; None: ``mean ± 2 sd``.

    Returns:
        The figure, with one axes: one errorbar, then one scatter per entry of ``points``.
    """
    names = [str(v) for v in labels]
    m, s = _vector("mean", mean, len(names)), _vector("sd", sd, len(names))
    _check_points(points, names)
    fig = _new_figure((max(3.5, 0.9 * len(names) + 1.8), 4.2))
    ax = fig.add_subplot()
    pos = np.arange(len(names), dtype=np.float64)
    if band is None:
        yerr, label = 2 * s, "posterior \u00b12 sd"
    else:
        low, high = _vector("low", band[0], len(names)), _vector("high", band[1], len(names))
        yerr, label = np.maximum(np.vstack([m - low, high - m]), 0.0), "posterior 95 % band"
    ax.errorbar(pos, m, yerr=yerr, fmt="o", color="black", capsize=4, label=label)
    rng = np.random.default_rng(0)
    for label, values in (points or {}).items():
        v = _vector(f"points[{label!r}]", values)
        at = names.index(label) + 0.22 + rng.uniform(-0.06, 0.06, v.size)
        ax.scatter(at, v, s=14, alpha=0.7, color="tab:blue", zorder=3)
    ax.set_xticks(pos, labels=names, rotation=30 if len(names) > 4 else 0)
    ax.set(xlim=(-0.6, len(names) - 0.4), ylabel=quantity, title=title or "")
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def plot_correlation_heatmap(
    corr: ArrayLike, labels: Sequence[str], *, name: str, title: str | None = None
) -> Figure:
    """Draw a coregionalization factor's correlation matrix as an annotated heatmap.

    As Bell et al. (2022), Fig. 5: the colour scale is fixed to [-1, 1] on a diverging
    map, so white means uncorrelated whatever the matrix, and each cell shows its value.

    Args:
        corr: ``(k, k)`` correlations between the categories of one dim, in [-1, 1].
        labels: ``(k,)`` category names.
        name: The dimension's name (default title "Coregionalization of <name>").
        title: Axes title overriding the default.

    Returns:
        The figure: the heatmap's axes, then its colorbar's axes.

    Raises:
        ValueError: If ``corr`` is not ``(k, k)`` for ``k = len(labels)`` or leaves [-1, 1].
    """
    c = np.asarray(corr, dtype=np.float64)
    k = len(labels)
    if c.shape != (k, k):
        raise ValueError(f"corr must have shape (len(labels), len(labels)) = {(k, k)}; got {c.shape}")
    if not np.all(np.abs(c) <= 1 + 1e-9):
        raise ValueError(f"corr must hold correlations in [-1, 1]; got range [{c.min()}, {c.max()}]")
    fig = _new_figure((1.0 + 0.75 * k + 1.2, 1.0 + 0.75 * k))
    ax = fig.add_subplot()
    image = ax.imshow(c, cmap="RdBu_r", vmin=-1.0, vmax=1.0)
    for i, j in np.ndindex(k, k):  # dark cells (|r| > 0.5) get white text
        ax.text(j, i, f"{c[i, j]:.2f}", ha="center", va="center", fontsize="small",
                color="white" if abs(c[i, j]) > 0.5 else "black")
    ticks = np.arange(k)
    ax.set_xticks(ticks, labels=[str(v) for v in labels], rotation=45, ha="right")
    ax.set_yticks(ticks, labels=[str(v) for v in labels])
    fig.colorbar(image, ax=ax, label="correlation")
    ax.set_title(title or f"Coregionalization of {name}")
    return fig


def plot_sensitivity(
    names: Sequence[str], main: ArrayLike, total: ArrayLike, main_sd: ArrayLike,
    total_sd: ArrayLike, *, quantity: str, title: str | None = None,
) -> Figure:
    """Draw main and total Sobol effects per dim as grouped bars with +/-1 sd.

    As Bell et al. (2022), Fig. 3 and 6: the main effect is the variance share a dim
    explains alone; the total effect adds its interactions, so a gap means interactions.

    Args:
        names: ``(d,)`` dimension names.
        main, total: ``(d,)`` main and total effect estimates.
        main_sd, total_sd: ``(d,)`` their Monte Carlo (or posterior) sd.
        quantity: What the effects decompose, shown in the y label.
        title: Axes title.

    Returns:
        The figure, with one axes: two bar containers (main, total) and a legend.
    """
    d = len(names)
    m, t, msd, tsd = (_vector(n, v, d) for n, v in
                      (("main", main), ("total", total), ("main_sd", main_sd), ("total_sd", total_sd)))
    fig = _new_figure((max(4.0, 1.1 * d + 2.0), 4.2))
    ax = fig.add_subplot()
    pos = np.arange(d, dtype=np.float64)
    ax.bar(pos - 0.2, m, width=0.4, yerr=msd, capsize=3, label="main effect")
    ax.bar(pos + 0.2, t, width=0.4, yerr=tsd, capsize=3, label="total effect")
    top = float(np.nanmax(np.concatenate([m + msd, t + tsd]), initial=0.0))
    ax.set_xticks(pos, labels=[str(v) for v in names], rotation=30 if d > 5 else 0)
    ax.set(ylim=(0.0, 1.0 if top <= 1.0 else 1.05 * top), ylabel=f"Sobol index of {quantity}",
           title=title or "")
    ax.legend(fontsize="small")
    ax.grid(True, axis="y", alpha=0.3)
    return fig


__all__ = ["FacetPoints", "plot_category_means", "plot_contour_facets",
           "plot_correlation_heatmap", "plot_line_facets", "plot_sensitivity"]
