"""Quantified reproducibility assessment: the small-sample coefficient of variation CV*.

For ``n`` repeated measurements ``x`` of one measurand on one object (e.g. the test
accuracy of one configuration under different seeds, machines or library versions),
Belz, Popovic & Mille (2022, section 3) report precision as::

    y      = x - scale_min                      (a ratio scale: 0 means "nothing")
    s      = sample sd of y (Bessel, n - 1)
    c4(n)  = sqrt(2 / (n - 1)) * Gamma(n / 2) / Gamma((n - 1) / 2)
    std    = s / c4(n)                          (unbiased sd for normal data)
    CV     = 100 * std / mean(y)
    CV*    = (1 + 1 / (4 n)) * CV               (small-sample correction)
    SE     = s^2 * sqrt(2 / (n - 1)) / (2 std)  (standard error of the sd)
    CI     = std -/+ t(0.975, n - 1) * SE       (symmetric; may go below 0)

The shift matters: CV is only meaningful on a scale whose zero means "none of it", so a
1..7 rating is shifted by ``scale_min=1`` and a BLEU or accuracy score is used as is.

Degenerate sets get words, not numbers (Belz et al.'s CV* assumes ``n`` independent
measurements with some spread):

- all values equal: status ``constant``; CV*, CV and the CI are NaN. CV* 0 with CI [0, 0]
  would claim perfect precision from no observed variation at all (a task that ignores its
  seed gives exactly this).
- bit-identical replicates under the same seed (:func:`qra_replicates`): one measurement
  repeated, not several; they count once, ``n`` is the number of distinct measurements and
  ``n_total`` the trials (status ``duplicates``).

References:
    Belz, A., Popovic, M., & Mille, S. (2022). Quantified Reproducibility Assessment of
    NLP Results. ACL 2022, 16-28. https://aclanthology.org/2022.acl-long.2
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QRA:
    """Precision of a set of repeated measurements (Belz et al. 2022).

    Attributes:
        n: Number of measurements.
        mean: Mean of the *shifted* values ``x - scale_min``; the paper's tables report
            this one (e.g. 4.75 for fluency ratings 5.36 and 6.14 on a 1..7 scale).
        mean_original: Mean in the original units, ``mean + scale_min``.
        std: Unbiased standard deviation ``s / c4(n)`` (same units as the values).
        std_ci: ``(low, high)`` confidence interval of ``std``; ``low`` may be negative.
        cv: Coefficient of variation ``100 * std / mean``, in percent.
        cv_star: Small-sample corrected ``(1 + 1/(4n)) * cv``, in percent.
        scale_min: The shift that was subtracted.
        confidence: Coverage of ``std_ci``, e.g. 0.95.
        name: Optional label (the object/measurand), e.g. from :func:`qra_table`.
        status: ``ok``; ``duplicates`` (bit-identical replicates counted once, CV* on the
            distinct ones); ``constant`` (all values equal: no CV*/CI); ``fixed`` (set by callers for a
            measurand equal in every trial of a sweep, a constant of the configuration).
        note: What is degenerate and what would help, in words; empty when ``ok``.
        n_total: Measurements before bit-identical replicates were collapsed (= ``n`` unless
            ``duplicates``/``too few distinct``).
    """

    n: int
    mean: float
    mean_original: float
    std: float
    std_ci: tuple[float, float]
    cv: float
    cv_star: float
    scale_min: float = 0.0
    confidence: float = 0.95
    name: str | None = None
    status: str = "ok"
    note: str = ""
    n_total: int | None = None

    @property
    def defined(self) -> bool:
        """Whether CV* and its CI exist (not a constant or a single distinct measurement)."""
        return self.status in ("ok", "duplicates")


def _c4(n: int) -> float:
    """Return the bias factor ``E[s] / sigma`` of the sample sd of ``n`` normal values."""
    return math.sqrt(2.0 / (n - 1)) * math.exp(math.lgamma(n / 2.0) - math.lgamma((n - 1) / 2.0))


def qra(
    values: ArrayLike,
    scale_min: float = 0.0,
    *,
    confidence: float = 0.95,
    name: str | None = None,
) -> QRA:
    """Compute the QRA precision statistics (CV* and its parts) of repeated measurements.

    Args:
        values: The ``n >= 2`` measurements, shape ``(n,)``.
        scale_min: Lowest possible score of the scale, subtracted first (1 for a 1..7
            rating; 0 for accuracy, BLEU, F1).
        confidence: Coverage of the confidence interval of ``std``, in ``(0, 1)``.
        name: Optional label stored on the result.

    Returns:
        A :class:`QRA`.

    Raises:
        ValueError: If fewer than 2 values, any NaN/inf, the shifted mean is ``<= 0``,
            or ``confidence`` is outside ``(0, 1)``.

    Example:
        >>> r = qra([5.36, 6.14], scale_min=1)
        >>> round(r.mean, 2), round(r.std, 3), round(r.cv_star, 3)
        (4.75, 0.691, 16.372)
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"values must be one-dimensional; got shape {x.shape}")
    if x.size < 2:
        raise ValueError(f"QRA needs at least 2 measurements; got {x.size}")
    if not np.all(np.isfinite(x)):
        raise ValueError("values contain NaN or infinite entries: drop failed measurements first")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), e.g. 0.95; got {confidence!r}")
    n = int(x.size)
    if np.ptp(x) == 0.0:
        return _constant(x, scale_min, confidence=confidence, name=name)
    y = x - float(scale_min)
    mean = float(y.mean())
    if mean <= 0.0:
        raise ValueError(
            f"mean after subtracting scale_min={scale_min!r} is {mean:.6g} <= 0, so the "
            "coefficient of variation is undefined: set scale_min to the lowest possible "
            "score of the scale (e.g. 1 for a 1..7 rating, 0 for accuracy; sweeper report --scale-min LOW)"
        )
    from scipy.stats import t as student_t  # scipy.stats takes ~1 s to import

    s = float(y.std(ddof=1))
    std = s / _c4(n)
    cv = 100.0 * std / mean
    se = s**2 * math.sqrt(2.0 / (n - 1)) / (2.0 * std)  # std > 0: the constant case returned above
    half = float(student_t.ppf(0.5 + confidence / 2.0, n - 1)) * se
    return QRA(
        n=n,
        mean=mean,
        mean_original=mean + float(scale_min),
        std=std,
        std_ci=(std - half, std + half),
        cv=cv,
        cv_star=(1.0 + 1.0 / (4.0 * n)) * cv,
        scale_min=float(scale_min),
        confidence=float(confidence),
        name=name,
        n_total=n,
    )


