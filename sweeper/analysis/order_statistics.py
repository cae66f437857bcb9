"""Order-statistic kernels: moments of the maximum of ``n`` draws from an empirical sample.

The numerical core of :mod:`sweeper.analysis.expected_max`. Given ``N`` sorted scores, it
computes for every budget ``n = 1..n_max`` the expected maximum of ``n`` draws from the
empirical distribution (Dodge et al. 2019, section 3, eq. 8)::

    E[V*_n] = sum_i v_(i) * ((i / N)^n - ((i - 1) / N)^n)        (v sorted ascending)

and its second moment, with replacement (``F_j^n``) or without (``C(c_j, n) / C(N, n)``),
for the plug-in standard deviation: all ``N`` budgets at ``N = 10^6`` in under a second.

How the curve for every ``n = 1..N`` is computed without an ``N x N`` matrix. With
``u_1 < ... < u_k`` the distinct values, ``F_j`` the empirical CDF at ``u_j`` and
``w = u - u_k <= 0``, summation by parts gives::

    E[w*_n]   = -sum_{j<k} (w_{j+1} - w_j)     * F_j^n
    E[w*_n^2] =  sum_{j<k} (w_j^2 - w_{j+1}^2) * F_j^n

Both sums have non-negative coefficients adding up to ``range`` and ``range^2``
(``range = u_k - u_1``). Terms with ``F_j^n <= 1e-16`` are dropped, so the expected max
is off by at most ``1e-16 * range`` and its second moment by at most ``1e-16 * range^2``
(proof: the dropped coefficients sum to at most the total, each times at most 1e-16).
About ``37 N / n`` terms survive at budget ``n`` (``37 = -ln 1e-16``), so all budgets
together need ``O(37 N ln N)`` products rather than ``N^2``. The kept terms of a block
of budgets ``n0 <= n < 2 n0`` factor as ``F^(n0 + a S + b) = [F^n0 (F^S)^a] * [F^b]``,
so each block is one matrix product (BLAS, in calls small enough to stay on one
thread) instead of one ``exp`` per (n, value) pair. The powers are built by repeated
multiplication from ``F^n0`` and ``F^S``, computed as ``exp(n log1p(-(N - c) / N))``;
each weight then carries a relative rounding error of about ``(2 sqrt(n) + 80) eps``
(<= 3e-13 at ``n = 10^6``; measured: 1e-16 absolute against 30-digit arithmetic for
``N = 10^5``).

Sampling without replacement, ``P(max of n <= u_j) = C(c_j, n) / C(N, n)`` (``c_j`` the
number of scores ``<= u_j``) is evaluated with log-gamma, so each weight carries a
relative error of about ``eps * ln(N!)`` (1e-12 at ``N = 10^3``, 1e-9 at ``N = 10^6``).
With fewer than 2^15 distinct scores every kept (n, value) term costs one ``exp``; above,
``C(c, n) / C(N, n) = (N - d)! (N - n)! / (N! (N - n - d)!)`` with ``d = N - c`` makes
each block of budgets and values a Hankel product, computed by FFT
(:func:`_hankel_tiles`). NOTE: docs/decisions/0020-expected-max-kernels.md

References:
    Dodge, J., Gururangan, S., Card, D., Schwartz, R., & Smith, N. A. (2019). Show Your
    Work: Improved Reporting of Experimental Results. EMNLP-IJCNLP 2019, 2185-2194.
    https://aclanthology.org/D19-1224 (code: github.com/allenai/show-your-work).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

_TRUNCATION = 1e-16  # drop terms with F_j^n <= this; error <= _TRUNCATION * range
_LOG_TRUNCATION = float(np.log(_TRUNCATION))
_COLUMNS = 1 << 15  # surviving values per matrix-product chunk (keeps blocks in cache)
_ELEMENTS = 1 << 16  # (n, value) pairs per chunk without replacement
_DIRECT_MAX_N = 1 << 15  # without replacement, up to this many scores every kept term is evaluated
_HANKEL_MIN_ROOM = 1024  # Hankel tiles only where N - (n + d) >= this (curvature of ln (N - s)!)
_HANKEL_MIN_WIDTH = 32  # narrower tiles are evaluated term by term
_HANKEL_MIN_BUDGET = 8  # budgets below this are evaluated term by term
_HANKEL_MIN_BLOCK = 256  # budgets per block at least (blocks double otherwise, as the kept set halves)
_HANKEL_CURVATURE = 64  # tiles satisfy (b + w)^2 <= K (N - s): exp(chord - ln h) <= e^(K / 8)
_BLAS_CALL = 1 << 18  # multiply-adds per matrix product (single-threaded in OpenBLAS)


def max_moments(
    sorted_values: NDArray[np.float64], n_max: int, without_replacement: bool
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Expected max and plug-in std of ``n = 1..n_max`` draws from ascending ``sorted_values``.

    Ties are grouped into distinct values with multiplicities; the two moment series of the
    module docstring are summed by :func:`_powers_with_replacement` or
    :func:`_powers_without_replacement`. Returns ``(mean, std)``, each of shape ``(n_max,)``.
    """
    starts = np.flatnonzero(np.diff(sorted_values, prepend=-np.inf))  # first of each run of ties
    distinct = sorted_values[starts]  # (k,)
    counts = np.diff(starts, append=sorted_values.size)  # (k,) multiplicities
    top = distinct[-1]
    if distinct.size == 1:
        return np.full(n_max, top), np.zeros(n_max)
    w = distinct - top  # <= 0, so both moment series have non-negative coefficients
    coef = np.stack([w[1:] - w[:-1], w[:-1] ** 2 - w[1:] ** 2])  # (2, k-1)
    powers = _powers_without_replacement if without_replacement else _powers_with_replacement
    first, second = powers(counts, coef, n_max)
    mean_w = -first
    var = np.clip(second - mean_w**2, 0.0, None)
    # The exact curve never decreases; rounding (~eps * range) must not make it appear to.
    mean = np.clip(np.maximum.accumulate(top + mean_w), distinct[0], top)
    return mean, np.sqrt(var)


