"""The parameters of a GP fit: their boxes and starting values, in the order of GPy's bounded
``GPRegression`` of the same sum of kernel terms (per term the stationary variance and
lengthscale(s), then ``W`` and ``kappa`` of each coregionalization factor; the noise variance
last), and reading fitted values back into a :class:`~sweeper.search.gp.GPFit`'s terms. The
objective they are fitted by is :mod:`sweeper.search.marginal_likelihood`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sweeper.search.gp import GPY_JITTER, GPFit
from sweeper.search.kernels import CategoryFactor, KernelTerm, kernel_family

log = logging.getLogger(__name__)

# Hyperparameter boxes on the standardised scale, inputs in the unit cube.
LENGTHSCALE_BOUNDS = (1e-3, 1e2)
VARIANCE_BOUNDS = (1e-3, 1e2)
# Coregionalization B = W Wᵀ + diag(kappa): W's entries and kappa, standardised scale.
W_BOUNDS = (-10.0, 10.0)
KAPPA_BOUNDS = (1e-6, 1e2)
NOISE_MAX = 10.0
# Starting points of the restarts: restart 0 is fixed, the others are random.
DEFAULT_LENGTHSCALE = 0.3
INIT_LENGTHSCALE_RANGE = (0.05, 2.0)
INIT_VARIANCE = 1.0
INIT_NOISE = 1e-2
INIT_W = 0.5
INIT_KAPPA = 0.5


@dataclass(frozen=True)
class TermLayout:
    """Which columns a term's stationary part and factors act on (see :func:`term_layout`)."""

    continuous: tuple[int, ...]
    categorical: tuple[tuple[int, int], ...]  # (column, number of categories)


def term_layout(
    d: int, categories: Mapping[int, int], terms: Sequence[Sequence[int]] | None
) -> list[TermLayout]:
    groups = [list(range(d))] if terms is None else [list(t) for t in terms]
    flat = sorted(c for g in groups for c in g)
    if flat != list(range(d)) or any(not g for g in groups):
        raise ValueError(f"terms must split the columns 0..{d - 1} into non-empty groups; got {terms!r}")
    for c, k in categories.items():
        if not 0 <= c < d or int(k) < 2:
            raise ValueError(f"categories maps a column in 0..{d - 1} to a count >= 2; got {c!r}: {k!r}")
    return [TermLayout(tuple(c for c in g if c not in categories),
                       tuple((c, int(categories[c])) for c in g if c in categories)) for g in groups]


def dimension_scaled_prior(d: int) -> tuple[float, float]:
    """``(mu, sigma)`` of the LogNormal lengthscale prior of Hvarfner et al. (2024) for ``d`` inputs.

    ``mu = sqrt(2) + log(d) / 2``, ``sigma = sqrt(3)`` on unit-cube inputs, BoTorch's default
    since 0.12 (whose ``SingleTaskGP`` the efficiency benchmark compares with). As a MAP
    penalty its mode is ``exp(mu - sigma^2)``: 0.29 for ``d = 2``, 0.5 for ``d = 6``; it
    keeps a lengthscale fitted on a handful of points from running off to the box's edge.

    Reference:
        Hvarfner, C., Hellsten, E. O., Nardi, L. (2024). Vanilla Bayesian Optimization
        Performs Great in High Dimensions. ICML 2024.
    """
    if d < 1:
        raise ValueError(f"d must be >= 1; got {d!r}")
    return float(np.sqrt(2.0) + 0.5 * np.log(d)), float(np.sqrt(3.0))


def start_values(
    layout: list[TermLayout], ard: bool, rank: int, noise: float, rng: np.random.Generator | None
) -> list[NDArray[np.float64]]:
    """A restart's starting values in the order of ``model.flattened_parameters`` (None: restart 0)."""
    lo, hi = np.log(INIT_LENGTHSCALE_RANGE[0]), np.log(INIT_LENGTHSCALE_RANGE[1])
    values: list[NDArray[np.float64]] = []
    for term in layout:
        if term.continuous:
            m = len(term.continuous) if ard else 1
            ls = np.full(m, DEFAULT_LENGTHSCALE) if rng is None else np.exp(rng.uniform(lo, hi, size=m))
            values += [np.array([INIT_VARIANCE]), ls]
        for _, n_cat in term.categorical:
            W = np.full(n_cat * rank, INIT_W) if rng is None else rng.normal(0.0, INIT_W, size=n_cat * rank)
            values += [W, np.full(n_cat, INIT_KAPPA)]
    return [*values, np.array([noise])]


