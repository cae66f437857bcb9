"""The comparison's figure: every sweep's expected-max curve with its 95 % band, and where the order changes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sweeper.analysis.plotting import _new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from sweeper.report.compare import Comparison


def plot_comparison(comparison: Comparison) -> Figure:
    """One axes: each sweep's curve (its kind in the legend) and band; a dotted line at each order change,
    the budgets between which it lies shaded grey. Save it with ``fig.savefig("compare.png")``.
    """
    fig = _new_figure((6.8, 4.4))
    ax = fig.add_subplot()
    for curve in comparison.curves:
        (line,) = ax.plot(curve.n, curve.mean, label=f"{curve.label} ({curve.kind}, {curve.n_trials} trials)")
        ax.fill_between(curve.n, curve.low, curve.high, color=line.get_color(), alpha=0.2, linewidth=0)
    for change in comparison.changes:
        ax.axvspan(change.low, change.high, color="0.5", alpha=0.12, linewidth=0)
        ax.axvline(change.n, color="0.3", linestyle=":", linewidth=1.2)
        ax.annotate(f"order changes\nn ≈ {change.n}", (change.n, 0.98), xycoords=("data", "axes fraction"),
                    xytext=(3, 0), textcoords="offset points", fontsize="small", color="0.3", va="top")
    maximize = comparison.mode == "max"
    ax.set_xlabel("trials (n)")
    ax.set_ylabel(f"expected best {comparison.metric}" + ("" if maximize else " (lowest)"))
    if max(c.n_trials for c in comparison.curves) >= 50:
        ax.set_xscale("log")
    ax.set_title(f"Expected best {comparison.metric} of n random trials (bands: 95 %)")
    ax.legend(loc="lower right" if maximize else "upper right", fontsize="small")
    ax.grid(True, alpha=0.3)
    return fig
