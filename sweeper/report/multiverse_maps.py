"""The maps of a multiverse analysis as files: figures and grids of each pair of continuous dims.

:func:`write_maps` names the files after the dims they map (:func:`slug`); :func:`figure_names`
finds the figures again from the summary's entries.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np

from sweeper.analysis.map_view import MapTrials, MapView, draw_map, map_view
from sweeper.analysis.multiverse import ContourMap, LineMap, MultiverseFit
from sweeper.report.document import OutputDir

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def slug(name: str) -> str:
    """A dim's name as part of a file name: runs of other characters than ``A-Za-z0-9_.-`` become ``_``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def write_maps(out: OutputDir, fit: MultiverseFit, trials: MapTrials, metric: str, others: str, resolution: int,
               seed: int, summary: dict[str, Any]) -> None:
    """Every pair of continuous dims (or the one, or the categories): figures, the grids as CSV, the summary."""
    cont = fit.continuous
    pairs = [(i, j) for a, i in enumerate(cont) for j in cont[a + 1:]] if len(cont) >= 2 else [tuple(cont)]
    note = ("others at their centre" if others == "centre" else "others averaged over their range") \
        if len(cont) > 2 else ""
    for columns in pairs:
        view = map_view(fit, columns, others=others, resolution=resolution, seed=seed)
        figures = draw_map(view, fit.space, trials, metric, note=note)
        if view.contour is not None:
            summary["maps"].append(_contour_files(out, view, view.contour, figures))
        elif view.line is not None:
            summary["maps"].append(_line_files(out, view, view.line, fit.space.names[columns[0]], figures))
        else:
            summary["maps"].append(_category_files(out, view, figures))


def _contour_files(out: OutputDir, view: MapView, cm: ContourMap, figures: dict[str, Figure]) -> dict[str, Any]:
    """A map over two continuous dims: its figures and its grids (long format); returns its summary entry."""
    import pandas as pd

    # contour_map sets the values along each axis and the latent sd
    assert cm.x_values is not None and cm.y_values is not None and cm.sd_latent is not None
    stem = f"{slug(cm.x_dim)}_{slug(cm.y_dim)}"
    for what, figure in figures.items():
        out.figure(f"map_{what}_{stem}.png", figure)
    gx, gy = np.meshgrid(cm.x_values, cm.y_values)
    out.csv(f"map_{stem}.csv", pd.concat([pd.DataFrame({
        "facet": label, cm.x_dim: gx.ravel(), cm.y_dim: gy.ravel(), "mean": cm.mean[label].ravel(),
        "sd": cm.sd[label].ravel(), "low": view.low[label].ravel(), "high": view.high[label].ravel(),
        "sd_latent": cm.sd_latent[label].ravel()})
        for label in cm.mean]))
    return {"x": cm.x_dim, "y": cm.y_dim, "x_log": cm.x_log, "y_log": cm.y_log, "facets": list(cm.mean)}


def _line_files(out: OutputDir, view: MapView, line: LineMap, name: str, figures: dict[str, Figure]) -> dict[str, Any]:
    """A map along one continuous dim ``name``: its figure and its lines; returns its summary entry."""
    import pandas as pd

    x, x_log, mean, sd = line
    out.figure(f"map_{slug(name)}.png", figures["map"])
    out.csv(f"map_{slug(name)}.csv", pd.concat([pd.DataFrame({
        "facet": k, name: x, "mean": mean[k], "sd": sd[k], "low": view.low[k], "high": view.high[k]})
        for k in mean]))
    return {"x": name, "x_log": x_log, "facets": list(mean)}


def _category_files(out: OutputDir, view: MapView, figures: dict[str, Figure]) -> dict[str, Any]:
    """The means of each category combination (no continuous dim): figure and table; returns its summary entry."""
    import pandas as pd

    assert view.categories is not None  # map_view makes one of contour, line and categories
    labels, mean, sd = view.categories
    out.figure("categories.png", figures["map"])
    out.csv("categories.csv", pd.DataFrame({"facet": labels, "mean": mean, "sd": sd, "low": view.low,
                                            "high": view.high}))
    return {"facets": labels}


def figure_names(s: dict[str, Any]) -> list[str]:
    """The map figures :func:`write_maps` wrote, from the entries it added to ``summary["maps"]``."""
    names = []
    for m in s["maps"]:
        if "y" in m:
            stem = f"{slug(m['x'])}_{slug(m['y'])}"
            names += [f"map_mean_{stem}.png", f"map_sd_{stem}.png"]
        elif "x" in m:
            names.append(f"map_{slug(m['x'])}.png")
        else:
            names.append("categories.png")
    return names
