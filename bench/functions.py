"""Test functions on the unit cube, for benchmarks that score how well a GP maps a space.

Every function takes points ``X_unit`` of shape ``(n, d)`` in ``[0, 1]^d`` (a single point
of shape ``(d,)`` is accepted too) and returns values of shape ``(n,)``, vectorised over
rows. Inputs are mapped to each function's standard domain inside, so searchers and
samplers only ever see the unit cube, as the sweeper's design space does.

Definitions follow S. Surjanovic and D. Bingham, *Virtual Library of Simulation
Experiments: Test Functions and Datasets*, Simon Fraser University
(https://www.sfu.ca/~ssurjano/), which cites the original sources given below.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

BRANIN_LOWER = np.array([-5.0, 0.0])
BRANIN_UPPER = np.array([10.0, 15.0])
BRANIN_MINIMUM = 0.397887  # at (-pi, 12.275), (pi, 2.275), (9.42478, 2.475) in the standard domain

HARTMANN6_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
HARTMANN6_A = np.array([
    [10.0, 3.0, 17.0, 3.5, 1.7, 8.0],
    [0.05, 10.0, 17.0, 0.1, 8.0, 14.0],
    [3.0, 3.5, 1.7, 10.0, 17.0, 8.0],
    [17.0, 8.0, 0.05, 10.0, 0.1, 14.0],
])
HARTMANN6_P = 1e-4 * np.array([
    [1312, 1696, 5569, 124, 8283, 5886],
    [2329, 4135, 8307, 3736, 1004, 9991],
    [2348, 1451, 3522, 2883, 3047, 6650],
    [4047, 8828, 8732, 5743, 1091, 381],
], dtype=float)
HARTMANN6_MINIMUM = -3.32237  # at (0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573)


def _as_points(X_unit: ArrayLike, d: int) -> NDArray[np.float64]:
    """``X_unit`` as a float array of shape ``(n, d)``; a single point ``(d,)`` becomes ``(1, d)``."""
    X = np.atleast_2d(np.asarray(X_unit, dtype=float))
    if X.shape[1] != d:
        raise ValueError(f"expected points with {d} coordinates, got shape {X.shape}")
    return X


def branin(X_unit: ArrayLike) -> NDArray[np.float64]:
    """The Branin (Branin-Hoo) function on ``[0, 1]^2``, shape ``(n, 2)`` -> ``(n,)``.

    ``f(x1, x2) = a (x2 - b x1^2 + c x1 - r)^2 + s (1 - t) cos(x1) + s`` with ``a = 1``,
    ``b = 5.1 / (4 pi^2)``, ``c = 5 / pi``, ``r = 6``, ``s = 10``, ``t = 1 / (8 pi)``, on
    ``x1 in [-5, 10]``, ``x2 in [0, 15]`` (the unit cube is scaled to that box). Three
    global minima of 0.397887; values range up to about 308. Source: L. C. W. Dixon and
    G. P. Szegő, "The global optimisation problem: an introduction", in *Towards Global
    Optimisation 2*, North-Holland, 1978; as defined by Surjanovic and Bingham.
    """
    X = BRANIN_LOWER + _as_points(X_unit, 2) * (BRANIN_UPPER - BRANIN_LOWER)
    x1, x2 = X[:, 0], X[:, 1]
    a, b, c, r, s, t = 1.0, 5.1 / (4.0 * np.pi**2), 5.0 / np.pi, 6.0, 10.0, 1.0 / (8.0 * np.pi)
    return a * (x2 - b * x1**2 + c * x1 - r) ** 2 + s * (1.0 - t) * np.cos(x1) + s


def hartmann6(X_unit: ArrayLike) -> NDArray[np.float64]:
    """The six-dimensional Hartmann function on ``[0, 1]^6``, shape ``(n, 6)`` -> ``(n,)``.

    ``f(x) = -sum_i alpha_i exp(-sum_j A_ij (x_j - P_ij)^2)`` with the standard ``alpha``
    (4,), ``A`` (4, 6) and ``P`` (4, 6) constants (``HARTMANN6_*``), on its native domain
    ``[0, 1]^6``. One global minimum of -3.32237; most of the cube is close to 0, which
    makes it a hard function to map from few points. Source: L. C. W. Dixon and G. P.
    Szegő (1978), as above; as defined by Surjanovic and Bingham.
    """
    X = _as_points(X_unit, 6)
    squared = ((X[:, None, :] - HARTMANN6_P[None, :, :]) ** 2 * HARTMANN6_A[None, :, :]).sum(axis=2)
    return -(np.exp(-squared) @ HARTMANN6_ALPHA)
