"""value_of (sweeper.run.interpolation) is parent[key], each interpolation's text parsed once per process."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from omegaconf import OmegaConf, read_write
from omegaconf.errors import InterpolationKeyError, InterpolationResolutionError

from sweeper.run import interpolation
from sweeper.run.interpolation import value_of


@dataclass
class Sweep:
    dir: str = "multirun/${now:%Y-%m-%d}"
    subdir: str = "${job.num}"  # a typed node: the int is written as a str


CONFIG = {"job": {"num": 3, "name": "app"}, "sweep": Sweep, "plain": 1.5, "text": "${job.name}_${job.num}.log",
          "node": "${job}", "relative": {"a": 2, "b": "${.a}", "up": "${..plain}"}, "escaped": r"\${job.num}",
          "env": "${oc.env:SWEEPER_TEST_PROBE,unset}", "missing": "???", "to_missing": "${missing}",
          "nowhere": "${no.such.key}", "items": [10, "${job.num}"], "none": None}


@pytest.fixture(autouse=True)
def _hydra_resolvers() -> None:
    """Hydra's resolvers (``now``: cached per config), as every Hydra job has them."""
    from hydra.core.utils import setup_globals

    setup_globals()


@pytest.mark.parametrize(("parent", "key"), [
    ("", "plain"), ("", "text"), ("", "node"), ("relative", "b"), ("relative", "up"), ("", "escaped"), ("", "env"),
    ("sweep", "dir"), ("sweep", "subdir"), ("items", 1), ("items", 0), ("", "none")])
def test_value_of_is_parent_key(parent: str, key: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWEEPER_TEST_PROBE", "set")
    cfg = OmegaConf.create(CONFIG)
    node = OmegaConf.select(cfg, parent) if parent else cfg
    for _ in range(2):  # the second time from the kept parse tree
        got, expected = value_of(node, key), node[key]
        assert got == expected and type(got) is type(expected), (got, expected)


def test_a_kept_parse_resolves_the_values_of_now() -> None:
    cfg = OmegaConf.create(CONFIG)
    OmegaConf.set_readonly(cfg, True)
    for num in (3, 4, 5):
        with read_write(cfg):
            cfg.job.num = num
        assert value_of(cfg.sweep, "subdir") == str(num) == cfg.sweep.subdir
        assert value_of(cfg, "text") == f"app_{num}.log"
    assert "${job.num}" in interpolation._TREES and "${job.name}_${job.num}.log" in interpolation._TREES


@pytest.mark.parametrize(("key", "error"), [("missing", Exception), ("to_missing", InterpolationResolutionError),
                                            ("nowhere", InterpolationKeyError)])
def test_errors_are_omegaconf_s(key: str, error: type[Exception]) -> None:
    cfg = OmegaConf.create(CONFIG)
    with pytest.raises(error) as expected:
        cfg[key]
    with pytest.raises(error) as got:
        value_of(cfg, key)
    assert str(got.value) == str(expected.value)


def test_the_kept_parse_trees_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interpolation, "_TREES", {})
    monkeypatch.setattr(interpolation, "_MAX_TREES", 3)
    cfg = OmegaConf.create({"a": 1, **{f"k{i}": "${a}" + "x" * i for i in range(5)}})
    assert [value_of(cfg, f"k{i}") for i in range(5)] == [1, *("1" + "x" * i for i in range(1, 5))]
    assert len(interpolation._TREES) <= 3
