"""``hydra.sweeper.configurations``: listed joint points crossed with the grid of the other dims.

The grid of a space with configurations runs each configuration once per combination of the other dims' values,
never a combination of one configuration's value with another's; every problem of the setting is reported at once.
"""

from __future__ import annotations

import itertools

import pytest

from sweeper.errors import SweeperConfigError
from sweeper.search.configurations import configurations_changed, joint_grid, joint_grid_size, with_configurations
from sweeper.search.grammar import parse_specs
from sweeper.search.policy import MultiversePolicy
from sweeper.search.settings import PolicySettings, default_num_trials, grid_size
from sweeper.search.space import ChoiceDim, SearchSpace

CONFIGS = [{"x": 0.1, "model": "a", "depth": 4}, {"x": 0.25, "model": "b", "depth": 4},
           {"x": 0.1, "model": "b", "depth": 4}]


def seeds_space() -> SearchSpace:
    return parse_specs({"env.seed": "range(1,4)", "env.threads": "choice(1,2)"})


def test_each_varying_key_is_a_dim_of_its_own_and_a_shared_key_a_fixed_value() -> None:
    space = with_configurations(seeds_space(), CONFIGS, strategy="grid")
    assert space is not None
    assert space.names == ["x", "model", "env.seed", "env.threads"]
    assert space.dims[0] == ChoiceDim("x", (0.1, 0.25)) and space.dims[1] == ChoiceDim("model", ("a", "b"))
    assert space.fixed_overrides == ("depth=4",)
    assert space.joint == ("x", "model") and space.configurations == ((0.1, "a"), (0.25, "b"), (0.1, "b"))
    # A new key keeps its + in the override, and its name without it.
    plus = with_configurations(seeds_space(), [{"+lr": 0.1}, {"+lr": 0.2}], strategy="grid")
    assert plus is not None and plus.dims[0].override_key == "+lr" and plus.joint == ("lr",)


def test_the_grid_runs_each_configuration_once_per_point_of_the_other_dims_and_nothing_else() -> None:
    space = with_configurations(seeds_space(), CONFIGS, strategy="grid")
    assert space is not None
    assert joint_grid_size(space) == grid_size(space) == 3 * 3 * 2 == default_num_trials("grid", space)
    points = space.from_unit(joint_grid(space, seed=0))
    ran = sorted((p["x"], p["model"], p["env.seed"], p["env.threads"]) for p in points)
    expected = sorted((c["x"], c["model"], s, t) for c, s, t in itertools.product(CONFIGS, (1, 2, 3), (1, 2)))
    assert ran == expected  # (0.25, "a") is never run: two dims' values, not their product
    # The strategy's own points, through the policy, are the same set, in a seeded order.
    policy = MultiversePolicy(space, PolicySettings(strategy="grid", num_trials=18, seed=3))
    asked = [policy.ask() for _ in range(18)]
    assert sorted((s.params["x"], s.params["model"], s.params["env.seed"], s.params["env.threads"])
                  for s in asked if s is not None) == expected
    assert [s.params for s in asked if s] != points


def test_a_space_without_configurations_is_written_and_read_as_before() -> None:
    plain = seeds_space()
    assert set(plain.to_dict()) == {"dims", "fixed_overrides"}
    joined = with_configurations(plain, CONFIGS, strategy="grid")
    assert joined is not None and SearchSpace.from_dict(joined.to_dict()) == joined
    assert configurations_changed(joined, joined) is None
    fewer = with_configurations(plain, CONFIGS[:2], strategy="grid")
    assert fewer is not None and "the configurations changed" in str(configurations_changed(joined, fewer))


def test_none_or_an_empty_list_leaves_the_space_alone() -> None:
    assert with_configurations(seeds_space(), None, strategy="ivr") == seeds_space()
    assert with_configurations(seeds_space(), [], strategy="ivr") == seeds_space()


def test_every_problem_of_the_configurations_is_reported_at_once() -> None:
    space = parse_specs({"x": "interval(0, 1)", "env.seed": "range(0,3)"})
    given = [{"x": 0.1, "y": 2}, {"y": 3}, "a", {"x": 0.1, "y": 2}, {"bad key": 1, "y": 1, "x": 2},
             {"x": float("nan"), "y": 5}]
    with pytest.raises(SweeperConfigError) as caught:
        with_configurations(space, given, strategy="ivr")
    problems = caught.value.problems
    expected = [
        "configuration 3 ('a') is not a mapping {key: value}",
        "configuration 5 has the key 'bad key', which is not an override key",
        "configuration 6 gives x the value NaN",
        "configuration 2 sets ['y'], configuration 1 sets ['x', 'y']: every configuration sets the same keys",
        "configuration 4 repeats configuration 1 (x=0.1, y=2): list each once",
        "needs strategy=grid, not 'ivr'. Try hydra.sweeper.strategy=grid.",
        "x is set by the configurations and also as 'x=interval(0, 1)': give each key in one place",
    ]
    for text in expected:
        assert sum(text in p for p in problems) == 1, (text, problems)
    assert len(problems) == len(expected) + 1  # configuration 5's keys differ too


@pytest.mark.parametrize("given", [{"x": 1}, "x=1", 3])
def test_a_value_that_is_not_a_list_of_mappings_is_refused_with_an_example(given: object) -> None:
    with pytest.raises(SweeperConfigError, match=r"a list of mappings, one per configuration.*Try "
                                                 r"hydra.sweeper.configurations=\[\{lr:0.1,depth:2\}"):
        with_configurations(seeds_space(), given, strategy="grid")


def test_a_space_that_did_not_parse_still_has_its_configurations_checked() -> None:
    assert with_configurations(None, [{"x": 1}, {"x": 2}], strategy="grid") is None
    with pytest.raises(SweeperConfigError, match="configuration 2 repeats configuration 1"):
        with_configurations(None, [{"x": 1}, {"x": 1}], strategy="grid")


def test_a_fixed_override_of_a_configuration_key_is_a_clash() -> None:
    space = SearchSpace(seeds_space().dims, ("+model=a",))
    with pytest.raises(SweeperConfigError, match="model is set by the configurations and also as '\\+model=a'"):
        with_configurations(space, CONFIGS, strategy="grid")


def test_a_grid_with_configurations_refuses_another_num_trials_with_the_crossed_size() -> None:
    space = with_configurations(seeds_space(), CONFIGS, strategy="grid")
    problems = PolicySettings(strategy="grid", num_trials=5).problems(space, "hydra.sweeper.")
    assert any("the grid has 18 points" in p and "num_trials=18" in p for p in problems), problems
