"""The committed ground-truth grids of bench/ml_maps.py are what their tasks return (checked at a few nodes)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bench.ml_maps import MAPS, load_grid


@pytest.mark.parametrize("name", ["svm", "wine", "mlp", "krr"])
def test_a_grid_holds_its_task_s_values(name: str) -> None:
    m = MAPS[name]
    values, axes = load_grid(name)
    nodes = list(itertools.product(*(range(a.size) for a in axes)))
    for k in np.random.default_rng(0).choice(len(nodes), size=4, replace=False):
        index = nodes[k]
        u = np.array([a[i] for a, i in zip(axes, index, strict=True)])
        # Equal to the last bits but for BLAS's order of sums, which follows its thread count (krr's solve
        # differed by 3e-14 under pytest-xdist): far below any difference between two nodes of a grid.
        assert values[index] == pytest.approx(m.score(m.space.from_unit(u[None, :])[0]), rel=1e-9, abs=1e-12), index


def test_the_wine_map_s_optimum_sits_on_the_bound() -> None:
    values, _ = load_grid("wine")
    assert values.max() == 1.0 and 0.3 < np.mean(values == 1.0) < 0.4  # a third of the space scores exactly 1
