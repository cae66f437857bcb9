"""A metric whose name reads lower-is-better, maximised because no mode was set, is questioned (issue 31)."""

from __future__ import annotations

import pytest

from hydra_plugins.multiverse_sweeper.config import MultiverseSweeperConf
from sweeper.search.direction import direction_warning, lower_is_better, name_words


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
