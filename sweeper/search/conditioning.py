"""The posterior covariance among candidates, conditioned exactly on the points asked and then on picks in turn.

IVR and the UCB batch (:mod:`sweeper.search.acquisition`) share it. Each observation is conditioned on with its own
noise variance (:func:`observation_noise`): the scalar ``noise_variance`` for a fit whose noise is the same
everywhere, and for an analysis member with a noise in the metric's units (decision 0086) the noise its posterior
gives that result, so a member chooses with the model its map is drawn with.
NOTE: docs/decisions/0087-members-choose-with-their-own-noise.md
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import scipy.linalg
from numpy.typing import NDArray

from sweeper.search.gp import cholesky_with_jitter

if TYPE_CHECKING:
    from sweeper.search.gp import GPFit

#: From this many training points on, the conditioner extends the fit's Cholesky factor by the
#: other points of ``X_cond`` (``O(n^2 p)``) instead of factorising ``K(X_cond, X_cond)`` anew
#: (``O(n^3)``). Below it a fresh factor is cheap, and keeps the picks bit-identical to a
#: conditioner that never reorders ``X_cond``. NOTE: docs/decisions/0015-reuse-the-fits-factor.md
REUSE_FACTOR_MIN_N = 1000

#: A noise variance: one number for every point, or one per point.
Noise = float | NDArray[np.float64]


def observation_noise(gp: GPFit, X: NDArray[np.float64]) -> Noise:
    """The noise variance (standardised scale) of a result at each row of ``X``, as ``gp``'s posterior has it.

    ``gp.noise_variance`` (one number) unless ``gp`` carries a noise in the metric's units (``metric_noise``,
    decision 0086). Then a row that is one of ``gp.X``'s gets its own result's noise (:meth:`GPFit.noise_at` of its
    ``y``: the noise the fit's factor was built with); any other row (a pending or failed trial, a candidate) the
    noise at the value of the latent mean there, as :meth:`GPFit.predict_warped` adds for a new trial's result.
    """
    if not gp.noise_varies:
        return float(gp.noise_variance)
    known = _training_rows(X, gp.X)
    noise = np.empty(X.shape[0])
    noise[known >= 0] = gp.noise_at(gp.y[known[known >= 0]])
    if np.any(known < 0):
        noise[known < 0] = _new_result_noise(gp, X[known < 0])
    return noise


def _new_result_noise(gp: GPFit, X: NDArray[np.float64]) -> Noise:
    """The noise variance of a new result at each row of ``X``: :meth:`GPFit.noise_at_mean` of the latent mean."""
    if not gp.noise_varies:
        return float(gp.noise_variance)
    return gp.noise_at_mean(gp.predict_warped(X)[0])


def _training_rows(X: NDArray[np.float64], train: NDArray[np.float64]) -> NDArray[np.intp]:
    """For each row of ``X``, the index of an exact copy among ``train``'s rows (each used once), or -1."""
    where: dict[bytes, list[int]] = {}
    for i, row in enumerate(np.ascontiguousarray(train, dtype=np.float64)):
        where.setdefault(row.tobytes(), []).append(i)
    index = np.full(X.shape[0], -1, dtype=np.intp)
    for i, row in enumerate(np.ascontiguousarray(X, dtype=np.float64)):
        copies = where.get(row.tobytes())
        if copies:
            index[i] = copies.pop(0)
    return index


class Conditioner:
    """Posterior covariance among candidates given ``X_cond``, conditioned on picks in turn.

    After ``k`` picks, ``cov_k(cand, cand[p]) = cov_0(cand, cand[p]) - U[:, :k] @ U[p, :k]``,
    where column ``i`` of ``U`` is ``cov_i(cand, x_i) / sqrt(var_i(x_i) + noise_i)``, and ``noise`` is each
    candidate's noise variance (:func:`observation_noise`; one number, or one per candidate).
    """

    def __init__(self, gp: GPFit, X_cond: NDArray[np.float64], X_cand: NDArray[np.float64], q: int) -> None:
        self.gp = gp
        self.X_cand = X_cand
        self.noise: Noise = observation_noise(gp, X_cand)
        c = X_cand.shape[0]
        self.L: NDArray[np.float64] | None  # the Cholesky factor of K(X_cond, X_cond) + noise; None without X_cond
        if X_cond.shape[0] > 0:
            # The posterior does not depend on the order of X_cond; self.X_cond is the order of L.
            self.X_cond, self.L = conditioning_factor(gp, X_cond)
            self.A = self.solve(gp.kernel(self.X_cond, X_cand))  # (N, c)
        else:
            self.X_cond = X_cond
            self.L = None
            self.A = np.zeros((0, c))
        self.var = np.maximum(gp.kernel_diag(X_cand) - np.einsum("ij,ij->j", self.A, self.A), 0.0)
        self.U = np.zeros((c, q))
        self.k = 0

    def solve(self, K: NDArray[np.float64]) -> NDArray[np.float64]:
        """``L^-1 K`` for a cross-covariance ``K`` of shape ``(N, b)``."""
        if self.L is None:
            return np.zeros((0, K.shape[1]))
        solved: NDArray[np.float64] = scipy.linalg.solve_triangular(self.L, K, lower=True, check_finite=False)
        return solved

    def condition_on(self, p: int) -> tuple[NDArray[np.float64], float]:
        """Condition on a noisy observation at candidate ``p``; return ``(cov_k(cand, p), s)``.

        ``s = var_k(p) + noise_p`` is the predictive variance of that observation.
        """
        x = self.X_cand[p : p + 1]
        g = self.gp.kernel(self.X_cand, x)[:, 0] - self.A.T @ self.A[:, p]
        g -= self.U[:, : self.k] @ self.U[p, : self.k]
        s = float(self.var[p]) + float(np.broadcast_to(self.noise, self.var.shape)[p])
        u = g / np.sqrt(s)
        self.U[:, self.k] = u
        self.k += 1
        self.var = np.maximum(self.var - u * u, 0.0)
        return g, s


def conditioning_factor(gp: GPFit, X_cond: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(X_ordered, L)``: ``X_cond``'s rows in some order and the Cholesky factor of ``K + diag(noise)``, each
    row's noise its :func:`observation_noise`.

    When the GP was fitted on many points (``>= REUSE_FACTOR_MIN_N``) that all appear
    among ``X_cond``'s rows (the finished trials among all asked ones), ``X_ordered`` is
    those rows first, then the rest (failed and pending trials), and ``L`` extends the
    fit's cached factor (built with the same noise) blockwise: ``[[L11, 0], [L21, L22]]`` with ``L21 = (L11^-1 K12)ᵀ``
    and ``L22 L22ᵀ = K22 + noise - L21 L21ᵀ`` (Golub & Van Loan 2013, §4.2). Otherwise
    ``X_cond`` as given with a fresh factor.
    """
    train = getattr(gp, "X", None)
    cached = getattr(gp, "cholesky", None)
    if train is not None and cached is not None and train.shape[0] >= REUSE_FACTOR_MIN_N:
        rest = _rows_not_in(X_cond, train)
        if rest is not None:
            X_ordered = np.vstack([train, rest])
            if rest.shape[0] == 0:
                return X_ordered, cached
            L21 = scipy.linalg.solve_triangular(cached, gp.kernel(train, rest), lower=True, check_finite=False).T
            K22 = gp.kernel(rest, rest)
            K22[np.diag_indices_from(K22)] += _new_result_noise(gp, rest)  # new results, not copies of the trials'
            L22 = cholesky_with_jitter(K22 - L21 @ L21.T)
            n, p = train.shape[0], rest.shape[0]
            L = np.zeros((n + p, n + p))
            L[:n, :n], L[n:, :n], L[n:, n:] = cached, L21, L22
            return X_ordered, L
    K = gp.kernel(X_cond, X_cond)
    K[np.diag_indices_from(K)] += observation_noise(gp, X_cond)
    return X_cond, cholesky_with_jitter(K)


def _rows_not_in(X: NDArray[np.float64], subset: NDArray[np.float64]) -> NDArray[np.float64] | None:
    """``X``'s rows left after removing one exact copy of each row of ``subset``; None if one is missing."""
    found = _training_rows(subset, X)
    if np.any(found < 0):
        return None
    keep = np.ones(X.shape[0], dtype=bool)
    keep[found] = False
    return X[keep]
