"""Unit tests for sweeper.search.warping: metric bounds parsing and the monotone output warp onto the real line."""

from __future__ import annotations

import decimal
import json
import math
from decimal import Decimal

import numpy as np
import pytest
from scipy.special import ndtri

from sweeper.search.warping import SQUEEZE_RANGE, MetricBounds, OutputWarp, squeeze_for

SHAPES = [(1.0, 1.0), (6.0, 2.2), (0.3, 3.0), (15.0, 9.0)]
TWO_SIDED = [(0.0, 1.0), (-1.0, 1.0)]
ONE_SIDED = [(0.0, None), (2.0, None), (None, 1.0)]


def inner_grid(low: float, high: float, n: int = 201) -> np.ndarray:
    """Increasing values strictly inside (low, high), well away from the squeeze at either bound."""
    width = high - low
    return np.linspace(low + 0.02 * width, high - 0.02 * width, n)


def one_sided_grid(low: float | None, high: float | None) -> np.ndarray:
    """Increasing values on the open side of a single bound, 0.01 to 100 units away from it."""
    dist = np.geomspace(0.01, 100.0, 121)
    return low + dist if low is not None else np.sort(high - dist)


# ----------------------------------------------------------------------------- MetricBounds.parse
@pytest.mark.parametrize(("value", "low", "high"), [
    ([0, 1], 0.0, 1.0),
    ([0, None], 0.0, None),
    (["0", "null"], 0.0, None),
    ((None, 1), None, 1.0),
    ([-1.5, "2.5"], -1.5, 2.5),
    (["None", " 3 "], None, 3.0),
])
def test_parse_accepts_numbers_and_null_sides(value: object, low: float | None, high: float | None) -> None:
    bounds = MetricBounds.parse(value)
    assert bounds == MetricBounds(low, high)
    assert bounds is not None
    for side in (bounds.low, bounds.high):
        assert side is None or isinstance(side, float)


@pytest.mark.parametrize("value", [None, [None, None], ["null", "~"], ("none", "")])
def test_parse_no_bounds_is_none(value: object) -> None:
    assert MetricBounds.parse(value) is None


def test_parse_passes_bounds_through() -> None:
    bounds = MetricBounds(0.0, 1.0)
    assert MetricBounds.parse(bounds) is bounds


@pytest.mark.parametrize(("value", "message"), [
    ([1, 0], "low < high"),
    ([0, 0], "low < high"),
    (["a", 1], "two numbers or null"),
    ([0, 1, 2], "must be a list [low, high]"),
    ("0,1", "must be a list [low, high]"),
    ([True, 1], "not a number"),
    ([0, float("inf")], "not finite"),
    ([float("nan"), 1], "not finite"),
    (5, "must be a list [low, high]"),
])
def test_parse_rejects_malformed_bounds_with_a_message(value: object, message: str) -> None:
    with pytest.raises(ValueError) as info:
        MetricBounds.parse(value)
    assert message in str(info.value)
    assert "metric_bounds" in str(info.value)


def test_constructor_rejects_unusable_bounds() -> None:
    with pytest.raises(ValueError, match="at least one number"):
        MetricBounds(None, None)
    with pytest.raises(ValueError, match=r"low < high; got \[2, 1\]"):
        MetricBounds(2.0, 1.0)


# ----------------------------------------------------------------------------- MetricBounds.from_text
@pytest.mark.parametrize(("text", "expected"), [
    ("[0.0, 1.0]", MetricBounds(0.0, 1.0)),
    ("[0, None]", MetricBounds(0.0, None)),
    ("[None, 1]", MetricBounds(None, 1.0)),
    ("[0, null]", MetricBounds(0.0, None)),
    ("[-1, 1]", MetricBounds(-1.0, 1.0)),
    (" [0.5,2] ", MetricBounds(0.5, 2.0)),
    ("None", None),
    ("none", None),
    ("", None),
    (None, None),
    ("[None, None]", None),
])
def test_from_text_reads_the_recorded_param(text: str | None, expected: MetricBounds | None) -> None:
    assert MetricBounds.from_text(text) == expected


