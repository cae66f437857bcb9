"""GPy's model of a fit: the hyperparameter boxes and starting values, building a bounded
``GPRegression`` for a sum of kernel terms, and reading the fitted values back into a
:class:`~sweeper.search.gp.GPFit`. The only module in the project that imports GPy, lazily
inside :func:`build_model`, so importing it is cheap.
"""

from __future__ import annotations

import functools
import logging
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sweeper.search.gp import GPY_JITTER, GPFit
from sweeper.search.kernels import CategoryFactor, KernelTerm, category_index, kernel_family

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


def build_model(
    X: NDArray[np.float64], z: NDArray[np.float64], noise_floor: float, layout: list[TermLayout],
    family: str, ard: bool, rank: int, lengthscale_prior: tuple[float, float] | None = None,
) -> Any:
    """A bounded GPy ``GPRegression`` with the given terms (lazy GPy import).

    ``lengthscale_prior=(mu, sigma)`` puts ``GPy.priors.LogGaussian(mu, sigma)`` on the
    lengthscales of every stationary part (continuous columns only; coregionalization
    factors get none). The lengthscales keep their box: the bounded (logistic) transform
    has no log-Jacobian in GPy, so the MAP maximises likelihood times the LogNormal density
    of the lengthscale itself, as BoTorch/GPyTorch do.

    GPy copies kernels when it combines them, so the fitted values are read back from
    ``model.flattened_parameters``, whose order is the order built here: per term the
    stationary variance and lengthscale(s), then ``W`` and ``kappa`` of each factor;
    the noise variance last (see :func:`start_values` and :func:`read_terms`).
    """
    import GPy

    # GPy announces every model construction at INFO ("initializing Y", ...): one line per
    # fit would drown the sweep's own console output.
    logging.getLogger("GP").setLevel(max(logging.getLogger("GP").getEffectiveLevel(), logging.WARNING))
    if lengthscale_prior is not None:
        # paramz warns at every evaluation that the logistic transform's log-Jacobian is 0
        # (which is what the MAP here wants).
        quiet = logging.getLogger("paramz.transformations")
        quiet.setLevel(max(quiet.getEffectiveLevel(), logging.ERROR))
    stationary = {"matern52": GPy.kern.Matern52, "rbf": GPy.kern.RBF}[family]
    X_gpy = X.copy()
    summands = []
    for t, term in enumerate(layout):
        parts = []
        if term.continuous:
            k = stationary(len(term.continuous), active_dims=list(term.continuous), ARD=ard,
                           lengthscale=DEFAULT_LENGTHSCALE, name=f"t{t}_{family}")
            if lengthscale_prior is not None:
                # set_prior constrains the parameter positive (Logexp); the box is restored after.
                k.lengthscale.set_prior(GPy.priors.LogGaussian(*lengthscale_prior), warning=False)
            k.lengthscale.constrain_bounded(*LENGTHSCALE_BOUNDS, warning=False)
            if term.categorical:
                k.variance.constrain_fixed(INIT_VARIANCE, warning=False)
            else:
                k.variance.constrain_bounded(*VARIANCE_BOUNDS, warning=False)
            parts.append(k)
        for c, n_cat in term.categorical:
            X_gpy[:, c] = category_index(X[:, c], n_cat)
            b = GPy.kern.Coregionalize(1, output_dim=n_cat, rank=rank, active_dims=[c],
                                       W=np.full((n_cat, rank), INIT_W), kappa=np.full(n_cat, INIT_KAPPA),
                                       name=f"t{t}_c{c}")
            b.W.constrain_bounded(*W_BOUNDS, warning=False)
            b.kappa.constrain_bounded(*KAPPA_BOUNDS, warning=False)
            parts.append(b)
        summands.append(functools.reduce(operator.mul, parts))
    kern = functools.reduce(operator.add, summands)
    model = GPy.models.GPRegression(X_gpy, z[:, None], kernel=kern, noise_var=max(INIT_NOISE, noise_floor))
    model.likelihood.variance.constrain_bounded(noise_floor, NOISE_MAX, warning=False)
    return model


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
