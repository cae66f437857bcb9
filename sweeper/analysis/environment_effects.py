"""Does an environment condition move a score? Paired tests and rank agreement of runs.

Crane (2018) reran question-answering models under changed *environment conditions*
(seed, threads, GPU vs CPU, library versions) and reported, per pair of conditions, the
spread of the scores, paired significance tests and the rank agreement of the runs
(Kendall's tau, Spearman's rho; his Table 9). Here the two score lists must be *paired*:
run ``i`` under condition ``a`` and run ``i`` under condition ``b`` share everything but the
condition (same seed, same data order, same hyperparameters).

Tests used:
    - Wilcoxon signed-rank on the differences ``a - b`` (``scipy.stats.wilcoxon``). The
      default ``zero_method="wilcox"`` drops zero differences, Wilcoxon's original
      treatment and R's ``wilcox.test`` default: a pair that the condition did not change
      at all (common when both are bitwise deterministic) says nothing about the
      *direction* of a change. ``"pratt"`` ranks the zeros and then drops them (more
      conservative when zeros are many); ``"zsplit"`` splits their ranks between signs.
      If every difference is zero there is nothing to rank: ``p = 1.0`` with a note.
      The p-value follows scipy's ``method="auto"``: exact for up to 50 pairs without
      ties or zeros; with ties or zeros, an exhaustive (deterministic) sign-flip
      permutation test for up to 13 pairs (up to a few seconds at 13), else the normal
      approximation with continuity correction. ``wilcoxon_method`` overrides it.
    - Paired t-test (``scipy.stats.ttest_rel``), which assumes normal differences.
    - Kendall's tau-b and Spearman's rho between the two score lists: do the runs that
      score high under ``a`` also score high under ``b``?

Duplicated pairs count once: given each pair's replicate key (its seed), a pair whose two
scores repeat another pair's bit-identically under the same seed is the same observation
again (e.g. ``env.deterministic`` true/false on CPU), and counting it would shrink every
p-value (Spearman p = 0 from 8 seeds counted twice). With fewer than
:data:`MIN_DISTINCT_PAIRS` distinct pairs no test is run: the p-values are NaN and the
notes say "too few distinct pairs".

References:
    Crane, M. (2018). Questionable Answers in Question Answering Research:
    Reproducibility and Variability of Published Results. TACL 6, 241-252.
    https://aclanthology.org/Q18-1018
    Wilcoxon, F. (1945). Individual comparisons by ranking methods. Biometrics Bulletin
    1(6), 80-83. Pratt, J. W. (1959). Remarks on zeros and ties in the Wilcoxon signed
    rank procedures. JASA 54(287), 655-667.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

log = logging.getLogger(__name__)

#: Fewest distinct pairs for any p-value: with 2, ranks always agree (|rho| = 1) and a paired
#: test has 1 degree of freedom, so a p-value would only restate the two pairs.
MIN_DISTINCT_PAIRS = 3


@dataclass(frozen=True)
class ConditionSummary:
    """Spread of one condition's scores.

    Attributes:
        name: The condition's label.
        n: Number of scores.
        mean: Mean score.
        sd: Sample standard deviation (``ddof=1``); NaN when ``n == 1``.
        min: Lowest score.
        max: Highest score.
        range: ``max - min``.
    """

    name: str
    n: int
    mean: float
    sd: float
    min: float
    max: float
    range: float


@dataclass(frozen=True)
class ConditionComparison:
    """Paired comparison of two environment conditions (Crane 2018, Table 9).

    Attributes:
        names: Labels of the two conditions ``(a, b)``.
        n: Number of distinct pairs (the tests' sample size).
        summary_a: Spread of condition ``a``'s scores.
        summary_b: Spread of condition ``b``'s scores.
        mean_difference: Mean of ``a - b``.
        n_nonzero: Pairs whose scores differ at all.
        wilcoxon_statistic: scipy's Wilcoxon statistic (NaN if all differences are zero).
        wilcoxon_p: Its p-value.
        zero_method: How zero differences were treated (see the module docstring).
        t_statistic: Paired t statistic (NaN if all differences are zero).
        t_p: Its p-value.
        kendall_tau: Kendall's tau-b between the two score lists (NaN for constant input).
        kendall_p: Its p-value.
        spearman_rho: Spearman's rho between the two score lists (NaN for constant input).
        spearman_p: Its p-value.
        alternative: The tests' alternative hypothesis.
        notes: Warnings and special cases met on the way, in words.
        n_total: Pairs before duplicated pairs were counted once (= ``n`` without ``keys``).
    """

    names: tuple[str, str]
    n: int
    summary_a: ConditionSummary
    summary_b: ConditionSummary
    mean_difference: float
    n_nonzero: int
    wilcoxon_statistic: float
    wilcoxon_p: float
    zero_method: str
    t_statistic: float
    t_p: float
    kendall_tau: float
    kendall_p: float
    spearman_rho: float
    spearman_p: float
    alternative: str = "two-sided"
    notes: tuple[str, ...] = ()
    n_total: int | None = None


def _as_values(values: ArrayLike, label: str) -> NDArray[np.float64]:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"{label}: scores must be one-dimensional; got shape {x.shape}")
    if x.size == 0:
        raise ValueError(f"{label}: no scores")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{label}: scores contain NaN or infinite values: drop failed runs first")
    return x


def _summary(name: str, x: NDArray[np.float64]) -> ConditionSummary:
    lo, hi = float(x.min()), float(x.max())
    return ConditionSummary(
        name=name,
        n=int(x.size),
        mean=float(x.mean()),
        sd=float(x.std(ddof=1)) if x.size > 1 else math.nan,
        min=lo,
        max=hi,
        range=hi - lo,
    )


def summarize_conditions(
    values_by_condition: Mapping[str, ArrayLike],
) -> dict[str, ConditionSummary]:
    """Summarize each condition's scores: mean, sd (``ddof=1``), min, max, range.

    Args:
        values_by_condition: Condition label -> its scores, each of shape ``(n_c,)``,
            ``n_c >= 1``.

    Returns:
        Label -> :class:`ConditionSummary`, in the mapping's order.

    Raises:
        ValueError: If a condition has no scores, or NaN/inf scores.

    Example:
        >>> s = summarize_conditions({"cpu": [0.91, 0.93, 0.92], "gpu": [0.90, 0.94]})
        >>> round(s["cpu"].sd, 3), round(s["gpu"].range, 3)
        (0.01, 0.04)
    """
    return {
        str(name): _summary(str(name), _as_values(values, f"condition {name!r}"))
        for name, values in values_by_condition.items()
    }


def _quietly(
    func: Callable[..., Any], notes: list[str], label: str, *args: Any, **kwargs: Any
) -> tuple[float, float]:
    """Call a scipy test; turn its warnings into notes; return ``(statistic, pvalue)``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = func(*args, **kwargs)
    for w in caught:
        notes.append(f"{label}: {w.message}")
    return float(result.statistic), float(result.pvalue)


def distinct_pairs(a: ArrayLike, b: ArrayLike, keys: ArrayLike) -> NDArray[np.bool_]:
    """Mask of the pairs to keep: the first of those with the same key and bit-identical scores.

    Example:
        >>> distinct_pairs([0.9, 0.9, 0.9], [0.8, 0.8, 0.8], keys=[0, 0, 1]).tolist()
        [True, False, True]
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    seen: set[tuple[object, bytes, bytes]] = set()
    keep = []
    for k, u, v in zip(np.asarray(keys, dtype=object).tolist(), x, y, strict=True):
        ident = (k, u.tobytes(), v.tobytes())
        keep.append(ident not in seen)
        seen.add(ident)
    return np.asarray(keep, dtype=bool)


def _too_few(n: int, n_total: int) -> str:
    """Why no p-value is given, and what would help."""
    return (f"too few distinct pairs for a test: {n} (of {n_total} pairs), at least {MIN_DISTINCT_PAIRS} needed; "
            "no p-value or rank correlation is given: sweep more seeds across both values")


def compare_conditions(
    a: ArrayLike,
    b: ArrayLike,
    *,
    keys: ArrayLike | None = None,
    names: tuple[str, str] = ("a", "b"),
    zero_method: Literal["wilcox", "pratt", "zsplit"] = "wilcox",
    alternative: Literal["two-sided", "less", "greater"] = "two-sided",
    wilcoxon_method: Literal["auto", "exact", "asymptotic"] = "auto",
) -> ConditionComparison:
    """Compare paired scores under two environment conditions.

    Args:
        a: Scores under condition ``a``, shape ``(n,)``, ``n >= 2``.
        b: Scores under condition ``b``, shape ``(n,)``; ``b[i]`` paired with ``a[i]``.
        keys: Optional replicate key of each pair (its seed): pairs bit-identical to an
            earlier pair with the same key count once (see the module docstring).
        names: Labels of the two conditions.
        zero_method: Wilcoxon's treatment of zero differences (see module docstring).
        alternative: ``"two-sided"``, or ``"greater"``/``"less"`` for ``a - b`` (both tests).
        wilcoxon_method: scipy's ``method`` for the Wilcoxon p-value (see module docstring).

    Returns:
        A :class:`ConditionComparison`.

    Raises:
        ValueError: If the lengths differ, fewer than 2 pairs, NaN/inf scores, or an
            unknown ``zero_method``/``alternative``.

    Example:
        >>> c = compare_conditions([0.80, 0.82, 0.85, 0.90], [0.79, 0.80, 0.86, 0.88],
        ...                        names=("threads=1", "threads=8"))
        >>> round(c.mean_difference, 4), round(c.kendall_tau, 3), round(c.wilcoxon_p, 3)
        (0.01, 1.0, 0.375)
    """
    _check_options(zero_method, alternative, wilcoxon_method)
    name_a, name_b = (str(n) for n in names)
    x, y = _paired(a, b, name_a, name_b)
    n_total = int(x.size)
    notes: list[str] = []
    if keys is not None:
        keep = distinct_pairs(x, y, keys)
        x, y = x[keep], y[keep]
        if x.size < n_total:
            notes.append(f"{n_total - x.size} of {n_total} pairs repeat another bit-identically under the same seed "
                         f"(the other params changed neither score): each distinct pair counts once, n = {x.size}")
    d = x - y
    n_nonzero = int(np.count_nonzero(d))
    w_stat, w_p, t_stat, t_p = _paired_tests(x, y, n_nonzero, n_total, notes, zero_method, alternative,
                                             wilcoxon_method)
    tau, tau_p, rho, rho_p = _rank_agreement(x, y, notes)
    return ConditionComparison(
        names=(name_a, name_b),
        n=int(x.size),
        summary_a=_summary(name_a, x),
        summary_b=_summary(name_b, y),
        mean_difference=float(d.mean()),
        n_nonzero=n_nonzero,
        wilcoxon_statistic=w_stat,
        wilcoxon_p=w_p,
        zero_method=zero_method,
        t_statistic=t_stat,
        t_p=t_p,
        kendall_tau=tau,
        kendall_p=tau_p,
        spearman_rho=rho,
        spearman_p=rho_p,
        alternative=alternative,
        notes=tuple(notes),
        n_total=n_total,
    )


def _check_options(zero_method: str, alternative: str, wilcoxon_method: str) -> None:
    """Raise a ValueError naming the first of :func:`compare_conditions`' options that scipy does not know."""
    if zero_method not in ("wilcox", "pratt", "zsplit"):
        raise ValueError(
            f"zero_method must be 'wilcox', 'pratt' or 'zsplit'; got {zero_method!r}"
        )
    if alternative not in ("two-sided", "less", "greater"):
        raise ValueError(
            f"alternative must be 'two-sided', 'less' or 'greater'; got {alternative!r}"
        )
    if wilcoxon_method not in ("auto", "exact", "asymptotic"):
        raise ValueError(
            f"wilcoxon_method must be 'auto', 'exact' or 'asymptotic'; got {wilcoxon_method!r}"
        )


def _paired(a: ArrayLike, b: ArrayLike, name_a: str, name_b: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The two conditions' scores as float vectors of one length, at least 2 pairs, or a ValueError saying why."""
    x = _as_values(a, f"condition {name_a!r}")
    y = _as_values(b, f"condition {name_b!r}")
    if x.size != y.size:
        raise ValueError(
            f"paired scores need equal lengths: {name_a!r} has {x.size}, {name_b!r} has "
            f"{y.size}; pair run i of one condition with run i of the other"
        )
    if x.size < 2:
        raise ValueError(f"need at least 2 pairs to compare conditions; got {x.size}")
    return x, y


def _paired_tests(x: NDArray[np.float64], y: NDArray[np.float64], n_nonzero: int, n_total: int, notes: list[str],
                  zero_method: str, alternative: str, wilcoxon_method: str) -> tuple[float, float, float, float]:
    """Wilcoxon signed-rank and paired t-test of the distinct pairs: ``(w_stat, w_p, t_stat, t_p)``.

    NaN with a note for too few distinct pairs; p = 1 and NaN statistics when no pair differs.
    """
    from scipy import stats  # scipy.stats takes ~1 s to import

    if x.size < MIN_DISTINCT_PAIRS:
        notes.append(_too_few(int(x.size), n_total))
        return math.nan, math.nan, math.nan, math.nan
    if n_nonzero == 0:
        notes.append(
            "all paired differences are zero: the conditions gave identical scores; "
            "Wilcoxon and t-test report p = 1.0 and a NaN statistic"
        )
        return math.nan, 1.0, math.nan, 1.0
    w_stat, w_p = _quietly(
        stats.wilcoxon, notes, "wilcoxon", x, y,
        zero_method=zero_method, alternative=alternative, method=wilcoxon_method,
    )  # fmt: skip
    t_stat, t_p = _quietly(stats.ttest_rel, notes, "t-test", x, y, alternative=alternative)
    return w_stat, w_p, t_stat, t_p


def _rank_agreement(x: NDArray[np.float64], y: NDArray[np.float64],
                    notes: list[str]) -> tuple[float, float, float, float]:
    """Kendall's tau-b and Spearman's rho of the distinct pairs: ``(tau, tau_p, rho, rho_p)``.

    NaN for too few distinct pairs (:func:`_paired_tests` notes it), and, with a note, for constant scores.
    """
    from scipy import stats

    if x.size < MIN_DISTINCT_PAIRS:
        return math.nan, math.nan, math.nan, math.nan
    if np.ptp(x) == 0.0 or np.ptp(y) == 0.0:
        notes.append("a condition's scores are constant: rank correlations are undefined (NaN)")
        return math.nan, math.nan, math.nan, math.nan
    tau, tau_p = _quietly(stats.kendalltau, notes, "kendall", x, y)
    rho, rho_p = _quietly(stats.spearmanr, notes, "spearman", x, y)
    return tau, tau_p, rho, rho_p


__all__ = [
    "ConditionComparison",
    "ConditionSummary",
    "MIN_DISTINCT_PAIRS",
    "compare_conditions",
    "distinct_pairs",
    "summarize_conditions",
]
