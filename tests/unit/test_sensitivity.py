"""Unit tests for sweeper.analysis.sensitivity (Sobol' indices, Saltelli et al. 2010).

Tolerances come from the spread of the estimates over 200 seeds (measured when these
tests were written): each is at least 3 standard deviations of the estimate under test.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from numpy.typing import NDArray

from sweeper.analysis.sensitivity import SobolIndices, clip_indices, sobol_indices

A_ISH, B_ISH = 7.0, 0.1


def _ishigami(u: NDArray[np.float64]) -> NDArray[np.float64]:
    """Ishigami & Homma (1990) with a=7, b=0.1, inputs mapped from [0, 1] to [-pi, pi]."""
    x = -np.pi + 2.0 * np.pi * u
    return np.sin(x[:, 0]) + A_ISH * np.sin(x[:, 1]) ** 2 + B_ISH * x[:, 2] ** 4 * np.sin(x[:, 0])


def _ishigami_analytic() -> tuple[list[float], list[float]]:
    a, b, pi = A_ISH, B_ISH, math.pi
    v1 = 0.5 * (1.0 + b * pi**4 / 5.0) ** 2
    v2 = a**2 / 8.0
    v13 = b**2 * pi**8 * (1.0 / 18.0 - 1.0 / 50.0)
    v = v1 + v2 + v13
    return [v1 / v, v2 / v, 0.0], [(v1 + v13) / v, v2 / v, v13 / v]


def test_ishigami_analytic_values_match_the_literature() -> None:
    main, total = _ishigami_analytic()
    assert main == pytest.approx([0.3139, 0.4424, 0.0], abs=1e-4)
    assert total == pytest.approx([0.5576, 0.4424, 0.2437], abs=1e-4)


def test_ishigami_matches_analytic_indices() -> None:
    # Over 200 seeds the 5-repeat means had sd <= 0.010 (S) and <= 0.0097 (T); the
    # largest error seen was 0.028, so 0.03 is >= 3 sd.
    s = sobol_indices(_ishigami, 3, n_base=4096, repeats=5, seed=0)
    main, total = _ishigami_analytic()
    np.testing.assert_allclose(s.main, main, atol=0.03)
    np.testing.assert_allclose(s.total, total, atol=0.03)
    # The per-repeat spread is that of N = 4096 Monte Carlo points: ~0.005 to 0.03.
    assert np.all(s.main_sd > 0.003) and np.all(s.main_sd < 0.05)
    assert np.all(s.total_sd > 0.002) and np.all(s.total_sd < 0.05)
    # Var[f] = a^2/8 + b pi^4/5 + b^2 pi^8/18 + 1/2 = 13.845.
    assert s.variance == pytest.approx(13.8446, rel=0.03)
    assert (s.n_base, s.repeats, s.names) == (4096, 5, ("x0", "x1", "x2"))


def test_linear_function_puts_main_effect_on_the_steep_input() -> None:
    # S = (25, 0.01) / 25.01; sd of main[0] here ~0.002, so 0.99 is ~5 sd away.
    s = sobol_indices(lambda x: 5.0 * x[:, 0] + 0.1 * x[:, 1], 2, n_base=32768, repeats=10)
    assert s.main[0] > 0.99
    assert s.main[1] < 0.01
    assert s.total[0] > 0.99
    assert s.total[1] < 0.01
    for sd in (s.main_sd, s.total_sd):
        assert sd.shape == (2,)
        assert np.all(sd >= 0.0)
    for arr in (s.main, s.total):
        assert arr.shape == (2,)


def test_linear_function_with_large_offset_is_not_noisier() -> None:
    """Centring keeps the Table 2 (b) estimator from blowing up with the mean of f."""
    kw = {"n_base": 2048, "repeats": 4, "seed": 3}
    plain = sobol_indices(lambda x: 5.0 * x[:, 0] + 0.1 * x[:, 1], 2, **kw)
    shifted = sobol_indices(lambda x: 5.0 * x[:, 0] + 0.1 * x[:, 1] + 1000.0, 2, **kw)
    np.testing.assert_allclose(shifted.main, plain.main, atol=1e-9)
    np.testing.assert_allclose(shifted.total, plain.total, atol=1e-9)


def test_pure_interaction_has_no_main_effect_and_full_total_effect() -> None:
    # Over 200 seeds: sd 0.012 (S) and 0.011 (T) for this setting; 0.05 is > 4 sd.
    s = sobol_indices(lambda x: (x[:, 0] - 0.5) * (x[:, 1] - 0.5), 2, n_base=4096, repeats=5)
    np.testing.assert_allclose(s.main, [0.0, 0.0], atol=0.05)
    np.testing.assert_allclose(s.total, [1.0, 1.0], atol=0.05)
    assert s.variance == pytest.approx(1.0 / 144.0, rel=0.05)


def test_categorical_column_main_effect_matches_analytic_value() -> None:
    # Level floor(3 u) of column 0 looks up {0, 1, 4}: variance 17/3 - 25/9 = 26/9 over
    # uniform levels; plus 4 x1 with variance 16/12. Additive: S = T = (26, 12) / 38.
    table = np.array([0.0, 1.0, 4.0])

    def f(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return table[np.floor(3.0 * x[:, 0]).astype(int)] + 4.0 * x[:, 1]

    s = sobol_indices(f, 2, names=["optimizer", "lr"], n_base=4096, repeats=5)
    expected = [26.0 / 38.0, 12.0 / 38.0]
    np.testing.assert_allclose(s.main, expected, atol=0.03)  # sd over 200 seeds <= 0.007
    np.testing.assert_allclose(s.total, expected, atol=0.03)
    assert s.variance == pytest.approx(38.0 / 9.0, rel=0.05)


def test_same_seed_same_result_different_seed_different_result() -> None:
    kw = {"n_base": 256, "repeats": 3}
    a = sobol_indices(_ishigami, 3, seed=7, **kw)
    b = sobol_indices(_ishigami, 3, seed=7, **kw)
    c = sobol_indices(_ishigami, 3, seed=8, **kw)
    d = sobol_indices(_ishigami, 3, seed=[7, 1], **kw)
    for field in ("main", "total", "main_sd", "total_sd"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        assert not np.array_equal(getattr(a, field), getattr(c, field))
        assert not np.array_equal(getattr(a, field), getattr(d, field))
    assert a.variance == b.variance != c.variance


def test_does_not_touch_the_global_rng_and_advances_a_generator() -> None:
    np.random.seed(123)
    state = np.random.get_state()[1].copy()
    first = sobol_indices(_ishigami, 3, n_base=64, repeats=2, seed=5)
    np.testing.assert_array_equal(np.random.get_state()[1], state)
    np.random.seed(999)
    again = sobol_indices(_ishigami, 3, n_base=64, repeats=2, seed=5)
    np.testing.assert_array_equal(first.main, again.main)

    rng = np.random.default_rng(5)
    g1 = sobol_indices(_ishigami, 3, n_base=64, repeats=2, seed=rng)
    g2 = sobol_indices(_ishigami, 3, n_base=64, repeats=2, seed=rng)
    np.testing.assert_array_equal(g1.main, first.main)  # int 5 and a fresh rng(5) agree
    assert not np.array_equal(g1.main, g2.main)


def test_design_is_a_b_and_a_with_one_column_from_b() -> None:
    seen: list[NDArray[np.float64]] = []

    def record(x: NDArray[np.float64]) -> NDArray[np.float64]:
        seen.append(x.copy())
        return x.sum(axis=1)

    n, d, repeats = 16, 3, 2
    sobol_indices(record, d, n_base=n, repeats=repeats, seed=1, batch_rows=7)
    x = np.concatenate(seen).reshape(repeats, d + 2, n, d)
    assert np.all((x >= 0.0) & (x < 1.0))
    for r in range(repeats):
        a, b = x[r, 0], x[r, 1]
        assert not np.any(np.isclose(a, b))  # independent matrices
        for i in range(d):
            ab = x[r, 2 + i]
            np.testing.assert_array_equal(ab[:, i], b[:, i])
            others = [j for j in range(d) if j != i]
            np.testing.assert_array_equal(ab[:, others], a[:, others])
    assert not np.allclose(x[0, 0], x[1, 0])  # each repeat draws its own pair

    # Repeat 0 uses the same points whatever the number of repeats.
    seen.clear()
    sobol_indices(record, d, n_base=n, repeats=1, seed=1)
    np.testing.assert_array_equal(np.concatenate(seen).reshape(d + 2, n, d), x[0])


def test_matches_a_loop_reference_of_the_estimators_on_the_same_design() -> None:
    """Per repeat: Table 2 (b) and (f) written out, then mean and sd (ddof=1) over repeats."""
    seen: list[NDArray[np.float64]] = []

    def record(x: NDArray[np.float64]) -> NDArray[np.float64]:
        seen.append(x.copy())
        return _ishigami(x)

    n, d, repeats = 64, 3, 4
    s = sobol_indices(record, d, n_base=n, repeats=repeats, seed=11)
    y = _ishigami(np.concatenate(seen)).reshape(repeats, d + 2, n)
    main = np.empty((repeats, d))
    total = np.empty((repeats, d))
    variances = []
    for r in range(repeats):
        f_a, f_b = y[r, 0], y[r, 1]
        both = np.concatenate([f_a, f_b])
        v = float(np.mean((both - both.mean()) ** 2))
        variances.append(v)
        for i in range(d):
            f_ab = y[r, 2 + i]
            main[r, i] = sum((f_b - both.mean()) * (f_ab - f_a)) / n / v
            total[r, i] = sum((f_a - f_ab) ** 2) / (2 * n) / v
    np.testing.assert_allclose(s.main_raw, main.mean(axis=0), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(s.total_raw, total.mean(axis=0), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(s.main_sd, main.std(axis=0, ddof=1), rtol=1e-10)
    np.testing.assert_allclose(s.total_sd, total.std(axis=0, ddof=1), rtol=1e-10)
    assert s.variance == pytest.approx(np.mean(variances), rel=1e-12)
    # The values shown are the raw means through clip_indices, with the sd of main - total.
    shown_main, shown_total, flags = clip_indices(
        main.mean(axis=0), total.mean(axis=0), main.std(axis=0, ddof=1),
        total.std(axis=0, ddof=1), repeats=repeats, diff_sd=(main - total).std(axis=0, ddof=1),
    )
    np.testing.assert_allclose(s.main, shown_main, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(s.total, shown_total, rtol=1e-10, atol=1e-12)
    assert s.flags == flags


def test_f_is_called_in_as_few_batches_as_possible() -> None:
    sizes: list[int] = []

    def count(x: NDArray[np.float64]) -> NDArray[np.float64]:
        sizes.append(x.shape[0])
        return _ishigami(x)

    n, d, repeats = 100, 3, 3  # 3 * (3 + 2) * 100 = 1500 rows
    small = sobol_indices(count, d, n_base=n, repeats=repeats, batch_rows=400)
    assert sizes == [400, 400, 400, 300]
    sizes.clear()
    big = sobol_indices(count, d, n_base=n, repeats=repeats)
    assert sizes == [1500]
    one = sobol_indices(_ishigami, d, n_base=n, repeats=repeats, batch_rows=1)
    for other in (big, one):
        np.testing.assert_array_equal(small.main, other.main)
        np.testing.assert_array_equal(small.total, other.total)


def test_column_vector_output_is_accepted() -> None:
    flat = sobol_indices(_ishigami, 3, n_base=128, repeats=2)
    column = sobol_indices(lambda x: _ishigami(x)[:, None], 3, n_base=128, repeats=2)
    np.testing.assert_array_equal(flat.main, column.main)


def test_single_repeat_has_zero_sd() -> None:
    s = sobol_indices(_ishigami, 3, n_base=512, repeats=1)
    np.testing.assert_array_equal(s.main_sd, np.zeros(3))
    np.testing.assert_array_equal(s.total_sd, np.zeros(3))
    assert s.repeats == 1
    assert np.all(s.total > 0.0)


@pytest.mark.parametrize(
    "f",
    [
        lambda x: np.full(x.shape[0], 3.5),
        lambda x: np.zeros(x.shape[0]),
        lambda x: np.sin(x[:, 0]) ** 2 + np.cos(x[:, 0]) ** 2,  # 1 up to rounding
    ],
)
def test_constant_function_gives_zeros_not_nan(f) -> None:
    s = sobol_indices(f, 2, n_base=256, repeats=3)
    for arr in (s.main, s.total, s.main_sd, s.total_sd):
        np.testing.assert_array_equal(arr, np.zeros(2))
    assert s.variance == 0.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"d": 0}, "d must be an int >= 1; got d=0"),
        ({"d": 2.0}, "d must be an int >= 1; got d=2.0"),
        ({"d": True}, "d must be an int >= 1; got d=True"),
        ({"n_base": 1}, "n_base must be an int >= 2; got n_base=1"),
        ({"repeats": 0}, "repeats must be an int >= 1; got repeats=0"),
        ({"batch_rows": 0}, "batch_rows must be an int >= 1; got batch_rows=0"),
        ({"names": ["a"]}, r"names must have one entry per dimension \(d=2\); got 1"),
        ({"names": "ab"}, "names must be a sequence of 2 strings"),
        ({"names": ["a", "a"]}, "names must be distinct"),
        ({"names": ["a", 1]}, "names must be strings"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs: dict, match: str) -> None:
    args = {"d": 2, "n_base": 8, "repeats": 1, **kwargs}
    with pytest.raises(ValueError, match=match):
        sobol_indices(lambda x: x.sum(axis=1), **args)


@pytest.mark.parametrize(
    ("f", "match"),
    [
        (lambda x: x, r"f must map an \(m, d\) array to shape \(m,\).*got shape \(32, 2\)"),
        (lambda x: x.sum(axis=1)[:-1], r"got shape \(31,\) for m=32"),
        (lambda x: np.float64(1.0), r"got shape \(\) for m=32"),
        (lambda x: np.where(x[:, 0] > 0.5, np.nan, 1.0), "NaN or infinite"),
    ],
)
def test_bad_function_output_raises_value_error(f, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        sobol_indices(f, 2, n_base=8, repeats=1)


def test_bad_seed_raises_type_error() -> None:
    with pytest.raises(TypeError, match="seed"):
        sobol_indices(_ishigami, 3, n_base=8, seed=1.5)  # type: ignore[arg-type]  # a bad seed on purpose


def test_as_dict_and_to_rows() -> None:
    s = sobol_indices(
        lambda x: 5.0 * x[:, 0] + x[:, 1] * x[:, 2], 3, names=("lr", "wd", "bs"), n_base=512
    )
    d = s.as_dict()
    assert list(d) == ["lr", "wd", "bs"]
    assert d["wd"] == (float(s.main[1]), float(s.total[1]))
    assert all(type(v) is float for pair in d.values() for v in pair)

    rows = s.to_rows()
    assert [r["name"] for r in rows] == ["lr", "wd", "bs"]
    assert list(rows[0]) == [
        "name", "main", "main_sd", "total", "total_sd", "main_raw", "total_raw", "flag",
    ]
    for i, row in enumerate(rows):
        assert row["main"] == s.main[i] and row["total"] == s.total[i]
        assert row["main_sd"] == s.main_sd[i] and row["total_sd"] == s.total_sd[i]
        assert row["main_raw"] == s.main_raw[i] and row["total_raw"] == s.total_raw[i]
        assert row["flag"] == s.flags[i] and type(row["flag"]) is str
        floats = ("main", "main_sd", "total", "total_sd", "main_raw", "total_raw")
        assert all(type(row[k]) is float for k in floats)
    assert json.loads(json.dumps(rows)) == rows


def test_result_arrays_are_read_only() -> None:
    s = sobol_indices(_ishigami, 3, n_base=64, repeats=2)
    assert isinstance(s, SobolIndices)
    for arr in (s.main, s.total, s.main_raw, s.total_raw, s.main_sd, s.total_sd):
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = 1.0


# --- Values shown inside 0 <= main <= total <= 1, raw kept, moves flagged (issue 32) ---


def _assert_shown_ordered(s: SobolIndices) -> None:
    assert np.all(s.main >= 0.0) and np.all(s.total <= 1.0)
    assert np.all(s.main <= s.total)


def test_one_dim_doing_everything_is_shown_at_1_with_the_raw_estimates_and_a_flag() -> None:
    # f depends on x0 alone: S_0 = T_0 = 1. With N = 64 and seed 2, both raw means come out
    # above 1 and main above total, as env.seed's 1.002 > 1.002 in issue 32.
    s = sobol_indices(lambda x: x[:, 0], 2, names=("seed", "lr"), n_base=64, repeats=10, seed=2)
    assert s.main_raw[0] > s.total_raw[0] > 1.0  # the crossing this test is about
    _assert_shown_ordered(s)
    assert (s.main[0], s.total[0]) == (1.0, 1.0)
    assert s.flags[0].startswith(f"main above 1 by {s.main_raw[0] - 1:.2g} (")
    assert f"total above 1 by {s.total_raw[0] - 1:.2g} (" in s.flags[0]
    assert f"sd {s.main_sd[0]:.2g} over 10 repeats): Monte Carlo noise" in s.flags[0]
    # x1 does nothing: both estimators are exactly 0, nothing moved.
    assert (s.main_raw[1], s.total_raw[1], s.main[1], s.total[1], s.flags[1]) == (0, 0, 0, 0, "")
    row = s.to_rows()[0]
    assert (row["main"], row["total"]) == (1.0, 1.0)
    assert (row["main_raw"], row["total_raw"], row["flag"]) == (s.main_raw[0], s.total_raw[0], s.flags[0])


def test_main_above_total_inside_0_1_is_shown_as_one_value_between_them() -> None:
    # f = x0 with N = 8, 3 repeats, seed 0: raw main 0.97 > raw total 0.73, both in [0, 1].
    s = sobol_indices(lambda x: x[:, 0], 2, n_base=8, repeats=3, seed=0)
    m, t = s.main_raw[0], s.total_raw[0]
    assert 0.0 < t < m < 1.0
    _assert_shown_ordered(s)
    assert s.main[0] == s.total[0] and t <= s.main[0] <= m
    w_m, w_t = s.main_sd[0] ** -2.0, s.total_sd[0] ** -2.0
    assert s.main[0] == pytest.approx((w_m * m + w_t * t) / (w_m + w_t), rel=1e-12)
    assert s.flags[0].startswith(f"main above total by {m - t:.2g} (")
    assert s.flags[0].endswith(f"both shown as their sd-weighted mean {s.main[0]:.3f}")


def test_normal_case_has_no_flag_and_shows_the_raw_estimates() -> None:
    # (x0 + 1/2)(x1 + 1/2): S_i = 0.48, T_i = 0.52 for both, far from 0, 1 and each other.
    s = sobol_indices(lambda x: (x[:, 0] + 0.5) * (x[:, 1] + 0.5), 2, n_base=1024, repeats=5)
    assert s.flags == ("", "")
    np.testing.assert_array_equal(s.main, s.main_raw)
    np.testing.assert_array_equal(s.total, s.total_raw)
    _assert_shown_ordered(s)
    assert all(row["flag"] == "" for row in s.to_rows())


def test_clip_indices_on_raw_numbers() -> None:
    m, t, flags = clip_indices(
        [1.002, 0.45, -0.001, 0.2, 0.6, 1.5],
        [1.001, 0.44, 0.003, -0.5, 0.7, 1.2],
        [0.038, 0.03, 0.002, 0.01, 0.02, 0.01],
        [0.01, 0.01, 0.001, 0.01, 0.02, 0.0],
        repeats=10,
    )
    assert np.all((m >= 0.0) & (m <= t) & (t <= 1.0))
    # env.seed in issue 32: both above 1 by less than their noise; shown 1 and 1.
    assert (m[0], t[0]) == (1.0, 1.0)
    assert flags[0] == (
        "main above 1 by 0.002 (0.2 standard errors; sd 0.038 over 10 repeats): Monte Carlo noise; "
        "total above 1 by 0.001 (0.3 standard errors; sd 0.01 over 10 repeats): Monte Carlo noise"
    )
    # Main above total inside [0, 1]: one value, weighted 1 : 9 towards the precise total.
    assert m[1] == t[1] == pytest.approx(0.441)
    assert flags[1].startswith("main above total by 0.01 (1.0 standard errors; sd 0.032 over 10 repeats)")
    assert flags[1].endswith("Monte Carlo noise; both shown as their sd-weighted mean 0.441")
    # A null index slightly negative: 0, flagged as noise; total untouched.
    assert (m[2], t[2]) == (0.0, 0.003)
    assert flags[2].startswith("main below 0 by 0.001 (1.6 standard errors")
    # Total far below 0 (158 standard errors): not noise, and the flag says what to do;
    # clipped to 0 it is then below main 0.2: both shown as their (equal-sd) mean 0.1.
    assert m[3] == t[3] == pytest.approx(0.1)
    assert flags[3] == (
        "total below 0 by 0.5 (158.1 standard errors; sd 0.01 over 10 repeats): "
        "more than Monte Carlo noise, raise n_base or repeats; "
        "main above total by 0.2 (44.7 standard errors; sd 0.014 over 10 repeats): "
        "more than Monte Carlo noise, raise n_base or repeats; both shown as their sd-weighted mean 0.100"
    )
    # Inside the bounds and ordered: shown as estimated, no flag.
    assert (m[4], t[4], flags[4]) == (0.6, 0.7, "")
    # Both above 1, total's sd 0: its excess is not noise.
    assert (m[5], t[5]) == (1.0, 1.0)
    assert "total above 1 by 0.2 (inf standard errors" in flags[5]
    for arr in (m, t):
        assert not arr.flags.writeable


def test_clip_indices_with_one_repeat_says_there_is_no_sd() -> None:
    m, t, flags = clip_indices([0.9, 0.3], [0.8, 0.4], [0.0, 0.0], [0.0, 0.0], repeats=1)
    assert m[0] == t[0] == pytest.approx(0.85)  # no sd to weight by: the plain mean
    assert flags == (
        "main above total by 0.1 (one repeat: no sd to judge it by); "
        "both shown as their sd-weighted mean 0.850",
        "",
    )
    assert (m[1], t[1]) == (0.3, 0.4)


def test_clip_indices_bad_input() -> None:
    with pytest.raises(ValueError, match="same length"):
        clip_indices([0.1, 0.2], [0.3], [0.0, 0.0], [0.0, 0.0], repeats=2)
    with pytest.raises(ValueError, match="diff_sd must have length 2"):
        clip_indices([0.1, 0.2], [0.3, 0.4], [0.0, 0.0], [0.0, 0.0], repeats=2, diff_sd=[0.1])
    with pytest.raises(ValueError, match="repeats must be an int >= 1"):
        clip_indices([0.1], [0.3], [0.0], [0.0], repeats=0)
