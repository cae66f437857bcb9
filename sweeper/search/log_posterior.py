"""The slice sampler's log posterior ``log p(y | theta) + log p(theta)``, worked out once per fit.

:mod:`sweeper.search.hyperposterior` evaluates it some 10^5 times per analysis on at most 150 trials:
in a profile of the unit tests (2026-12-07) it took 43 % of their CPU, most of it Python's and numpy's
cost per call (a few dozen calls per evaluation on ``n x n`` matrices of a few dozen rows), not the
arithmetic. So :class:`LogPosterior` works out once what a fit fixes: where each block of ``theta``
lies (:mod:`sweeper.search.hyper_vector`'s layout), the kernel's columns and each trial's category,
the clipped inputs of the warped columns, and, for a one-sided output warp (it has no sampled shapes),
the warped outputs themselves. Each call then does the floating-point operations of
``unpack -> warp_inputs -> sum_of_terms -> cholesky_with_jitter -> warped_log_likelihood``, in the
same order on the same values: the same bits (tests/unit/test_log_posterior.py compares them), so a
seeded analysis draws the same members as before, in about half the time. The sampler moves one coordinate
at a time, so each block (a kernel term's covariance, the Cholesky factor, the output warp's values) is kept
until a coordinate it reads moves: a third less again.
NOTE: docs/decisions/0083-log-posterior-worked-out-once.md
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from sweeper.search.bounded import standardise, standardised_log_likelihood
from sweeper.search.gp import GPFit, kumaraswamy_cdf, metric_noise_share
from sweeper.search.gp_linalg import cholesky_with_jitter, solve_lower
from sweeper.search.hyper_vector import (
    Slot,
    ceiling_top,
    has_ceiling,
    has_metric_noise,
    n_lengthscales,
    parameter_slots,
    warped_columns,
)
from sweeper.search.kernels import OF_SQ_DIST, category_index, scaled_sq_dist_within
from sweeper.search.warping import OutputWarp

T = TypeVar("T")


class _Memo(Generic[T]):
    """The value kept for the last key: the slice sampler moves one coordinate of ``theta`` at a time, so the
    blocks of the log posterior that do not read it are the same as at the last call."""

    def __init__(self) -> None:
        self.key: bytes | None = None
        self.value: T

    def put(self, key: bytes, value: T) -> None:
        self.key, self.value = key, value

    def get(self, key: bytes, compute: Callable[[], T]) -> T:
        if key != self.key:
            self.put(key, compute())
        return self.value


class LogPrior:
    """``theta -> log p(theta)`` (up to a constant) of the slots' normal priors, ``-inf`` outside their boxes.

    The slots' settings as flat arrays, so one evaluation is a few numpy calls, not a loop of
    them per slot; the sum still runs slot by slot, in order, so a density is bit for bit the
    slot-by-slot sum.
    """

    def __init__(self, slots: list[Slot]) -> None:
        def flat(value: Callable[[Slot], object]) -> NDArray[np.float64]:
            return np.concatenate([np.full(s.size, value(s)) for s in slots])

        self.log = flat(lambda s: s.log).astype(bool)
        self.low, self.high = flat(lambda s: s.box[0]), flat(lambda s: s.box[1])
        self.mean, self.sd = flat(lambda s: s.prior[0]), flat(lambda s: s.prior[1])
        ends = np.cumsum([s.size for s in slots]).tolist()
        self.slices = [slice(start, end) for start, end in zip([0, *ends[:-1]], ends, strict=True)]

    def __call__(self, theta: NDArray[np.float64]) -> float:
        value = theta.copy()
        np.exp(theta, out=value, where=self.log)  # the log slots' values; the others as they are
        if (value < self.low).any() or (value > self.high).any():
            return -math.inf
        squares = ((theta - self.mean) / self.sd) ** 2
        lp = 0.0
        for block in self.slices:  # np.add.reduce is what ndarray.sum calls, without its Python wrappers
            lp -= 0.5 * float(np.add.reduce(squares[block]))
        return lp


@dataclass(frozen=True)
class _Term:
    """One kernel term's blocks of ``theta`` (None: held at the fit's value) and fixed parts."""

    columns: list[int]  # positions in the continuous columns' block (empty: categorical only)
    family: str
    shape: tuple[int, ...]  # of the lengthscales
    variance: float  # the fit's, when not sampled
    variance_at: int | None
    lengthscales_at: slice | None
    factors: tuple[tuple[slice, tuple[int, ...], slice, tuple[NDArray[np.intp], ...]], ...]

    def reads(self, inputs: list[tuple[int, int, NDArray[np.float64]]]) -> NDArray[np.intp]:
        """The positions in ``theta`` this term's covariance reads: its blocks and its columns' input warps."""
        at = [] if self.variance_at is None else [self.variance_at]
        for block in ([] if self.lengthscales_at is None else [self.lengthscales_at]):
            at += range(block.start, block.stop)
        for W_at, _, kappa_at, _ in self.factors:
            at += [*range(W_at.start, W_at.stop), *range(kappa_at.start, kappa_at.stop)]
        for warp_at, position, _ in inputs:
            if position in self.columns:
                at += [warp_at, warp_at + 1]
        return np.array(at, dtype=np.intp)

    def covariance(self, theta: NDArray[np.float64], Xc: NDArray[np.float64], n: int) -> NDArray[np.float64]:
        """This term's ``(n, n)`` covariance of the (warped) continuous columns ``Xc``."""
        variance = self.variance if self.variance_at is None else float(np.exp(theta[self.variance_at:
                                                                                        self.variance_at + 1])[0])
        if self.lengthscales_at is not None:
            ls = np.broadcast_to(np.exp(theta[self.lengthscales_at]), self.shape).copy()
            K = OF_SQ_DIST[self.family](scaled_sq_dist_within(Xc[:, self.columns], ls), variance)
        else:
            K = np.full((n, n), variance)
        for W_at, W_shape, kappa_at, pairs in self.factors:
            W = theta[W_at].copy().reshape(W_shape)
            B = W @ W.T + np.diag(np.exp(theta[kappa_at]))
            K *= B[pairs]
        return K


