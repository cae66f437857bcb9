"""Issue 34: a Hydra user's habits hold: grids run each point once, YAML params give way to the command line,
and mistakes get a message naming the fix (the parts that need neither Hydra's command line nor Ray)."""

from __future__ import annotations

import pytest

from hydra_plugins.multiverse_sweeper.config import unknown_setting_problem
from sweeper.errors import SweeperConfigError
from sweeper.search.grammar import parse_search_space, parse_specs
from sweeper.search.settings import PolicySettings, default_num_trials

GRID = {"db": "choice(mysql, postgresql)", "k": "range(0, 2)"}  # 4 points


def problems_of(spec: str) -> list[str]:
    with pytest.raises(SweeperConfigError) as info:
        parse_specs({"n": spec})
    return info.value.problems


@pytest.mark.parametrize(("spec", "expect"), [
    ("int(interval(4.5, 64))", ("needs integer bounds", "would cut 4.5 to 4", "Use e.g. n='int(interval(5, 64))'")),
    ("int(interval(4.5, 4.9))", ("no integer lies between them", "Use e.g. n='int(interval(4, 5))'")),
    ("int(interval(4.5, 5.5))", ("the one integer between them is 5", "Use e.g. n='5'")),
    ("tag(log, int(interval(1.5, 8)))", ("would cut 1.5 to 1", "Use e.g. n='tag(log, int(interval(2, 8)))'")),
])
def test_an_int_interval_with_a_non_integer_bound_is_refused_with_the_integers_within(
        spec: str, expect: tuple[str, ...]) -> None:
    [problem] = problems_of(spec)
    assert "lower bound 4 must be below upper bound 4" not in problem
    for text in expect:
        assert text in problem, problem


def test_an_int_interval_with_integer_bounds_stays_as_written() -> None:
    dim = parse_specs({"n": "int(interval(4, 64.0))"}).dims[0]
    assert (dim.low, dim.high) == (4, 64)


@pytest.mark.parametrize("yaml_value", [["mysql", "postgresql"], {"a": 1}])
def test_a_yaml_list_or_mapping_entry_gives_way_to_the_same_key_on_the_command_line(yaml_value: object) -> None:
    space = parse_search_space({"db": yaml_value, "x": "interval(0, 1)"}, ["db=sqlite,duckdb"])
    assert space.describe() == {"x": "interval(0, 1)", "db": "sqlite,duckdb"}
    with pytest.raises(SweeperConfigError, match="a YAML list or mapping is not a search-space entry"):
        parse_search_space({"db": yaml_value}, ["x=interval(0, 1)"])


def grid_problems(**settings: object) -> list[str]:
    space = parse_specs(GRID)
    policy_settings = PolicySettings(strategy="grid", **settings)  # type: ignore[arg-type]  # valid values, mixed types
    return [p for p in policy_settings.problems(space, "hydra.sweeper.") if "num_trials" in p or "grid_repeats" in p]


def test_a_grid_runs_each_point_once_unless_told_to_repeat_it() -> None:
    space = parse_specs(GRID)
    assert default_num_trials("grid", space) == 4 and default_num_trials("grid", space, 3) == 12
    assert default_num_trials("ivr", space) == 32
    assert grid_problems(num_trials=4) == [] and grid_problems(num_trials=12, grid_repeats=3) == []
    [short] = grid_problems(num_trials=2)
    assert "the grid has 4 points: set hydra.sweeper.num_trials=4, or leave it unset" in short
    [multiple] = grid_problems(num_trials=32)
    assert "or hydra.sweeper.grid_repeats=8 to run the whole grid that many times" in multiple
    assert "grid_repeats=0 is invalid" in grid_problems(num_trials=4, grid_repeats=0)[0]
    ivr = PolicySettings(strategy="ivr", grid_repeats=2).problems(space, "hydra.sweeper.")
    assert any("the grid strategy alone repeats its grid" in p for p in ivr)


@pytest.mark.parametrize(("key", "closest"), [("num_trails", "num_trials"), ("stratgy", "strategy"),
                                              ("n_inital", "n_initial"), ("param", "params")])
def test_an_unknown_setting_names_the_closest_one(key: str, closest: str) -> None:
    problem = unknown_setting_problem(key, 8)
    assert f"hydra.sweeper.{key}=8 is not a setting of the multiverse sweeper" in problem
    assert f"did you mean hydra.sweeper.{closest}? Try hydra.sweeper.{closest}=8." in problem


def test_an_unknown_setting_like_none_lists_them_all() -> None:
    assert "the settings are strategy, metric, mode" in unknown_setting_problem("zzz", 1)
