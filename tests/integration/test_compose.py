"""The fast composition path gives exactly Hydra's config, and steps aside for config groups."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import HydraContext, RunMode
from omegaconf import DictConfig, OmegaConf

from sweeper.compose import TrialComposer
from tests.integration.conftest import TOY_APP

pytestmark = pytest.mark.integration


@pytest.fixture()
def toy_context(tmp_path: Path) -> Iterator[tuple[HydraContext, DictConfig]]:
    from hydra._internal.callbacks import Callbacks

    with initialize_config_dir(config_dir=str(TOY_APP.parent / "conf"), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        cfg = loader.load_configuration("toy", overrides=[f"hydra.sweep.dir={tmp_path}"], run_mode=RunMode.MULTIRUN)
        HydraConfig.instance().set_config(cfg)
        yield HydraContext(config_loader=loader, callbacks=Callbacks(cfg)), cfg


def tree(cfg: DictConfig) -> dict:
    t = OmegaConf.to_container(cfg, resolve=False)
    t["hydra"]["runtime"].pop("cwd")
    return t


@pytest.mark.parametrize("fixed", [[], ["model=large", "steps=2"]])
def test_fast_path_equals_hydra_for_value_dims(toy_context, fixed: list[str]) -> None:
    ctx, master = toy_context
    composer = TrialComposer(ctx, master, fixed)
    assert composer.verify(["x=0.5", "y=0.5"])
    for dims in (["x=0.1", "y=0.9"], ["x=0.75", "y=0.0"], ["x=1.0", "y=0.3333333333333333"]):
        fast, full = composer.compose(dims), composer.compose_full(dims)
        assert tree(fast) == tree(full)
        assert fast.x == float(dims[0].split("=")[1])
        assert list(fast.hydra.overrides.task) == [*fixed, *dims]
    if fixed:
        assert composer.compose(["x=0.1", "y=0.2"]).model.width == 64  # the group choice is kept


def test_config_group_dims_take_hydra_full_path(toy_context) -> None:
    ctx, master = toy_context
    composer = TrialComposer(ctx, master, [])
    assert not composer.verify(["model=large", "x=0.5"])
    cfg = composer.compose(["model=large", "x=0.5"])
    assert cfg.model.width == 64 and cfg.hydra.runtime.choices.model == "large"


def test_a_key_missing_from_the_config_raises(toy_context) -> None:
    ctx, master = toy_context
    with pytest.raises(Exception, match="typo"):
        TrialComposer(ctx, master, []).verify(["typo=1"])


def test_composer_pickles_without_its_cached_base(toy_context) -> None:
    import pickle

    ctx, master = toy_context
    composer = TrialComposer(ctx, master, [])
    composer.verify(["x=0.5", "y=0.5"])
    composer.compose(["x=0.2", "y=0.2"])
    assert composer._base is not None
    clone = pickle.loads(pickle.dumps(composer))
    assert clone.fast and clone._base is None
    assert tree(clone.compose(["x=0.2", "y=0.2"])) == tree(composer.compose(["x=0.2", "y=0.2"]))