def _constant(x: NDArray[np.float64], scale_min: float, *, confidence: float, name: str | None,
              note: str | None = None, n_total: int | None = None) -> QRA:
    """A QRA without CV*: every value equal, so there is no spread to describe (status ``constant``)."""
    value = float(x[0])
    text = note or (f"constant: all {x.size} measurements are {value:.6g}; CV* and its CI are not defined "
                    "(no variation was observed, which is not evidence of precision): check that the "
                    "conditions really changed between the measurements")
    return QRA(n=int(x.size), mean=value - float(scale_min), mean_original=value, std=0.0,
               std_ci=(math.nan, math.nan), cv=math.nan, cv_star=math.nan, scale_min=float(scale_min),
               confidence=float(confidence), name=name, status="constant", note=text,
               n_total=int(x.size) if n_total is None else n_total)


def distinct_measurements(values: ArrayLike, keys: Sequence[object] | None = None) -> NDArray[np.float64]:
    """The values with bit-identical replicates under the same key dropped (the first one kept).

    A trial repeated under the same seed that gives the bit-identical score is the same
    measurement again, not a new one: counting it would shrink CV*'s CI (Belz et al. 2022
    assume independent measurements). Equal values under *different* keys (e.g. two seeds
    that give the same accuracy on a finite test set) stay: they are separate measurements.

    Args:
        values: The measurements, shape ``(n,)``.
        keys: One key per value (e.g. its seed); ``None``: one key for all.

    Example:
        >>> distinct_measurements([0.9, 0.9, 0.8, 0.9], keys=[0, 0, 0, 1]).tolist()
        [0.9, 0.8, 0.9]
    """
    x = np.asarray(values, dtype=np.float64)
    ks = [None] * x.size if keys is None else list(keys)
    if len(ks) != x.size:
        raise ValueError(f"keys must have one entry per value: {len(ks)} keys for {x.size} values")
    seen: set[tuple[object, bytes]] = set()
    keep = []
    for k, v in zip(ks, x, strict=True):
        ident = (k, v.tobytes())
        keep.append(ident not in seen)
        seen.add(ident)
    distinct: NDArray[np.float64] = x[np.asarray(keep, dtype=bool)]
    return distinct


