"""GPy's bounded ``GPRegression`` of a fit's terms: the reference the numpy objective of
:mod:`sweeper.search.marginal_likelihood` and the numpy posterior of :mod:`sweeper.search.gp`
are tested against (the sweeper itself no longer imports GPy)."""

from __future__ import annotations

import functools
import logging
import operator
from typing import Any

import GPy
import numpy as np
from numpy.typing import NDArray

from sweeper.search import gp_model as spec
from sweeper.search.kernels import category_index


def build_model(
    X: NDArray[np.float64], z: NDArray[np.float64], noise_floor: float, layout: list[spec.TermLayout],
    family: str, ard: bool, rank: int, lengthscale_prior: tuple[float, float] | None = None,
) -> Any:
    """A bounded GPy ``GPRegression`` with the given terms, its parameters in the order of
    :func:`~sweeper.search.gp_model.start_values`.

    ``lengthscale_prior=(mu, sigma)`` puts ``GPy.priors.LogGaussian(mu, sigma)`` on the
    lengthscales of every stationary part; the bounded (logistic) transform has no
    log-Jacobian in GPy, so the MAP maximises likelihood times the LogNormal density of the
    lengthscale itself.
    """
    logging.getLogger("GP").setLevel(logging.WARNING)
    logging.getLogger("paramz.transformations").setLevel(logging.ERROR)
    stationary = {"matern52": GPy.kern.Matern52, "rbf": GPy.kern.RBF}[family]
    X_gpy = X.copy()
    summands = []
    for t, term in enumerate(layout):
        parts = []
        if term.continuous:
            k = stationary(len(term.continuous), active_dims=list(term.continuous), ARD=ard,
                           lengthscale=spec.DEFAULT_LENGTHSCALE, name=f"t{t}_{family}")
            if lengthscale_prior is not None:
                # set_prior constrains the parameter positive (Logexp); the box is restored after.
                k.lengthscale.set_prior(GPy.priors.LogGaussian(*lengthscale_prior), warning=False)
            k.lengthscale.constrain_bounded(*spec.LENGTHSCALE_BOUNDS, warning=False)
            if term.categorical:
                k.variance.constrain_fixed(spec.INIT_VARIANCE, warning=False)
            else:
                k.variance.constrain_bounded(*spec.VARIANCE_BOUNDS, warning=False)
            parts.append(k)
        for c, n_cat in term.categorical:
            X_gpy[:, c] = category_index(X[:, c], n_cat)
            b = GPy.kern.Coregionalize(1, output_dim=n_cat, rank=rank, active_dims=[c],
                                       W=np.full((n_cat, rank), spec.INIT_W), kappa=np.full(n_cat, spec.INIT_KAPPA),
                                       name=f"t{t}_c{c}")
            b.W.constrain_bounded(*spec.W_BOUNDS, warning=False)
            b.kappa.constrain_bounded(*spec.KAPPA_BOUNDS, warning=False)
            parts.append(b)
        summands.append(functools.reduce(operator.mul, parts))
    kern = functools.reduce(operator.add, summands)
    model = GPy.models.GPRegression(X_gpy, z[:, None], kernel=kern, noise_var=max(spec.INIT_NOISE, noise_floor))
    model.likelihood.variance.constrain_bounded(noise_floor, spec.NOISE_MAX, warning=False)
    return model
