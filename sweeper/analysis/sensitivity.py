"""Sobol' sensitivity indices of a function on the unit cube, by Monte Carlo.

For ``Y = f(X)`` with ``X`` uniform on ``[0, 1]^d``, the first-order (main) index of
input ``i`` is ``S_i = Var[E[Y | X_i]] / Var[Y]`` (the share of the variance that
``X_i`` explains alone) and the total index is ``T_i = E[Var[Y | X_~i]] / Var[Y]`` (the
share that involves ``X_i`` in any way, interactions included) (Sobol' 1993). The
multiverse analysis computes both on a GP posterior mean over the decision space (Bell
et al. 2022, Fig. 3 and 6).

Design and estimators (Saltelli et al. 2010, section 3 and Table 2). Each repeat draws
two independent ``N x d`` matrices ``A`` and ``B`` of i.i.d. uniform points, and builds
``A_B^(i)``: ``A`` with its column ``i`` taken from ``B``. With ``f_A = f(A)`` etc.,
centred by ``c = mean([f_A, f_B])``::

    V       = var([f_A, f_B])                                  (2N points, ddof=0)
    S_i * V = mean((f_B - c) * (f_A_B^(i) - f_A))              (Table 2 (b), Saltelli 2010)
    T_i * V = mean((f_A - f_A_B^(i))^2) / 2                    (Table 2 (f), Jansen 1999)

Centring changes neither expectation (up to ``O(1/N)``) but removes the term
``mean(f) * mean(f_A_B^(i) - f_A)`` whose variance grows with ``mean(f)^2``: without it
``f = 5 x_1 + 100`` would need thousands of times more points than ``f = 5 x_1``. SALib
standardises its outputs for the same reason. The Jansen estimator is shift-invariant.
A repeat costs ``(d + 2) N`` evaluations of ``f``; ``repeats`` independent repeats give
the mean estimates and their spread (``main_sd``, ``total_sd``); the standard error of
the mean is ``sd / sqrt(repeats)``. The per-repeat estimates are not clipped (clipping
would bias the mean over repeats), so the raw means (``main_raw``, ``total_raw``) can
cross the bounds every index obeys: a null index comes out slightly negative, an input
that does everything slightly above 1, an input without interactions with ``S_i``
slightly above ``T_i``. The values shown (``main``, ``total``) obey
``0 <= main <= total <= 1``; :func:`clip_indices` states the rule, and ``flags`` says in
words, per input, what was moved, by how much and whether that is within Monte Carlo
noise.

Categorical dimensions need no special case. The search space codes a categorical
dimension with ``k`` levels as a unit-cube column whose level is ``floor(u * k)``, so
uniform ``u`` already gives each level probability ``1 / k``, and swapping the column
of ``A`` for that of ``B`` redraws the level: the indices are those of ``f`` with its
categories drawn uniformly, as for any other input.

``f`` is called on stacked rows, at most ``batch_rows`` at a time
(:mod:`sweeper.analysis.sobol_design`).

References:
    Sobol', I. M. (1993). Sensitivity estimates for nonlinear mathematical models.
    Math. Model. Comput. Exp. 1(4), 407-414.
    Jansen, M. J. W. (1999). Analysis of variance designs for model output. Comput.
    Phys. Commun. 117(1-2), 35-43.
    Saltelli, A., Annoni, P., Azzini, I., Campolongo, F., Ratto, M., & Tarantola, S.
    (2010). Variance based sensitivity analysis of model output. Design and estimator
    for the total sensitivity index. Comput. Phys. Commun. 181(2), 259-270.
    Bell, S. J., Kampman, O. P., Dodge, J., & Lawrence, N. D. (2022). Modeling the
    Machine Learning Multiverse. NeurIPS 2022.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sweeper.analysis.sobol_design import check_int, check_names, evaluate_stacked
from sweeper.search.design import Seed, as_generator

log = logging.getLogger(__name__)

# A repeat whose output variance is at most (this * max |f|)^2 is constant up to rounding
# (|f - mean f| within a few dozen ulps of f): its indices would be noise, so they are 0.
_FLAT = 64 * np.finfo(np.float64).eps


@dataclass(frozen=True, eq=False)
class SobolIndices:
    """First-order and total Sobol' indices, averaged over independent repeats.

    ``eq=False``: the generated ``__eq__`` would compare arrays elementwise and fail.

    Attributes:
        names: Input names, one per unit-cube column, length ``d``.
        main: First-order indices ``S_i`` as shown: ``main_raw`` put inside
            ``0 <= main <= total <= 1`` by :func:`clip_indices`, shape ``(d,)``.
        total: Total indices ``T_i`` as shown, likewise, shape ``(d,)``.
        main_sd: Standard deviation (ddof=1) of the ``S_i`` estimates across repeats,
            shape ``(d,)``; zeros if ``repeats == 1``.
        total_sd: The same for ``T_i``, shape ``(d,)``.
        n_base: Rows ``N`` of each base matrix ``A`` and ``B``.
        repeats: Number of independent ``(A, B)`` pairs.
        variance: Mean over repeats of the estimated ``Var[f]`` (in ``f``'s units
            squared); 0 when ``f`` is constant.
        main_raw: ``S_i`` estimates, mean over repeats, unclipped, shape ``(d,)``.
        total_raw: ``T_i`` estimates, mean over repeats, unclipped, shape ``(d,)``.
        flags: Per input, ``""`` where ``main == main_raw`` and ``total == total_raw``,
            else what :func:`clip_indices` moved, in words.
    """

    names: tuple[str, ...]
    main: NDArray[np.float64]
    total: NDArray[np.float64]
    main_sd: NDArray[np.float64]
    total_sd: NDArray[np.float64]
    n_base: int
    repeats: int
    variance: float
    main_raw: NDArray[np.float64]
    total_raw: NDArray[np.float64]
    flags: tuple[str, ...]

    def as_dict(self) -> dict[str, tuple[float, float]]:
        """Return ``{name: (main, total)}`` (the values shown) as plain floats, in input order."""
        return {
            name: (float(m), float(t)) for name, m, t in zip(self.names, self.main, self.total, strict=True)
        }

    def to_rows(self) -> list[dict[str, float | str]]:
        """Return one row per input: ``name``, ``main``, ``main_sd``, ``total``, ``total_sd``,
        ``main_raw``, ``total_raw``, ``flag``.

        ``main`` and ``total`` are the values shown (``0 <= main <= total <= 1``),
        ``main_raw`` and ``total_raw`` the unclipped estimates, ``flag`` the words saying
        what was moved (``""`` when nothing was). The rows hold plain ``str`` and
        ``float`` values, ready for ``csv.DictWriter``, ``json.dumps`` or
        ``pandas.DataFrame``.
        """
        return [
            {
                "name": self.names[i],
                "main": float(self.main[i]),
                "main_sd": float(self.main_sd[i]),
                "total": float(self.total[i]),
                "total_sd": float(self.total_sd[i]),
                "main_raw": float(self.main_raw[i]),
                "total_raw": float(self.total_raw[i]),
                "flag": self.flags[i],
            }
            for i in range(len(self.names))
        ]


def _judged(what: str, excess: float, sd: float, repeats: int) -> str:
    """``what`` crossed by ``excess``, judged against the standard error ``sd / sqrt(repeats)``."""
    head = f"{what} by {excess:.2g}"
    if repeats < 2:
        return f"{head} (one repeat: no sd to judge it by)"
    se = sd / math.sqrt(repeats)
    k = excess / se if se > 0 else math.inf
    why = f"{k:.1f} standard errors; sd {sd:.2g} over {repeats} repeats"
    if k <= 3.0:
        return f"{head} ({why}): Monte Carlo noise"
    return f"{head} ({why}): more than Monte Carlo noise, raise n_base or repeats"


def clip_indices(
    main: ArrayLike,
    total: ArrayLike,
    main_sd: ArrayLike,
    total_sd: ArrayLike,
    *,
    repeats: int,
    diff_sd: ArrayLike | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64], tuple[str, ...]]:
    """Put raw Sobol' estimates inside ``0 <= main <= total <= 1`` and say what moved.

    Every true pair of indices obeys ``0 <= S_i <= T_i <= 1``; Monte Carlo estimates
    need not. The rule, per input:

    1. each of ``main`` and ``total`` is clipped into ``[0, 1]``;
    2. if then ``main > total``, both are shown as one value: their mean weighted by
       ``1 / sd^2`` (the value closest to both that obeys ``main <= total``, trusting
       the less noisy estimate more; the plain mean when both sds are 0, the
       estimate with sd 0 when only one is). It lies between them, so inside
       ``[0, 1]``. Raising ``total`` to ``main`` instead would let the noisier
       estimator (the main effect's, usually) move the more precise one.

    Each move is flagged in words, with the distance and the sd: ``"main above 1 by
    0.0021 (0.2 standard errors; sd 0.038 over 10 repeats): Monte Carlo noise"``. A
    crossing within 3 standard errors of the mean (``sd / sqrt(repeats)``) is called
    Monte Carlo noise (3, not 2: the sd itself comes from few repeats, and a true index
    of exactly 0 or 1, or ``S_i == T_i``, is common); a larger one is not, and the flag
    says to raise ``n_base`` or ``repeats`` (the ratio estimators are also biased by
    ``O(1/N)``). With one repeat there is no sd, and the flag says so.

    Args:
        main, total: ``(d,)`` raw estimates (means over repeats).
        main_sd, total_sd: ``(d,)`` their sd across repeats (ddof=1; zeros for one repeat).
        repeats: Number of repeats the means and sds come from, ``>= 1``.
        diff_sd: ``(d,)`` sd across repeats of ``main - total``, used to judge
            ``main > total``; default ``sqrt(main_sd^2 + total_sd^2)``.

    Returns:
        ``(main, total, flags)``: the values shown, as new read-only arrays, and one
        string per input, ``""`` where nothing moved, else the moves joined by ``"; "``.

    Example:
        >>> m, t, flags = clip_indices([1.0021, 0.45, -0.001], [1.0019, 0.44, 0.0],
        ...                            [0.038, 0.03, 0.002], [0.01, 0.01, 0.001], repeats=10)
        >>> m.round(3).tolist(), t.round(3).tolist()
        ([1.0, 0.441, 0.0], [1.0, 0.441, 0.0])
        >>> flags[2]
        'main below 0 by 0.001 (1.6 standard errors; sd 0.002 over 10 repeats): Monte Carlo noise'
    """
    repeats = check_int("repeats", repeats, 1)
    raw_m, raw_t, m_sd, t_sd, gap_sd = _index_vectors(main, total, main_sd, total_sd, diff_sd)
    m, t = np.clip(raw_m, 0.0, 1.0), np.clip(raw_t, 0.0, 1.0)
    flags = []
    for i in range(raw_m.shape[0]):
        said = _out_of_range(raw_m[i], raw_t[i], m_sd[i], t_sd[i], repeats)
        if m[i] > t[i]:
            said.append(_judged("main above total", m[i] - t[i], gap_sd[i], repeats))
            pooled = _pooled(m[i], t[i], m_sd[i], t_sd[i])
            m[i] = t[i] = pooled
            said[-1] += f"; both shown as their sd-weighted mean {pooled:.3f}"
        flags.append("; ".join(said))
    for arr in (m, t):
        arr.setflags(write=False)
    return m, t, tuple(flags)


def _index_vectors(main: ArrayLike, total: ArrayLike, main_sd: ArrayLike, total_sd: ArrayLike,
                   diff_sd: ArrayLike | None) -> tuple[NDArray[np.float64], ...]:
    """:func:`clip_indices`' arguments as ``(d,)`` float vectors (copies), ``diff_sd`` defaulted.

    Raises:
        ValueError: The vectors differ in length.
    """
    raw_m, raw_t, m_sd, t_sd = (
        np.array(v, dtype=np.float64).reshape(-1) for v in (main, total, main_sd, total_sd)
    )
    d = raw_m.shape[0]
    if not raw_t.shape == m_sd.shape == t_sd.shape == (d,):
        raise ValueError(
            f"main, total, main_sd and total_sd must have the same length; got "
            f"{raw_m.shape[0]}, {raw_t.shape[0]}, {m_sd.shape[0]}, {t_sd.shape[0]}"
        )
    gap_sd = (
        np.hypot(m_sd, t_sd) if diff_sd is None else np.array(diff_sd, dtype=np.float64).reshape(-1)
    )
    if gap_sd.shape != (d,):
        raise ValueError(f"diff_sd must have length {d}; got {gap_sd.shape[0]}")
    return raw_m, raw_t, m_sd, t_sd, gap_sd


def _out_of_range(raw_m: float, raw_t: float, m_sd: float, t_sd: float, repeats: int) -> list[str]:
    """Step 1 of :func:`clip_indices` for one input: the flags of a raw index below 0 or above 1."""
    said = []
    for what, raw, sd in (("main", raw_m, m_sd), ("total", raw_t, t_sd)):
        if raw < 0.0:
            said.append(_judged(f"{what} below 0", -raw, sd, repeats))
        elif raw > 1.0:
            said.append(_judged(f"{what} above 1", raw - 1.0, sd, repeats))
    return said


def _pooled(m: float, t: float, m_sd: float, t_sd: float) -> float:
    """Step 2 of :func:`clip_indices`: ``main > total`` shown as one value, their mean weighted by ``1 / sd^2``."""
    if m_sd > 0 and t_sd > 0:
        w_m, w_t = 1.0 / m_sd**2, 1.0 / t_sd**2
        pooled = (w_m * m + w_t * t) / (w_m + w_t)
    elif m_sd == t_sd:  # both 0
        pooled = 0.5 * (m + t)
    else:
        pooled = m if m_sd == 0 else t
    return min(max(pooled, t), m)  # between them, whatever the rounding


def sobol_indices(
    f: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    d: int,
    *,
    names: Sequence[str] | None = None,
    n_base: int = 2048,
    repeats: int = 10,
    seed: Seed = 0,
    batch_rows: int = 65536,
) -> SobolIndices:
    """Estimate first-order and total Sobol' indices of ``f`` on ``[0, 1]^d``.

    Uses the ``A, B, A_B^(i)`` design and the estimators of Saltelli et al. (2010,
    Table 2 (b) for ``S_i``, (f) for ``T_i`` after Jansen 1999); see the module
    docstring. Categorical columns coded by cells (level ``floor(u * k)``) need nothing
    special: uniform ``u`` already draws their levels uniformly.

    Args:
        f: Vectorised function, ``(m, d)`` array of points in ``[0, 1)^d`` to ``(m,)``
            values (``(m, 1)`` is accepted, e.g. a GP's predicted mean); must return
            finite values.
        d: Dimension, ``d >= 1``.
        names: Input names, ``d`` distinct strings; default ``x0 .. x{d-1}``.
        n_base: Rows ``N`` of each base matrix, ``N >= 2``. Cost: ``repeats * (d + 2) *
            N`` evaluations of ``f``; the Monte Carlo error shrinks like ``1 / sqrt(N)``.
        repeats: Independent ``(A, B)`` pairs, ``>= 1``; their spread gives ``main_sd``
            and ``total_sd`` (zeros if 1).
        seed: See :func:`sweeper.search.design.as_generator`; a ``Generator`` is advanced, not
            copied. Repeat ``r`` uses the same points whatever ``repeats`` is.
        batch_rows: Most rows passed to ``f`` in one call, ``>= 1``. All repeats are
            stacked and then cut into ``ceil(repeats * (d + 2) * N / batch_rows)`` calls.

    Returns:
        A :class:`SobolIndices`. A repeat whose estimated ``Var[f]`` is 0, not finite,
        or at most ``(64 eps * max |f|)^2`` (constant up to rounding) gets
        all-zero indices instead of NaN or noise; a constant ``f`` thus gives all zeros.
        ``main`` and ``total`` are the raw means put inside ``0 <= main <= total <= 1``
        by :func:`clip_indices`; ``main_raw``, ``total_raw`` keep the means as estimated
        and ``flags`` says what was moved.

    Raises:
        ValueError: If ``d``, ``n_base``, ``repeats`` or ``batch_rows`` is not an int in
            range, ``names`` is not ``d`` distinct strings, or ``f`` returns the wrong
            shape or non-finite values.
        TypeError: If ``seed`` is of an unsupported type.

    Example:
        >>> s = sobol_indices(lambda x: x[:, 0] + 0.1 * x[:, 1], 2, n_base=1024, repeats=4)
        >>> s.main.round(2).tolist(), s.total.round(2).tolist()
        ([0.99, 0.01], [0.99, 0.01])
    """
    d = check_int("d", d, 1)
    n_base = check_int("n_base", n_base, 2)
    repeats = check_int("repeats", repeats, 1)
    batch_rows = check_int("batch_rows", batch_rows, 1)
    names_t = check_names(names, d)
    rng = as_generator(seed)

    ab = rng.random((repeats, 2, n_base, d))  # repeat r: A = ab[r, 0], B = ab[r, 1]
    y = evaluate_stacked(f, ab[:, 0], ab[:, 1], batch_rows)  # (R, d + 2, N)
    main, total, var, ok = _repeat_estimates(y)
    return _averaged(names_t, main, total, var, ok, n_base)


def _repeat_estimates(
    y: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    """Each repeat's ``(main, total)`` estimates, each ``(R, d)``, its ``Var[f]`` and whether it is usable, ``(R,)``.

    ``y``: ``f`` on the stacked design, shape ``(R, d + 2, N)`` (blocks ``A``, ``B``, ``A_B^(i)``).
    A repeat with constant or overflowing ``f`` (see ``_FLAT``) gets all-zero indices.
    """
    repeats = y.shape[0]
    y_a, y_b, y_ab = y[:, 0], y[:, 1], y[:, 2:]  # (R, N), (R, N), (R, d, N)

    both = y[:, :2].reshape(repeats, -1)  # (R, 2N)
    centre = both.mean(axis=1, keepdims=True)  # (R, 1)
    with np.errstate(over="ignore", invalid="ignore"):
        var = both.var(axis=1)  # (R,)
        scale = np.abs(both).max(axis=1)
        ok = np.isfinite(var) & (var > (_FLAT * scale) ** 2)
        safe = np.where(ok, var, 1.0)[:, None]  # (R, 1)
        diff = y_ab - y_a[:, None, :]  # (R, d, N): f(A_B^i) - f(A)
        main = np.mean((y_b - centre)[:, None, :] * diff, axis=2) / safe  # Table 2 (b)
        total = 0.5 * np.mean(diff**2, axis=2) / safe  # Table 2 (f), Jansen 1999
    main = np.where(ok[:, None], main, 0.0)  # (R, d)
    total = np.where(ok[:, None], total, 0.0)
    if not ok.all():
        log.info(
            "sobol_indices: %d of %d repeat(s) have constant or overflowing f; indices set to 0",
            int((~ok).sum()),
            repeats,
        )
    return main, total, var, ok


def _averaged(names: tuple[str, ...], main: NDArray[np.float64], total: NDArray[np.float64],
              var: NDArray[np.float64], ok: NDArray[np.bool_], n_base: int) -> SobolIndices:
    """The :class:`SobolIndices` of the per-repeat estimates: their means, sds and the values shown."""
    repeats, d = main.shape

    def sd(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return x.std(axis=0, ddof=1) if repeats > 1 else np.zeros(d)

    main_raw, total_raw = main.mean(axis=0), total.mean(axis=0)
    main_sd, total_sd = sd(main), sd(total)
    shown_main, shown_total, flags = clip_indices(
        main_raw, total_raw, main_sd, total_sd, repeats=repeats, diff_sd=sd(main - total)
    )
    result = SobolIndices(
        names=names,
        main=shown_main,
        total=shown_total,
        main_sd=main_sd,
        total_sd=total_sd,
        n_base=n_base,
        repeats=repeats,
        variance=float(np.where(ok | ~np.isfinite(var), var, 0.0).mean()),
        main_raw=main_raw,
        total_raw=total_raw,
        flags=flags,
    )
    for arr in (result.main_raw, result.total_raw, result.main_sd, result.total_sd):
        arr.setflags(write=False)
    return result


__all__ = ["SobolIndices", "clip_indices", "sobol_indices"]
