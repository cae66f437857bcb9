"""Slope-weighted IVR against plain IVR and Sobol on the demo's own real map (issue 37).

The ground truth is the committed 40 x 40 grid of the demo's SVC test accuracy
(``bench/data/map_svm.npz``); each trial reads it. The searcher's policy is driven as Tune drives
it with one worker (:func:`bench.efficiency.policy_points`), and every design is scored as the
efficiency benchmark scores it: the normalised RMSE of one plain GP fitted to its points, over the
grid's nodes. Plain IVR spreads its trials evenly over a map whose error lies on one cliff; the
slope weights (``ivr_slope_weight``) send them there, and draw a better map from the same number of
trials. bench/README.md §3 has the five-seed tables on seven maps.
"""

from __future__ import annotations

import numpy as np
import pytest

from bench import efficiency

pytestmark = pytest.mark.usefixtures("one_blas_thread")

MAP, N, SEEDS = "svm", 40, (0, 1)


def map_error(strategy: str, seed: int, overrides: dict[str, float]) -> float:
    f, _ = efficiency.objective(MAP)
    X = efficiency.policy_points(strategy, efficiency.search_space(MAP), seed, N, f, overrides)
    X_test, truth = efficiency.test_set(MAP)
    return efficiency.normalised_errors(efficiency.shared_surrogate_mean(X, f(X), X_test), truth)[0]


@pytest.fixture(scope="module")
def errors() -> dict[str, float]:
    designs = {"slope-weighted": ("ours", {}), "plain": ("ours", {"ivr_slope_weight": 0.0}), "sobol": ("sobol", {})}
    return {name: float(np.mean([map_error(strategy, seed, overrides) for seed in SEEDS]))
            for name, (strategy, overrides) in designs.items()}


def test_slope_weights_draw_the_demo_map_better_than_plain_ivr_and_sobol(errors) -> None:
    # Measured: 0.300 against plain IVR's 0.311 and Sobol's 0.345 (the same points every run: seeded).
    assert errors["slope-weighted"] < errors["plain"], errors
    assert errors["slope-weighted"] < 0.9 * errors["sobol"], errors


def test_the_searcher_beats_sobol_on_a_held_out_map() -> None:
    # bench/ml_maps.py's krr map (a test R^2 with no lower bound) was made after the searcher's settings were
    # chosen (bench.ml_maps.HELD_OUT). Measured on seed 0 at n = 30: 0.21 against Sobol's 0.46 (five seeds: 0.235
    # against 0.487); plain IVR's points would be scored the same way.
    f, _ = efficiency.objective("krr")
    X_test, truth = efficiency.test_set("krr")
    space = efficiency.search_space("krr")
    errors = {}
    for strategy in ("ours", "sobol"):
        X = efficiency.policy_points(strategy, space, 0, 30, f, {})
        errors[strategy] = efficiency.normalised_errors(efficiency.shared_surrogate_mean(X, f(X), X_test), truth)[0]
    assert errors["ours"] < 0.7 * errors["sobol"], errors


def test_the_oracle_scores_a_candidate_by_the_fit_it_would_give() -> None:
    """The oracle's rank-one update equals the yardstick's posterior with the point added, hyperparameters held."""
    from sweeper.search.gp import GPFit
    from sweeper.search.gp_fit import fit_gp

    f, d = efficiency.objective(MAP)
    X_test, _ = efficiency.test_set(MAP)
    X = efficiency.initial_design(d, 0, 16)
    gp = fit_gp(X, f(X), seed=0, n_restarts=3)
    cand = np.random.default_rng(1).uniform(size=(5, d))
    means = efficiency.means_with_one_more(gp, X_test, cand, f(cand))
    for j in range(cand.shape[0]):
        grown = GPFit(gp.terms, gp.noise_variance, gp.y_mean, gp.y_std, gp.log_likelihood,
                      np.vstack([X, cand[j]]), np.append(f(X), f(cand[j:j + 1])), gp.kernel_name)
        np.testing.assert_allclose(means[:, j], grown.predict_mean(X_test), rtol=1e-8, atol=1e-8)


def test_a_checkpoint_where_the_tables_go_is_refused_before_anything_runs(tmp_path, monkeypatch) -> None:
    import argparse

    monkeypatch.setattr(efficiency, "RESULTS_DIR", tmp_path)
    parser = argparse.ArgumentParser()
    efficiency.add_arguments(parser)
    args = parser.parse_args(["--functions", "branin", "--strategies", "sobol", "--n", "10",
                              "--checkpoint", str(tmp_path / "mine.json"), "--results-name", "mine"])
    with pytest.raises(SystemExit, match="--checkpoint .*mine.json is where --results-name mine writes its tables"):
        efficiency.run(args)
    assert not (tmp_path / "mine.json").exists()
