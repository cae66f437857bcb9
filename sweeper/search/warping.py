"""Declared bounds of a metric, and the monotone warp that lets a GP model it where the bounds hold.

Accuracies live in [0, 1], a loss above 0, an accuracy gap in [-1, 1]. A GP on the raw
values knows none of this: fitted to a map with a plateau at the majority class and a
ceiling near the best accuracy, it interpolates with overshoot, and its means, bands and
expected-max curves reach values the metric cannot take (1.02 accuracy). With declared
bounds the GP models ``g = w(y)``, where ``w`` maps the open interval between the bounds
onto the real line, and every number shown is a function of ``w^{-1}(g)``: it stays inside.

The warp of two bounds is the logit of a Kumaraswamy distribution function of the value
rescaled to (0, 1)::

    r = (y - low) / (high - low),  p = 1 - (1 - r^a)^b,  w(y) = logit(p) = log p - log(1 - p)

``a = b = 1`` is the plain logit. The two shape parameters are learned from the data (by
:mod:`sweeper.search.bounded` and :mod:`sweeper.search.hyperposterior`): a GP likes outputs that vary
about equally everywhere, and a real accuracy map varies a lot across its cliffs and very
little along its ceiling, so the warp that maximises the marginal likelihood of the warped
GP, Jacobian included (Snelson, Rasmussen & Ghahramani 2004, eq. 6), stretches the ceiling
and squeezes the cliff. That is the bounded analogue of Snelson et al.'s warped GP, with
the Kumaraswamy CDF that BoTorch uses to warp inputs (Snoek et al. 2014) as its flexible
monotone family on (0, 1). One bound: ``w(y) = log(y - low)`` or ``-log(high - y)``. The
analysis may rescale onto ``[low, top]`` with a ceiling ``top`` below ``high`` that it learns
(:attr:`OutputWarp.top`, :mod:`sweeper.search.hyperposterior`): the model then saturates there.

Values exactly on a bound (a training accuracy of 1.0) have no finite logit. They are
placed ``eps`` inside the bound (:func:`squeeze_for`): half the distance from the bound to
the nearest value that is not on it, between 1e-4 and 1e-2 of the range, so a run of perfect
scores sits just beyond the best imperfect one rather than at an arbitrary extreme.

Every formula is evaluated in log space (``log1p``, ``expm1``, ``log_expit``), so shapes far
from 1 neither overflow nor round a value onto the bound.

References:
    Snelson, E., Rasmussen, C. E., Ghahramani, Z. (2004). Warped Gaussian Processes. NIPS 16.
    Kumaraswamy, P. (1980). A generalized probability density function for double-bounded
    random processes. Journal of Hydrology 46.
    Snoek, J., Swersky, K., Zemel, R., Adams, R. P. (2014). Input Warping for Bayesian
    Optimization of Non-Stationary Functions. ICML 2014.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

#: Gauss-Hermite nodes (probabilists') for moments of the back-transformed Gaussian.
_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(32)
_GH_WEIGHTS = _GH_WEIGHTS / _GH_WEIGHTS.sum()
#: Where a value on a bound is placed, as a fraction of the range (see :func:`squeeze_for`).
SQUEEZE_RANGE = (1e-4, 1e-2)
#: Range of the learned Kumaraswamy shapes; beyond them the warp is degenerate in float64.
SHAPE_BOUNDS = (0.05, 50.0)

_NULLS = {"null", "none", "~", ""}


def _bound_value(value: Any) -> float | None:
    """A bound from config or command-line text: a finite number, or None for no bound."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _NULLS:
            return None
        value = float(text)  # ValueError for text that is no number
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{value!r} is not finite")
    return number


