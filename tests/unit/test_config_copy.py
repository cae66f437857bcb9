"""Copies from a pickle made once (sweeper.run.config_copy) are, node for node, what copy.deepcopy gives."""

from __future__ import annotations

import copy
import enum
import sys
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.base import Node

from sweeper.run.config_copy import ConfigCopier


class Colour(enum.Enum):
    RED = 1
    BLUE = 2


@dataclass
class Inner:
    lr: float = 0.1
    colour: Colour = Colour.RED
    tags: list[str] = field(default_factory=lambda: ["a"])


@dataclass
class Outer:
    inner: Inner = field(default_factory=Inner)
    mapping: dict[str, int] = field(default_factory=lambda: {"k": 1})
    name: str = "${.inner.lr}"
    missing: Any = "???"
    optional: int | None = None


def _config() -> DictConfig:
    cfg = OmegaConf.create({"outer": OmegaConf.structured(Outer), "extra": {"list": [1, {"x": "${outer.name}"}]}})
    OmegaConf.set_struct(cfg, True)
    OmegaConf.set_readonly(cfg.extra, True)
    return cfg


def _same(a: Any, b: Any, path: str = "") -> None:
    """Equal node for node: types, metadata, flags, content; a node's parent is the copy's own node."""
    assert type(a) is type(b), path
    if isinstance(a, Node):
        da, db = dict(vars(a)), dict(vars(b))
        for d in (da, db):
            d.pop("_flags_cache", None)  # a cache: rebuilt on use
        assert (da.pop("_parent") is None) == (db.pop("_parent") is None), path
        assert da.keys() == db.keys(), path
        for key in da:
            _same(da[key], db[key], f"{path}/{key}")
    elif isinstance(a, dict):
        assert list(a) == list(b), path
        for key in a:
            _same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, type | enum.Enum):
        assert a is b, path  # shared, as deepcopy shares them
    elif hasattr(a, "__dict__") and not callable(a):
        _same(vars(a), vars(b), path)
    else:
        assert a == b, (path, a, b)


def test_a_copy_is_what_deepcopy_gives() -> None:
    cfg = _config()
    copier = ConfigCopier(cfg)
    assert copier.pickled
    made = copier.copy()
    _same(made, copy.deepcopy(cfg))
    assert OmegaConf.get_type(made.outer.inner) is Inner and made.outer.inner.colour is Colour.RED
    assert made.outer.name == "0.1" and made.extra.list[1].x == "0.1"  # interpolations resolve in the copy
    assert OmegaConf.is_readonly(made.extra) and OmegaConf.is_struct(made)
    assert made is not cfg and made.outer.inner is not cfg.outer.inner


def test_copies_are_independent_of_each_other_and_of_the_original() -> None:
    cfg = _config()
    copier = ConfigCopier(cfg)
    first, second = copier.copy(), copier.copy()
    first.outer.inner.lr = 0.5
    first.outer.inner.tags.append("b")
    with open_dict(first):
        first.added = 1
    assert second.outer.inner.lr == cfg.outer.inner.lr == 0.1 and list(second.outer.inner.tags) == ["a"]
    assert "added" not in second and "added" not in cfg
    _same(second, copy.deepcopy(cfg))


def test_a_class_its_module_no_longer_holds_by_that_name_is_kept(monkeypatch: Any) -> None:
    """Hydra's plugin scan runs a plugin's module again: its config's class is no longer the module's."""
    cfg = _config()
    monkeypatch.setattr(sys.modules[__name__], "Inner", type("Inner", (), {}))
    copier = ConfigCopier(cfg)
    assert copier.pickled
    assert OmegaConf.get_type(copier.copy().outer.inner) is OmegaConf.get_type(cfg.outer.inner)


class _DeepcopyOnly:
    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("not picklable")

    def __deepcopy__(self, memo: Any) -> _DeepcopyOnly:
        return _DeepcopyOnly()


def test_a_config_that_does_not_pickle_is_deep_copied() -> None:
    cfg = OmegaConf.create({"a": 1})
    cfg._metadata.extra = _DeepcopyOnly()  # something of its own that deepcopy copies and pickle refuses
    copier = ConfigCopier(cfg)
    assert not copier.pickled
    made = copier.copy()
    assert made == cfg and made is not cfg