def qra_replicates(
    values: ArrayLike,
    keys: Sequence[object] | None = None,
    scale_min: float = 0.0,
    *,
    confidence: float = 0.95,
    name: str | None = None,
    label: str = "this configuration",
) -> QRA:
    """:func:`qra` on the distinct measurements, saying in words what was bit-identical.

    Args:
        values: The ``n >= 2`` finite measurements of one object (``label``).
        keys: One replicate key per value, e.g. its seed: bit-identical values with the same
            key count once (see :func:`distinct_measurements`); ``None``: any bit-identical
            values count once.
        scale_min: As :func:`qra`.
        confidence: As :func:`qra`.
        name: The measurand.
        label: The object in words, e.g. ``"configuration `lr=0.1`"``.

    Returns:
        A :class:`QRA`: ``constant`` when every value is equal ("N replicates of X are
        bit-identical: does the task use its seed?"), ``duplicates`` with ``n`` distinct of
        ``n_total`` (a value that differs leaves at least 2 distinct), else ``ok``.

    Raises:
        ValueError: As :func:`qra`.

    Example:
        >>> r = qra_replicates([0.9] * 16, keys=range(16), label="configuration `x=1`")
        >>> r.status, r.note.split(":")[0]
        ('constant', '16 replicates of configuration `x=1` are bit-identical (0.9)')
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size < 2 or not np.all(np.isfinite(x)):
        return qra(x, scale_min, confidence=confidence, name=name)  # raises with its message
    if np.ptp(x) == 0.0:
        note = (f"{x.size} replicates of {label} are bit-identical ({float(x[0]):.6g}): does the task use its seed? "
                "They are one measurement, so no CV* or CI can be built; vary the seed (or the condition) inside "
                "the task and rerun")
        return _constant(x, scale_min, confidence=confidence, name=name, note=note)
    distinct = distinct_measurements(x, keys)
    if distinct.size == x.size:
        return qra(x, scale_min, confidence=confidence, name=name)
    repeated = (f"{x.size - distinct.size} of {x.size} replicates of {label} are bit-identical to another under the "
                f"same seed (the other conditions did not change the result): each distinct measurement counts once")
    r = qra(distinct, scale_min, confidence=confidence, name=name)
    return replace(r, status="duplicates", n_total=int(x.size),
                   note=f"{repeated}: CV* and its CI use n = {distinct.size} distinct measurements of {x.size}")


def qra_table(
    groups: Mapping[str, Sequence[float]],
    scale_min: float = 0.0,
    *,
    confidence: float = 0.95,
) -> list[QRA]:
    """Compute :func:`qra` for each named group of measurements, in the mapping's order.

    Args:
        groups: Label (object/measurand/condition) -> its ``n >= 2`` measurements.
        scale_min: Lowest possible score, as in :func:`qra` (one scale for all groups).
        confidence: Coverage of each ``std_ci``.

    Returns:
        One :class:`QRA` per group, with ``name`` set to its label.

    Raises:
        ValueError: As :func:`qra`, with the group's label prefixed.

    Example:
        >>> rows = qra_table({"seed": [0.90, 0.92, 0.91], "threads": [0.90, 0.90, 0.96]})
        >>> [(r.name, round(r.cv_star, 2)) for r in rows]
        [('seed', 1.34), ('threads', 4.6)]
    """
    rows = []
    for label, values in groups.items():
        try:
            rows.append(qra(values, scale_min, confidence=confidence, name=label))
        except ValueError as err:
            raise ValueError(f"group {label!r}: {err}") from None
    return rows


__all__ = ["QRA", "distinct_measurements", "qra", "qra_replicates", "qra_table"]