@dataclass(frozen=True)
class MetricBounds:
    """The values a metric can take: ``low <= y <= high`` (either side may be open, None).

    Example:
        >>> MetricBounds.parse([0, 1])
        MetricBounds(low=0.0, high=1.0)
        >>> MetricBounds.parse(None) is None
        True
        >>> MetricBounds(0.0, 1.0).violation(1.2, "test_acc")
        'test_acc=1.2 is outside metric_bounds=[0, 1] (above 1)'
    """

    low: float | None = None
    high: float | None = None

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem:
            raise ValueError(problem)

    def problem(self) -> str | None:
        """Why these bounds are unusable, or None."""
        if self.low is None and self.high is None:
            return "metric_bounds needs at least one number: [low, high] with either side null"
        if self.low is not None and self.high is not None and not self.low < self.high:
            return f"metric_bounds needs low < high; got [{self.low:g}, {self.high:g}]"
        return None

    @classmethod
    def parse(cls, value: Any) -> MetricBounds | None:
        """``[low, high]`` (numbers, or null on either side) from a config or the command line.

        None, or ``[null, null]``, means no bounds. Raises ValueError naming what is wrong.
        """
        if value is None or isinstance(value, MetricBounds):
            return value
        if isinstance(value, str) or not isinstance(value, Sequence) or len(value) != 2:
            raise ValueError(f"metric_bounds must be a list [low, high] (either may be null); got {value!r}")
        try:
            low, high = (_bound_value(v) for v in value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"metric_bounds must hold two numbers or null; got {list(value)!r} ({exc})") from None
        if low is None and high is None:
            return None
        return cls(low, high)

    @classmethod
    def from_text(cls, text: str | None) -> MetricBounds | None:
        """Bounds from a recorded param (``[0.0, 1.0]``, ``[0, None]``, ``None``); None when there are none."""
        if text is None or str(text).strip().lower() in _NULLS:
            return None
        inner = str(text).strip()
        if not (inner.startswith("[") and inner.endswith("]")):
            raise ValueError(f"metric_bounds {text!r} is not a list [low, high]")
        return cls.parse([part.strip().strip("'\"") for part in inner[1:-1].split(",")])

    def as_list(self) -> list[float | None]:
        return [self.low, self.high]

    def text(self) -> str:
        """``[0, 1]``, ``[0, null]``: the form the config takes."""
        return "[" + ", ".join("null" if v is None else f"{v:g}" for v in self.as_list()) + "]"

    def contains(self, value: float) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def violation(self, value: float, metric: str) -> str | None:
        """A message naming the value and the bound it breaks, or None when inside."""
        if self.low is not None and value < self.low:
            side = f"below {self.low:g}"
        elif self.high is not None and value > self.high:
            side = f"above {self.high:g}"
        else:
            return None
        return f"{metric}={value:g} is outside metric_bounds={self.text()} ({side})"

    def clip(self, values: ArrayLike) -> NDArray[np.float64]:
        """Values clipped into the bounds (for numbers computed on the original scale, e.g. a band edge)."""
        lo = -np.inf if self.low is None else self.low
        hi = np.inf if self.high is None else self.high
        return np.clip(np.asarray(values, dtype=np.float64), lo, hi)


def squeeze_for(bounds: MetricBounds, y: ArrayLike) -> float:
    """Where values on a bound are placed, as a fraction of the range (two bounds) or in units (one).

    Half the smallest distance from a bound to a value not on it, clipped to
    :data:`SQUEEZE_RANGE` (times the range, or times the spread of ``y`` with one bound).
    """
    y = np.asarray(y, dtype=np.float64)
    if bounds.low is not None and bounds.high is not None:
        scale = bounds.high - bounds.low
    else:
        scale = float(np.ptp(y)) if y.size > 1 and np.ptp(y) > 0 else 1.0
    gaps = [np.abs(y - b) for b in (bounds.low, bounds.high) if b is not None]
    inner = np.concatenate([g[g > 0] for g in gaps]) / scale
    half = 0.5 * float(inner.min()) if inner.size else SQUEEZE_RANGE[1]
    fraction = float(np.clip(half, *SQUEEZE_RANGE))
    return fraction if bounds.low is not None and bounds.high is not None else fraction * scale


#: Within ``eps`` of a bound, up to rounding: on it (:meth:`OutputWarp.inverse`).
_ON_BOUND = 1.0 + 1e-9


