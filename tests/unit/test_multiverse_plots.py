"""Unit tests for sweeper.analysis.multiverse_plots: structure of the figures, never pixels."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.container import BarContainer
from matplotlib.contour import ContourSet
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from sweeper.analysis.multiverse_plots import (
    FacetPoints,
    plot_category_means,
    plot_contour_facets,
    plot_correlation_heatmap,
    plot_line_facets,
    plot_sensitivity,
)
from sweeper.errors import MissingDependencyError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
X = np.logspace(-4, -1, 12)  # (gx,) a log-scaled learning rate
Y = np.linspace(0.0, 0.5, 9)  # (gy,) a linear dropout


def _grids(n: int) -> dict[str, np.ndarray]:
    xx, yy = np.meshgrid(np.log10(X), Y)  # (gy, gx)
    return {f"opt={i}": np.sin(xx + i) + yy * (i + 1) for i in range(n)}


def _points() -> FacetPoints:
    return FacetPoints(
        included_x=np.array([1e-3, 1e-2]), included_y=np.array([0.1, 0.3]),
        excluded_x=np.array([5e-2]), excluded_y=np.array([0.4]),
    )


def _contour(n: int = 3, **kwargs: object) -> Figure:
    args: dict[str, object] = {"x_name": "lr", "y_name": "dropout", "x_log": True,
                               "y_log": False, "quantity": "posterior mean of test_acc"}
    args.update(kwargs)
    return plot_contour_facets(X, Y, _grids(n), **args)  # type: ignore[arg-type]  # keyword values of mixed types


def _facet_axes(fig: Figure) -> list[Axes]:
    # matplotlib labels the axes it makes for a colorbar "<colorbar>"
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def _markers(ax: Axes, marker: str) -> list[Line2D]:
    """Return the non-empty marker-only lines of ``ax`` drawn with ``marker``."""
    return [ln for ln in ax.lines if ln.get_marker() == marker and len(ln.get_xdata())]


def _save(fig: Figure, path: Path) -> None:
    fig.savefig(path, dpi=40)  # small: the test checks a PNG is written, not pixels
    assert path.stat().st_size > 0 and path.read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize(("n", "max_columns", "shape"), [(1, 4, (1, 1)), (3, 4, (1, 3)), (5, 2, (3, 2))])
def test_contour_one_axes_per_facet(n: int, max_columns: int, shape: tuple) -> None:
    fig = _contour(n, max_columns=max_columns, title="multiverse")
    facets = _facet_axes(fig)
    assert len(facets) == n
    assert len(fig.axes) == n + 1  # exactly one shared colorbar
    grid = facets[0].get_subplotspec().get_gridspec()
    assert (grid.nrows, grid.ncols) == shape
    assert [ax.get_title() for ax in facets] == list(_grids(n))
    assert all(ax.get_xlabel() == "lr" and ax.get_ylabel() == "dropout" for ax in facets)
    cbar_ax = next(ax for ax in fig.axes if ax.get_label() == "<colorbar>")
    assert cbar_ax.get_ylabel() == "posterior mean of test_acc"
    assert fig.get_suptitle() == "multiverse"


@pytest.mark.parametrize(("x_log", "y_log"), [(True, False), (False, True), (True, True), (False, False)])
def test_contour_log_scales(x_log: bool, y_log: bool) -> None:
    fig = plot_contour_facets(X, Y + 0.1, _grids(2), x_name="lr", y_name="d", x_log=x_log,
                              y_log=y_log, quantity="q")  # Y + 0.1 > 0: valid on a log axis
    for ax in _facet_axes(fig):
        assert ax.get_xscale() == ("log" if x_log else "linear")
        assert ax.get_yscale() == ("log" if y_log else "linear")


def test_contour_shares_the_global_colour_scale() -> None:
    grids = _grids(3)
    fig = _contour(3)
    lo = min(z.min() for z in grids.values())
    hi = max(z.max() for z in grids.values())
    sets = [c for ax in _facet_axes(fig) for c in ax.collections if isinstance(c, ContourSet)]
    filled = [c for c in sets if c.filled]
    assert len(filled) == 3 and len(sets) == 6  # contourf + contour lines per facet
    for cs in filled:
        assert cs.get_clim() == pytest.approx((lo, hi))
        np.testing.assert_allclose(cs.levels, filled[0].levels)
    assert filled[0].levels[0] == pytest.approx(lo) and filled[0].levels[-1] == pytest.approx(hi)


def test_contour_draws_included_and_excluded_trials(tmp_path: Path) -> None:
    pts = _points()
    fig = _contour(2, points={"opt=1": pts})
    plain, with_points = _facet_axes(fig)
    assert not _markers(plain, "o") and not _markers(plain, "x")
    (dots,) = _markers(with_points, "o")
    (crosses,) = _markers(with_points, "x")
    np.testing.assert_array_equal(dots.get_xdata(), pts.included_x)
    np.testing.assert_array_equal(dots.get_ydata(), pts.included_y)
    assert to_rgba(dots.get_markerfacecolor()) == to_rgba("white")
    assert to_rgba(dots.get_markeredgecolor()) == to_rgba("black")
    np.testing.assert_array_equal(crosses.get_xdata(), pts.excluded_x)
    assert to_rgba(crosses.get_color()) == to_rgba("black")
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["trial", "failed/filtered"]
    _save(fig, tmp_path / "facets.png")


def test_contour_without_points_has_no_legend_and_single_empty_title() -> None:
    xx, yy = np.meshgrid(X, Y)
    fig = plot_contour_facets(X, Y, {"": xx * yy}, x_name="a", y_name="b", x_log=False,
                              y_log=False, quantity="q")
    assert not fig.legends
    (ax,) = _facet_axes(fig)
    assert ax.get_title() == "" and ax.get_xscale() == "linear"


def test_constant_grid_does_not_crash(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = plot_contour_facets(X, Y, {"all": np.full((Y.size, X.size), 0.7)}, x_name="lr",
                                  y_name="d", x_log=True, y_log=False, quantity="q")
        _save(fig, tmp_path / "constant.png")
    (cs,) = [c for c in _facet_axes(fig)[0].collections if isinstance(c, ContourSet) and c.filled]
    lo, hi = cs.get_clim()
    assert lo < 0.7 < hi and hi - lo < 0.01


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"grids": {"a": np.zeros((12, 9))}}, r"grids\['a'\] must have shape .*\(9, 12\).*got \(12, 9\)"),
        ({"x": X[::-1]}, "x must be strictly increasing"),
        ({"x": np.zeros((12, 1))}, r"x must have shape \(n,\); got \(12, 1\)"),
        ({"y": Y - 1.0, "y_log": True}, "y must be > 0 on a log axis"),
        ({"grids": {}}, "grids is empty"),
        ({"points": {"nope": _points()}}, r"points has facet labels \['nope'\]"),
        ({"grids": {"a": np.full((9, 12), np.nan)}}, "no finite value"),
    ],
)
def test_contour_bad_input(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"x": X, "y": Y, "grids": _grids(1), "x_name": "lr", "y_name": "d",
                               "x_log": False, "y_log": False, "quantity": "q"}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        plot_contour_facets(**args)  # type: ignore[arg-type]  # bad input on purpose


def test_facet_points_checks_shapes() -> None:
    with pytest.raises(ValueError, match=r"included_y must have shape \(2,\); got \(3,\)"):
        FacetPoints(np.zeros(2), np.zeros(3), np.zeros(0), np.zeros(0))
    with pytest.raises(ValueError, match=r"excluded_y must have shape \(1,\); got \(0,\)"):
        FacetPoints(np.zeros(2), np.zeros(2), np.zeros(1), np.zeros(0))


def test_line_facets_bands_and_trials(tmp_path: Path) -> None:
    mean = {"adam": np.linspace(0.5, 0.9, 12), "sgd": np.linspace(0.4, 0.6, 12)}
    sd = {"adam": np.full(12, 0.05), "sgd": np.full(12, 0.02)}
    pts = FacetPoints(np.array([1e-3, 1e-2]), np.array([0.7, 0.8]),
                      np.array([2e-3, 3e-2]), np.array([np.nan, 0.55]))
    fig = plot_line_facets(X, mean, sd, x_name="lr", x_log=True, quantity="test_acc",
                           points={"sgd": pts}, title="1-D")
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and ax.get_ylabel() == "test_acc"
    lines = [ln for ln in ax.lines if ln.get_label() in mean]
    assert [ln.get_label() for ln in lines] == ["adam", "sgd"]
    band = ax.collections[1].get_paths()[0].vertices[:, 1]  # the sgd +/-2 sd band
    assert band.min() == pytest.approx(0.4 - 0.04) and band.max() == pytest.approx(0.6 + 0.04)
    (dots,) = _markers(ax, "o")
    assert to_rgba(dots.get_markerfacecolor()) == to_rgba(lines[1].get_color())
    crosses = _markers(ax, "x")
    assert sorted(len(c.get_xdata()) for c in crosses) == [1, 1]
    # the NaN score is drawn at the bottom, in axes coordinates
    unscored = next(c for c in crosses if c.get_xdata()[0] == 2e-3)
    assert unscored.get_ydata()[0] == pytest.approx(0.03)
    assert unscored.get_transform() == ax.get_xaxis_transform()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["adam", "sgd", "failed/filtered"]
    _save(fig, tmp_path / "lines.png")


def test_line_facets_bad_input() -> None:
    with pytest.raises(ValueError, match=r"mean\['a'\] must have shape \(12,\); got \(3,\)"):
        plot_line_facets(X, {"a": np.zeros(3)}, {"a": np.zeros(3)}, x_name="lr", x_log=True, quantity="q")
    with pytest.raises(ValueError, match="same non-empty labels"):
        plot_line_facets(X, {"a": np.zeros(12)}, {"b": np.zeros(12)}, x_name="lr", x_log=True, quantity="q")


def test_category_means(tmp_path: Path) -> None:
    fig = plot_category_means(["adam", "sgd", "rms"], np.array([0.8, 0.7, 0.75]),
                              np.array([0.01, 0.02, 0.03]), quantity="test_acc",
                              points={"adam": np.array([0.79, 0.81]), "rms": np.array([0.7])})
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["adam", "sgd", "rms"]
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [0.8, 0.7, 0.75])
    (bars,) = ax.collections[:1]  # the +/-2 sd error bars
    segs = bars.get_segments()
    np.testing.assert_allclose([s[1, 1] - s[0, 1] for s in segs], [0.04, 0.08, 0.12])
    scatters = ax.collections[1:]
    assert [len(c.get_offsets()) for c in scatters] == [2, 1]
    rms_x = scatters[1].get_offsets()[:, 0]
    assert np.all((rms_x > 2.0) & (rms_x < 2.4))  # beside its own bar, not on it
    _save(fig, tmp_path / "categories.png")
    with pytest.raises(ValueError, match=r"sd must have shape \(3,\); got \(2,\)"):
        plot_category_means(["a", "b", "c"], np.zeros(3), np.zeros(2), quantity="q")


def test_correlation_heatmap(tmp_path: Path) -> None:
    corr = np.array([[1.0, -0.87, 0.1], [-0.87, 1.0, 0.0], [0.1, 0.0, 1.0]])
    fig = plot_correlation_heatmap(corr, ["adam", "sgd", "rms"], name="optimizer")
    ax, cbar_ax = fig.axes
    assert cbar_ax.get_label() == "<colorbar>"
    (image,) = ax.images
    assert image.get_clim() == (-1.0, 1.0) and image.get_cmap().name == "RdBu_r"
    np.testing.assert_array_equal(image.get_array(), corr)
    texts = {(t.get_position(), t.get_text()): t.get_color() for t in ax.texts}
    assert len(texts) == 9
    assert texts[((1, 0), "-0.87")] == "white" and texts[((2, 0), "0.10")] == "black"
    assert texts[((0, 0), "1.00")] == "white"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["adam", "sgd", "rms"]
    assert ax.get_title() == "Coregionalization of optimizer"
    _save(fig, tmp_path / "heatmap.png")
    with pytest.raises(ValueError, match=r"corr must have shape .*\(2, 2\); got \(3, 3\)"):
        plot_correlation_heatmap(corr, ["a", "b"], name="opt")
    with pytest.raises(ValueError, match=r"in \[-1, 1\]"):
        plot_correlation_heatmap(2 * corr, ["a", "b", "c"], name="opt")


def test_sensitivity_bars(tmp_path: Path) -> None:
    main, total = np.array([0.6, 0.1, 0.0]), np.array([0.7, 0.3, 0.05])
    fig = plot_sensitivity(["lr", "dropout", "seed"], main, total, np.full(3, 0.02),
                           np.full(3, 0.03), quantity="test_acc", title="Sobol")
    (ax,) = fig.axes
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [b.get_label() for b in bars] == ["main effect", "total effect"]
    np.testing.assert_allclose([p.get_height() for p in bars[0].patches], main)
    np.testing.assert_allclose([p.get_height() for p in bars[1].patches], total)
    assert ax.get_ylim() == (0.0, 1.0)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["main effect", "total effect"]
    _save(fig, tmp_path / "sobol.png")
    big = plot_sensitivity(["a"], [1.1], [1.2], [0.1], [0.1], quantity="q")
    assert big.axes[0].get_ylim()[1] >= 1.3


def test_sensitivity_bad_input() -> None:
    with pytest.raises(ValueError, match=r"total_sd must have shape \(2,\); got \(3,\)"):
        plot_sensitivity(["a", "b"], np.zeros(2), np.zeros(2), np.zeros(2), np.zeros(3), quantity="q")


def test_missing_matplotlib_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    with pytest.raises(MissingDependencyError, match=r"pip install -e '\.\[plot\]'"):
        plot_sensitivity(["a"], [0.5], [0.6], [0.0], [0.0], quantity="q")
