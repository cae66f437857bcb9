"""Unit tests for sweeper.analysis.qra against Belz, Popovic & Mille (2022)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper.analysis import QRA, qra
from sweeper.analysis.qra import _c4, qra_table

# Belz et al. 2022, Table 4: BLEU of NTS_def, original + 6 reproductions.
NTS_DEF_BLEU = [84.51, 84.50, 87.46, 85.60, 84.20, 86.61, 86.20]
# Belz et al. 2022, Table 2: Fluency on a 1..7 scale, original + reproduction.
FLUENCY = [5.36, 6.14]


def test_table4_nts_def_bleu() -> None:
    r = qra(NTS_DEF_BLEU)
    assert r.n == 7
    assert round(r.mean, 2) == 85.58
    assert round(r.std, 2) == 1.29
    assert (round(r.std_ci[0], 2), round(r.std_ci[1], 2)) == (0.45, 2.13)
    assert round(r.cv_star, 3) == 1.562
    assert r.mean_original == pytest.approx(r.mean)


def test_table2_fluency_on_1_to_7_scale() -> None:
    r = qra(FLUENCY, scale_min=1)
    assert round(r.mean, 2) == 4.75  # the paper reports the shifted mean
    assert r.mean_original == pytest.approx(5.75)
    assert round(r.std, 3) == 0.691
    assert (round(r.std_ci[0], 2), round(r.std_ci[1], 2)) == (-3.26, 4.65)  # not truncated
    assert round(r.cv_star, 3) == 16.372


def test_hand_worked_formulas() -> None:
    x = np.array([10.0, 12.0, 11.0, 13.0])
    s = x.std(ddof=1)
    c4 = math.sqrt(2 / 3) * math.gamma(2.0) / math.gamma(1.5)
    std = s / c4
    cv = 100 * std / x.mean()
    se = s**2 * math.sqrt(2 / 3) / (2 * std)
    t = 3.182446305284263  # t(0.975, 3)
    r = qra(x)
    assert r.std == pytest.approx(std, rel=1e-13)
    assert r.cv == pytest.approx(cv, rel=1e-13)
    assert r.cv_star == pytest.approx((1 + 1 / 16) * cv, rel=1e-13)
    assert r.std_ci == pytest.approx((std - t * se, std + t * se), rel=1e-12)


@pytest.mark.parametrize(("n", "c4"), [(2, 0.7978845608), (3, 0.8862269255), (5, 0.9399856030), (10, 0.9726592741)])
def test_c4_reference_values(n: int, c4: float) -> None:
    assert _c4(n) == pytest.approx(c4, abs=1e-10)


def test_c4_large_n_is_stable() -> None:
    assert _c4(10_000) == pytest.approx(1 - 1 / (4 * 10_000), abs=1e-8)


def test_shift_invariance_and_confidence() -> None:
    a = qra([2.0, 3.0, 4.0], scale_min=1.0)
    b = qra([1.0, 2.0, 3.0])
    assert (a.mean, a.std, a.cv_star) == pytest.approx((b.mean, b.std, b.cv_star))
    wide = qra([1.0, 2.0, 3.0], confidence=0.99)
    assert wide.std_ci[0] < b.std_ci[0] and wide.std_ci[1] > b.std_ci[1]
    assert wide.confidence == 0.99


def test_identical_measurements_have_zero_cv() -> None:
    r = qra([0.9, 0.9, 0.9])
    assert (r.std, r.cv, r.cv_star, r.std_ci) == (0.0, 0.0, 0.0, (0.0, 0.0))


def test_qra_table_keeps_order_and_labels() -> None:
    rows = qra_table({"bleu": NTS_DEF_BLEU, "again": NTS_DEF_BLEU[:3]})
    assert [r.name for r in rows] == ["bleu", "again"]
    assert all(isinstance(r, QRA) for r in rows)
    assert rows[0].cv_star == pytest.approx(qra(NTS_DEF_BLEU).cv_star)
    with pytest.raises(ValueError, match="group 'one': QRA needs at least 2"):
        qra_table({"ok": [1.0, 2.0], "one": [1.0]})


@pytest.mark.parametrize(
    ("values", "kwargs", "match"),
    [
        ([1.0], {}, "at least 2 measurements; got 1"),
        ([], {}, "at least 2 measurements; got 0"),
        ([1.0, float("nan")], {}, "drop failed measurements"),
        ([[1.0, 2.0]], {}, "one-dimensional"),
        ([1.0, 2.0], {"scale_min": 5.0}, "set scale_min to the lowest possible score"),
        ([-1.0, 1.0], {}, "<= 0"),
        ([1.0, 2.0], {"confidence": 95}, "confidence must be in"),
    ],
)
def test_bad_input(values: object, kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        qra(values, **kwargs)  # type: ignore[arg-type]
