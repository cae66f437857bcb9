"""Covariance functions of the GP surrogate, in numpy: stationary kernels times coregionalization.

A point lives in the unit cube ``[0, 1]^d`` (see :mod:`sweeper.search.space`). Continuous, integer
and grid dimensions are continuous coordinates; a categorical dimension with ``k`` choices
is a column whose cell ``floor(u k)`` is the category. The covariance is a sum of
:class:`KernelTerm` s; each term is a stationary kernel over its continuous columns times
one coregionalization factor per categorical column it holds (Bell et al. 2022, §5.1)::

    k(x, x') = sum_t  s_t k_stat(x_C, x'_C; l_t)  prod_{c in t} B_c[cat_c(x), cat_c(x')]

with ``B_c = W_c W_cᵀ + diag(kappa_c)`` (the intrinsic coregionalization model; ``W_c`` is
``k x rank``). On a full grid of category combinations this is the Kronecker product
``B_model ⊗ B_dataset ⊗ k(X, X)`` of the paper. One term over every column is the shared
kernel the sweeper searches with; one term per column is the additive kernel of the
interaction test (:mod:`sweeper.search.interaction`).

This module is pure numpy: it is what predictions and acquisition functions evaluate, and
it matches GPy's ``Matern52``/``RBF``/``Coregionalize`` to rounding (tested), the model whose
likelihood :mod:`sweeper.search.marginal_likelihood` maximises.

References:
    Rasmussen, C. E., & Williams, C. K. I. (2006). Gaussian Processes for Machine
    Learning. MIT Press. Eq. 4.9 (squared exponential), eq. 4.17 (Matern 5/2).
    Álvarez, M. A., Rosasco, L., & Lawrence, N. D. (2012). Kernels for vector-valued
    functions: a review. Found. Trends Mach. Learn. 4(3), §4.2 (intrinsic coregionalization).
    Bell, S. J., Kampman, O. P., Dodge, J., & Lawrence, N. D. (2022). Modeling the Machine
    Learning Multiverse. NeurIPS 2022, §5.1 (coregionalized categorical decisions).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: ``--kernel`` names: the stationary family, with one lengthscale per dimension (ARD) or one shared.
KERNELS = ("matern52-ard", "matern52", "rbf-ard", "rbf")
_SQRT5 = float(np.sqrt(5.0))


def kernel_family(name: str) -> tuple[str, bool]:
    """Split a kernel name into ``(family, ard)``: ``"rbf-ard" -> ("rbf", True)``."""
    if name not in KERNELS:
        raise ValueError(f"unknown kernel {name!r}: choose one of {', '.join(KERNELS)}")
    family, _, ard = name.partition("-")
    return family, bool(ard)


def _scaled_sq_dist(X1: NDArray[np.float64], X2: NDArray[np.float64], ls: NDArray[np.float64]) -> NDArray[np.float64]:
    A = X1 / ls
    B = X2 / ls
    # In place: these matrices are (n_mc, n_cand) in the acquisition and dominate its time.
    t = A @ B.T
    t *= -2.0
    t += np.einsum("ij,ij->i", A, A)[:, None]
    t += np.einsum("ij,ij->i", B, B)[None, :]
    np.maximum(t, 0.0, out=t)
    return t


def scaled_sq_dist_within(X: NDArray[np.float64], ls: NDArray[np.float64]) -> NDArray[np.float64]:
    """``_scaled_sq_dist(X, X, ls)``, bit for bit, with one row-norm pass instead of two (the slice
    sampler's likelihood calls it some 10^5 times per analysis)."""
    A = X / ls
    t = A @ (X / ls).T  # a second buffer: a product of two arrays (A @ A.T would take BLAS's syrk, other bits)
    t *= -2.0
    norms = np.einsum("ij,ij->i", A, A)
    t += norms[:, None]
    t += norms[None, :]
    np.maximum(t, 0.0, out=t)
    return t


def _matern52_of(t: NDArray[np.float64], variance: float) -> NDArray[np.float64]:
    """Matern-5/2 of the scaled squared distances ``t`` (overwritten)."""
    np.sqrt(t, out=t)
    t *= _SQRT5  # t = sqrt(5) r
    e = np.exp(-t)
    K = t * t
    K *= 1.0 / 3.0
    K += t
    K += 1.0
    K *= e
    K *= variance
    return K


def _rbf_of(t: NDArray[np.float64], variance: float) -> NDArray[np.float64]:
    """Squared exponential of the scaled squared distances ``t`` (overwritten)."""
    t *= -0.5
    np.exp(t, out=t)
    t *= variance
    return t


def matern52(
    X1: NDArray[np.float64], X2: NDArray[np.float64], lengthscales: NDArray[np.float64], variance: float
) -> NDArray[np.float64]:
    """Matern-5/2 ARD covariance ``s (1 + sqrt5 r + 5 r²/3) exp(-sqrt5 r)`` (R&W eq. 4.17), ``(a, b)``."""
    return _matern52_of(_scaled_sq_dist(X1, X2, lengthscales), variance)


def rbf(
    X1: NDArray[np.float64], X2: NDArray[np.float64], lengthscales: NDArray[np.float64], variance: float
) -> NDArray[np.float64]:
    """Squared-exponential ARD covariance ``s exp(-r²/2)`` (R&W eq. 4.9), ``(a, b)``."""
    return _rbf_of(_scaled_sq_dist(X1, X2, lengthscales), variance)


STATIONARY = {"matern52": matern52, "rbf": rbf}
#: Each family as a function of the scaled squared distances (overwritten) and the variance.
OF_SQ_DIST = {"matern52": _matern52_of, "rbf": _rbf_of}


def category_index(u: NDArray[np.float64], k: int) -> NDArray[np.intp]:
    """The category of unit-cube coordinates ``u``: cell ``floor(u k)``, clipped to ``0..k-1``."""
    return np.clip(np.floor(np.asarray(u, dtype=np.float64) * k), 0, k - 1).astype(np.intp)


def category_labels(X: NDArray[np.float64], categories: Mapping[int, int] | None) -> list[NDArray[np.intp]]:
    """The category of every row of ``X`` in each categorical column (column -> ``k``), columns in order."""
    return [category_index(X[:, c], k) for c, k in sorted((categories or {}).items())]


@dataclass(frozen=True)
class CategoryFactor:
    """One categorical dimension's coregionalization matrix ``B = W Wᵀ + diag(kappa)``.

    Attributes:
        column: The dimension's column in the unit cube.
        W: Shape ``(k, rank)``.
        kappa: Shape ``(k,)``, ``> 0``.
    """

    column: int
    W: NDArray[np.float64]
    kappa: NDArray[np.float64]

    @property
    def n_categories(self) -> int:
        return int(self.kappa.shape[0])

    @property
    def B(self) -> NDArray[np.float64]:
        """The ``(k, k)`` covariance between categories."""
        return self.W @ self.W.T + np.diag(self.kappa)

    def correlation(self) -> NDArray[np.float64]:
        """``B`` scaled to unit diagonal: how alike the response is across categories (Fig. 5)."""
        B = self.B
        s = np.sqrt(np.diag(B))
        correlation: NDArray[np.float64] = B / np.outer(s, s)
        return correlation

    def index(self, X: NDArray[np.float64]) -> NDArray[np.intp]:
        """Category of each row of ``X`` (full unit-cube points), shape ``(a,)``."""
        return category_index(X[:, self.column], self.n_categories)

    def to_dict(self) -> dict[str, Any]:
        return {"column": self.column, "W": self.W.tolist(), "kappa": self.kappa.tolist(),
                "correlation": self.correlation().tolist()}


@dataclass(frozen=True)
class KernelTerm:
    """One summand: a stationary kernel over ``columns`` times the factors of its categorical columns.

    Attributes:
        columns: Continuous columns of the stationary part (empty: the term is categorical only).
        lengthscales: One per column (equal for a non-ARD kernel), unit-cube coordinates.
        variance: Signal variance of the stationary part (1 when factors carry the scale).
        factors: Coregionalization factors, one per categorical column of the term.
        family: ``"matern52"`` or ``"rbf"``.
    """

    columns: tuple[int, ...]
    lengthscales: NDArray[np.float64]
    variance: float
    factors: tuple[CategoryFactor, ...] = ()
    family: str = "matern52"

    def __call__(self, X1: NDArray[np.float64], X2: NDArray[np.float64]) -> NDArray[np.float64]:
        """Covariance between rows of ``X1`` ``(a, d)`` and ``X2`` ``(b, d)``, shape ``(a, b)``."""
        if self.columns:
            cols = list(self.columns)
            K = STATIONARY[self.family](X1[:, cols], X2[:, cols], self.lengthscales, self.variance)
        else:
            K = np.full((X1.shape[0], X2.shape[0]), self.variance)
        for f in self.factors:
            K *= f.B[np.ix_(f.index(X1), f.index(X2))]
        return K

    def diag(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """Prior variance at each row of ``X``, shape ``(a,)``."""
        v = np.full(X.shape[0], self.variance)
        for f in self.factors:
            v *= np.diag(f.B)[f.index(X)]
        return v

    def to_dict(self) -> dict[str, Any]:
        return {"columns": list(self.columns), "family": self.family,
                "lengthscales": [float(v) for v in self.lengthscales], "variance": float(self.variance),
                "factors": [f.to_dict() for f in self.factors]}
