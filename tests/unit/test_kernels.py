"""Composite kernels: the numpy covariance equals GPy's, and coregionalization recovers category correlations."""

from __future__ import annotations

import GPy
import numpy as np
import pytest

import sweeper.search.gp_model as gp_model
from sweeper.search.design import sobol_design
from sweeper.search.gp import GPY_JITTER
from sweeper.search.gp_fit import fit_gp
from sweeper.search.kernels import KERNELS, CategoryFactor, KernelTerm, category_index, kernel_family
from tests.gpy_reference import build_model


def two_category_data(seed: int, sign: float, offset: float) -> tuple[np.ndarray, np.ndarray]:
    """Column 1 is a 2-category dim; category B's response is sign * A's + offset."""
    X = sobol_design(40, 2, seed=seed)
    f = np.sin(6 * X[:, 0]) + X[:, 0] ** 2
    return X, np.where(category_index(X[:, 1], 2) == 0, f, sign * f + offset)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_coregionalization_recovers_a_shifted_category_as_positively_correlated(seed: int) -> None:
    X, y = two_category_data(seed, 1.0, 0.5)
    corr = fit_gp(X, y, seed=seed, categories={1: 2}).factors[0].correlation()
    assert corr[0, 1] > 0.9
    np.testing.assert_allclose(np.diag(corr), 1.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_coregionalization_recovers_a_mirrored_category_as_negatively_correlated(seed: int) -> None:
    X, y = two_category_data(seed, -1.0, 0.0)
    assert fit_gp(X, y, seed=seed, categories={1: 2}).factors[0].correlation()[0, 1] < -0.9


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("terms", [None, [[0], [1], [2], [3]], [[0, 2], [1], [3]]])
def test_numpy_posterior_equals_gpy_for_every_structure(kernel: str, terms: list | None) -> None:
    rng = np.random.default_rng(5)
    X = rng.random((30, 4))
    y = np.sin(4 * X[:, 0]) * (1 + category_index(X[:, 2], 3)) + X[:, 1] + 0.3 * category_index(X[:, 3], 2)
    categories = {2: 3, 3: 2}
    fit = fit_gp(X, y, seed=0, categories=categories, kernel=kernel, terms=terms, n_restarts=1, rank=2,
                 max_iters=30)  # any values will do: the test compares two evaluations of one model
    # Rebuild GPy's model with the fitted values and ask it for the same posterior.
    family, ard = kernel_family(kernel)
    layout = gp_model.term_layout(4, categories, terms)
    z = (y - fit.y_mean) / fit.y_std
    model = build_model(X, z, 1e-6, layout, family, ard, 2)
    values = []
    for t in fit.terms:
        if t.columns:
            values += [[t.variance], t.lengthscales if ard else t.lengthscales[:1]]
        for f in t.factors:
            values += [f.W.ravel(), f.kappa]
    model[:] = np.concatenate([*values, [fit.noise_variance - GPY_JITTER]])
    assert float(model.log_likelihood()) == pytest.approx(fit.log_likelihood, rel=1e-8)
    Xs = rng.random((25, 4))
    Xs_gpy = Xs.copy()
    for c, k in categories.items():
        Xs_gpy[:, c] = category_index(Xs[:, c], k)
    mean_gpy, var_gpy = model.predict_noiseless(Xs_gpy)
    mean, sd = fit.predict(Xs)
    np.testing.assert_allclose(mean, fit.y_mean + fit.y_std * mean_gpy[:, 0], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(sd**2, fit.y_std**2 * var_gpy[:, 0], rtol=1e-6, atol=1e-10)
    assert len(fit.terms) == (1 if terms is None else len(terms))


def test_term_covariance_is_stationary_times_category_matrix() -> None:
    factor = CategoryFactor(1, np.array([[1.0], [-0.5]]), np.array([0.1, 0.2]))
    term = KernelTerm((0,), np.array([0.4]), 1.0, (factor,))
    X1 = np.array([[0.1, 0.2], [0.3, 0.9]])  # categories 0 and 1
    X2 = np.array([[0.5, 0.7]])  # category 1
    stat = GPy.kern.Matern52(1, lengthscale=0.4).K(X1[:, :1], X2[:, :1])[:, 0]
    B = factor.B
    np.testing.assert_allclose(term(X1, X2)[:, 0], stat * np.array([B[0, 1], B[1, 1]]))
    np.testing.assert_allclose(term.diag(X1), [B[0, 0], B[1, 1]])
    assert factor.correlation()[0, 1] == pytest.approx(-0.5 / np.sqrt(1.1 * 0.45))


def test_category_index_cells() -> None:
    np.testing.assert_array_equal(category_index(np.array([0.0, 0.33, 0.34, 0.999, 1.0]), 3), [0, 0, 1, 2, 2])


def test_bad_structure_is_rejected() -> None:
    X = sobol_design(8, 2, seed=0)
    with pytest.raises(ValueError, match="terms must split the columns"):
        fit_gp(X, X[:, 0], seed=0, terms=[[0]])
    with pytest.raises(ValueError, match="categories maps a column"):
        fit_gp(X, X[:, 0], seed=0, categories={5: 2})
    with pytest.raises(ValueError, match="unknown kernel"):
        fit_gp(X, X[:, 0], seed=0, kernel="linear")
    with pytest.raises(ValueError, match="rank"):
        fit_gp(X, X[:, 0], seed=0, rank=0)
