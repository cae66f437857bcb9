"""The objective of a GP fit, its gradient and its L-BFGS-B maximisation, in numpy.

A fit maximises the log marginal likelihood of the standardised outputs ``z`` (plus, for a MAP,
the log prior of the lengthscales) over the hyperparameters of a sum of kernel terms
(:mod:`sweeper.search.kernels`): per term a stationary variance and lengthscales, ``W`` and
``kappa`` of each coregionalization factor, and the noise variance. The parameters, their order
(:func:`~sweeper.search.gp_model.start_values`) and their boxes are those of GPy's bounded
``GPRegression`` of the same terms, and so is the optimiser: each free parameter ``theta`` in its
box ``(lo, hi)`` moves in the logistic coordinate ``x = log((theta - lo) / (hi - theta))`` (the
``Logistic`` transform of GPy's ``constrain_bounded``), and SciPy's L-BFGS-B runs with paramz's
settings (``maxfun = maxiter = max_iters``, SciPy's default tolerances). The covariance adds
:data:`~sweeper.search.gp.GPY_JITTER` to the noise variance, as GPy's exact inference does.
tests/unit/test_marginal_likelihood.py compares the objective and its gradient with GPy's.

Why not GPy: every evaluation through GPy's parameter framework (paramz) recomputed every
parameter's printable name for each attribute the model set, and bound each cached call's
arguments; at a few dozen trials that bookkeeping cost more than the linear algebra.
NOTE: docs/decisions/0088-gp-objective-without-gpy.md

Formulas (Rasmussen & Williams 2006): ``log p(z | theta) = -z^T alpha / 2 - sum_i log L_ii -
n log(2 pi) / 2`` with ``K_y = L L^T`` and ``alpha = K_y^-1 z`` (eq. 2.30, Algorithm 2.1), and
``d log p / d theta_j = tr((alpha alpha^T - K_y^-1) dK_y / d theta_j) / 2`` (eq. 5.9). For
Matern-5/2 ``s (1 + sqrt5 r + 5 r^2 / 3) exp(-sqrt5 r)`` with ``r^2 = sum_k D_k / l_k^2``
(eq. 4.17), ``dK / dl_k = 5 s (1 + sqrt5 r) exp(-sqrt5 r) D_k / (3 l_k^3)``; for the squared
exponential ``s exp(-r^2 / 2)`` (eq. 4.9), ``dK / dl_k = K D_k / l_k^3``. A coregionalization
factor ``B = W W^T + diag(kappa)`` (Álvarez et al. 2012, §4.2) has ``dL/dW = (dL/dB + dL/dB^T) W``
and ``dL/dkappa = diag(dL/dB)``. The lengthscale prior is ``LogNormal(mu, sigma)`` on the
lengthscale itself (no log-Jacobian of the transform, as in GPy's bounded parameters).

References:
    Rasmussen, C. E., & Williams, C. K. I. (2006). Gaussian Processes for Machine Learning.
    MIT Press. Eqs. 2.30, 4.9, 4.17, 5.9; Algorithm 2.1.
    Álvarez, M. A., Rosasco, L., & Lawrence, N. D. (2012). Kernels for vector-valued
    functions: a review. Found. Trends Mach. Learn. 4(3), §4.2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.optimize
from numpy.typing import NDArray
from scipy.linalg.lapack import dpotri

from sweeper.search.gp import GPY_JITTER
from sweeper.search.gp_linalg import log_marginal_likelihood, posterior_factor
from sweeper.search.gp_model import (
    INIT_VARIANCE,
    KAPPA_BOUNDS,
    LENGTHSCALE_BOUNDS,
    NOISE_MAX,
    VARIANCE_BOUNDS,
    W_BOUNDS,
    TermLayout,
)
from sweeper.search.kernels import category_index, scaled_sq_dist_within

Values = list[NDArray[np.float64]]
#: Evaluations in a row that may fail to factorise before the run fails (paramz's allowance).
_ALLOWED_FAILURES = 10


@dataclass(frozen=True)
class _Block:
    """One parameter array: what it is, in which term (and factor), its size, box and whether it moves."""

    kind: str  # "variance", "lengthscale", "W", "kappa" or "noise"
    term: int
    factor: int
    size: int
    box: tuple[float, float]
    free: bool


def _blocks(layout: list[TermLayout], ard: bool, rank: int, noise_floor: float) -> list[_Block]:
    """The parameter arrays in the order of :func:`~sweeper.search.gp_model.start_values`."""
    blocks = []
    for t, term in enumerate(layout):
        if term.continuous:
            # With factors, the factors carry the scale and the stationary variance is fixed at 1.
            blocks.append(_Block("variance", t, -1, 1, VARIANCE_BOUNDS, not term.categorical))
            blocks.append(_Block("lengthscale", t, -1, len(term.continuous) if ard else 1, LENGTHSCALE_BOUNDS, True))
        for f, (_, n_cat) in enumerate(term.categorical):
            blocks.append(_Block("W", t, f, n_cat * rank, W_BOUNDS, True))
            blocks.append(_Block("kappa", t, f, n_cat, KAPPA_BOUNDS, True))
    return [*blocks, _Block("noise", -1, -1, 1, (noise_floor, NOISE_MAX), True)]


def _inverse_from_factor(L: NDArray[np.float64]) -> NDArray[np.float64]:
    """``(L L^T)^-1`` from the lower triangular Cholesky factor ``L`` (zeros above the diagonal, as
    :func:`~sweeper.search.gp_linalg.cholesky_with_jitter` returns it): LAPACK's ``dpotri``, as GPy's inference
    uses, two thirds of the work of solving against the identity. ``dpotri`` fills the lower triangle and
    leaves ``L``'s zeros above it, which the transpose fills."""
    inverse: NDArray[np.float64]
    inverse, info = dpotri(L, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"dpotri failed: info {info}")
    inverse += np.tril(inverse, -1).T
    return inverse


