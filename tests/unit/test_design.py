"""Unit tests for sweeper.search.design: seeds, Sobol and random designs."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pytest

from sweeper.search.design import as_generator, random_design, sobol_design

# First 8 points of the unscrambled 2-D Sobol' sequence (Joe & Kuo direction numbers).
SOBOL_2D_FIRST_8 = np.array(
    [
        [0.0, 0.0],
        [0.5, 0.5],
        [0.75, 0.25],
        [0.25, 0.75],
        [0.375, 0.375],
        [0.875, 0.875],
        [0.625, 0.125],
        [0.125, 0.625],
    ]
)


def test_unscrambled_sobol_matches_reference_table() -> None:
    np.testing.assert_array_equal(sobol_design(8, 2, scramble=False), SOBOL_2D_FIRST_8)


def test_unscrambled_sobol_ignores_seed() -> None:
    np.testing.assert_array_equal(
        sobol_design(8, 2, seed=1, scramble=False), sobol_design(8, 2, seed=2, scramble=False)
    )


def test_scrambled_sobol_is_reproducible_per_seed() -> None:
    a = sobol_design(16, 3, seed=0)
    b = sobol_design(16, 3, seed=0)
    c = sobol_design(16, 3, seed=1)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_sequence_seed_gives_independent_reproducible_streams() -> None:
    a = sobol_design(8, 2, seed=[0, 1, 7])
    np.testing.assert_array_equal(a, sobol_design(8, 2, seed=[0, 1, 7]))
    assert not np.allclose(a, sobol_design(8, 2, seed=[0, 2, 7]))


@pytest.mark.parametrize("n", [1, 5, 8, 100])
def test_sobol_shape_range_and_no_balance_warning(n: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        X = sobol_design(n, 4, seed=3)
    assert X.shape == (n, 4)
    assert X.dtype == np.float64
    assert np.all((X >= 0.0) & (X < 1.0))


def test_scrambled_sobol_is_balanced_at_power_of_two() -> None:
    # Each half of each axis holds exactly half of the first 2^k points.
    X = sobol_design(64, 3, seed=5)
    for j in range(3):
        assert np.sum(X[:, j] < 0.5) == 32


def test_random_design_reproducible_and_in_range() -> None:
    a = random_design(50, 3, seed=11)
    np.testing.assert_array_equal(a, random_design(50, 3, seed=11))
    assert not np.allclose(a, random_design(50, 3, seed=12))
    assert a.shape == (50, 3)
    assert np.all((a >= 0.0) & (a < 1.0))


@pytest.mark.parametrize("design", [sobol_design, random_design])
@pytest.mark.parametrize(("n", "d"), [(0, 2), (3, 0), (-1, 1)])
def test_designs_reject_empty_shapes(design: Callable[..., np.ndarray], n: int, d: int) -> None:
    with pytest.raises(ValueError, match="must be a positive"):
        design(n, d, seed=0)


def test_as_generator() -> None:
    g = np.random.default_rng(0)
    assert as_generator(g) is g
    assert as_generator(3).random() == np.random.default_rng(3).random()
    assert as_generator([3, 4]).random() == np.random.default_rng([3, 4]).random()
    assert as_generator((3, 4)).random() == as_generator([3, 4]).random()
    assert as_generator(np.int64(3)).random() == as_generator(3).random()
    assert isinstance(as_generator(None), np.random.Generator)
    with pytest.raises(TypeError, match="seed must be"):
        as_generator(1.5)  # type: ignore[arg-type]  # a bad seed on purpose
    with pytest.raises(TypeError, match="seed must be"):
        as_generator("abc")  # type: ignore[arg-type]  # a bad seed on purpose