@pytest.mark.parametrize("text", ["0, 1", "[0, 1", "(0, 1)", "[0, 1, 2]", "[a, 1]", "[1, 0]"])
def test_from_text_rejects_malformed_text(text: str) -> None:
    with pytest.raises(ValueError, match="metric_bounds"):
        MetricBounds.from_text(text)


@pytest.mark.parametrize("bounds", [MetricBounds(0.0, 1.0), MetricBounds(0.0, None), MetricBounds(None, -2.5)])
def test_from_text_round_trips_text_and_str_of_list(bounds: MetricBounds) -> None:
    assert MetricBounds.from_text(bounds.text()) == bounds
    assert MetricBounds.from_text(str(bounds.as_list())) == bounds  # how MLflow stringifies a list param


def test_text_is_the_config_form() -> None:
    assert MetricBounds(0.0, 1.0).text() == "[0, 1]"
    assert MetricBounds(0.0, None).text() == "[0, null]"
    assert MetricBounds(None, 0.5).text() == "[null, 0.5]"


# ----------------------------------------------------------------------------- violation / contains / clip
def test_violation_names_metric_value_and_bound() -> None:
    bounds = MetricBounds(0.0, 1.0)
    assert bounds.violation(1.2, "test_acc") == "test_acc=1.2 is outside metric_bounds=[0, 1] (above 1)"
    below = bounds.violation(-0.25, "val_acc")
    assert below is not None
    assert "val_acc" in below and "-0.25" in below and "below 0" in below and "[0, 1]" in below
    one = MetricBounds(0.0, None).violation(-3.0, "loss")
    assert one == "loss=-3 is outside metric_bounds=[0, null] (below 0)"
    assert MetricBounds(None, 1.0).violation(1e6, "acc") is not None
    for inside in (0.0, 0.5, 1.0):
        assert bounds.violation(inside, "test_acc") is None


def test_contains_is_inclusive_at_the_bounds() -> None:
    bounds = MetricBounds(-1.0, 1.0)
    assert bounds.contains(-1.0) and bounds.contains(1.0) and bounds.contains(0.0)
    assert not bounds.contains(math.nextafter(1.0, 2.0))
    assert not bounds.contains(math.nextafter(-1.0, -2.0))
    assert MetricBounds(0.0, None).contains(1e300)
    assert not MetricBounds(0.0, None).contains(-1e-300)
    assert MetricBounds(None, 1.0).contains(-1e300)


def test_clip_clips_into_the_bounds() -> None:
    np.testing.assert_array_equal(MetricBounds(0.0, 1.0).clip([-0.5, 0.3, 1.7]), [0.0, 0.3, 1.0])
    np.testing.assert_array_equal(MetricBounds(0.0, None).clip([-0.5, 1e9]), [0.0, 1e9])
    np.testing.assert_array_equal(MetricBounds(None, 1.0).clip([-1e9, 2.0]), [-1e9, 1.0])


# ----------------------------------------------------------------------------- two-sided warp
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("limits", TWO_SIDED)
def test_two_sided_round_trip_and_monotone(shape: tuple[float, float], limits: tuple[float, float]) -> None:
    warp = OutputWarp(MetricBounds(*limits), *shape, eps=1e-3)
    y = inner_grid(*limits)
    g = warp.forward(y)
    assert np.all(np.isfinite(g))
    assert np.all(np.diff(g) > 0), "forward must be strictly increasing"
    np.testing.assert_allclose(warp.inverse(g), y, rtol=0, atol=1e-10 * (limits[1] - limits[0]))
    # ... and the inverse is monotone on the real line too.
    gs = np.linspace(-30.0, 30.0, 301)
    assert np.all(np.diff(warp.inverse(gs)) >= 0)


