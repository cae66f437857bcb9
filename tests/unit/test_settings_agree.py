"""The sweeper's settings have one source: ``MultiverseSweeperConf`` declares each setting and its default once.

Each setting goes to exactly one owner: the search (``PolicySettings``), the run (``RunSettings``), the trials'
checkpoints (``CheckpointSettings``), or the search space (``params``). An owner that repeats a setting's
default must repeat it exactly; the constructors Hydra calls take exactly the declared settings, by name.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import types
import typing
from typing import Any

import pytest

from hydra_plugins.multiverse_sweeper.config import MultiverseSweeperConf
from hydra_plugins.multiverse_sweeper.multiverse_sweeper import MultiverseSweeper
from sweeper.run.hydra_sweeper import SweeperImpl
from sweeper.run.run_settings import RunSettings
from sweeper.run.tune_checkpoints import CheckpointSettings
from sweeper.search.settings import PolicySettings, default_num_trials

OWNERS = (PolicySettings, RunSettings, CheckpointSettings)
#: Settings the driver resolves before the search sees them: null in the conf, a value in PolicySettings.
RESOLVED = {"num_trials": default_num_trials("ivr", None), "mode": "max"}
#: PolicySettings fields computed from another setting, and which.
DERIVED = {"max_failures": "max_failure_rate"}
#: Conf fields that are no layer's settings object: Hydra's target, the search space (its params and its listed
#: configurations), and the sweep run's link to the sweep it re-runs (kept by SweeperImpl, tagged by sweep_records).
NOT_SETTINGS = {"_target_", "params", "configurations", "rerun_of"}


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory()


CONF = {f.name: f for f in dataclasses.fields(MultiverseSweeperConf)}


@pytest.mark.parametrize("owner", OWNERS, ids=lambda c: c.__name__)
def test_each_owners_field_is_a_conf_setting_with_the_same_default(owner: type) -> None:
    for f in dataclasses.fields(owner):
        if f.name in DERIVED:
            assert DERIVED[f.name] in CONF
            continue
        assert f.name in CONF, f"{owner.__name__}.{f.name} is not a setting of MultiverseSweeperConf"
        conf_default = _default(CONF[f.name])
        if f.name in RESOLVED:
            assert conf_default is None and _default(f) == RESOLVED[f.name]
        else:
            assert _default(f) == conf_default, f"{owner.__name__}.{f.name}: {_default(f)!r} != {conf_default!r}"


def test_each_conf_setting_has_exactly_one_owner() -> None:
    for name in CONF:
        owners = [c.__name__ for c in OWNERS if name in {f.name for f in dataclasses.fields(c)}]
        assert len(owners) == (0 if name in NOT_SETTINGS else 1), f"{name}: owned by {owners}"


def test_the_constructor_takes_each_setting_by_name() -> None:
    parameters = inspect.signature(SweeperImpl.__init__).parameters
    named = {p.name for p in parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert named == set(CONF) - {"_target_"}
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())  # +hydra.sweeper.typos


def _another_value(f: dataclasses.Field[Any]) -> Any:
    """A valid value of the setting that differs from its default."""
    if f.name == "params":
        return {"x": "interval(0, 1)"}
    if f.name == "metric_bounds":
        return [0, 1]
    if f.name == "configurations":
        return [{"x": 0.1, "y": "a"}, {"x": 0.2, "y": "b"}]
    default = _default(f)
    kinds = [t for t in typing.get_args(f.type) if t is not type(None)] if isinstance(f.type, types.UnionType) \
        else [f.type]
    kind = kinds[0]
    if kind is bool:
        return not default
    if kind is int:
        return (default or 0) + 7
    if kind is float:
        return (default or 0.0) + 0.25
    return f"{f.name}-given"


def test_the_sweeper_hands_each_setting_to_its_owner() -> None:
    given = {name: _another_value(f) for name, f in CONF.items() if name != "_target_"}
    impl = SweeperImpl(**given)
    search = impl.policy_settings(None)
    objects = {"PolicySettings": search, "RunSettings": impl.run, "CheckpointSettings": impl.checkpoints}
    assert impl.params == given["params"]
    assert (impl.configurations, impl.rerun_of) == (given["configurations"], given["rerun_of"])
    for name, value in given.items():
        owner = next((o for o in objects.values() if name in {f.name for f in dataclasses.fields(o)}), None)
        if name in NOT_SETTINGS:
            continue
        assert owner is not None and getattr(owner, name) == value, name
    assert search.max_failures == math.floor(min(given["max_failure_rate"], 1.0) * given["num_trials"])
    assert not impl.unknown


def test_hydra_instantiates_the_plugin_with_the_declared_settings() -> None:
    """What Hydra does with ``hydra/sweeper=multiverse``: the shim gets the node's settings and hands them on."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    node = OmegaConf.structured(MultiverseSweeperConf)
    node.num_trials, node.trial_timeout_s = 12, 30.0
    plugin = instantiate(node)
    # By name: another test may have imported the plugin's module afresh, making a second class object.
    assert (type(plugin).__module__, type(plugin).__qualname__) == (MultiverseSweeper.__module__, "MultiverseSweeper")
    assert plugin._impl.policy_settings(None).num_trials == 12 and plugin._impl.run.trial_timeout_s == 30.0
    settings = {k: v for k, v in node.items() if k != "_target_"}
    typo = MultiverseSweeper(**settings, num_initial=4)  # +hydra.sweeper.num_initial=4: reported by the sweep
    assert typo._impl.unknown == {"num_initial": 4}
    with pytest.raises(TypeError, match="n_initial"):  # a missing setting too
        MultiverseSweeper(**{k: v for k, v in settings.items() if k != "n_initial"})


def test_an_unset_mode_and_num_trials_are_resolved_for_the_search() -> None:
    given = {name: _default(f) for name, f in CONF.items() if name != "_target_"}
    search = SweeperImpl(**given).policy_settings(None)
    assert (search.mode, search.num_trials) == ("max", 32)
    assert search == dataclasses.replace(PolicySettings(), max_failures=16)
