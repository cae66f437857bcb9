"""A trial's .hydra/*.yaml from kept text (sweeper.run.job_yaml) is byte for byte OmegaConf.to_yaml's."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from omegaconf import OmegaConf

from sweeper.run.job_yaml import ChunkedYaml, dump, quick_dump, to_yaml

BASE = {
    "hydra": {
        "run": {"dir": "outputs/${now:%Y-%m-%d}/${now:%H-%M-%S}"},
        "help": {"template": "${hydra.help.header}\n== Configuration groups ==\nCompose your configuration\n\n"
                             "$APP_CONFIG_GROUPS\n" + "a long line of words " * 8 + "\n", "header": "x: y"},
        "overrides": {"hydra": ["hydra.sweep.dir=/tmp/s", "hydra.mode=MULTIRUN"], "task": ["model=large"]},
        "job": {"name": "app", "chdir": None, "override_dirname": "", "id": "???", "num": "???",
                "env_set": {}, "config": {"override_dirname": {"kv_sep": "=", "item_sep": ",", "exclude_keys": []}}},
        "runtime": {"version": "1.3.8", "output_dir": "???", "choices": {"model": "large", "hydra/sweeper": "m"},
                    "config_sources": [{"path": "hydra.conf", "schema": "pkg", "provider": "hydra"}]},
        "verbose": False,
        "empty": {},
        "words": ["yes", "no", "on", "1", "1.5", "null", "~", "", " lead", "a: b", "#c", "ünï"],
    }
}
CHANGED = (("hydra", "overrides", "task"), ("hydra", "job", "override_dirname"), ("hydra", "job", "id"),
           ("hydra", "job", "num"), ("hydra", "runtime", "output_dir"))


def _trial(tree: dict[str, Any], index: int, values: list[str]) -> None:
    hydra = tree["hydra"]
    hydra["overrides"]["task"] = ["model=large", *values]
    hydra["job"]["override_dirname"] = ",".join(["model=large", *values])
    hydra["job"]["id"], hydra["job"]["num"] = f"app_{index}", index
    hydra["runtime"]["output_dir"] = f"/tmp/sweep dir with spaces/{'long ' * 20 * (index % 2)}{index}"


def test_the_hydra_node_s_text_from_kept_pairs_is_the_whole_dump() -> None:
    tree, chunks = copy.deepcopy(BASE), ChunkedYaml()
    for index, values in enumerate((["x=0.5"], ["x=1e-05", "y=true"], [], ["x='quoted'", "y=a: b"], ["x=1"] * 30)):
        _trial(tree, index, values)
        assert chunks.dump(tree, CHANGED) == dump(tree) == OmegaConf.to_yaml(OmegaConf.create(tree))
    assert not chunks.whole and ("hydra", "help") in chunks._kept


def test_a_task_config_by_its_overrides_keys() -> None:
    """Top-level and nested keys, an int key named by its str, a list element, a key added and one deleted."""
    base = {"x": 0.5, "model": {"lr": 0.1, "depth": 3, "layers": [1, 2]}, 1: {"a": 1, "b": 2}, "tail": "t"}
    chunks = ChunkedYaml()
    cases = [
        ({"x": 0.25}, [("x",)]),
        ({"model": {"lr": 1e-05}}, [("model", "lr")]),
        ({1: {"a": 7}}, [("1", "a")]),
        ({"model": {"layers": [1, 9]}}, [("model", "layers", "1")]),
        ({"new": "added"}, [("new",)]),
        ({}, [("x",), ("model", "lr")]),  # overridden before, the base's value again
    ]
    for change, paths in cases:
        tree = copy.deepcopy(base)
        for key, value in change.items():
            if isinstance(value, dict):
                tree[key].update(value)
            else:
                tree[key] = value
        assert chunks.dump(tree, paths) == dump(tree), (change, paths)
    tree = copy.deepcopy(base)
    del tree["x"]
    assert chunks.dump(tree, [("x",)]) == dump(tree)
    assert chunks.dump({}, []) == dump({}) == "{}\n"


def test_a_key_yaml_writes_in_two_lines_gives_the_whole_dump() -> None:
    long = "k" * 200  # longer than 128 characters: a complex key, "? kkk...\n: ..."
    tree = {long: {"x": 0.5, "y": 1}, "z": 2}
    chunks = ChunkedYaml()
    assert chunks.dump(tree, [(long, "x")]) == dump(tree)
    assert chunks.whole  # its header is not one line: whole dumps from now on
    tree[long]["x"] = 0.75
    assert chunks.dump(tree, [(long, "x")]) == dump(tree)
    top = {long: 1, "x": 0.5}  # a complex key among kept pairs is kept as it is
    assert ChunkedYaml().dump(top, [("x",)]) == dump(top)


def test_none_for_changed_means_the_whole_dump() -> None:
    assert ChunkedYaml().dump(BASE, None) == dump(BASE)


@pytest.mark.parametrize("cfg", [{"a": {"b": [1, "2", None, True]}, "c": "${a.b}"}, {}])
def test_to_yaml_is_omegaconf_s(cfg: dict[str, Any]) -> None:
    node = OmegaConf.create(cfg)
    assert to_yaml(node) == OmegaConf.to_yaml(node)


@pytest.mark.parametrize("value", [
    "plain", "x=0.5", "y=1e-05", "-", "?", ":", "a:b", "#", "!tag", "&a", "*a", "|", ">", "'q'", '"q"', "%", "@", "`",
    "[a]", "{b}", "a,b", "true", "no", "~", "null", "1", "0x1f", "1_000", ".inf", "=", "/" * 100, "a" * 100, "", 0,
    -3, 1.5e-300, float("inf"), float("nan"), True, None, ["a", ["b", {"c": "d"}]], {"k": {"j": "v"}}, [], {}])
def test_libyaml_is_taken_only_where_it_writes_what_pyyaml_writes(value: Any) -> None:
    for tree in ({"hydra": {"job": {"id": value}}}, {"x": value}, [value]):
        assert quick_dump(tree) == dump(tree)


def test_text_libyaml_folds_otherwise_takes_pyyaml() -> None:
    text = "a long line of words " * 8 + "\n"  # double-quoted, folded: libyaml breaks it elsewhere
    assert quick_dump({"x": text}) == dump({"x": text}) == OmegaConf.to_yaml({"x": text})


def test_libyaml_writes_what_pyyaml_writes_for_random_plain_ascii() -> None:
    """The claim _PLAIN_ASCII rests on, over 3,000 seeded strings of printable ASCII without whitespace."""
    import random
    import string

    import yaml

    from sweeper.run.job_yaml import _LibyamlDumper

    rng = random.Random(0)
    for _ in range(3000):
        text = "".join(rng.choice(string.printable[:94]) for _ in range(rng.randint(0, 40)))
        for tree in ({"x": text}, {"hydra": {"job": {"id": text}}}, [text]):
            libyaml = yaml.dump(tree, default_flow_style=False, allow_unicode=True, sort_keys=False,
                                Dumper=_LibyamlDumper)
            assert libyaml == dump(tree), text
