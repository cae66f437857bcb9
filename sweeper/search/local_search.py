"""Local candidates for IVR: a random search around the best of the Sobol candidates.

A fixed candidate set thins out as the dimension grows, so IVR's maximum can lie far from the best
candidate; ``ivr_local_search`` adds points near the best ones (:class:`sweeper.search.gp_batch.IVRBatch`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from sweeper.search.acquisition import integrated_variance_reduction

if TYPE_CHECKING:
    from sweeper.search.gp import GPFit


def local_ivr_candidates(
    gp: GPFit,
    X_cond: NDArray[np.float64],
    X_cand: NDArray[np.float64],
    X_mc: NDArray[np.float64],
    rng: np.random.Generator,
    columns: NDArray[np.intp] | None = None,
    n_best: int = 8,
    n_local: int = 32,
    scales: tuple[float, ...] = (0.05, 0.015),
    weights: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """More candidates near the best of ``X_cand`` by IVR: a local random search.

    Each round scores the pool (``X_cand`` plus the points added so far), takes its ``n_best``
    by IVR (weighted by ``weights`` over ``X_mc``, as the batch is) and draws ``n_local``
    Gaussian perturbations of each with sd ``scale`` in ``columns`` (None: all), clipped to the
    unit cube. A fixed candidate set of 2048 Sobol points is ~0.02 apart in 2-D but ~0.3 in 6-D,
    so the best candidate can be far from IVR's maximum; the caller appends these points to the
    candidates and selects among all of them.

    Returns:
        The new points, shape ``(len(scales) * n_best * n_local, d)``.
    """
    X_cand = np.asarray(X_cand, dtype=np.float64)
    d = X_cand.shape[1]
    mask = np.zeros(d, dtype=bool)
    mask[np.arange(d) if columns is None else np.asarray(columns, dtype=np.intp)] = True
    pool, scores = X_cand, integrated_variance_reduction(gp, X_cond, X_cand, X_mc, weights)
    added = []
    for scale in scales:
        best = pool[np.argsort(-scores, kind="stable")[:n_best]]
        step = rng.normal(0.0, scale, size=(best.shape[0], n_local, d)) * mask
        new = np.clip(best[:, None, :] + step, 0.0, 1.0).reshape(-1, d)
        added.append(new)
        pool = np.vstack([pool, new])
        scores = np.concatenate([scores, integrated_variance_reduction(gp, X_cond, new, X_mc, weights)])
    return np.vstack(added) if added else np.zeros((0, d))

