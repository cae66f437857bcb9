"""Whether a sweep's metric depends on any choice: the permutation test in front of the maps and the indices."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bench.ml_maps import MAPS, truth_at
from sweeper.analysis.effect_test import ALPHA, MAX_TEST_POINTS, PERMUTATIONS, effect_test
from sweeper.analysis.multiverse import fit_multiverse, posterior_sensitivity, sensitivity
from sweeper.search.design import sobol_design
from sweeper.search.grammar import parse_specs
from sweeper.search.warping import MetricBounds

SPACE3 = parse_specs({"a": "interval(0, 1)", "b": "interval(0, 1)", "c": "interval(0, 1)"})


def _noise(seed: int, n: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """The case that found the fault: 32 Sobol points over 3 dims of an accuracy that is 0.8 + seed noise."""
    X = sobol_design(n, 3, seed=seed)
    return X, np.clip(0.8 + np.random.default_rng(seed).normal(0.0, 0.05, n), 0.0, 1.0)


def test_pure_noise_shows_no_effect_and_the_indices_it_would_have_reported_are_cautioned() -> None:
    """Sobol indices of the posterior mean named a dim 'most important' on noise; the test says not to read them."""
    X, y = _noise(0)
    fit = fit_multiverse(SPACE3, X, y, seed=0, bounds=MetricBounds(0.0, 1.0))
    apportioned = posterior_sensitivity(fit, n_base=256, repeats=2)
    assert apportioned.total.max() > 0.5  # the mean's wiggles on noise, apportioned as if they were effects
    test = effect_test(SPACE3, fit.X, fit.y, warp=fit.gp.warp, seed=0)
    assert not test.shown and test.p_value is not None and test.p_value > ALPHA
    assert test.permutations == PERMUTATIONS and test.n == 32
    caution = test.caution("test_acc")
    assert caution is not None and "do not show that `test_acc` depends on any choice" in caution
    assert "Run more trials" in caution and f"p = {test.p_value:.2f}" in caution
    assert test.p_value == (1 + test.as_good) / (1 + PERMUTATIONS) and test.verdict().startswith("not shown")


def test_real_seed_noise_of_a_model_that_ignores_the_choices_shows_no_effect() -> None:
    """Real variation between seeds (SGD's shuffling on breast cancer) over three choices the model never reads.

    Four sweeps of 32 trials: a test at level 0.05 shows an effect in two or more of four with probability 1.4 %;
    here it shows one (p = 0.35, 0.4, 0.25 and 0.05; decision 0078 has more).
    """
    from bench.effect_test import seed_noise_scores

    shown = []
    for sweep in range(4):
        U, scores = seed_noise_scores(sweep)
        assert np.ptp(scores) > 0.03  # real noise of a few test examples, not a constant
        shown.append(effect_test(SPACE3, U, scores, seed=0).shown)
    assert sum(shown) <= 1, shown


@pytest.mark.parametrize("name", ["svm", "sgd"])
def test_a_real_map_s_effect_is_shown(name: str) -> None:
    """The demo's SVC map (cliffs, a plateau) and the SGD map (a choice dim) at 32 Sobol points: every shuffle fits
    worse, and by far: ``K`` below 10^-5, under anything pure noise gave in decision 0078 (-4.2)."""
    m = MAPS[name]
    X = sobol_design(32, m.space.d, seed=0)
    y = truth_at(name, X)
    fit = fit_multiverse(m.space, X, y, seed=0, bounds=MetricBounds(*m.bounds), kept=1)
    test = effect_test(m.space, X, y, warp=fit.gp.warp, seed=0)
    assert test.shown and test.caution("acc") is None
    assert test.as_good == 0 and test.p_value == pytest.approx(ALPHA) and test.log10_K < -5.0
    assert test.verdict() == "effect (0 of 19 shuffles fit as well; p = 0.05)"


def test_a_weak_effect_beside_noise_is_shown_by_the_shuffles() -> None:
    """A linear effect of 0.04 over the space beside noise of sd 0.02: a ``K`` near what pure noise over a choice dim
    reached (10^-4.2), and shown by the shuffles."""
    X = sobol_design(32, 3, seed=2)
    y = 0.8 + 0.04 * X[:, 0] + np.random.default_rng(2).normal(0.0, 0.02, 32)
    test = effect_test(SPACE3, X, y, seed=0)
    assert -5.0 < test.log10_K < -1.0
    assert test.shown and test.p_value == pytest.approx(1.0 / (1 + PERMUTATIONS))


def test_a_constant_metric_is_left_to_its_own_note() -> None:
    X = sobol_design(12, 3, seed=0)
    test = effect_test(SPACE3, X, np.full(12, 0.9))
    assert test.note.startswith("the metric is constant") and test.verdict() == "no evidence"
    assert not test.shown and test.caution("acc") is None and test.permutations == 0 and test.p_value is None
    with pytest.raises(ValueError, match="permutations must be a positive int; got 0"):
        effect_test(SPACE3, X, np.arange(12.0), permutations=0)


def test_a_large_sweep_is_tested_on_a_subset() -> None:
    X, y = _noise(3, n=MAX_TEST_POINTS + 40)
    test = effect_test(SPACE3, X, y, seed=0, permutations=3)
    assert test.n == MAX_TEST_POINTS and test.permutations == 3
    assert test.p_value is not None and test.p_value in {k / 4 for k in range(1, 5)}


def test_the_python_sensitivity_warns_on_noise_and_not_on_an_effect() -> None:
    X, y = _noise(0)
    with pytest.warns(UserWarning, match="do not show that `y` depends on any choice"):
        sensitivity(X, y, ["a", "b", "c"], n_base=128, repeats=2)
    U = sobol_design(24, 2, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        sensitivity(U, 5 * U[:, 0] + 0.1 * U[:, 1], ["x1", "x2"], n_base=128, repeats=2)


def test_the_bench_counts_what_the_test_shows(tmp_path, monkeypatch) -> None:
    """``python -m bench effect`` (decision 0078's measurements), at its smoke sizes: each kind of case runs through
    the test as ``sweeper multiverse`` runs it, and its table counts the effects shown."""
    import json

    from bench import __main__ as bench_main
    from bench import report

    monkeypatch.setattr(report, "RESULTS_DIR", tmp_path)
    bench_main.main(["effect", "--smoke"])
    rows = json.loads((tmp_path / "effect_test_smoke.json").read_text())["rows"]
    assert [(r["case"], r["shown"]) for r in rows] == [("noise", False), ("seed noise", False), ("map", True)]
    assert "Where there is no effect (2 tests): shown in 0" in (tmp_path / "effect_test_smoke.md").read_text()


def test_bit_identical_copies_count_once() -> None:
    """A fixed seed measures each configuration twice with the same result: 12 measurements of noise, not 24 (as
    24 rows, every shuffle that parts two copies fits worse, and the test showed an effect)."""
    U = sobol_design(12, 3, seed=0)
    X = np.repeat(U, 2, axis=0)
    noise = np.repeat(0.8 + np.random.default_rng(0).normal(0.0, 0.05, 12), 2)
    test = effect_test(SPACE3, X, noise, seed=0)
    assert test.n == 12 and not test.shown
    effect = np.repeat(0.7 + 0.2 * U[:, 0], 2)
    assert effect_test(SPACE3, X, effect, seed=0).shown
