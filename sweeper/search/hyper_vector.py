"""The analysis GP's hyperparameters as one vector for the slice sampler: its blocks (with
their priors and boxes), packing a :class:`~sweeper.search.gp.GPFit` into it and back.

The priors are those of :mod:`sweeper.search.hyperposterior`, whose docstring says why each
has its shape; the measurements behind their settings are in docs/decisions/0012-0016.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sweeper.search.gp import GPFit
from sweeper.search.gp_model import KAPPA_BOUNDS, LENGTHSCALE_BOUNDS, NOISE_MAX, VARIANCE_BOUNDS, W_BOUNDS
from sweeper.search.kernels import CategoryFactor, KernelTerm
from sweeper.search.warping import SHAPE_BOUNDS, OutputWarp

#: Prior of the log noise variance (standardised scale): centre and sd.
#: NOTE: docs/decisions/0005-analysis-gp-noise-prior.md
NOISE_PRIOR = (math.log(3e-3), 1.0)
#: sd of the LogNormal(0, sd) prior on each of the warp's Kumaraswamy shapes.
#: NOTE: docs/decisions/0006-analysis-gp-warp-shape-prior.md (sd 1 measured again: 0084-bad-maps-miss-next-to-trials.md)
SHAPE_PRIOR_SD = 2.0
#: Input warping (Kumaraswamy CDF per continuous column, Snoek et al. 2014): on, its shapes' prior sd and box.
#: NOTE: docs/decisions/0007-analysis-gp-input-warping.md
INPUT_WARP = True
INPUT_WARP_PRIOR_SD = 0.75
INPUT_WARP_BOUNDS = (0.1, 10.0)
#: A learned ceiling between the best trial and the declared upper bound, and the normal prior of its logit share.
#: NOTE: docs/decisions/0009-analysis-gp-ceiling.md
CEILING = True
CEILING_PRIOR = (3.0, 1.5)
#: A noise in the metric's own units beside the warped scale's (two bounds only: :attr:`GPFit.metric_noise`), the
#: normal prior of its log sd and its box, both relative to the bounds' range (an accuracy's: 1).
#: NOTE: docs/decisions/0086-metric-unit-noise.md
METRIC_NOISE = True
METRIC_NOISE_PRIOR = (math.log(3e-3), 0.5)
METRIC_NOISE_BOUNDS = (1e-5, 1e-2)


# ----------------------------------------------------------------------------- parameter vector
@dataclass(frozen=True)
class Slot:
    """One block of the parameter vector: its length, prior and box (all in sampler units)."""

    size: int
    log: bool  # the sampler moves log(value)
    prior: tuple[float, float]  # normal (mean, sd) in sampler units
    box: tuple[float, float]  # in value units


def parameter_slots(gp: GPFit) -> list[Slot]:
    """The parameter blocks of ``gp`` in the order of :func:`pack`."""
    out = []
    for term in gp.terms:
        if term.columns:
            if not term.factors:
                out.append(Slot(1, True, (0.0, 1.0), VARIANCE_BOUNDS))
            d = len(term.columns)
            out.append(Slot(n_lengthscales(gp, term), True, (math.sqrt(2) + 0.5 * math.log(d), math.sqrt(3)),
                             LENGTHSCALE_BOUNDS))
        for f in term.factors:
            out.append(Slot(f.W.size, False, (0.0, 1.0), W_BOUNDS))
            out.append(Slot(f.kappa.size, True, (0.0, 1.5), KAPPA_BOUNDS))
    out.append(Slot(1, True, NOISE_PRIOR, (1e-8, NOISE_MAX)))
    if gp.warp is not None and gp.warp.two_sided:
        out.append(Slot(2, True, (0.0, SHAPE_PRIOR_SD), SHAPE_BOUNDS))
        if has_ceiling(gp):
            out.append(Slot(1, False, CEILING_PRIOR, (-15.0, 15.0)))
        if has_metric_noise(gp):
            width = _range(gp.warp)
            out.append(Slot(1, True, (METRIC_NOISE_PRIOR[0] + math.log(width), METRIC_NOISE_PRIOR[1]),
                            (METRIC_NOISE_BOUNDS[0] * width, METRIC_NOISE_BOUNDS[1] * width)))
    for _ in warped_columns(gp):
        out.append(Slot(2, True, (0.0, INPUT_WARP_PRIOR_SD), INPUT_WARP_BOUNDS))
    return out


def has_ceiling(gp: GPFit) -> bool:
    """Whether the warp's ceiling is sampled: two bounds, and a best trial below the upper one."""
    w = gp.warp
    return CEILING and w is not None and w.two_sided and float(np.max(gp.y)) < float(_upper_bound(w))


def has_metric_noise(gp: GPFit) -> bool:
    """Whether a noise in the metric's units is sampled: a two-sided warp (see :data:`METRIC_NOISE`)."""
    return METRIC_NOISE and gp.warp is not None and gp.warp.two_sided


def _range(warp: OutputWarp) -> float:
    """The width of a two-sided warp's declared bounds."""
    assert warp.bounds.low is not None
    return _upper_bound(warp) - warp.bounds.low


def _upper_bound(warp: OutputWarp) -> float:
    """The declared upper bound of a two-sided warp."""
    if warp.bounds.high is None:
        raise ValueError("a ceiling needs an upper bound")
    return warp.bounds.high