@dataclass(frozen=True)
class OutputWarp:
    """The monotone map ``w`` from a bounded metric to the real line (see the module docstring).

    Attributes:
        bounds: The metric's bounds.
        a: Kumaraswamy shape applied to ``r`` (two bounds only; 1 is the plain logit).
        b: Kumaraswamy shape applied to ``1 - r^a``.
        eps: Where values on a bound go: a fraction of the range (two bounds), or units (one).
        top: A ceiling below the upper bound (two bounds only): the value is rescaled onto
            ``[low, top]``, so the model saturates there (:mod:`sweeper.search.hyperposterior` learns
            it); None is the bound itself.
    """

    bounds: MetricBounds
    a: float = 1.0
    b: float = 1.0
    eps: float = 1e-3
    top: float | None = None

    @property
    def two_sided(self) -> bool:
        return self.bounds.low is not None and self.bounds.high is not None

    @classmethod
    def for_data(cls, bounds: MetricBounds, y: ArrayLike, a: float = 1.0, b: float = 1.0) -> OutputWarp:
        """The warp with shapes ``a, b`` and the squeeze that suits ``y``."""
        return cls(bounds, float(a), float(b), squeeze_for(bounds, y))

    def with_shapes(self, a: float, b: float, top: float | None = None) -> OutputWarp:
        return OutputWarp(self.bounds, float(a), float(b), self.eps, self.top if top is None else float(top))

    @property
    def _hi(self) -> float | None:
        return self.bounds.high if self.top is None else self.top

    def _ends(self) -> tuple[float, float]:
        """``(low, top)``: the range a two-sided warp rescales onto (``top`` is the upper bound without a ceiling)."""
        lo, hi = self.bounds.low, self._hi
        if lo is None or hi is None:
            raise ValueError(f"the warp onto {self.bounds.text()} has one bound, not a range")
        return lo, hi

    def _unit(self, y: NDArray[np.float64]) -> NDArray[np.float64]:
        if self.two_sided:
            lo, hi = self._ends()
            return np.clip((y - lo) / (hi - lo), self.eps, 1.0 - self.eps)
        low, upper = self.bounds.low, self._hi
        if low is not None:
            return np.maximum(y - low, self.eps)
        return np.maximum(upper - y, self.eps)  # type: ignore[operator]  # one bound, not the lower: upper is set

    def forward(self, y: ArrayLike) -> NDArray[np.float64]:
        """``w(y)``, elementwise; values on or beyond a bound are squeezed ``eps`` inside first."""
        return self._of_unit(self._unit(np.asarray(y, dtype=np.float64)))

    def exact(self, y: ArrayLike) -> NDArray[np.float64]:
        """``w(y)`` for a distribution function: ``P(Y <= y) = Phi((exact(y) - mean) / sd)``.

        The last ``eps`` before a bound is where the model holds values on it (:meth:`inverse`
        maps it onto the bound), so ``P(Y <= y)`` is flat there and jumps at the bound:
        ``exact`` is ``w(bound - eps)`` inside that stretch, ``inf`` at or beyond the upper
        bound (``-inf`` below the lower one).
        """
        y = np.asarray(y, dtype=np.float64)
        if self.two_sided:
            lo, hi = self._ends()
            t = (y - lo) / (hi - lo)
            top, bottom = t >= 1.0, t < 0.0
            t = np.clip(t, self.eps, 1.0 - self.eps)
        else:
            low, upper = self.bounds.low, self._hi
            t = y - low if low is not None else upper - y
            beyond = t < 0.0 if low is not None else t <= 0.0
            top, bottom = (np.zeros_like(beyond), beyond) if low is not None else (beyond, np.zeros_like(beyond))
            t = np.maximum(t, self.eps)
        g = self._of_unit(t)
        return np.where(top, np.inf, np.where(bottom, -np.inf, g))

    def _of_unit(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        """``w`` of the value rescaled to (0, 1) (two bounds) or of its distance to the bound (one)."""
        if not self.two_sided:
            return np.log(t) if self.bounds.low is not None else -np.log(t)
        log_q = self.b * np.log1p(-(t ** self.a))  # log(1 - p)
        return np.log(-np.expm1(log_q)) - log_q

    def inverse(self, g: ArrayLike) -> NDArray[np.float64]:
        """``w^{-1}(g)``, inside the bounds; within ``eps`` of a bound it is the bound.

        The model holds a value on a bound ``eps`` inside it (:meth:`forward`), so that last
        ``eps`` is where it says "on the bound": a map whose best trials score exactly 1.0
        gets a band that reaches 1.0 there, not one that stops ``2e-5`` short of every such
        truth.
        """
        g = np.asarray(g, dtype=np.float64)
        if not self.two_sided:
            low, upper = self.bounds.low, self._hi
            gap = np.exp(g if low is not None else -g)
            gap = np.where(gap <= self.eps * _ON_BOUND, 0.0, gap)
            return low + gap if low is not None else upper - gap
        from scipy.special import log_expit  # here: a trial's worker reads this module's settings, not this

        log_q = log_expit(-g)  # log(1 - p)
        r_a = -np.expm1(log_q / self.b)
        r = np.exp(np.log(np.maximum(r_a, np.finfo(np.float64).tiny)) / self.a)
        r = np.where(r >= 1.0 - self.eps * _ON_BOUND, 1.0, np.where(r <= self.eps * _ON_BOUND, 0.0, r))
        lo, hi = self._ends()
        return lo + (hi - lo) * r

    def log_jacobian(self, y: ArrayLike) -> NDArray[np.float64]:
        """``log w'(y)``, elementwise (for the warped GP's likelihood of the original values)."""
        y = np.asarray(y, dtype=np.float64)
        t = self._unit(y)
        if not self.two_sided:
            return -np.log(t)
        return self._two_sided_terms(t)[1]

    def forward_and_log_jacobian(self, y: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """:meth:`forward` and :meth:`log_jacobian` together, their shared terms computed once (the same bits)."""
        t = self._unit(np.asarray(y, dtype=np.float64))
        if not self.two_sided:
            return self._of_unit(t), -np.log(t)
        return self._two_sided_terms(t)

    def _two_sided_terms(self, t: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``w`` and ``log w'`` of a two-sided warp at the rescaled values ``t``."""
        t_a = t ** self.a
        log_q = self.b * np.log1p(-t_a)
        log_p = np.log(-np.expm1(log_q))
        lo, hi = self._ends()
        width = hi - lo
        return log_p - log_q, (math.log(self.a * self.b) + (self.a - 1.0) * np.log(t)
                               + (self.b - 1.0) * np.log1p(-t_a) - log_p - log_q - math.log(width))

    def spread(self, y: ArrayLike, tau: float) -> NDArray[np.float64]:
        """Half the width ``(w(y + tau) - w(y - tau)) / 2`` on the modelled scale of ``y ± tau``, elementwise.

        A noise of sd ``tau`` in the metric's own units, seen on the warped scale: ``tau w'(y)`` where the
        warp is straight, and finite near a bound, where :meth:`forward` squeezes a value ``eps`` inside
        (the analysis's metric-unit noise, :data:`sweeper.search.hyper_vector.METRIC_NOISE`).
        """
        y = np.asarray(y, dtype=np.float64)
        half: NDArray[np.float64] = 0.5 * (self.forward(y + tau) - self.forward(y - tau))
        return half

    def moments(self, mean: ArrayLike, sd: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Mean and sd of ``w^{-1}(g)`` for ``g ~ N(mean, sd^2)``, elementwise (32-node Gauss-Hermite).

        Both lie inside the bounds' range: the mean is an average of values inside them.
        """
        mean = np.asarray(mean, dtype=np.float64)
        sd = np.asarray(sd, dtype=np.float64)
        v = self.inverse(mean[..., None] + sd[..., None] * _GH_NODES)
        m = v @ _GH_WEIGHTS
        var = ((v - m[..., None]) ** 2) @ _GH_WEIGHTS
        return m, np.sqrt(np.maximum(var, 0.0))

    def to_dict(self) -> dict[str, Any]:
        return {"bounds": self.bounds.as_list(), "a": self.a, "b": self.b, "eps": self.eps, "top": self.top}

    @classmethod
    def from_dict(cls, d: Any) -> OutputWarp:
        return cls(MetricBounds(*d["bounds"]), float(d["a"]), float(d["b"]), float(d["eps"]), d.get("top"))

    def describe(self) -> str:
        if not self.two_sided:
            return f"log warp of the distance to the bound {self.bounds.text()}"
        return f"Kumaraswamy-logit warp onto {self.bounds.text()} (a={self.a:.3g}, b={self.b:.3g})"
