"""Every experiment config composes with conf/train.yaml, and its search space is what it says."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from sweeper.search.grammar import parse_search_space
from sweeper.search.policy import MultiversePolicy
from sweeper.search.settings import PolicySettings
from tests.conftest import REPO

EXPERIMENTS = ("optimizer_gap", "batch_size", "seeds", "budget")


def _compose(experiment: str) -> Any:
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("train", overrides=[f"+experiment={experiment}"], return_hydra_config=True)


@pytest.mark.parametrize("scale", ["cpu", "paper"])
@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_composes_and_its_space_parses(name: str, scale: str) -> None:
    cfg = _compose(f"{name}/{scale}")
    sweeper = cfg.hydra.sweeper
    space = parse_search_space(OmegaConf.to_container(sweeper.params), [])
    assert space.dims, "an experiment sweeps something"
    for dim in space.dims:  # every swept key exists in the composed config
        assert OmegaConf.select(cfg, dim.name, default="<missing>") != "<missing>", dim.name
    assert cfg.mlflow.experiment_name == f"{name.replace('_', '-')}-{scale}"
    assert cfg.data.name in ("digits", "cifar10") or name == "batch_size"
    if scale == "cpu":
        assert cfg.data.name in ("digits", "breast_cancer") and sweeper.num_trials <= 48
        assert cfg.model in ("mlp", "logreg", "cnn")


def test_the_paper_scale_settings() -> None:
    gap = _compose("optimizer_gap/paper")
    assert (gap.task, gap.hydra.sweeper.strategy, gap.hydra.sweeper.metric) == ("optimizer_gap", "ivr", "gap")
    assert (gap.hydra.sweeper.n_initial, gap.hydra.sweeper.batch_size, gap.hydra.sweeper.num_trials) == (32, 32, 96)
    assert dict(gap.hydra.sweeper.params) == {"optimizer.lr": "tag(log, interval(1e-4, 1))",
                                              "optimizer.eps": "tag(log, interval(1e-11, 1e-4))"}
    batch = _compose("batch_size/paper").hydra.sweeper
    assert (batch.n_initial, batch.batch_size, batch.num_trials) == (32, 32, 192)  # 6 batches of 32
    space = {d.name: d for d in parse_search_space(OmegaConf.to_container(batch.params), []).dims}
    assert (space["batch_size"].low, space["batch_size"].high) == (16, 8192)
    assert math.isclose(space["optimizer.lr"].high, 10 ** -0.5)
    assert set(space["model"].choices) == {"alexnet", "vgg16_bn", "resnet18"}
    assert set(space["data.name"].choices) == {"cifar10", "cifar100", "tiny_imagenet"}
    budget = _compose("budget/paper").hydra.sweeper
    assert budget.strategy == "random" and budget.num_trials == 100


@pytest.mark.parametrize("scale", ["cpu", "paper"])
def test_the_seeds_design_is_the_full_factorial(scale: str) -> None:
    """The grid strategy visits every cell of 2 x 2 x n_seeds once."""
    sweeper = _compose(f"seeds/{scale}").hydra.sweeper
    space = parse_search_space(OmegaConf.to_container(sweeper.params), [])
    n_seeds = len(space.dims[2].values)
    assert sweeper.num_trials == 4 * n_seeds and sweeper.strategy == "grid"
    for seed in (0, 1):
        policy = MultiversePolicy(space, PolicySettings(strategy="grid", num_trials=sweeper.num_trials, seed=seed))
        asked = [policy.ask() for _ in range(sweeper.num_trials)]
        cells = Counter(tuple(sorted(s.params.items())) for s in asked if s is not None)
        assert len(cells) == sweeper.num_trials and set(cells.values()) == {1}


@pytest.mark.parametrize("scale", ["cpu", "paper"])
def test_the_batch_size_initial_design_covers_every_model_and_dataset(scale: str) -> None:
    sweeper = _compose(f"batch_size/{scale}").hydra.sweeper
    space = parse_search_space(OmegaConf.to_container(sweeper.params), [])
    policy = MultiversePolicy(space, PolicySettings(strategy="ivr", num_trials=sweeper.num_trials,
                                                    n_initial=sweeper.n_initial, batch_size=sweeper.batch_size))
    asked = [policy.ask() for _ in range(sweeper.n_initial)]
    cells = Counter((s.params["model"], s.params["data.name"]) for s in asked if s is not None)
    n_cells = len(space.dims[0].choices) * len(space.dims[1].choices)
    assert len(cells) == n_cells and max(cells.values()) - min(cells.values()) <= 1