def warped_columns(gp: GPFit) -> list[int]:
    """The continuous columns whose inputs are warped (none unless INPUT_WARP)."""
    return sorted({c for t in gp.terms for c in t.columns}) if INPUT_WARP else []


def n_lengthscales(gp: GPFit, term: KernelTerm) -> int:
    """Free lengthscales of a term: one per column with ARD, one in all without."""
    return term.lengthscales.size if gp.kernel_name.endswith("-ard") else 1


def pack(gp: GPFit) -> NDArray[np.float64]:
    parts: list[Any] = []
    for term in gp.terms:
        if term.columns:
            if not term.factors:
                parts.append([term.variance])
            parts.append(term.lengthscales[:n_lengthscales(gp, term)])
        for f in term.factors:
            parts += [f.W.ravel(), f.kappa]
    parts.append([gp.noise_variance])
    if gp.warp is not None and gp.warp.two_sided:
        parts.append([gp.warp.a, gp.warp.b])
        if has_ceiling(gp):
            hi, top = _upper_bound(gp.warp), gp.warp.top
            y_max = float(np.max(gp.y))
            share = 0.98 if top is None else min(max((top - y_max) / (hi - y_max), 1e-6), 1 - 1e-6)
            parts.append([math.log(share / (1.0 - share))])
        if has_metric_noise(gp):
            start = math.exp(METRIC_NOISE_PRIOR[0]) * _range(gp.warp)
            parts.append([gp.metric_noise if gp.metric_noise > 0.0 else start])
    shapes = {c: (a, b) for c, a, b in gp.input_warp}
    for c in warped_columns(gp):
        parts.append(list(shapes.get(c, (1.0, 1.0))))
    values = np.concatenate([np.asarray(p, dtype=np.float64).ravel() for p in parts])
    logs = np.concatenate([np.full(s.size, s.log) for s in parameter_slots(gp)])
    return np.where(logs, np.log(np.maximum(values, 1e-300)), values)


def unpack(theta: NDArray[np.float64], gp: GPFit) -> tuple[tuple[KernelTerm, ...], float, OutputWarp | None,
                                                             tuple[tuple[int, float, float], ...], float]:
    """Terms, noise variance, output warp, input warp and metric-unit noise sd (0: none) of a parameter vector
    laid out like ``gp``'s."""
    i = 0

    def take(size: int, log: bool) -> NDArray[np.float64]:
        nonlocal i
        v = theta[i:i + size]
        i += size
        return np.exp(v) if log else v.copy()

    terms = []
    for term in gp.terms:
        variance, ls = term.variance, term.lengthscales
        if term.columns:
            if not term.factors:
                variance = float(take(1, True)[0])
            # A kernel without ARD has one lengthscale, shared by its columns.
            ls = np.broadcast_to(take(n_lengthscales(gp, term), True), term.lengthscales.shape).copy()
        factors = []
        for f in term.factors:
            W = take(f.W.size, False).reshape(f.W.shape)
            factors.append(CategoryFactor(f.column, W, take(f.kappa.size, True)))
        terms.append(KernelTerm(term.columns, ls, variance, tuple(factors), term.family))
    noise = float(take(1, True)[0])
    warp = gp.warp
    if warp is not None and warp.two_sided:
        a, b = take(2, True)
        top = None
        if has_ceiling(gp):
            hi, y_max = _upper_bound(warp), float(np.max(gp.y))
            top = ceiling_top(y_max, hi, float(take(1, False)[0]))
        warp = warp.with_shapes(float(a), float(b), top)
    metric_noise = float(take(1, True)[0]) if has_metric_noise(gp) else 0.0
    inputs = []
    for c in warped_columns(gp):
        a, b = take(2, True)
        inputs.append((c, float(a), float(b)))
    return tuple(terms), noise, warp, tuple(inputs), metric_noise


def ceiling_top(y_max: float, high: float, logit: float) -> float:
    """The warp's ceiling ``y_max + s (high - y_max)`` of its sampled ``logit(s)``."""
    return y_max + (high - y_max) / (1.0 + math.exp(-logit))


def shortest_lengthscale(theta: NDArray[np.float64], gp: GPFit) -> float:
    """The shortest lengthscale of any term of ``theta`` (laid out like ``gp``), or inf without one."""
    return min((float(np.min(t.lengthscales)) for t in unpack(theta, gp)[0] if t.columns), default=math.inf)


def parameter_names(gp: GPFit) -> list[str]:
    names: list[str] = []
    for t, term in enumerate(gp.terms):
        if term.columns:
            if not term.factors:
                names.append(f"t{t}.variance")
            names += [f"t{t}.lengthscale[{c}]" for c in term.columns][:n_lengthscales(gp, term)]
        for f in term.factors:
            names += [f"t{t}.W[{f.column}][{i}]" for i in range(f.W.size)]
            names += [f"t{t}.kappa[{f.column}][{i}]" for i in range(f.kappa.size)]
    names.append("noise_variance")
    if gp.warp is not None and gp.warp.two_sided:
        names += ["warp.a", "warp.b"] + (["warp.top_logit"] if has_ceiling(gp) else [])
        names += ["metric_noise"] if has_metric_noise(gp) else []
    for c in warped_columns(gp):
        names += [f"input_warp[{c}].a", f"input_warp[{c}].b"]
    return names