@pytest.mark.parametrize("limits", TWO_SIDED)
def test_two_sided_unit_shapes_are_the_plain_logit(limits: tuple[float, float]) -> None:
    low, high = limits
    y = inner_grid(low, high)
    r = (y - low) / (high - low)
    np.testing.assert_allclose(OutputWarp(MetricBounds(low, high)).forward(y), np.log(r / (1 - r)), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("shape", SHAPES)
def test_two_sided_forward_is_the_kumaraswamy_logit(shape: tuple[float, float]) -> None:
    a, b = shape
    y = np.linspace(0.01, 0.99, 15)

    def direct(v: float) -> float:  # the formula itself, in 50 digits: nothing rounds onto 0 or 1
        with decimal.localcontext() as ctx:
            ctx.prec = 50
            p = 1 - (1 - Decimal(v) ** Decimal(a)) ** Decimal(b)
            return float((p / (1 - p)).ln())

    np.testing.assert_allclose(OutputWarp(MetricBounds(0.0, 1.0), a, b).forward(y), [direct(v) for v in y],
                               rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("limits", TWO_SIDED)
def test_two_sided_inverse_of_extreme_values_stays_inside(shape: tuple[float, float],
                                                          limits: tuple[float, float]) -> None:
    low, high = limits
    warp = OutputWarp(MetricBounds(low, high), *shape)
    g = np.array([-np.inf, -1e3, -1e2, -40.0, 40.0, 1e2, 1e3, np.inf])
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # underflow to 0 is harmless
        y = warp.inverse(g)
    assert np.all(np.isfinite(y))
    assert np.all((y >= low) & (y <= high))
    assert np.all(np.diff(y) >= 0)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("limits", TWO_SIDED)
def test_two_sided_log_jacobian_matches_finite_difference(shape: tuple[float, float],
                                                          limits: tuple[float, float]) -> None:
    low, high = limits
    warp = OutputWarp(MetricBounds(low, high), *shape)
    y = np.linspace(low + 0.05 * (high - low), high - 0.05 * (high - low), 37)
    h = 1e-6 * (high - low)
    numeric = (warp.forward(y + h) - warp.forward(y - h)) / (2 * h)
    np.testing.assert_allclose(np.exp(warp.log_jacobian(y)), numeric, rtol=1e-6)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("limits", TWO_SIDED)
def test_two_sided_values_on_a_bound_are_squeezed_inside(shape: tuple[float, float],
                                                         limits: tuple[float, float]) -> None:
    low, high = limits
    eps = 1e-3
    warp = OutputWarp(MetricBounds(low, high), *shape, eps=eps)
    width = high - low
    on = warp.forward(np.array([low, high]))
    assert np.all(np.isfinite(on))
    assert np.all(np.isfinite(warp.log_jacobian(np.array([low, high]))))
    # On a bound = eps of the range inside it; beyond it (never for checked data) is the same.
    np.testing.assert_allclose(on, warp.forward(np.array([low + eps * width, high - eps * width])), rtol=1e-12)
    np.testing.assert_array_equal(warp.forward(np.array([low - 5.0, high + 5.0])), on)
    # ... and the squeezed values come back on the bound: the last eps is where the model says "on it".
    np.testing.assert_array_equal(warp.inverse(on), [low, high])
    inside = np.array([low + 2 * eps * width, high - 2 * eps * width])
    np.testing.assert_allclose(warp.inverse(warp.forward(inside)), inside, rtol=1e-9)


# ----------------------------------------------------------------------------- one-sided warp
@pytest.mark.parametrize("limits", ONE_SIDED)
def test_one_sided_round_trip_and_monotone(limits: tuple[float | None, float | None]) -> None:
    low, high = limits
    warp = OutputWarp(MetricBounds(low, high), eps=1e-3)
    assert not warp.two_sided
    y = one_sided_grid(low, high)
    g = warp.forward(y)
    assert np.all(np.isfinite(g))
    assert np.all(np.diff(g) > 0)
    np.testing.assert_allclose(warp.inverse(g), y, rtol=1e-12, atol=1e-12)
    # The log of the distance to the bound, with its Jacobian.
    distance = y - low if low is not None else high - y
    np.testing.assert_allclose(g, np.log(distance) if low is not None else -np.log(distance), rtol=1e-12)
    h = 1e-7
    numeric = (warp.forward(y + h) - warp.forward(y - h)) / (2 * h)
    np.testing.assert_allclose(np.exp(warp.log_jacobian(y)), numeric, rtol=1e-5)


@pytest.mark.parametrize("limits", ONE_SIDED)
def test_one_sided_bound_is_finite_and_extremes_stay_on_the_open_side(
        limits: tuple[float | None, float | None]) -> None:
    low, high = limits
    warp = OutputWarp(MetricBounds(low, high), eps=1e-3)
    bound = low if low is not None else high
    assert np.isfinite(warp.forward(np.array([bound]))[0])
    toward_bound = np.array([-np.inf, -1e3, -50.0]) if low is not None else np.array([np.inf, 1e3, 50.0])
    y = warp.inverse(toward_bound)
    assert np.all(np.isfinite(y))
    assert np.all(y >= low) if low is not None else np.all(y <= high)


# ----------------------------------------------------------------------------- moments
MOMENT_CASES = [(0.0, 1.0), (2.0, 0.5), (-3.0, 2.0), (1.0, 0.01), (-0.5, 1.5)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("limits", TWO_SIDED)
def test_two_sided_moments_match_monte_carlo(shape: tuple[float, float], limits: tuple[float, float]) -> None:
    warp = OutputWarp(MetricBounds(*limits), *shape)
    n = 100_000
    z = np.random.default_rng(0).standard_normal(n)
    strata = ndtri((np.arange(n) + 0.5) / n)  # stratified: nearly exact expectations
    mean_g = np.array([m for m, _ in MOMENT_CASES])
    sd_g = np.array([s for _, s in MOMENT_CASES])
    mean, sd = warp.moments(mean_g, sd_g)
    assert mean.shape == sd.shape == (len(MOMENT_CASES),)
    for i, (m, s) in enumerate(MOMENT_CASES):
        draws = warp.inverse(m + s * z)
        se = draws.std() / math.sqrt(n)
        assert abs(mean[i] - draws.mean()) < max(1e-3, 5 * se)
        assert abs(sd[i] - draws.std()) < max(1e-3, 5 * se)
        exact = warp.inverse(m + s * strata)
        assert mean[i] == pytest.approx(exact.mean(), abs=1e-4)
        assert sd[i] == pytest.approx(exact.std(), abs=1e-4)
    assert np.all((mean > limits[0]) & (mean < limits[1]))
    assert np.all(sd >= 0)


@pytest.mark.parametrize("limits", TWO_SIDED)
def test_two_sided_moments_stay_inside_for_extreme_gaussians(limits: tuple[float, float]) -> None:
    warp = OutputWarp(MetricBounds(*limits), 6.0, 2.2)
    mean, sd = warp.moments(np.array([-200.0, 200.0, 0.0, 30.0]), np.array([50.0, 50.0, 100.0, 1e-9]))
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(sd))
    assert np.all((mean >= limits[0]) & (mean <= limits[1]))
    assert np.all(sd <= (limits[1] - limits[0]) / 2 + 1e-12)  # sd of a variable on an interval


@pytest.mark.parametrize("limits", ONE_SIDED)
def test_one_sided_moments_match_lognormal(limits: tuple[float | None, float | None]) -> None:
    low, high = limits
    warp = OutputWarp(MetricBounds(low, high))
    m, s = np.array([0.5, -1.0, 2.0]), np.array([0.3, 0.5, 0.1])
    mean, sd = warp.moments(m, s)
    # exp(N(mu, s^2)) is LogNormal: mean exp(mu + s^2 / 2), var (exp(s^2) - 1) exp(2 mu + s^2).
    mu = m if low is not None else -m
    ln_mean = np.exp(mu + s**2 / 2)
    ln_sd = np.sqrt(np.expm1(s**2) * np.exp(2 * mu + s**2))
    np.testing.assert_allclose(mean, low + ln_mean if low is not None else high - ln_mean, rtol=1e-6)
    np.testing.assert_allclose(sd, ln_sd, rtol=1e-5)
    assert np.all(mean > low) if low is not None else np.all(mean < high)


# ----------------------------------------------------------------------------- serialisation
@pytest.mark.parametrize("warp", [
    OutputWarp(MetricBounds(0.0, 1.0), 6.0, 2.2, 0.004),
    OutputWarp(MetricBounds(-1.0, 1.0)),
    OutputWarp(MetricBounds(0.0, None), eps=0.01),
    OutputWarp(MetricBounds(None, 3.5), eps=1e-4),
])
def test_to_dict_from_dict_round_trip(warp: OutputWarp) -> None:
    d = json.loads(json.dumps(warp.to_dict()))
    back = OutputWarp.from_dict(d)
    assert back == warp
    y = np.array([0.3, 0.5]) if warp.two_sided or warp.bounds.low is not None else np.array([-1.0, 3.0])
    np.testing.assert_array_equal(back.forward(y), warp.forward(y))


def test_with_shapes_and_for_data_keep_bounds_and_squeeze() -> None:
    bounds = MetricBounds(0.0, 1.0)
    warp = OutputWarp.for_data(bounds, [0.2, 0.996, 1.0], 2.0, 3.0)
    assert (warp.a, warp.b) == (2.0, 3.0)
    assert warp.eps == pytest.approx(0.002)
    other = warp.with_shapes(0.5, 4)
    assert (other.bounds, other.eps, other.a, other.b) == (bounds, warp.eps, 0.5, 4.0)
    assert "a=0.5" in other.describe() and "[0, 1]" in other.describe()
    assert "log warp" in OutputWarp(MetricBounds(0.0, None)).describe()


# ----------------------------------------------------------------------------- squeeze_for
@pytest.mark.parametrize(("limits", "y", "expected"), [
    ((0.0, 1.0), [0.0, 0.004, 0.5, 1.0], 0.002),       # half the gap to the low bound
    ((0.0, 1.0), [0.3, 0.997, 1.0, 1.0], 0.0015),      # ... or to the high one
    ((-1.0, 1.0), [-1.0, -0.996, 0.3, 1.0], 0.001),    # as a fraction of the range (2)
    ((0.0, 1.0), [0.0, 0.1, 0.5, 1.0], 1e-2),          # clipped to the top of SQUEEZE_RANGE
    ((0.0, 1.0), [0.0, 1e-5, 0.5, 1.0], 1e-4),         # ... and to its bottom
    ((0.0, 1.0), [0.0, 1.0, 1.0], 1e-2),               # nothing off the bounds
    ((0.0, 1.0), [0.4, 0.6], 1e-2),                    # nothing on them: the gaps still count
])
def test_squeeze_for_two_bounds(limits: tuple[float, float], y: list[float], expected: float) -> None:
    eps = squeeze_for(MetricBounds(*limits), y)
    assert eps == pytest.approx(expected, rel=1e-9)
    assert SQUEEZE_RANGE[0] <= eps <= SQUEEZE_RANGE[1]


def test_perfect_scores_sit_just_beyond_the_best_imperfect_one() -> None:
    y = np.array([0.2, 0.6, 0.997, 1.0, 1.0])
    warp = OutputWarp.for_data(MetricBounds(0.0, 1.0), y, 6.0, 2.2)
    g = warp.forward(y)
    assert g[2] < g[3] == g[4]
    assert warp.eps == pytest.approx(0.0015)  # half the gap to the best imperfect score
    assert warp.inverse(g[3:4])[0] == 1.0  # the perfect scores come back perfect ...
    assert warp.inverse(g[2:3])[0] == pytest.approx(0.997, abs=1e-12)  # ... and the imperfect one as it was


def test_one_sided_squeeze_keeps_distinct_values_distinct() -> None:
    y = np.array([0.0, 0.001, 0.004, 0.011])  # e.g. a loss with one perfect run
    warp = OutputWarp.for_data(MetricBounds(0.0, None), y)
    assert warp.eps < 0.001  # in units, below the best non-perfect value
    assert np.all(np.diff(warp.forward(y)) > 0)


def test_a_ceiling_rescales_onto_low_top_and_the_inverse_saturates_there() -> None:
    warp = OutputWarp(MetricBounds(0.0, 1.0), 3.0, 2.0, 1e-3, top=0.96)
    y = np.array([0.2, 0.5, 0.9, 0.95])
    np.testing.assert_allclose(warp.inverse(warp.forward(y)), y, rtol=1e-10)
    g = np.linspace(-50.0, 50.0, 201)
    assert np.all(warp.inverse(g) <= 0.96) and warp.inverse(np.array([50.0]))[0] == pytest.approx(0.96, abs=1e-6)
    assert warp.forward(np.array([0.96]))[0] == warp.forward(np.array([0.99]))[0]  # on or above it: squeezed
    assert OutputWarp.from_dict(warp.to_dict()) == warp
