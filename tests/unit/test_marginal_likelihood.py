"""The numpy objective of a GP fit against GPy's model of the same terms, and its gradient against
finite differences."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize

from sweeper.search import gp_model
from sweeper.search.marginal_likelihood import MarginalLikelihood
from tests.gpy_reference import build_model

STRUCTURES = [(None, {}), (None, {2: 3}), ([[0], [1], [2], [3]], {2: 3, 3: 2}), ([[0, 2], [1], [3]], {2: 3, 3: 2}),
              ([[0], [1, 2, 3]], {})]
PRIOR = (1.5, 1.7)


def _both(family: str, ard: bool, terms: list | None, categories: dict[int, int], prior: tuple | None,
          seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    X = rng.random((25, 4))
    z = np.sin(5 * X[:, 0]) + (X[:, 1] > 0.5) + 0.1 * rng.normal(size=25)
    layout = gp_model.term_layout(4, categories, terms)
    return (build_model(X, z, 1e-6, layout, family, ard, 2, prior),
            MarginalLikelihood(X, z, layout, family, ard, 2, 1e-6, prior), layout, rng)


@pytest.mark.parametrize("prior", [None, PRIOR])
@pytest.mark.parametrize("terms, categories", STRUCTURES)
@pytest.mark.parametrize("kernel", ["matern52-ard", "matern52", "rbf-ard", "rbf"])
def test_objective_and_gradient_equal_gpys(kernel: str, terms: list | None, categories: dict, prior: tuple | None):
    family, _, ard = kernel.partition("-")
    gpy, ours, layout, rng = _both(family, bool(ard), terms, categories, prior, seed=len(str(terms)))
    for _ in range(3):
        gpy[:] = np.concatenate(gp_model.start_values(layout, bool(ard), 2, 1e-2, rng))
        # Away from the start, where every parameter's gradient is far from 0.
        x = gpy.optimizer_array + rng.normal(0.0, 0.5, size=gpy.optimizer_array.shape)
        f_gpy, g_gpy = gpy._objective_grads(x)
        f, g = ours._objective(x)
        assert f == pytest.approx(f_gpy, rel=1e-9, abs=1e-9)
        np.testing.assert_allclose(g, g_gpy, rtol=1e-7, atol=1e-9 * np.max(np.abs(g_gpy)))
        ll, lp = ours.evaluate(ours.split(ours._theta_of(x)))
        assert ll == pytest.approx(float(gpy.log_likelihood()), rel=1e-9)
        assert lp == pytest.approx(float(gpy.log_prior()), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("kernel", ["matern52-ard", "rbf"])
def test_gradient_matches_finite_differences(kernel: str) -> None:
    family, _, ard = kernel.partition("-")
    _, ours, layout, rng = _both(family, bool(ard), [[0, 2], [1], [3]], {2: 3, 3: 2}, PRIOR, seed=3)
    x = ours._x_of(np.concatenate(gp_model.start_values(layout, bool(ard), 2, 1e-2, rng)))
    error = scipy.optimize.check_grad(lambda v: ours._objective(v)[0], lambda v: ours._objective(v)[1], x,
                                      epsilon=1e-6)
    assert error < 1e-4 * max(1.0, float(np.linalg.norm(ours._objective(x)[1])))


@pytest.mark.parametrize("prior", [None, PRIOR])
def test_one_restart_reaches_gpys_optimum(prior: tuple | None) -> None:
    """From the same start, L-BFGS-B on the numpy objective ends where GPy's own optimisation ends."""
    gpy, ours, layout, _ = _both("matern52", True, None, {2: 3}, prior, seed=7)
    start = gp_model.start_values(layout, True, 2, 1e-2, None)
    gpy[:] = np.concatenate(start)
    gpy.optimize(optimizer="lbfgsb", max_iters=500, messages=False)
    values = ours.maximise(start, 500)
    # The objective (the likelihood, or likelihood plus log prior for a MAP) to L-BFGS-B's tolerance.
    assert sum(ours.evaluate(values)) == pytest.approx(float(gpy.log_likelihood() + gpy.log_prior()), abs=1e-4)
    np.testing.assert_allclose(np.concatenate(values), gpy.param_array, rtol=0.05, atol=1e-3)
    assert sum(ours.evaluate(values)) > sum(ours.evaluate(start)) + 1.0  # and it moved to the optimum
