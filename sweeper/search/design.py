"""Space-filling and random designs in the unit cube, and the one seed helper.

Every random draw in the sweeper goes through :func:`as_generator`, so that a sweep's
``seed`` fixes its Sobol scramble, its random designs and its GP restarts, and so that
independent streams can be derived without touching numpy's global RNG (e.g.
``as_generator([seed, batch_index, 7])`` for the restarts of one batch's GP fit).

References:
    Sobol', I. M. (1967). On the distribution of points in a cube and the approximate
    evaluation of integrals. USSR Comput. Math. Math. Phys. 7(4), 86-112.
    Owen, A. B. (1998). Scrambling Sobol' and Niederreiter-Xing points. J. Complexity
    14(4), 466-489.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

log = logging.getLogger(__name__)

Seed = int | Sequence[int] | np.random.Generator | None


def as_generator(seed: Seed) -> np.random.Generator:
    """Turn a seed into a ``numpy.random.Generator``.

    Args:
        seed: ``None`` (fresh OS entropy), an ``int``, a sequence of ints (used as
            ``SeedSequence`` entropy, so ``[seed, i]`` and ``[seed, j]`` give independent
            streams), or a ``Generator``, which is returned as is (not copied).

    Returns:
        A generator; the same int or sequence always gives the same stream.

    Raises:
        TypeError: If ``seed`` is of another type (e.g. a float or a legacy
            ``RandomState``).
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        return np.random.default_rng()
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        return np.random.default_rng(int(seed))
    if isinstance(seed, Sequence) and not isinstance(seed, (str, bytes)):
        entropy = list(seed)
        if all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in entropy):
            return np.random.default_rng([int(s) for s in entropy])
    raise TypeError(
        f"seed must be an int, a sequence of ints, a numpy Generator or None; got {seed!r}"
    )


def _check_shape(n: int, d: int) -> None:
    if n < 1:
        raise ValueError(f"n must be a positive number of points; got n={n!r}")
    if d < 1:
        raise ValueError(f"d must be a positive dimension; got d={d!r}")


def sobol_design(
    n: int, d: int, seed: Seed = None, *, scramble: bool = True
) -> NDArray[np.float64]:
    """Draw the first ``n`` points of a (scrambled) Sobol' sequence in ``[0, 1)^d``.

    Any positive ``n`` is accepted; scipy's warning that non-powers of two lose the
    balance properties is silenced (a sweep's budget rarely is a power of two, and a
    prefix of a Sobol' sequence still fills space far better than i.i.d. points).

    Args:
        n: Number of points, ``n >= 1``.
        d: Dimension, ``d >= 1``.
        seed: Seed of the Owen scramble (see :func:`as_generator`); ignored when
            ``scramble=False``.
        scramble: Whether to scramble. Unscrambled points are deterministic and start
            at the origin.

    Returns:
        Points, shape ``(n, d)``, each coordinate in ``[0, 1)``.

    Raises:
        ValueError: If ``n < 1`` or ``d < 1``.
    """
    from scipy.stats import qmc

    _check_shape(n, d)
    rng = as_generator(seed) if scramble else None
    sampler = qmc.Sobol(d, scramble=scramble, rng=rng)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*balance properties.*", category=UserWarning)
        points = sampler.random(n)
    return np.asarray(points, dtype=np.float64)


def random_design(n: int, d: int, seed: Seed = None) -> NDArray[np.float64]:
    """Draw ``n`` i.i.d. uniform points in ``[0, 1)^d``.

    This is the only design under which the expected-maximum estimator of Dodge et al.
    (2019) is unbiased.

    Args:
        n: Number of points, ``n >= 1``.
        d: Dimension, ``d >= 1``.
        seed: See :func:`as_generator`.

    Returns:
        Points, shape ``(n, d)``.

    Raises:
        ValueError: If ``n < 1`` or ``d < 1``.
    """
    _check_shape(n, d)
    return as_generator(seed).random((n, d))


def balance_categories(U: NDArray[np.float64], categories: dict[int, int], seed: Seed) -> NDArray[np.float64]:
    """Give every combination of categories an equal share of the rows of a design.

    The categorical columns of ``U`` (cell ``floor(u k)`` is the category) are replaced by
    cell centres such that every block of ``C = prod k`` consecutive rows holds each
    combination once, in a seeded random order: any prefix of ``m C`` rows (e.g. the
    initial design of a GP strategy) is exactly balanced. IMPORTANT: the order must be random, not
    cyclic: the ``i``-th point of a Sobol sequence is structured in ``i`` (even indices
    fill one half of the first axis), so a cyclic assignment would tie each combination to
    a sub-region of the continuous dims. Used for the integration points of IVR, which
    then averages over every combination with equal weight, and for its candidates.

    Args:
        U: Design in the unit cube, shape ``(n, d)``; not modified.
        categories: Categorical columns -> number of categories.
        seed: Seed of the order (see :func:`as_generator`).

    Returns:
        A copy of ``U`` with balanced categorical columns.
    """
    U = np.array(U, dtype=np.float64, copy=True)
    if not categories or U.shape[0] == 0:
        return U
    columns = sorted(categories)
    sizes = [int(categories[c]) for c in columns]
    n_combos = int(np.prod(sizes))
    rng = as_generator(seed)
    blocks = -(-U.shape[0] // n_combos)
    combos = np.concatenate([rng.permutation(n_combos) for _ in range(blocks)])[: U.shape[0]]
    for c, k in zip(columns, sizes, strict=True):
        U[:, c] = (combos % k + 0.5) / k
        combos = combos // k
    return U


def factorial_design(levels: Sequence[NDArray[np.float64]], seed: Seed) -> NDArray[np.float64]:
    """Every combination of the given levels (a full factorial), in a seeded random order.

    The random order makes every prefix a uniform random subset of the grid, so a sweep cut
    short still spreads over it, and one seed gives one order.

    Args:
        levels: For each dimension, its levels (unit-cube coordinates).
        seed: Seed of the order (see :func:`as_generator`).

    Returns:
        Shape ``(prod(len(l)), len(levels))``.
    """
    mesh = np.meshgrid(*[np.asarray(lv, dtype=np.float64) for lv in levels], indexing="ij")
    grid = np.stack([m.ravel() for m in mesh], axis=1)
    return grid[as_generator(seed).permutation(grid.shape[0])]
