"""Unit tests for sweeper.analysis.plotting: structure of the figures, never pixels."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from sweeper.analysis import expected_max
from sweeper.analysis.expected_max import surrogate_expected_max
from sweeper.analysis.plotting import plot_condition_distributions, plot_expected_max
from sweeper.errors import MissingDependencyError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _curves() -> dict[str, object]:
    rng = np.random.default_rng(0)
    return {
        "svm": expected_max(rng.uniform(0.7, 0.9, 20), durations_s=rng.uniform(1, 3, 20)),
        "mlp": expected_max(rng.uniform(0.6, 0.95, 30), durations_s=rng.uniform(5, 9, 30)),
    }


def test_expected_max_figure_structure_and_png(tmp_path: Path) -> None:
    curves = _curves()
    fig = plot_expected_max(curves, title="budget", log_x=True)  # type: ignore[arg-type]  # ExpectedMax values
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    assert len(ax.lines) == 2
    assert len(ax.collections) == 2  # one band per family
    assert [line.get_label() for line in ax.lines] == ["svm", "mlp"]
    assert ax.get_xscale() == "log" and ax.get_title() == "budget"
    np.testing.assert_array_equal(ax.lines[0].get_xdata(), np.arange(1, 21))
    out = tmp_path / "curves.png"
    fig.savefig(out)
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_band_is_clipped_to_observed_range() -> None:
    em = expected_max([0.0, 0.0, 0.0, 1.0])  # the sd band would cross both 0 and 1
    fig = plot_expected_max({"x": em})
    y = fig.axes[0].collections[0].get_paths()[0].vertices[:, 1]
    assert y.min() >= 0.0 and y.max() <= 1.0
    assert y.max() == 1.0


def test_seconds_axis_uses_budget_s() -> None:
    curves = _curves()
    fig = plot_expected_max(curves, unit="seconds")  # type: ignore[arg-type]  # ExpectedMax values
    ax = fig.axes[0]
    budget_s = curves["mlp"].budget_s  # type: ignore[attr-defined]  # an ExpectedMax
    np.testing.assert_allclose(ax.lines[1].get_xdata(), budget_s)
    assert ax.get_xlabel() == "budget (s)"


def test_surrogate_curve_is_drawn_with_its_band() -> None:
    rng = np.random.default_rng(1)
    s = surrogate_expected_max(rng.normal(size=(10, 15)))
    fig = plot_expected_max({"gp": s, "obs": expected_max(rng.normal(size=15))})
    assert len(fig.axes[0].lines) == 2 and len(fig.axes[0].collections) == 2


@pytest.mark.parametrize(
    ("curves", "kwargs", "match"),
    [
        ({}, {}, "empty"),
        ({"x": expected_max([1.0, 2.0])}, {"unit": "seconds"}, "no trial durations"),
        ({"x": expected_max([1.0, 2.0])}, {"unit": "hours"}, "'trials' or 'seconds'"),
    ],
)
def test_expected_max_bad_input(curves: dict[str, object], kwargs: dict[str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        plot_expected_max(curves, **kwargs)  # type: ignore[arg-type]  # bad input on purpose


def test_condition_distributions_structure_and_png(tmp_path: Path) -> None:
    values = {"cpu": [0.91, 0.93, 0.92, 0.90], "gpu": [0.90, 0.94, 0.95], "tf32": [0.89, 0.9]}
    fig = plot_condition_distributions(values, ylabel="test_acc", title="environment")
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["cpu", "gpu", "tf32"]
    assert len(ax.collections) == 3  # one strip of runs per condition
    assert [len(c.get_offsets()) for c in ax.collections] == [4, 3, 2]
    assert ax.get_ylabel() == "test_acc"
    out = tmp_path / "conditions.png"
    fig.savefig(out)
    assert out.read_bytes()[:8] == PNG_MAGIC


def test_condition_distributions_bad_input() -> None:
    with pytest.raises(ValueError, match="empty"):
        plot_condition_distributions({})
    with pytest.raises(ValueError, match="drop failed runs first"):
        plot_condition_distributions({"cpu": [0.9, float("nan")]})


def test_missing_matplotlib_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    with pytest.raises(MissingDependencyError, match=r"pip install -e '\.\[plot\]'"):
        plot_expected_max({"x": expected_max([1.0, 2.0])})
    with pytest.raises(MissingDependencyError, match="plotting needs matplotlib"):
        plot_condition_distributions({"cpu": [1.0, 2.0]})
