"""The multiverse analysis: Bayes factors and sensitivity with known answers, maps, facets, axes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.special import ndtri

from sweeper.analysis.map_view import MapTrials, draw_map, map_view
from sweeper.analysis.multiverse import (
    axis_values,
    bayes_factor,
    category_facets,
    category_means,
    contour_map,
    fit_multiverse,
    interaction_tests,
    line_map,
    sensitivity,
)
from sweeper.search.design import sobol_design
from sweeper.search.grammar import parse_specs
from sweeper.search.interaction import BayesFactor, interaction_bayes_factor
from sweeper.search.space import FloatDim, GridDim, IntDim
from sweeper.search.warping import MetricBounds


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_bayes_factor_favours_the_additive_kernel_for_an_additive_function(seed: int) -> None:
    X = sobol_design(40, 2, seed=seed)
    assert bayes_factor(X, np.sin(3 * X[:, 0]) + X[:, 1] ** 2, seed=seed) > 1


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_bayes_factor_favours_the_shared_kernel_for_an_interacting_function(seed: int) -> None:
    X = sobol_design(40, 2, seed=seed)
    assert bayes_factor(X, np.sin(6 * X[:, 0] * X[:, 1]), seed=seed) < 1


def test_bayes_factor_fitted_on_a_subset_keeps_its_verdict_and_scores_all_results(
        caplog: pytest.LogCaptureFixture) -> None:
    X = sobol_design(160, 2, seed=0)
    small = X[:50]
    y_small = np.sin(3 * small[:, 0]) + small[:, 1] ** 2
    assert interaction_bayes_factor(small, y_small, max_fit_points=60) == interaction_bayes_factor(small, y_small)
    for y, sign in ((np.sin(3 * X[:, 0]) + X[:, 1] ** 2, 1), (np.sin(6 * X[:, 0] * X[:, 1]), -1)):
        exact = interaction_bayes_factor(X, y)
        with caplog.at_level("DEBUG", logger="sweeper.search.gp_fit"):
            caplog.clear()
            subset = interaction_bayes_factor(X, y, max_fit_points=60)
        assert "fitted on 60 of 160 observations" in caplog.text
        assert sign * exact.log10_K > 1 and sign * subset.log10_K > 1
        assert subset.n == 160 and subset.shared_log_likelihood != exact.shared_log_likelihood


def test_bayes_factor_reads_original_units_through_the_space() -> None:
    # The same additive function of log10(C) and g, given in original units: K > 1 through the space.
    space = parse_specs({"C": "tag(log, interval(1e-3, 1e3))", "g": "interval(0, 10)"})
    U = sobol_design(40, 2, seed=0)
    rows = [[p["C"], p["g"]] for p in space.from_unit(U)]
    y = np.sin(3 * U[:, 0]) + U[:, 1] ** 2
    assert bayes_factor(rows, y, space=space) > 10


def test_sensitivity_puts_the_main_effect_on_the_dominant_dim() -> None:
    X = sobol_design(40, 2, seed=0)
    s = sensitivity(X, 5 * X[:, 0] + 0.1 * X[:, 1], ["x1", "x2"])
    assert list(s) == ["x1", "x2"]
    assert s["x1"][0] > 0.98 and s["x2"][0] < 0.02
    assert s["x1"][1] >= s["x1"][0] - 0.02  # total >= main up to Monte Carlo error


def test_sensitivity_includes_categorical_dims() -> None:
    space = parse_specs({"model": "choice(a, b, c)", "x": "interval(0, 1)"})
    U = space.to_unit(space.from_unit(sobol_design(36, 2, seed=1)))
    offset = np.array([0.0, 2.0, 4.0])[np.floor(U[:, 0] * 3).astype(int)]
    rows = [[p["model"], p["x"]] for p in space.from_unit(U)]
    s = sensitivity(rows, offset + 0.1 * U[:, 1], ["model", "x"], space=space)
    assert s["model"][0] > 0.95 and s["x"][0] < 0.05


MIXED = parse_specs({"model": "choice(a, b)", "C": "tag(log, interval(1e-3, 1e3))",
                                "g": "interval(0, 1)"})


@pytest.fixture(scope="module")
def mixed_fit():
    U = MIXED.to_unit(MIXED.from_unit(sobol_design(32, 3, seed=0)))
    sign = np.where(U[:, 0] > 0.5, -1.0, 1.0)  # model b mirrors model a
    return fit_multiverse(MIXED, U, sign * np.sin(5 * U[:, 1]) + U[:, 2], seed=0)


def test_facets_are_the_category_combinations() -> None:
    space = parse_specs({"m": "choice(a, b)", "x": "interval(0, 1)", "d": "choice(u, v, w)"})
    facets = category_facets(space)
    assert [f[0] for f in facets][:2] == ["m=a, d=u", "m=a, d=v"] and len(facets) == 6
    assert facets[-1][1] == {0: 0.75, 2: pytest.approx(5 / 6)}
    assert category_facets(parse_specs({"x": "interval(0, 1)"})) == [("", {})]


def test_contour_map_is_the_gp_posterior_on_a_log_grid(mixed_fit) -> None:
    cm = contour_map(mixed_fit, 1, 2, resolution=11)
    assert (cm.x_dim, cm.y_dim, cm.x_log, cm.y_log) == ("C", "g", True, False)
    np.testing.assert_allclose(cm.x, np.logspace(-3, 3, 11))
    assert set(cm.mean) == {"model=a", "model=b"} and cm.mean["model=a"].shape == (11, 11)
    # Cell (row 3, column 7) of facet b is the GP at C-unit 0.7, g-unit 0.3, model b.
    # Its mean and sd are of a new trial's metric (noise included); sd_latent is the GP's about f alone.
    mean, sd = mixed_fit.gp.predict(np.array([[0.75, 0.7, 0.3]]), noise=True)
    latent = mixed_fit.gp.predict(np.array([[0.75, 0.7, 0.3]]))[1]
    assert cm.mean["model=b"][3, 7] == pytest.approx(mean[0]) and cm.sd["model=b"][3, 7] == pytest.approx(sd[0])
    assert cm.sd_latent["model=b"][3, 7] == pytest.approx(latent[0]) and latent[0] < sd[0]
    np.testing.assert_allclose(cm.x_values, cm.x)  # float dims: predicted where drawn
    # The mirrored facets have opposite slopes along C near the origin of the sine.
    assert cm.mean["model=a"][5, 2] > cm.mean["model=a"][5, 0] and cm.mean["model=b"][5, 2] < cm.mean["model=b"][5, 0]


def test_marginal_map_averages_the_other_dims(mixed_fit) -> None:
    centre = contour_map(mixed_fit, 1, 2, resolution=5, others="centre")
    marginal = contour_map(mixed_fit, 1, 2, resolution=5, others="marginal")
    np.testing.assert_allclose(centre.mean["model=a"], marginal.mean["model=a"])  # no other continuous dim
    with pytest.raises(ValueError, match="two different continuous dims"):
        contour_map(mixed_fit, 0, 1)
    x, x_log, mean, sd = line_map(mixed_fit, 2, resolution=7, others="marginal")
    assert not x_log and set(mean) == {"model=a", "model=b"} and mean["model=a"].shape == (7,)


def test_coregionalization_of_the_half_mirrored_models_is_negative(mixed_fit) -> None:
    # b = -sin + g against a = sin + g: the larger, sine part is mirrored, the g part shared.
    corr = mixed_fit.gp.factors[0].correlation()[0, 1]
    assert -0.9 < corr < -0.2


def test_interaction_tests_cover_every_pair(mixed_fit) -> None:
    tests = interaction_tests(mixed_fit, seed=0)
    assert set(tests.pairs) == {("model", "C"), ("model", "g"), ("C", "g")}
    assert tests.overall.verdict() == "interaction"
    assert tests.pairs[("model", "C")].log10_K < -1  # model flips the sign of the C effect
    assert tests.pairs[("model", "g")].log10_K > tests.pairs[("model", "C")].log10_K
    assert all(bf.additive_log_likelihood == tests.overall.additive_log_likelihood for bf in tests.pairs.values())


def test_category_means_for_a_categorical_only_space() -> None:
    space = parse_specs({"m": "choice(a, b, c)"})
    U = space.to_unit(space.from_unit(sobol_design(12, 1, seed=0)))
    y = np.floor(U[:, 0] * 3) * 2.0
    labels, mean, sd = category_means(fit_multiverse(space, U, y, seed=0))
    assert labels == ["m=a", "m=b", "m=c"]
    np.testing.assert_allclose(mean, [0.0, 2.0, 4.0], atol=0.05)


def test_axis_values_map_every_continuous_kind() -> None:
    u = np.array([0.0, 0.5, 1.0])
    x, log = axis_values(FloatDim("lr", 1e-4, 1.0, log=True), u)
    assert log and x == pytest.approx([1e-4, 1e-2, 1.0])
    x, log = axis_values(IntDim("n", 1, 4), u)
    assert not log and x == pytest.approx([0.5, 2.5, 4.5])
    x, log = axis_values(GridDim("b", (16, 32, 64)), np.array([1 / 6, 0.5, 5 / 6]))
    assert x == pytest.approx([16, 32, 64])
    assert math.isclose(axis_values(IntDim("k", 1, 100, log=True), np.array([1.0]))[0][0], 100.5)


# ----------------------------------------------------------------------------- the band of a map's files and figures
NEAR_ONE = parse_specs({"x": "interval(0, 1)", "m": "choice(a, b)"})


def _band_fit(bounds):
    """Scores near 1 with a few perfect ones: where mean ± 1.96 sd leaves [0, 1]."""
    U = NEAR_ONE.to_unit(NEAR_ONE.from_unit(sobol_design(16, 2, seed=1)))
    noise = np.random.default_rng(0).normal(0.0, 0.02, 16)
    return fit_multiverse(NEAR_ONE, U, np.minimum(0.95 + 0.05 * U[:, 0] + noise, 1.0), seed=0, bounds=bounds)


def _written_maps(fit, tmp_path):
    from sweeper.report.document import OutputDir
    from sweeper.report.multiverse_maps import write_maps as _maps

    summary = {"maps": []}
    trials = MapTrials(fit.X, fit.y, np.empty((0, fit.space.d)))
    out = OutputDir(tmp_path / "maps")
    _maps(out, fit, trials, "val_acc", "centre", 5, 0, summary)
    return pd.read_csv(out.commit() / "map_x.csv")


def test_a_bounded_map_s_band_stays_inside_the_bounds_and_is_the_figure_s(tmp_path) -> None:

    fit = _band_fit(MetricBounds(0.0, 1.0))
    csv = _written_maps(fit, tmp_path)
    assert (csv["mean"] + 1.96 * csv["sd"]).max() > 1.0  # the band a reader would draw from mean and sd leaves [0, 1]
    assert (csv["low"] >= 0).all() and (csv["high"] <= 1).all()
    assert (csv["low"] <= csv["mean"]).all() and (csv["mean"] <= csv["high"]).all()
    view = map_view(fit, [0])
    for k, label in enumerate(view.line.mean):  # the CSV's band is the one the figure fills
        rows = csv[csv["facet"] == label]
        np.testing.assert_allclose(rows[["low", "high"]].to_numpy().T, [view.low[label], view.high[label]])
        fill = draw_map(view, fit.space, MapTrials(fit.X, fit.y, np.empty((0, 2))), "val_acc")["map"]
        edge = fill.axes[0].collections[k].get_paths()[0].vertices[:, 1]
        assert (edge.min(), edge.max()) == pytest.approx((view.low[label].min(), view.high[label].max()))


def test_an_unbounded_map_s_band_is_mean_plus_minus_1_96_sd(tmp_path) -> None:
    csv = _written_maps(_band_fit(None), tmp_path)
    np.testing.assert_allclose(csv["low"], csv["mean"] - ndtri(0.975) * csv["sd"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(csv["high"], csv["mean"] + ndtri(0.975) * csv["sd"], rtol=1e-9, atol=1e-12)


# ------------------------------------------------- degenerate data (issue 32, item 4)
def test_a_constant_metric_gets_no_interaction_verdict_but_words() -> None:
    X = np.random.default_rng(0).random((24, 3))
    bf = interaction_bayes_factor(X, np.full(24, 0.8666))
    assert bf.verdict() == "no evidence" and bf.log10_K == 0.0 and not bf.is_conclusive(10.0)
    assert bf.note == ("the metric is constant over this sweep (value 0.8666 in all 24 trials): nothing depends on "
                       "any choice, and no interaction, sensitivity or map can be estimated")
    # a spread of rounding size is still constant; a real one is not
    tiny = interaction_bayes_factor(X, 0.8666 + 1e-14 * np.arange(24), pair=(0, 1))
    assert tiny.verdict() == "no evidence"


def test_a_pair_with_a_dim_that_never_varied_has_no_evidence() -> None:
    X = np.random.default_rng(1).random((24, 3))
    X[:, 2] = 0.5
    y = np.sin(6 * X[:, 0]) + X[:, 1]
    bf = interaction_bayes_factor(X, y, pair=(0, 2))
    assert bf.verdict() == "no evidence" and "dim(s) 2 took one value in every trial" in bf.note



@pytest.mark.parametrize("log10_K, default, at_ten", [
    (2.5, "no interaction", "no interaction"), (1.5, "no interaction", "no interaction"),
    (0.0, "inconclusive", "inconclusive"), (-1.5, "inconclusive", "interaction"),
    (-2.5, "interaction", "interaction")])
def test_interaction_needs_k_below_a_hundredth_unless_the_user_chose_a_threshold(
        log10_K: float, default: str, at_ten: str) -> None:
    # decision 0085: K < 1/10 said "interaction" on 16 of 210 tests of additive truths, K < 1/100 on 5
    bf = BayesFactor(log10_K, 0.0, 0.0, (0, 1), 24)
    assert bf.verdict() == default and bf.verdict(10.0) == at_ten
    assert bf.is_conclusive() == (default != "inconclusive")


# ------------------------------------------------- the interaction tests of a bounded metric (issue 37)
def test_each_model_learns_its_own_warp_so_an_additive_map_near_its_ceiling_is_additive(tmp_path, monkeypatch):
    """``python -m bench interaction`` (decision 0079's measurements) at its smoke sizes, 32 trials each.

    A choice that shifts an accuracy near 1 beside two smooth dims is additive on the metric's scale. With the
    warp that suits the shared model for both models, the overall test said "interaction"; with each model's own
    warp it says "no interaction", and no pair is called interacting. The real svm map's interaction (28 % of its
    variance) is still found; the mlp map's (1.2 %) is not called.
    """
    import json

    from bench import __main__ as bench_main
    from bench import report

    monkeypatch.setattr(report, "RESULTS_DIR", tmp_path)
    bench_main.main(["interaction", "--smoke"])
    rows = {r["name"]: {tuple(t["dims"]): t for t in r["tests"]}
            for r in json.loads((tmp_path / "interaction_test_smoke.json").read_text())["rows"]}
    ceiling = rows["near the ceiling"]
    assert ceiling[()]["shipped"] > 1 and ceiling[()]["before"] < -1
    assert all(t["shipped"] >= -1 for t in ceiling.values())
    assert rows["svm"][()]["shipped"] < -1 and rows["svm"][()]["share"] == pytest.approx(0.282, abs=0.001)
    assert rows["mlp"][()]["shipped"] >= -1 and rows["mlp"][()]["share"] == pytest.approx(0.012, abs=0.001)
    assert "'interaction' was said on 0 and 2; where it has one (1), it was found on 1 and 1" in (
        tmp_path / "interaction_test_smoke.md").read_text()