class LogPosterior:
    """``theta -> log p(y | theta) + log p(theta)`` on the points ``(X, y)``, laid out like ``gp``'s
    parameter vector (:func:`sweeper.search.hyper_vector.pack`); ``-inf`` outside the prior's boxes or
    where the covariance cannot be factorised."""

    def __init__(self, gp: GPFit, X: NDArray[np.float64], y: NDArray[np.float64]) -> None:
        self.prior = LogPrior(parameter_slots(gp))
        self.n = X.shape[0]
        self._diagonal = np.diag_indices(self.n)
        self._y = y
        continuous = sorted({c for t in gp.terms for c in t.columns})
        self._Xc = X[:, continuous] if continuous else X[:, :0]
        i, terms = 0, []
        for term in gp.terms:
            variance_at = lengthscales_at = None
            if term.columns:
                if not term.factors:
                    variance_at, i = i, i + 1
                k = n_lengthscales(gp, term)
                lengthscales_at, i = slice(i, i + k), i + k
            factors = []
            for f in term.factors:
                W_at, kappa_at = slice(i, i + f.W.size), slice(i + f.W.size, i + f.W.size + f.kappa.size)
                i = kappa_at.stop
                labels = category_index(X[:, f.column], f.n_categories)
                factors.append((W_at, f.W.shape, kappa_at, np.ix_(labels, labels)))
            terms.append(_Term([continuous.index(c) for c in term.columns], term.family,
                               term.lengthscales.shape, term.variance, variance_at, lengthscales_at, tuple(factors)))
        self._terms = tuple(terms)
        self._noise_at, i = i, i + 1
        self._warp = gp.warp
        self._two_sided = gp.warp is not None and gp.warp.two_sided
        self._shapes_at = self._ceiling_at = self._metric_at = None
        if self._two_sided:
            self._shapes_at, i = i, i + 2
            if has_ceiling(gp):
                self._ceiling_at, i = i, i + 1
        self._warp_end = i  # the output warp's shapes and ceiling end here; a metric-unit noise and input warps follow
        self._noise_warp, self._noise_scale = gp.warp, gp.y_std  # a metric-unit noise's scale: the point fit's
        if has_metric_noise(gp):
            self._metric_at, i = i, i + 1
        self._y_max = float(np.max(gp.y))
        # The input warp of each warped column: its place among the continuous columns, its clipped inputs.
        self._inputs = []
        for c in warped_columns(gp):
            self._inputs.append((i, continuous.index(c), np.clip(X[:, c], 0.0, 1.0)))
            i += 2
        self._z_plain = (y - gp.y_mean) / gp.y_std
        self._one_sided = gp.warp is not None and not self._two_sided
        self._fixed = _fixed_warp(gp.warp, y) if self._one_sided else None
        # What each cached value reads of theta: a term its own blocks and its columns' input warps, the
        # covariance everything but the output warp's shapes and ceiling, which the last cache reads alone
        # (a metric-unit noise's sd is the covariance's: its share of the diagonal is on the point fit's warp).
        self._term_reads = [term.reads(self._inputs) for term in self._terms]
        self._term_memos = [_Memo[NDArray[np.float64]]() for _ in self._terms]
        shapes = range(self._shapes_at, self._warp_end) if self._shapes_at is not None else range(0)
        self._covariance_at = np.array([k for k in range(i) if k not in shapes], dtype=np.intp)
        self._factor = _Memo[NDArray[np.float64] | None]()
        self._shapes = _Memo[tuple[float, NDArray[np.float64], float] | None]()
        self._metric = _Memo[NDArray[np.float64]]()  # the metric-unit noise's share: it reads tau alone

    def __call__(self, theta: NDArray[np.float64]) -> float:
        lp = self.prior(theta)
        if not math.isfinite(lp):
            return -math.inf
        L = self._factor.get(theta[self._covariance_at].tobytes(), lambda: self._cholesky(theta))
        if L is None:
            return -math.inf
        if self._warp is None:
            v = solve_lower(L, self._z_plain)
            ll = -0.5 * float(v @ v) - float(np.sum(np.log(np.diag(L))))
        else:
            ll = self._warped(theta, L)
        return ll + lp if math.isfinite(ll) else -math.inf

    def _cholesky(self, theta: NDArray[np.float64]) -> NDArray[np.float64] | None:
        """The lower Cholesky factor of the covariance ``theta`` holds; None where it cannot be factorised.

        Each term's covariance is the one kept from the last call unless a block it reads has moved; the terms
        are summed in their order either way, so the sum has the same bits."""
        Xc: NDArray[np.float64] | None = None
        K: NDArray[np.float64] | None = None
        for term, memo, reads in zip(self._terms, self._term_memos, self._term_reads, strict=True):
            key = theta[reads].tobytes()
            if memo.key != key:
                if Xc is None:
                    Xc = self._warped_inputs(theta)
                memo.put(key, term.covariance(theta, Xc, self.n))
            if K is None:
                K = memo.value.copy()
            else:
                K += memo.value
        assert K is not None
        K[self._diagonal] += float(np.exp(theta[self._noise_at:self._noise_at + 1])[0])
        if self._metric_at is not None:
            K[self._diagonal] += self._metric.get(theta[self._metric_at:self._metric_at + 1].tobytes(),
                                                  lambda: self._metric_share(theta))
        try:
            return cholesky_with_jitter(K, max_tries=2)
        except np.linalg.LinAlgError:
            return None

    def _metric_share(self, theta: NDArray[np.float64]) -> NDArray[np.float64]:
        """:meth:`sweeper.search.gp.GPFit.noise_at`'s metric-unit share of each trial's noise variance, on the
        point fit's warp and scale, at ``theta``'s ``tau``."""
        assert self._noise_warp is not None and self._metric_at is not None
        tau = float(np.exp(theta[self._metric_at:self._metric_at + 1])[0])
        return metric_noise_share(self._noise_warp, self._noise_scale, self._y, tau)

    def _warped_inputs(self, theta: NDArray[np.float64]) -> NDArray[np.float64]:
        """The continuous columns after each one's Kumaraswamy CDF (:func:`sweeper.search.gp.warp_inputs`)."""
        if not self._inputs:
            return self._Xc
        Xc = self._Xc.copy()
        for at, position, u in self._inputs:
            a, b = np.exp(theta[at:at + 2])
            Xc[:, position] = kumaraswamy_cdf(u, float(a), float(b))
        return Xc

    def _warped(self, theta: NDArray[np.float64], L: NDArray[np.float64]) -> float:
        """:func:`sweeper.search.bounded.warped_log_likelihood` of the warp ``theta`` holds."""
        if self._one_sided:
            if self._fixed is None:
                return -math.inf
            s, z, log_jacobian = self._fixed
        else:
            warped = self._shapes.get(theta[self._shapes_at:self._warp_end].tobytes(),
                                      lambda: self._two_sided_values(theta))
            if warped is None:
                return -math.inf
            s, z, log_jacobian = warped
        return standardised_log_likelihood(z, s, L, log_jacobian)

    def _two_sided_values(self, theta: NDArray[np.float64]) -> tuple[float, NDArray[np.float64], float] | None:
        """The sd of ``w(y)``, the standardised values and ``sum log w'(y)`` of the two-sided warp with ``theta``'s
        shapes and ceiling; None where the likelihood is ``-inf``."""
        warp = self._warp
        assert warp is not None and self._shapes_at is not None
        a, b = (float(v) for v in np.exp(theta[self._shapes_at:self._shapes_at + 2]))
        top = None
        if self._ceiling_at is not None:
            assert warp.bounds.high is not None
            top = ceiling_top(self._y_max, warp.bounds.high, float(theta[self._ceiling_at]))
        g, log_jacobian = warp.with_shapes(a, b, top).forward_and_log_jacobian(self._y)
        standardised = standardise(g)
        return None if standardised is None else (*standardised, float(np.sum(log_jacobian)))


def _fixed_warp(warp: OutputWarp | None, y: NDArray[np.float64]) -> tuple[float, NDArray[np.float64], float] | None:
    """A one-sided warp's sd of ``w(y)``, the standardised values and ``sum log w'(y)``: no sampled shape
    changes them. None where the likelihood is ``-inf`` whatever ``theta``."""
    assert warp is not None
    g, log_jacobian = warp.forward_and_log_jacobian(y)
    standardised = standardise(g)
    if standardised is None:
        return None
    return *standardised, float(np.sum(log_jacobian))