def _geometric_rows(
    start: NDArray[np.float64], ratio: NDArray[np.float64], rows: int
) -> NDArray[np.float64]:
    """Return ``start * ratio**i`` for ``i = 0..rows-1``, shape ``(rows, len(start))``."""
    out = np.empty((rows, start.size))
    out[0] = start
    for i in range(1, rows):  # row by row: far faster than np.cumprod(axis=0)
        np.multiply(out[i - 1], ratio, out=out[i])
    return out


def _add_products(
    acc: NDArray[np.float64], x: NDArray[np.float64], w: NDArray[np.float64]
) -> None:
    """Add ``x @ w.T`` to ``acc`` in BLAS calls of at most ``_BLAS_CALL`` multiply-adds.

    Small calls run on the calling thread (OpenBLAS threads only above 2^18): the work
    here is memory-bound, and threaded BLAS collapses on a busy machine without gaining
    anything on an idle one (NOTE: docs/decisions/0020-expected-max-kernels.md).
    """
    m, k = x.shape
    n = w.shape[0]
    rows = min(m, max(1, _BLAS_CALL // (n * 64)))
    cols = max(1, _BLAS_CALL // (n * rows))
    for r0 in range(0, m, rows):
        for c0 in range(0, k, cols):
            acc[r0 : r0 + rows] += x[r0 : r0 + rows, c0 : c0 + cols] @ w[:, c0 : c0 + cols].T


def _powers_with_replacement(
    counts: NDArray[np.int64], coef: NDArray[np.float64], n_max: int
) -> NDArray[np.float64]:
    """Return ``sum_j coef[r, j] * F_j^n`` for ``n = 1..n_max``, shape ``(r, n_max)``.

    ``F_j = cumsum(counts)[j] / N`` for ``j < k - 1`` (ascending); ``coef`` is
    ``(r, k - 1)`` and non-negative. Terms with ``F_j^n <= _TRUNCATION`` are dropped.
    """
    total = int(counts.sum())
    cum = np.cumsum(counts)[:-1]
    f = cum / total  # (k-1,) ascending
    log_f = np.log1p(-(total - cum) / total)  # accurate even for F close to 1
    out = np.zeros((coef.shape[0], n_max))
    n0 = 1
    while n0 <= n_max:
        n1 = min(2 * n0, n_max + 1)  # block n0 <= n < n1; F^n > tol^2: no subnormals
        first = int(np.searchsorted(log_f, _LOG_TRUNCATION / n0, side="right"))
        size = n1 - n0
        s = int(np.ceil(np.sqrt(size / 2)))  # n = n0 + a*s + b, 0 <= b < s, 0 <= a < a_len
        a_len = -(-size // s)
        acc = np.zeros((a_len, coef.shape[0] * s))
        for lo in range(first, f.size, _COLUMNS):
            hi = min(lo + _COLUMNS, f.size)
            lf = log_f[lo:hi]
            rows_a = _geometric_rows(np.exp(n0 * lf), np.exp(s * lf), a_len)  # F^(n0+a*s)
            rows_b = _geometric_rows(np.ones(hi - lo), f[lo:hi], s)  # F^b
            weighted = (coef[:, None, lo:hi] * rows_b[None]).reshape(-1, hi - lo)
            _add_products(acc, rows_a, weighted)  # acc += rows_a @ weighted.T, (a_len, r*s)
        block = acc.reshape(a_len, coef.shape[0], s).transpose(1, 0, 2).reshape(coef.shape[0], -1)
        out[:, n0 - 1 : n1 - 1] = block[:, :size]
        n0 = n1
    return out


def _powers_without_replacement(
    counts: NDArray[np.int64], coef: NDArray[np.float64], n_max: int
) -> NDArray[np.float64]:
    """As :func:`_powers_with_replacement` with ``C(c_j, n) / C(N, n)`` in place of ``F_j^n``.

    With fewer than ``_DIRECT_MAX_N`` distinct scores every kept term is evaluated
    (:class:`_Hypergeometric`); with more, the bulk goes through :func:`_hankel_tiles` and
    only the strips where ``c_j - n`` or ``N - n`` is small are evaluated term by term.
    """
    hyper = _Hypergeometric(counts, coef)
    if hyper.cum.size < _DIRECT_MAX_N:  # few distinct scores: few terms
        return hyper.direct(1, n_max + 1, 0)
    return _hankel_tiles(hyper, n_max)


class _Hypergeometric:
    """The kept terms ``coef[:, j] * C(c_j, n) / C(N, n)`` of a sorted sample, for any ``n`` and ``j`` range."""

    def __init__(self, counts: NDArray[np.int64], coef: NDArray[np.float64]) -> None:
        from scipy.special import gammaln  # scipy.special costs ~0.3 s to import

        self.total = int(counts.sum())
        self.cum = np.cumsum(counts)[:-1]  # c_j, ascending
        self.log_f = np.log1p(-(self.total - self.cum) / self.total)
        self.lg = gammaln(np.arange(self.total + 1, dtype=np.float64) + 1.0)  # lg[m] = ln(m!)
        # lg_pad[m + total + 1] = ln(m!), and +inf for m < 0 so that exp(-inf) = 0 there.
        self.lg_pad = np.concatenate([np.full(self.total + 1, np.inf), self.lg])
        self.coef = coef

    def first_kept(self, n0: int) -> int:
        """First ``j`` whose term can exceed ``_TRUNCATION`` for some ``n >= n0``.

        ``C(c, n) / C(N, n) <= (c / N)^n``: the same kept set as with replacement is safe.
        """
        return int(np.searchsorted(self.log_f, _LOG_TRUNCATION / n0, side="right"))

    def direct(self, n_lo: int, n_hi: int, j_lo: int, j_hi: int | None = None) -> NDArray[np.float64]:
        """``sum_j coef[:, j] C(c_j, n) / C(N, n)`` over kept ``j`` in ``[j_lo, j_hi)``, ``n`` in ``[n_lo, n_hi)``.

        One ``exp`` of log-gamma differences per kept (n, j) pair; returns ``(r, n_hi - n_lo)``.
        """
        total, lg, cum = self.total, self.lg, self.cum
        j_hi = cum.size if j_hi is None else j_hi
        a_j = lg[cum] - lg[total]  # (k-1,)
        out = np.zeros((self.coef.shape[0], n_hi - n_lo))
        n0 = n_lo
        while n0 < n_hi:
            n1 = min(2 * n0, n_hi)
            first = max(self.first_kept(n0), j_lo)
            width = j_hi - first
            if width > 0:
                step = max(1, _ELEMENTS // width)
                index = cum[first:j_hi] + (total + 1)  # (J,)
                for m0 in range(n0, n1, step):
                    n = np.arange(m0, min(m0 + step, n1))  # (b,)
                    log_g = self.lg_pad[index[None, :] - n[:, None]]  # (b, J): ln((c_j - n)!)
                    np.subtract(a_j[first:j_hi], log_g, out=log_g)
                    log_g += lg[total - n][:, None]
                    g = np.exp(log_g, out=log_g)  # C(c_j, n) / C(N, n)
                    out[:, m0 - n_lo : m0 - n_lo + n.size] = self.coef[:, first:j_hi] @ g.T
            n0 = n1
        return out


def _hankel_reach(room: int) -> int:
    """Largest tile size ``R = b + w - 1`` with ``R^2 <= K (N - s_max)``, ``N - s_max = room - R``.

    ``room = N - s_min + 1`` for the tile's smallest ``s = n + d``.
    """
    half = _HANKEL_CURVATURE // 2
    return math.isqrt(_HANKEL_CURVATURE * room + half * half) - half


def _hankel_tiles(hyper: _Hypergeometric, n_max: int) -> NDArray[np.float64]:
    """:func:`_powers_without_replacement` for large ``N``: Hankel tiles by FFT, the rest term by term.

    With ``d = N - c`` scores above a value and ``s = n + d``,
    ``C(c, n) / C(N, n) = (N - d)! (N - n)! / (N! (N - s)!)``: a factor of ``d``, a factor of
    ``n`` and ``h(s) = 1 / (N - s)!``, so over a tile of ``B`` budgets and ``W`` values the sum
    over ``d`` is a correlation with ``h``: one FFT of length ``~B + W`` instead of ``B W``
    exponentials. ``ln h`` is made flat by taking out its chord over the tile (the chord's
    slope moves into the ``d`` and ``n`` factors, each scaled to at most 1); what is left,
    ``exp(chord - ln h)``, lies in ``[1, e^8]`` because the tile is small enough,
    ``(B + W)^2 <= 64 (N - s_max)`` (``ln h`` has curvature ``<= 1 / (N - s)``, so the gap
    to the chord is at most ``(B + W)^2 / (8 (N - s_max))``). The FFT's rounding is then
    about ``e^8 eps log(B + W)``, ~1e-11, of the largest term of each budget; measured
    against term-by-term evaluation (``N = 5 10^4``): 2e-11 of the range, the size of the
    log-gamma error of the terms themselves (``eps ln N!``). Where ``N - s`` is small (the
    lowest scores at budgets below 8, every score at budgets within ``4096`` of ``N``) the
    curvature is too high and the terms are evaluated directly (below 8 as products).
    """
    from scipy import fft

    total, lg, cum = hyper.total, hyper.lg, hyper.cum
    r = hyper.coef.shape[0]
    dense = np.zeros((r, total + 1))  # dense[:, d] = coef of the value with N - c_j = d
    dense[:, total - cum] = hyper.coef
    out = np.zeros((r, n_max))

    def tile(n_lo: int, b: int, d_lo: int, w: int) -> None:
        x = dense[:, d_lo : d_lo + w]
        used = np.flatnonzero(x.any(axis=0))
        if used.size == 0:
            return
        s0 = n_lo + d_lo
        s = np.arange(s0, s0 + b + w - 1)
        ell = lg[total - s]  # ln (N - s)!
        slope = (ell[-1] - ell[0]) / (s.size - 1) if s.size > 1 else 0.0
        h = np.exp(ell[0] + slope * (s - s0) - ell)  # exp(chord - ln (N-s)!) in [1, e^8]
        d = np.arange(d_lo, d_lo + w)
        p = lg[total - d] - slope * (d - d_lo)
        top = p[used].max()
        x = x * np.exp(p - top)
        n = np.arange(n_lo, n_lo + b)
        y = np.exp(lg[total - n] - lg[total] - ell[0] - slope * (n - n_lo) + top)  # <= 1
        size = fft.next_fast_len(b + w - 1, real=True)
        z = fft.irfft(fft.rfft(x[:, ::-1], size) * fft.rfft(h, size), size)[:, w - 1 : w - 1 + b]
        out[:, n_lo - 1 : n_lo - 1 + b] += y * z

    # The smallest budgets reach c = n, too curved for tiles: C(c, n) / C(N, n) as the product
    # of (c - i) / (N - i), i < n, one budget after the other (relative rounding ~ n eps).
    n_small = min(n_max, _HANKEL_MIN_BUDGET - 1)
    g = np.ones(cum.size)
    for n in range(1, n_small + 1):
        g *= (cum - (n - 1.0)) / (total - (n - 1.0))  # 0 from n = c + 1 on
        out[:, n - 1] = hyper.coef @ g
    n0 = n_small + 1
    while n0 <= n_max:
        n1 = min(max(2 * n0, n0 + _HANKEL_MIN_BLOCK), n_max + 1)  # extra terms are cheaper than tiles
        first = hyper.first_kept(n0)
        m0 = n0
        while m0 < n1 and first < cum.size:
            if total - m0 < 4 * _HANKEL_MIN_ROOM:  # budgets close to N: term by term
                out[:, m0 - 1 :] = hyper.direct(m0, n_max + 1, first)
                return out
            d_hi = min(total - int(cum[first]), total - m0)  # largest kept d
            reach = _hankel_reach(total - m0)  # largest b + w - 1 of a tile at d = 1
            b = min(n1 - m0, max(reach // 2, reach + 1 - max(d_hi, _HANKEL_MIN_WIDTH)))
            d_lo = 1
            while d_lo <= d_hi:
                w = min(d_hi - d_lo + 1, _hankel_reach(total - m0 - d_lo + 1) - b + 1)
                if w < min(_HANKEL_MIN_WIDTH, d_hi - d_lo + 1) or \
                        total - (m0 + b - 1) - (d_lo + w - 1) < _HANKEL_MIN_ROOM:
                    break
                tile(m0, b, d_lo, w)
                d_lo += w
            if d_lo <= d_hi:  # the strip d >= d_lo, next to c = n: term by term
                j_hi = int(np.searchsorted(cum, total - d_lo, side="right"))  # j with d_j >= d_lo
                out[:, m0 - 1 : m0 - 1 + b] += hyper.direct(m0, m0 + b, first, j_hi)
            m0 += b
        n0 = n1
    return out


__all__ = ["max_moments"]
