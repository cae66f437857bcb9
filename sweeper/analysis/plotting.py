"""Figures for the analysis results; the only module of :mod:`sweeper.analysis` using matplotlib.

Each function draws dataclasses computed elsewhere and returns a new
``matplotlib.figure.Figure`` attached to its own Agg canvas: pyplot is never imported,
no backend is switched and no global state changes, so these work headless and inside
other applications. Save with ``fig.savefig("curve.png")``.

References:
    Dodge, J., Gururangan, S., Card, D., Schwartz, R., & Smith, N. A. (2019). Show Your
    Work: Improved Reporting of Experimental Results. EMNLP-IJCNLP 2019 (section 3.3:
    the +/-1 sd band is clipped to the observed minimum and maximum).
    Crane, M. (2018). Questionable Answers in Question Answering Research. TACL 6.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import ArrayLike

from sweeper.analysis.environment_effects import summarize_conditions
from sweeper.analysis.expected_max import ExpectedMax, SurrogateExpectedMax
from sweeper.errors import MissingDependencyError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_MISSING = "plotting needs matplotlib: pip install -e '.[plot]'"


def _new_figure(figsize: tuple[float, float]) -> Figure:
    """Return a Figure on its own Agg canvas, or raise if matplotlib is missing."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise MissingDependencyError(_MISSING) from err
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)  # a per-figure canvas; pyplot's backend is left alone
    return fig


def plot_expected_max(
    curves: Mapping[str, ExpectedMax | SurrogateExpectedMax],
    *,
    unit: Literal["trials", "seconds"] = "trials",
    log_x: bool = False,
    title: str | None = None,
) -> Figure:
    """Draw expected-max curves of several model families on one axes.

    Each :class:`ExpectedMax` is drawn as its mean with a +/-1 sd band clipped to the
    family's observed ``[min, max]`` (Dodge et al. 2019, section 3.3); a
    :class:`SurrogateExpectedMax` as its mean with its percentile band.

    Args:
        curves: Family label -> its curve; one line per entry, in order.
        unit: x axis in ``"trials"`` (n) or ``"seconds"`` (n * mean trial duration).
        log_x: Logarithmic x axis.
        title: Axes title.

    Returns:
        The figure, with one axes holding one line and one band per family.

    Raises:
        ValueError: If ``curves`` is empty, ``unit`` is unknown, or seconds are asked
            for a curve without durations.
        MissingDependencyError: If matplotlib is not installed.

    Example:
        >>> from sweeper.analysis import expected_max
        >>> fig = plot_expected_max({"svm": expected_max([0.80, 0.85, 0.90])})
        >>> len(fig.axes[0].lines)
        1
    """
    if not curves:
        raise ValueError("curves is empty: pass at least one label -> ExpectedMax")
    if unit not in ("trials", "seconds"):
        raise ValueError(f"unit must be 'trials' or 'seconds'; got {unit!r}")
    fig = _new_figure((6.4, 4.2))
    ax = fig.add_subplot()
    maximize = True
    for label, curve in curves.items():
        if unit == "seconds":
            budget_s = getattr(curve, "budget_s", None)
            if budget_s is None:
                raise ValueError(
                    f"curve {label!r} has no trial durations: pass durations_s to "
                    "expected_max, or plot with unit='trials'"
                )
            x = np.asarray(budget_s)
        else:
            x = curve.n
        if isinstance(curve, SurrogateExpectedMax):
            low, high = curve.low, curve.high
            band = f"{label} ({100 * curve.level:g}% of posterior)"
        else:
            lo_obs, hi_obs = curve.values_sorted[0], curve.values_sorted[-1]
            low = np.clip(curve.mean - curve.std, lo_obs, hi_obs)
            high = np.clip(curve.mean + curve.std, lo_obs, hi_obs)
            band = f"{label} \u00b11 sd"
        maximize = maximize and curve.maximize
        (line,) = ax.plot(x, curve.mean, label=label)
        ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2, linewidth=0, label=band)
    ax.set_xlabel("trials (n)" if unit == "trials" else "budget (s)")
    ax.set_ylabel("expected best score" if maximize else "expected best (lowest) score")
    if log_x:
        ax.set_xscale("log")
    if title:
        ax.set_title(title)
    ax.legend(loc="lower right" if maximize else "upper right", fontsize="small")
    ax.grid(True, alpha=0.3)
    return fig


def plot_condition_distributions(
    values_by_condition: Mapping[str, ArrayLike],
    *,
    ylabel: str = "score",
    title: str | None = None,
) -> Figure:
    """Draw each condition's scores as a box plot with the individual runs on top.

    Args:
        values_by_condition: Condition label -> its scores, each of shape ``(n_c,)``.
        ylabel: y axis label (the metric).
        title: Axes title.

    Returns:
        The figure, with one axes: one box and one strip of points per condition.

    Raises:
        ValueError: If the mapping is empty, or a condition has no or non-finite scores.
        MissingDependencyError: If matplotlib is not installed.

    Example:
        >>> fig = plot_condition_distributions({"cpu": [0.91, 0.93], "gpu": [0.90, 0.94]})
        >>> [t.get_text() for t in fig.axes[0].get_xticklabels()]
        ['cpu', 'gpu']
    """
    if not values_by_condition:
        raise ValueError("values_by_condition is empty: pass at least one label -> scores")
    summarize_conditions(values_by_condition)  # validates every condition's scores
    labels = [str(k) for k in values_by_condition]
    data = [np.asarray(v, dtype=np.float64) for v in values_by_condition.values()]
    fig = _new_figure((max(3.2, 1.1 * len(labels) + 1.5), 4.2))
    ax = fig.add_subplot()
    positions = np.arange(1, len(labels) + 1)
    ax.boxplot(data, positions=positions, widths=0.5, showfliers=False)
    rng = np.random.default_rng(0)  # fixed jitter: the same data give the same figure
    for pos, y in zip(positions, data, strict=True):
        jitter = rng.uniform(-0.12, 0.12, size=y.size)
        ax.scatter(pos + jitter, y, s=14, alpha=0.7, zorder=3)
    ax.set_xticks(positions, labels=labels)
    ax.set_ylabel(ylabel)
    ax.set_xlabel("condition")
    if title:
        ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    return fig


__all__ = ["plot_condition_distributions", "plot_expected_max"]