def _weighted_sq_diffs(Xc: NDArray[np.float64], M: NDArray[np.float64], ard: bool) -> NDArray[np.float64]:
    """``sum_ij M_ij (x_ik - x_jk)^2`` for each column ``k`` of ``Xc`` (their sum when not ``ard``), for a
    symmetric ``M``: ``2 sum_i x_ik^2 (M 1)_i - 2 x_k^T M x_k``, one ``n x n`` by ``n x p`` product, without
    the ``p x n x n`` differences."""
    out: NDArray[np.float64] = 2.0 * (np.einsum("ik,i->k", Xc * Xc, M.sum(axis=1)) - np.einsum("ik,ik->k", Xc, M @ Xc))
    return out if ard else out.sum(keepdims=True)


@dataclass
class _Term:
    """What one evaluation of a term keeps for its gradient."""

    K: NDArray[np.float64]  # the term's covariance
    stationary: NDArray[np.float64] | None  # its stationary part (None: none)
    slope: NDArray[np.float64] | None  # dK_stationary/dl_k = slope * D_k / l_k^3
    factors: list[NDArray[np.float64]]  # each factor's n x n matrix B[c_i, c_j]


class MarginalLikelihood:
    """``theta -> log p(z | theta)``, the log prior and their gradient, for one data set and model.

    Built once per data set; :meth:`maximise` runs one L-BFGS-B restart from a start, and
    :meth:`evaluate` scores a parameter vector. Each term's continuous columns and its
    categories (as indices and one-hot matrices) are worked out once here.
    """

    def __init__(self, X: NDArray[np.float64], z: NDArray[np.float64], layout: list[TermLayout], family: str,
                 ard: bool, rank: int, noise_floor: float, prior: tuple[float, float] | None) -> None:
        if family not in ("matern52", "rbf"):
            raise ValueError(f"unknown kernel family {family!r}")
        self.z, self.n = z, z.shape[0]
        self.layout, self.family, self.ard, self.rank, self.prior = layout, family, ard, rank, prior
        self.blocks = _blocks(layout, ard, rank, noise_floor)
        self._sizes = np.cumsum([b.size for b in self.blocks])[:-1]
        free = np.concatenate([np.full(b.size, b.free) for b in self.blocks])
        self._free = np.flatnonzero(free)
        self._lo = np.concatenate([np.full(b.size, b.box[0]) for b in self.blocks])[self._free]
        self._hi = np.concatenate([np.full(b.size, b.box[1]) for b in self.blocks])[self._free]
        self._fixed = np.concatenate([np.full(b.size, INIT_VARIANCE) for b in self.blocks])
        self._columns: list[NDArray[np.float64]] = []  # each term's continuous columns of X
        self._onehots: list[list[NDArray[np.float64]]] = []
        self._cats: list[list[NDArray[np.intp]]] = []
        for term in layout:
            self._columns.append(np.ascontiguousarray(X[:, list(term.continuous)]))
            cats = [category_index(X[:, c], k) for c, k in term.categorical]
            self._cats.append(cats)
            self._onehots.append([np.eye(k)[c] for c, (_, k) in zip(cats, term.categorical, strict=True)])
        self._failures = 0

    # -- parameters -----------------------------------------------------------------------------
    def split(self, theta: NDArray[np.float64]) -> Values:
        """A flat parameter vector as the per-block arrays of ``start_values``."""
        return [a.copy() for a in np.split(theta, self._sizes)]

    def _theta_of(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        theta = self._fixed.copy()
        theta[self._free] = self._lo + (self._hi - self._lo) / (1.0 + np.exp(-np.maximum(x, -300.0)))
        return theta

    def _x_of(self, theta: NDArray[np.float64]) -> NDArray[np.float64]:
        t = theta[self._free]
        x: NDArray[np.float64] = np.log(np.clip(t - self._lo, 1e-10, np.inf) / np.clip(self._hi - t, 1e-10, np.inf))
        return x

    # -- the objective --------------------------------------------------------------------------
    def evaluate(self, values: Values) -> tuple[float, float]:
        """``(log p(z | theta), log p(theta))`` at ``values`` (order of ``start_values``)."""
        ll, lp, _ = self._evaluate(np.concatenate(values), gradient=False)
        return ll, lp

    def _terms(self, parts: Values) -> tuple[list[_Term], NDArray[np.float64]]:
        """Each term's covariance (and what its gradient needs), and their sum."""
        it = iter(parts)
        terms = []
        for t, term in enumerate(self.layout):
            stationary = slope = None
            if term.continuous:
                variance, ls = float(next(it)[0]), next(it)
                stationary, slope = self._stationary(scaled_sq_dist_within(self._columns[t], ls), variance)
            factors = []
            for cats in self._cats[t]:
                W, kappa = next(it).reshape(-1, self.rank), next(it)
                B = W @ W.T + np.diag(kappa)
                factors.append(B[np.ix_(cats, cats)])
            K = stationary if stationary is not None else np.ones((self.n, self.n))
            if factors:
                K = K * factors[0]
                for C in factors[1:]:
                    K *= C
            terms.append(_Term(K, stationary, slope, factors))
        total = terms[0].K.copy()
        for term_ in terms[1:]:
            total += term_.K
        return terms, total

    def _stationary(self, r2: NDArray[np.float64],
                    variance: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The stationary part of the scaled squared distances ``r2``, and its slope (see :class:`_Term`)."""
        if self.family == "rbf":
            K = variance * np.exp(-0.5 * r2)
            return K, K
        sr = np.sqrt(5.0 * r2)
        e = variance * np.exp(-sr)
        return (1.0 + sr + sr * sr / 3.0) * e, (5.0 / 3.0) * (1.0 + sr) * e

    def _evaluate(self, theta: NDArray[np.float64],
                  gradient: bool) -> tuple[float, float, NDArray[np.float64] | None]:
        parts = np.split(theta, self._sizes)  # views: nothing below writes to them
        terms, K = self._terms(parts)
        L, alpha = posterior_factor(K, float(parts[-1][0]) + GPY_JITTER, self.z)
        ll = log_marginal_likelihood(self.z, L, alpha)
        lp, lp_grad = self._log_prior(parts)
        if not gradient:
            return ll, lp, None
        G = np.outer(alpha, alpha)
        G -= _inverse_from_factor(L)
        G *= 0.5  # dL/dK_y
        grads = self._gradient(parts, terms, G)
        for i, g in lp_grad.items():
            grads[i] = grads[i] + g
        return ll, lp, np.concatenate(grads)

    def _log_prior(self, parts: Values) -> tuple[float, dict[int, NDArray[np.float64]]]:
        """GPy's ``LogGaussian(mu, sigma)`` density of every lengthscale, and its gradient per block."""
        if self.prior is None:
            return 0.0, {}
        mu, sigma = self.prior
        lp, grads = 0.0, {}
        for i, block in enumerate(self.blocks):
            if block.kind == "lengthscale":
                ls = parts[i]
                log_ls = np.log(ls)
                lp += float(np.sum(-0.5 * np.log(2 * np.pi * sigma**2) - 0.5 * (log_ls - mu) ** 2 / sigma**2
                                   - log_ls))
                grads[i] = -(1.0 + (log_ls - mu) / sigma**2) / ls
        return lp, grads

    def _gradient(self, parts: Values, terms: list[_Term], G: NDArray[np.float64]) -> Values:
        """``d log p(z | theta) / d theta`` per block, from ``G = dL/dK_y`` (R&W eq. 5.9)."""
        grads: Values = []
        dB = np.zeros(0)  # a factor's dL/dB, worked out at its W block and read again at its kappa block
        for i, block in enumerate(self.blocks):
            if block.kind == "noise":
                grads.append(np.array([np.trace(G)]))
                continue
            term = terms[block.term]
            if block.kind == "variance":
                grads.append(np.array([np.sum(G * term.K) / float(parts[i][0])]))
            elif block.kind == "lengthscale":
                assert term.slope is not None
                M = G * term.slope
                for C in term.factors:
                    M *= C
                grads.append(_weighted_sq_diffs(self._columns[block.term], M, self.ard) / parts[i] ** 3)
            elif block.kind == "W":
                dB = self._factor_gradient(block, term, G)
                W = parts[i].reshape(-1, self.rank)
                grads.append(((dB + dB.T) @ W).ravel())
            else:  # kappa: the block right after its factor's W
                grads.append(np.diag(dB).copy())
        return grads

    def _factor_gradient(self, block: _Block, term: _Term, G: NDArray[np.float64]) -> NDArray[np.float64]:
        """``dL/dB`` of one factor: ``G`` times the term's other parts, summed per pair of categories."""
        H = G.copy() if term.stationary is None else G * term.stationary
        for g, C in enumerate(term.factors):
            if g != block.factor:
                H *= C
        E = self._onehots[block.term][block.factor]
        dB: NDArray[np.float64] = E.T @ H @ E
        return dB

    def _objective(self, x: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        """What L-BFGS-B minimises: ``-(log p(z | theta) + log p(theta))`` and its gradient in ``x``."""
        theta = self._theta_of(x)
        try:
            ll, lp, grad = self._evaluate(theta, gradient=True)
        except (np.linalg.LinAlgError, ValueError, ZeroDivisionError):
            self._failures += 1
            if self._failures > _ALLOWED_FAILURES:
                raise
            return np.inf, np.zeros_like(x)
        self._failures = 0
        assert grad is not None
        t = theta[self._free]
        dx = grad[self._free] * (t - self._lo) * (self._hi - t) / (self._hi - self._lo)
        return -(ll + lp), -dx

    def maximise(self, start: Values, max_iters: int) -> Values:
        """One L-BFGS-B run from ``start``: the parameter values at its end (order of ``start_values``)."""
        self._failures = 0
        x0 = self._x_of(np.concatenate(start))
        x, _, _ = scipy.optimize.fmin_l_bfgs_b(self._objective, x0, maxfun=max_iters, maxiter=max_iters)
        return self.split(self._theta_of(x))
