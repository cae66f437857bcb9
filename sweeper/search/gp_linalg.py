"""The linear algebra of an exact GP posterior: the covariance of a sum of kernel terms, its
Cholesky factor (with diagonal jitter when the plain factorisation fails), the weights
``alpha`` and the log marginal likelihood, all on the standardised scale.

References:
    Rasmussen, C. E., & Williams, C. K. I. (2006). Gaussian Processes for Machine
    Learning. MIT Press. Algorithm 2.1 (Cholesky prediction and log marginal likelihood).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import scipy.linalg
from numpy.typing import NDArray
from scipy.linalg.lapack import dpotrf, dtrtrs

from sweeper.search.kernels import KernelTerm

log = logging.getLogger(__name__)


def cholesky_with_jitter(K: NDArray[np.float64], max_tries: int = 6) -> NDArray[np.float64]:
    """Lower Cholesky factor of a symmetric PSD matrix, adding diagonal jitter if needed.

    Args:
        K: Symmetric matrix, shape ``(n, n)``.
        max_tries: Number of jitter levels tried (``1e-10`` times the mean diagonal,
            growing tenfold each time) after the plain factorisation fails.

    Returns:
        ``L`` with ``L @ L.T == K + jitter * I``, shape ``(n, n)``.

    Raises:
        numpy.linalg.LinAlgError: If every jitter level fails.
    """
    if K.dtype == np.float64 and K.ndim == 2 and K.size:
        # scipy.linalg.cholesky(K, lower=True, check_finite=False)'s own LAPACK call (the same bits), without
        # its checks and wrappers: the slice sampler factorises some 10^5 small matrices per analysis.
        plain: NDArray[np.float64]
        plain, info = dpotrf(K, lower=1, clean=1, overwrite_a=0)
        if info == 0:
            return plain
    else:
        try:
            checked: NDArray[np.float64] = scipy.linalg.cholesky(K, lower=True, check_finite=False)
            return checked
        except np.linalg.LinAlgError:
            pass
    scale = float(np.mean(np.diag(K))) if K.size else 1.0
    jitter = 1e-10 * (scale if scale > 0 else 1.0)
    for _ in range(max_tries):
        try:
            L: NDArray[np.float64] = scipy.linalg.cholesky(
                K + jitter * np.eye(K.shape[0]), lower=True, check_finite=False
            )
            log.debug("Cholesky needed jitter %.1e", jitter)
            return L
        except np.linalg.LinAlgError:
            jitter *= 10.0
    raise np.linalg.LinAlgError(f"matrix not positive definite even with jitter {jitter / 10:.1e}")


def solve_lower(L: NDArray[np.float64], z: NDArray[np.float64]) -> NDArray[np.float64]:
    """``L^-1 z`` for a lower triangular ``L``: ``scipy.linalg.solve_triangular(L, z, lower=True,
    check_finite=False)``'s own LAPACK call (the same bits), without its checks and wrappers."""
    if L.flags.f_contiguous:
        v, info = dtrtrs(L, z, overwrite_b=0, lower=1, trans=0, unitdiag=0)
    else:  # LAPACK reads C order as the transpose
        v, info = dtrtrs(L.T, z, overwrite_b=0, lower=0, trans=1, unitdiag=0)
    if info != 0:
        raise np.linalg.LinAlgError(f"singular matrix: resolution failed at diagonal {info - 1}")
    solved: NDArray[np.float64] = v
    return solved


def sum_of_terms(
    terms: Sequence[KernelTerm], X1: NDArray[np.float64], X2: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Covariance of a sum of kernel terms between the rows of ``X1`` and ``X2``, shape ``(a, b)``."""
    K = terms[0](X1, X2)
    for term in terms[1:]:
        K += term(X1, X2)
    return K


def posterior_factor(
    K: NDArray[np.float64], noise_variance: float | NDArray[np.float64], z: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(L, alpha)``: the Cholesky factor of ``K + noise I`` and ``alpha = (K + noise I)^-1 z``.

    R&W Algorithm 2.1, lines 2-3. ``K`` (the training covariance, ``(n, n)``) is overwritten
    by ``K + noise I``; ``noise_variance`` is one number or one per point (``(n,)``).
    """
    K[np.diag_indices_from(K)] += noise_variance
    L = cholesky_with_jitter(K)
    alpha: NDArray[np.float64] = scipy.linalg.cho_solve((L, True), z, check_finite=False)
    return L, alpha


def log_marginal_likelihood(z: NDArray[np.float64], L: NDArray[np.float64], alpha: NDArray[np.float64]) -> float:
    """``log p(z | X) = -z^T alpha / 2 - sum_i log L_ii - n log(2 pi) / 2`` (R&W Algorithm 2.1, line 8)."""
    n = z.shape[0]
    return float(-0.5 * z @ alpha - np.sum(np.log(np.diag(L))) - 0.5 * n * np.log(2.0 * np.pi))


def posterior_root(cov: NDArray[np.float64], variance: float) -> NDArray[np.float64]:
    """A matrix ``R`` with ``R @ R.T ~= cov``: Cholesky with jitter, else clipped eigenvectors."""
    jitter = 1e-10 * variance
    eye = np.eye(cov.shape[0])
    while jitter <= 1e-4 * variance * (1 + 1e-9):
        try:
            R: NDArray[np.float64] = scipy.linalg.cholesky(cov + jitter * eye, lower=True, check_finite=False)
            return R
        except np.linalg.LinAlgError:
            jitter *= 10.0
    log.debug("posterior covariance not positive definite with jitter; using its eigendecomposition")
    w, Q = np.linalg.eigh(cov)
    root: NDArray[np.float64] = Q * np.sqrt(np.clip(w, 0.0, None))[None, :]
    return root
