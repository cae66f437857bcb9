"""A metric whose name reads lower-is-better, maximised because no mode was set, is questioned (issue 31)."""

from __future__ import annotations

import pytest

from hydra_plugins.multiverse_sweeper.config import MultiverseSweeperConf
from sweeper.search.direction import (
    bounds_hint,
    bounds_warning,
    direction_warning,
    lower_is_better,
    name_words,
    reads_like_unit_score,
)


@pytest.mark.parametrize("name", [
    "loss", "val_loss", "valLoss", "val/loss", "val-loss", "train.loss", "test_error", "top1_err", "mse", "RMSE",
    "testMSE", "MSELoss", "mae", "regret", "perplexity", "val_ppl", "nll", "cost", "loss2", "l2_loss", "wer",
    "latency_ms", "train_time_s",
])
def test_names_that_read_lower_is_better(name: str) -> None:
    assert lower_is_better(name)


@pytest.mark.parametrize("name", [
    "objective", "score", "acc", "test_acc", "accuracy", "f1", "auc", "reward", "bleu",
    "lossless_acc", "errand", "timestamp", "mistral_score",  # whole words only
    "neg_log_loss", "neg_mean_squared_error", "error_reduction", "loss_improvement",  # reversed: higher is better
])
def test_names_that_do_not(name: str) -> None:
    assert not lower_is_better(name)


def test_words_split_at_separators_camel_case_and_digits() -> None:
    assert name_words("val/testMSE_2") == ["val", "test", "mse", "2"]
    assert name_words("MSELoss") == ["mse", "loss"]
    assert name_words("top1-err") == ["top", "1", "err"]


def test_the_warning_names_the_setting_to_change() -> None:
    assert direction_warning("val_loss", None) == (
        "hydra.sweeper.metric='val_loss' reads like lower-is-better, but the sweep maximises it (hydra.sweeper.mode "
        "is not set): add hydra.sweeper.mode=min, or hydra.sweeper.mode=max to keep maximising and silence this.")


@pytest.mark.parametrize(("metric", "mode"), [("val_loss", "max"), ("val_loss", "min"), ("val_acc", None)])
def test_an_explicit_mode_or_a_higher_is_better_name_never_warns(metric: str, mode: str | None) -> None:
    assert direction_warning(metric, mode) is None


def test_the_mode_is_not_set_unless_given() -> None:
    """null in the sweeper's config means "not set": the sweep maximises, and may question it."""
    assert MultiverseSweeperConf().mode is None


@pytest.mark.parametrize("name", ["val_acc", "test_accuracy", "f1_macro", "roc_auc", "valAcc", "precision@5",
                                  "recall", "F1", "mean_iou"])
def test_names_that_read_like_a_score_in_the_unit_interval(name: str) -> None:
    assert reads_like_unit_score(name)


@pytest.mark.parametrize("name", ["val_loss", "objective", "accumulated", "f10", "lossless", "reward", "fauc"])
def test_names_that_do_not_read_like_one(name: str) -> None:
    assert not reads_like_unit_score(name)


def test_an_accuracy_without_bounds_is_questioned_by_name_naming_the_setting() -> None:
    assert bounds_warning("val_acc", None) == (
        "hydra.sweeper.metric='val_acc' reads like a score in [0, 1], but no bounds are declared: the GP may map it "
        "outside [0, 1]. Add hydra.sweeper.metric_bounds=[0,1] (or hydra.sweeper.metric_bounds=[null,null] to "
        "model it unbounded and silence this).")


@pytest.mark.parametrize(("metric", "bounds"), [("val_acc", [0, 1]), ("val_acc", [None, None]),
                                                ("val_loss", None)])
def test_declared_bounds_explicitly_none_or_another_name_never_warn(metric: str, bounds: object) -> None:
    assert bounds_warning(metric, bounds) is None


def test_the_bounds_are_not_set_unless_given() -> None:
    """null means "not set" (questioned); [null, null], "unbounded on purpose", parses to no bounds too."""
    from sweeper.search.warping import MetricBounds

    assert MultiverseSweeperConf().metric_bounds is None and MetricBounds.parse([None, None]) is None


def test_a_report_hints_bounds_only_for_an_unbounded_score_whose_values_all_lie_in_0_1() -> None:
    hint = bounds_hint("val_acc", [0.5, 0.93, 1.0, float("nan")], bounded=False)
    assert hint is not None and "`--bounds 0 1`" in hint and "`hydra.sweeper.metric_bounds=[0,1]`" in hint
    assert bounds_hint("val_acc", [0.5, 1.2], bounded=False) is None  # not a score in [0, 1] after all
    assert bounds_hint("val_acc", [0.5, 0.9], bounded=True) is None
    assert bounds_hint("val_loss", [0.5, 0.9], bounded=False) is None
    assert bounds_hint("val_acc", [], bounded=False) is None