def values_from_fit(
    init: GPFit | Mapping[str, Any], layout: list[TermLayout], family: str, ard: bool, rank: int,
    noise_floor: float,
) -> list[NDArray[np.float64]] | None:
    """``init``'s hyperparameters as a start in the order of :func:`start_values`, inside the boxes.

    ``init`` is a :class:`GPFit` or its :meth:`GPFit.hyperparameters` (JSON-able, e.g. from
    a saved searcher state). None when it has another layout (terms, columns, categories,
    rank or kernel family), or is malformed.
    """
    hp = init.hyperparameters() if isinstance(init, GPFit) else init
    try:
        terms = _hp_terms(hp, layout)
        if len(terms) != len(layout):
            return None
        values: list[NDArray[np.float64]] = []
        for term, t in zip(layout, terms, strict=True):
            term_values = _term_values(term, t, family, ard, rank)
            if term_values is None:
                return None
            values += term_values
        noise = float(hp["noise_variance"]) - GPY_JITTER
        values.append(_inside([max(noise, noise_floor)], (noise_floor, NOISE_MAX)))
    except (KeyError, TypeError, ValueError) as exc:
        log.debug("warm start ignored: %s", exc)
        return None
    if not all(np.all(np.isfinite(v)) for v in values):
        return None
    return values


def _hp_terms(hp: Mapping[str, Any], layout: list[TermLayout]) -> list[Any]:
    """The terms of :meth:`GPFit.hyperparameters`, a single stationary kernel's written as one term."""
    if "terms" in hp:
        return list(hp["terms"])
    return [{"columns": list(layout[0].continuous) if len(layout) == 1 else None,
             "family": kernel_family(str(hp.get("kernel", "matern52-ard")))[0],
             "lengthscales": hp["lengthscales"], "variance": hp["variance"], "factors": []}]


def _inside(v: Any, bounds: tuple[float, float]) -> NDArray[np.float64]:
    """``v`` clipped strictly inside ``bounds``: the logistic transform is infinite on them."""
    lo, hi = bounds
    margin = 1e-9 * (hi - lo)
    return np.clip(np.asarray(v, dtype=np.float64).ravel(), lo + margin, hi - margin)


def _term_values(
    term: TermLayout, t: Mapping[str, Any], family: str, ard: bool, rank: int
) -> list[NDArray[np.float64]] | None:
    """One term's start values (order of :func:`start_values`) from its dict, or None for another layout."""
    factors = list(t.get("factors", []))
    shapes = [np.asarray(f["W"], dtype=np.float64).reshape(len(f["kappa"]), -1).shape for f in factors]
    if (t["columns"] is None or tuple(t["columns"]) != term.continuous or t.get("family", family) != family
            or tuple((int(f["column"]), k) for f, (k, _) in zip(factors, shapes, strict=True)) != term.categorical
            or any(r != rank for _, r in shapes)):
        return None
    values: list[NDArray[np.float64]] = []
    if term.continuous:
        ls = np.asarray(t["lengthscales"], dtype=np.float64).ravel()
        if ls.shape[0] != len(term.continuous):
            return None
        ls = ls if ard else np.array([float(np.exp(np.mean(np.log(ls))))])
        variance = np.array([INIT_VARIANCE]) if term.categorical else _inside([t["variance"]], VARIANCE_BOUNDS)
        values += [variance, _inside(ls, LENGTHSCALE_BOUNDS)]
    for f in factors:
        values += [_inside(f["W"], W_BOUNDS), _inside(f["kappa"], KAPPA_BOUNDS)]
    return values


def read_terms(
    values: list[NDArray[np.float64]], layout: list[TermLayout], family: str
) -> tuple[tuple[KernelTerm, ...], float]:
    """Fitted terms and noise variance from parameter values in the order of :func:`start_values`."""
    it = iter(values)
    terms = []
    for term in layout:
        variance, ls = 1.0, np.zeros(0)
        if term.continuous:
            variance = float(next(it)[0])
            ls = np.broadcast_to(next(it), (len(term.continuous),)).astype(np.float64)
        factors = tuple(
            CategoryFactor(c, next(it).reshape(n_cat, -1).copy(), next(it).copy()) for c, n_cat in term.categorical
        )
        terms.append(KernelTerm(term.continuous, ls, variance, factors, family))
    noise = float(next(it)[0])
    return tuple(terms), noise
