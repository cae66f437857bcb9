"""Acquisition functions over a fitted GP: integrated variance reduction and batch UCB.

Everything here is vectorised numpy/scipy on the *standardised* scale of a :class:`sweeper.search.gp.GPFit`, and uses
only ``gp.kernel``, ``gp.kernel_diag``, ``gp.noise_variance``, ``gp.noise_varies`` and ``gp.predict`` (plus, where
present, ``gp.X`` and ``gp.cholesky``, to reuse the fit's factor at large n; and with a metric-unit noise, the
members' per-point noise of :func:`sweeper.search.conditioning.observation_noise`), so a GP can be mocked in tests.

IMPORTANT: the posterior covariance of a GP does not depend on the observed values ``y`` (beyond each result's noise,
for an analysis member whose noise is in the metric's units, decision 0086: there a pending point's and a pick's
noise is the one at its predicted value). Integrated variance reduction therefore conditions *exactly* on every point
in ``X_cond`` -- finished, failed and still-pending trials alike -- and a greedy batch is built by conditioning on
each pick in turn (rank-one updates), with no "hallucinated" outcomes needed. The UCB batch uses the same updates
for its exploration term, which is GP-BUCB's hallucination of the pending observations. IVR's optional weights
over the integration points (:func:`sweeper.search.slope_weights.slope_weights`) are computed once per batch from the
fit's mean on the finished results; the variance they weight is still conditioned exactly.

References:
    Seo, S., Wallat, M., Graepel, T., & Obermayer, K. (2000). Gaussian process regression:
    active data selection and test point rejection. IJCNN 2000 (ALC).
    Chen, P. (2014). Integrated mean squared error sequential design for Gaussian process
    models (IMSE/IVR).
    Bell, S. J., Kampman, O. P., Dodge, J., & Lawrence, N. D. (2022). Modeling the Machine
    Learning Multiverse. NeurIPS 2022, eqs. 6-7 (IVR as the multiverse search criterion).
    Srinivas, N., Krause, A., Kakade, S., & Seeger, M. (2010). Gaussian process
    optimization in the bandit setting: no regret and experimental design. ICML 2010 (UCB).
    Desautels, T., Krause, A., & Burdick, J. W. (2014). Parallelizing exploration-
    exploitation tradeoffs in Gaussian process bandit optimization. JMLR 15 (GP-BUCB).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from sweeper.search.conditioning import Conditioner, Noise

if TYPE_CHECKING:
    from sweeper.search.gp import GPFit

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class BatchSelection:
    """A greedily chosen batch of candidates.

    Attributes:
        indices: Row indices into ``X_cand`` in the order picked, shape ``(q,)``, distinct.
        values: Acquisition value of each pick at the time it was picked (conditioned on
            ``X_cond`` and the earlier picks), shape ``(q,)``.
    """

    indices: NDArray[np.intp]
    values: NDArray[np.float64]


def _as_points(X: NDArray[np.float64], d: int, name: str) -> NDArray[np.float64]:
    X = np.asarray(X, dtype=np.float64)
    if X.size == 0:
        return X.reshape(0, d)
    if X.ndim != 2 or X.shape[1] != d:
        raise ValueError(f"{name} must have shape (n, {d}); got shape {X.shape}")
    return X


def _check_batch(q: int, c: int) -> None:
    if not 1 <= q <= c:
        raise ValueError(f"batch size q must be in [1, {c}] (the number of candidates); got {q!r}")


def _ivr_from_cov(C: NDArray[np.float64], var: NDArray[np.float64], noise: Noise) -> NDArray[np.float64]:
    # IVR(x) = (1/m) sum_j cov(x_j, x)^2 / (var(x) + noise(x))         (m, c) -> (c,)
    ivr: NDArray[np.float64] = np.einsum("ij,ij->j", C, C) / (C.shape[0] * (var + noise))
    return ivr


def _prepare(gp: GPFit, X_cond: NDArray[np.float64], X_cand: NDArray[np.float64], X_mc: NDArray[np.float64], q: int,
             weights: NDArray[np.float64] | None = None) -> tuple[Conditioner, NDArray[np.float64]]:
    X_cand = np.asarray(X_cand, dtype=np.float64)
    if X_cand.ndim != 2 or X_cand.shape[0] < 1:
        raise ValueError(f"X_cand must have shape (c, d) with c >= 1; got shape {X_cand.shape}")
    d = X_cand.shape[1]
    X_cond = _as_points(X_cond, d, "X_cond")
    X_mc = _as_points(X_mc, d, "X_mc")
    if X_mc.shape[0] < 1:
        raise ValueError("X_mc needs at least one Monte Carlo integration point")
    cond = Conditioner(gp, X_cond, X_cand, q)
    B = cond.solve(gp.kernel(cond.X_cond, X_mc)) if X_cond.shape[0] else np.zeros((0, X_mc.shape[0]))
    C = gp.kernel(X_mc, X_cand)  # (m, c)
    if B.shape[0]:
        C -= B.T @ cond.A
    if weights is not None:
        # Row j scaled by sqrt(w_j): every squared covariance in the integral, and its rank-one updates, weighted.
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (X_mc.shape[0],) or not np.all(np.isfinite(w) & (w > 0)):
            raise ValueError(f"weights must be {X_mc.shape[0]} positive finite numbers, one per integration point")
        C *= np.sqrt(w / np.mean(w))[:, None]
    return cond, C


def integrated_variance_reduction(
    gp: GPFit,
    X_cond: NDArray[np.float64],
    X_cand: NDArray[np.float64],
    X_mc: NDArray[np.float64],
    weights: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """Reduction of the integrated posterior variance from one more noisy observation.

    ``IVR(x) = (1/m) sum_j cov_n(x_j, x)^2 / (var_n(x) + noise(x))``, the Monte Carlo
    estimate over ``X_mc`` of ``int [var_n(u) - var_{n+x}(u)] du`` on the unit cube, where
    ``cov_n`` is the posterior covariance given noisy observations at ``X_cond``
    (standardised scale). It depends on no ``y`` but through the noise. With ``weights`` (one per
    integration point, e.g. :func:`sweeper.search.slope_weights.slope_weights`) the integral is ``int w(u) [...] du``,
    the weights taken relative to their mean.

    Args:
        gp: Fitted GP (only its kernel and noise are used; the noise of each point as
            :func:`sweeper.search.conditioning.observation_noise` has it).
        X_cond: Points conditioned on (observed, failed, pending), shape ``(N, d)``;
            ``N`` may be 0 (the prior).
        X_cand: Candidates, shape ``(c, d)``.
        X_mc: Integration points, uniform in the unit cube, shape ``(m, d)``.
        weights: Positive weight of each integration point, shape ``(m,)``; None: all equal.

    Returns:
        IVR of each candidate, shape ``(c,)``, finite and ``>= 0``, in standardised
        variance units.

    Raises:
        ValueError: If shapes disagree or a weight is not positive and finite.
    """
    cond, C = _prepare(gp, X_cond, X_cand, X_mc, q=0, weights=weights)
    return _ivr_from_cov(C, cond.var, cond.noise)


def select_ivr_batch(
    gp: GPFit,
    X_cond: NDArray[np.float64],
    X_cand: NDArray[np.float64],
    X_mc: NDArray[np.float64],
    q: int,
    weights: NDArray[np.float64] | None = None,
) -> BatchSelection:
    """Choose ``q`` distinct candidates greedily by integrated variance reduction.

    Each pick is the argmax of :func:`integrated_variance_reduction` given ``X_cond``
    and the earlier picks; the (m, c) cross-covariance and the candidate variances are
    updated by rank-one conditioning instead of refactorising, so a batch costs one
    Cholesky plus ``O(q m c)``.

    Args:
        gp: Fitted GP.
        X_cond: Points conditioned on, shape ``(N, d)``, ``N >= 0``.
        X_cand: Candidates, shape ``(c, d)``.
        X_mc: Integration points, shape ``(m, d)``.
        q: Batch size, ``1 <= q <= c``.
        weights: Weight of each integration point (:func:`integrated_variance_reduction`); None: equal.

    Returns:
        The picks and each pick's IVR at the time it was picked.

    Raises:
        ValueError: If shapes disagree or ``q`` is out of range.
    """
    c = np.asarray(X_cand).shape[0]
    _check_batch(q, c)
    cond, C = _prepare(gp, X_cond, X_cand, X_mc, q, weights)
    return _greedy_ivr([(cond, C, 1.0)], c, q)


def select_mixture_ivr_batch(
    members: Sequence[GPFit],
    X_cond: NDArray[np.float64],
    X_cand: NDArray[np.float64],
    X_mc: NDArray[np.float64] | Sequence[NDArray[np.float64]],
    q: int,
    weights: Sequence[NDArray[np.float64]],
    shares: Sequence[float] | None = None,
) -> BatchSelection:
    """:func:`select_ivr_batch` for a mixture of GPs: each pick maximises the members' weighted mean IVR.

    IVR integrated over a mixture of models (posterior draws, and any fit given a share): member ``i``'s
    IVR, ``int weights[i](u) [var_n(u) - var_{n+x}(u)] du`` with the weights as given (not relative to their
    mean, so a member whose variance means more of the metric counts more), enters with ``shares[i]``
    (None: ``1 / len(members)`` each). Each member conditions on ``X_cond`` and the earlier picks exactly.
    ``X_mc`` is one integration set for every member, or one per member (its weights on its own set).
    NOTE: docs/decisions/0070-ivr-over-the-bounded-mixture.md, docs/decisions/0071-mixture-ivr-keeps-the-raw-fit.md

    Raises:
        ValueError: If shapes disagree, ``q`` is out of range, there is no member, or a member's weights
            (one positive finite number per integration point) or share (positive, finite) are not.
    """
    mcs = [X_mc] * len(members) if isinstance(X_mc, np.ndarray) else list(X_mc)
    if len(members) < 1 or len(weights) != len(members) or len(mcs) != len(members):
        raise ValueError(f"need one weight vector per member (and one integration set, if a list), and a member; "
                         f"got {len(members)}, {len(weights)} and {len(mcs)}")
    shares = [1.0 / len(members)] * len(members) if shares is None else [float(x) for x in shares]
    if len(shares) != len(members) or not all(np.isfinite(x) and x > 0 for x in shares):
        raise ValueError(f"need one positive finite share per member; got {shares} for {len(members)} members")
    c = np.asarray(X_cand).shape[0]
    _check_batch(q, c)
    parts = []
    for member, w, share, points in zip(members, weights, shares, mcs, strict=True):
        cond, C = _prepare(member, X_cond, X_cand, points, q, w)
        parts.append((cond, C, float(np.mean(w)) * share))
    return _greedy_ivr(parts, c, q)


def _greedy_ivr(parts: Sequence[tuple[Conditioner, NDArray[np.float64], float]], c: int, q: int) -> BatchSelection:
    """``q`` picks, each the argmax of ``sum(scale * IVR)`` over the ``(conditioner, C, scale)`` parts.

    After each pick every part conditions on it: the (m, c) cross-covariance and the candidate
    variances by rank-one updates instead of refactorising, so a batch costs one Cholesky per
    part plus ``O(q m c)`` each.
    """
    taken = np.zeros(c, dtype=bool)
    indices = np.empty(q, dtype=np.intp)
    values = np.empty(q)
    for k in range(q):
        ivr = np.zeros(c)
        for cond, C, scale in parts:
            ivr += scale * _ivr_from_cov(C, cond.var, cond.noise)
        ivr[taken] = -np.inf
        p = int(np.argmax(ivr))
        indices[k], values[k], taken[p] = p, ivr[p], True
        if k + 1 < q:
            for cond, C, _ in parts:
                h = C[:, p].copy()  # cov_k(X_mc, x_p), (m,)
                g, s = cond.condition_on(p)  # cov_k(X_cand, x_p), (c,)
                C -= np.outer(h, g / s)  # cov_{k+1}(X_mc, X_cand)
    log.debug("IVR batch: %s (values %s)", indices.tolist(), values.tolist())
    return BatchSelection(indices=indices, values=values)


def select_ucb_batch(
    gp: GPFit,
    X_cond: NDArray[np.float64],
    X_cand: NDArray[np.float64],
    q: int,
    beta: float,
    maximize: bool = True,
) -> BatchSelection:
    """Choose ``q`` distinct candidates greedily by GP-BUCB.

    The score is ``+-mean(x) + beta * sd_k(x)`` on the standardised scale: ``mean`` is
    the posterior mean of ``gp`` (fitted on the observed data only), and ``sd_k`` is the
    latent posterior sd given ``X_cond`` (observed, failed, pending) and the ``k``
    earlier picks, whose outcomes are "hallucinated" -- only the variance is updated.
    ``beta`` multiplies the sd directly (it is Srinivas et al.'s ``beta_t ** 0.5``).

    Args:
        gp: Fitted GP.
        X_cond: Points conditioned on, shape ``(N, d)``, ``N >= 0``.
        X_cand: Candidates, shape ``(c, d)``.
        q: Batch size, ``1 <= q <= c``.
        beta: Exploration weight, ``>= 0``.
        maximize: Whether larger ``y`` is better. With ``False`` the picks minimise
            ``mean - beta * sd``.

    Returns:
        The picks and their scores in the maximisation sense: ``mean + beta * sd`` when
        maximising, ``-(mean - beta * sd)`` when minimising (standardised units).

    Raises:
        ValueError: If shapes disagree, ``q`` is out of range or ``beta < 0``.
    """
    X_cand = np.asarray(X_cand, dtype=np.float64)
    if X_cand.ndim != 2 or X_cand.shape[0] < 1:
        raise ValueError(f"X_cand must have shape (c, d) with c >= 1; got shape {X_cand.shape}")
    c, d = X_cand.shape
    _check_batch(q, c)
    if not beta >= 0.0:
        raise ValueError(f"beta must be >= 0; got {beta!r}")
    X_cond = _as_points(X_cond, d, "X_cond")
    # On the GP's own (warped, standardised) scale: the warp is monotone, so the order is the metric's.
    mean, _ = gp.predict_warped(X_cand)
    mean_std = (np.asarray(mean, dtype=np.float64) - gp.y_mean) / gp.y_std
    sign = 1.0 if maximize else -1.0
    cond = Conditioner(gp, X_cond, X_cand, q)
    taken = np.zeros(c, dtype=bool)
    indices = np.empty(q, dtype=np.intp)
    values = np.empty(q)
    for k in range(q):
        score = sign * mean_std + beta * np.sqrt(cond.var)
        score[taken] = -np.inf
        p = int(np.argmax(score))
        indices[k], values[k], taken[p] = p, score[p], True
        if k + 1 < q:
            cond.condition_on(p)
    log.debug("UCB batch: %s (scores %s)", indices.tolist(), values.tolist())
    return BatchSelection(indices=indices, values=values)
