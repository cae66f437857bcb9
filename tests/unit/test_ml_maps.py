"""The committed ground-truth grids of bench/ml_maps.py are what their tasks return (checked at a few nodes)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bench.ml_maps import MAPS, load_grid, truth_at


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


def test_an_interpolated_truth_never_leaves_its_nodes_values() -> None:
    """Linear interpolation's rounding put wine's plateau (exactly 1.0) at 1.0000000000000002 here, which a declared
    ``metric_bounds=[0, 1]`` refuses: a bounded sweep counted that trial as failed, and the bench's bounded fit of
    the same points raised."""
    values, _ = load_grid("wine")
    assert truth_at("wine", np.array([[0.6239027819391343, 0.5919027832141105]]))[0] == 1.0
    truth = truth_at("wine", np.random.default_rng(0).uniform(size=(20_000, 2)))
    assert values.min() <= truth.min() and truth.max() <= values.max() == 1.0
