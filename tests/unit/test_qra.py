"""Unit tests for sweeper.analysis.qra against Belz, Popovic & Mille (2022)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweeper.analysis import QRA, qra
from sweeper.analysis.qra import _c4, distinct_measurements, qra_replicates, qra_table
from sweeper.report.document import OutputDir, render_markdown
from sweeper.report.groups import qra_groups
from sweeper.report.sections import qra_section

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


def test_identical_measurements_are_constant_not_cv_zero() -> None:
    r = qra([0.9, 0.9, 0.9])
    assert r.status == "constant" and not r.defined
    assert r.std == 0.0 and math.isnan(r.cv) and math.isnan(r.cv_star)
    assert all(math.isnan(v) for v in r.std_ci)  # no CI [0, 0]
    assert r.note.startswith("constant: all 3 measurements are 0.9")


def test_a_task_that_ignores_its_seed_gets_words_not_cv_star_zero() -> None:
    r = qra_replicates([0.8666] * 16, keys=[str(s) for s in range(16)], label="configuration `x=0.3`")
    assert r.status == "constant" and r.n_total == 16
    assert r.note.startswith("16 replicates of configuration `x=0.3` are bit-identical (0.8666): does the task use "
                             "its seed?")
    assert math.isnan(r.cv_star) and all(math.isnan(v) for v in r.std_ci)


def test_bit_identical_replicates_under_one_seed_count_once() -> None:
    # seeds/cpu: 8 seeds x 4 conditions that do not change the result -> 8 distinct of 32.
    per_seed = [0.951, 0.944, 0.948, 0.939, 0.951, 0.946, 0.942, 0.950]  # seeds 0 and 4 tie: both stay
    values = np.repeat(per_seed, 4)
    keys = np.repeat(np.arange(8), 4)
    r = qra_replicates(values, keys=keys, label="the configuration")
    expected = qra(per_seed)
    assert (r.status, r.n, r.n_total) == ("duplicates", 8, 32)
    assert (r.std, r.std_ci, r.cv_star) == (expected.std, expected.std_ci, expected.cv_star)
    assert r.cv_star != qra(values).cv_star  # what n = 32 would have claimed
    assert "24 of 32 replicates of the configuration are bit-identical to another under the same seed" in r.note
    assert "n = 8 distinct measurements of 32" in r.note


def test_distinct_measurements_keep_equal_values_of_different_seeds() -> None:
    assert distinct_measurements([0.9, 0.9, 0.9], keys=[0, 1, 0]).tolist() == [0.9, 0.9]
    assert distinct_measurements([0.9, 0.9, 0.8]).tolist() == [0.9, 0.8]
    assert distinct_measurements([0.0, -0.0], keys=[0, 0]).size == 2  # bit-identical, not merely equal
    with pytest.raises(ValueError, match="one entry per value"):
        distinct_measurements([1.0, 2.0], keys=[0])


def test_replicates_without_duplicates_are_plain_qra() -> None:
    r = qra_replicates(NTS_DEF_BLEU, keys=range(7))
    assert r == qra(NTS_DEF_BLEU) and r.status == "ok" and r.note == "" and r.n_total == 7


def seeds_cpu_trials(per_seed: list[float]) -> pd.DataFrame:
    """8 seeds x threads {1, 2} x deterministic {true, false} of one configuration; ``epochs`` fixed."""
    seeds, threads, det = (a.ravel() for a in np.meshgrid(np.arange(8), [1, 2], ["true", "false"], indexing="ij"))
    n = seeds.size
    return pd.DataFrame({"index": np.arange(n), "run_id": [f"r{i}" for i in range(n)], "status": "FINISHED",
                         "param.lr": 0.05, "param.env.seed": seeds, "param.env.threads": threads,
                         "param.env.deterministic": det, "metric.test_acc": np.asarray(per_seed)[seeds],
                         "metric.epochs": 3.0, "tag.seed": [str(s) for s in seeds]})


def test_report_groups_count_distinct_seeds_and_skip_constants_of_the_configuration() -> None:
    per_seed = [0.951, 0.944, 0.948, 0.939, 0.951, 0.946, 0.942, 0.950]
    (group,) = qra_groups(seeds_cpu_trials(per_seed), ["test_acc", "epochs"])
    acc, epochs = group.results["test_acc"], group.results["epochs"]
    assert isinstance(acc, QRA) and (acc.status, acc.n, acc.n_total) == ("duplicates", 8, 32)
    assert acc.cv_star == qra(per_seed).cv_star
    assert isinstance(epochs, QRA) and epochs.status == "fixed" and math.isnan(epochs.cv_star)
    assert epochs.note == "`epochs` is 3 in every trial of the sweep: a constant of the configuration, not a " \
                          "measurement, so it has no CV*"


def test_report_qra_section_writes_status_and_words(tmp_path: Path) -> None:
    groups = qra_groups(seeds_cpu_trials([0.9] * 8), ["test_acc", "epochs"])
    out = OutputDir(tmp_path / "report")
    blocks = qra_section(out, groups, ["test_acc", "epochs"])
    rows = pd.read_csv(out.commit() / "qra.csv").set_index("measurand")
    assert rows.loc["test_acc", "status"] == "constant" and rows.loc["test_acc", "n_trials"] == 32
    assert math.isnan(rows.loc["test_acc", "cv_star"]) and math.isnan(rows.loc["test_acc", "ci_low"])
    assert rows.loc["epochs", "status"] == "fixed"
    text = render_markdown(blocks)
    assert "32 replicates of the configuration are bit-identical (0.9): does the task use its seed?" in text
    assert "`epochs` take(s) one value in every trial of the sweep" in text
    assert "\n| epochs |" not in text  # no CV* row for a constant of the configuration


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
        qra(values, **kwargs)  # type: ignore[arg-type]  # bad input on purpose
