"""Tests for sweeper.search.space: grammar -> dimensions, validation messages, unit-cube mappings."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np
import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hypothesis import given, settings
from hypothesis import strategies as st

from sweeper.errors import SweeperConfigError
from sweeper.search.grammar import parse_search_space, parse_specs
from sweeper.search.space import (
    ChoiceDim,
    Dimension,
    FloatDim,
    GridDim,
    IntDim,
    SearchSpace,
    format_override_value,
)

PARSER = OverridesParser.create()
FAST = settings(max_examples=200, deadline=None)


def parse_value(text: str) -> Any:
    """Parse ``x=<text>`` with Hydra and return the plain value."""
    [override] = PARSER.parse_overrides([f"x={text}"])
    assert not override.is_sweep_override()
    return override.value()


def one_dim(override: str) -> Dimension:
    space = parse_search_space(None, [override])
    assert space.fixed_overrides == ()
    [dim] = space.dims
    return dim


# ----------------------------------------------------------------------------- grammar


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("x=interval(0, 1)", FloatDim("x", 0.0, 1.0)),
        ("x=interval(-2.5, 1e3)", FloatDim("x", -2.5, 1000.0)),
        ("x=int(interval(1, 10))", IntDim("x", 1, 10)),
        ("x=tag(log, interval(1e-3, 1e3))", FloatDim("x", 1e-3, 1e3, log=True)),
        ("x=tag(log, int(interval(1, 1024)))", IntDim("x", 1, 1024, log=True)),
        ("x=choice(a, b, c)", ChoiceDim("x", ("a", "b", "c"))),
        ("x=a,b,c", ChoiceDim("x", ("a", "b", "c"))),
        ("x=shuffle(a, b)", ChoiceDim("x", ("a", "b"))),
        ("x=choice(1, 2.5, abc, true)", ChoiceDim("x", (1, 2.5, "abc", True), ("1", "2.5", "abc", "true"))),
        ("x=choice('a b', '1.5', 'true')", ChoiceDim("x", ("a b", "1.5", "true"), ("'a b'", "'1.5'", "'true'"))),
        ("x=choice([1,2],[3])", ChoiceDim("x", ([1, 2], [3]), ("[1,2]", "[3]"))),
        ("x=range(0, 5)", GridDim("x", (0, 1, 2, 3, 4))),
        ("x=range(5)", GridDim("x", (0, 1, 2, 3, 4))),
        ("x=range(5, 1, -2)", GridDim("x", (5, 3))),
        ("x=range(0, 1, 0.25)", GridDim("x", (0.0, 0.25, 0.5, 0.75))),
        ("x=range(1, 2.5, 0.5)", GridDim("x", (1.0, 1.5, 2.0))),
        ("x=range(0, 1, 0.1)", GridDim("x", tuple(0.1 * i for i in range(10)))),
        ("+x=choice(a, b)", ChoiceDim("x", ("a", "b"), override_key="+x")),
        ("++x=interval(0, 1)", FloatDim("x", 0.0, 1.0, override_key="++x")),
        ("model@pkg=a,b", ChoiceDim("model@pkg", ("a", "b"))),
        ("opt.lr=tag(log, interval(1e-4, 1))", FloatDim("opt.lr", 1e-4, 1.0, log=True)),
    ],
)
def test_override_to_dimension(override: str, expected: Dimension) -> None:
    dim = one_dim(override)
    assert dim == type(expected)(**{**vars(expected), "spec": override.split("=", 1)[1]})
    assert type(dim.from_unit(0.3)) is type(expected.from_unit(0.3))


def test_grid_values_follow_hydra_definition_without_accumulation() -> None:
    dim = one_dim("x=range(0, 1, 0.1)")
    assert isinstance(dim, GridDim)
    assert dim.values == tuple(0.0 + 0.1 * i for i in range(10))
    assert all(type(v) is float for v in dim.values)
    assert all(type(v) is int for v in one_dim("x=range(0, 5)").values)  # type: ignore[union-attr]  # a GridDim


@pytest.mark.parametrize(
    ("override", "fixed"),
    [
        ("lr=0.1", "lr=0.1"),
        ("model=resnet18", "model=resnet18"),
        ("+x=1", "+x=1"),
        ("~y", "~y"),
        ("++z=2", "++z=2"),
        ("name='hello world'", "name='hello world'"),
        ("x=choice(q)", "x=q"),  # one value: nothing to search, so a fixed value
        ("+x=choice('a b')", "+x='a b'"),
        ("x=range(3, 4)", "x=3"),
    ],
)
def test_plain_and_single_value_overrides_are_fixed(override: str, fixed: str) -> None:
    space = parse_search_space({}, [override])
    assert space.dims == ()
    assert space.fixed_overrides == (fixed,)


def test_yaml_and_command_line_together() -> None:
    params = {
        "C": "tag(log, interval(1e-3, 1e3))",
        "kernel": "choice(rbf, linear)",
        "n": 3,
        "ratio": 0.5,
        "flag": True,
        "nothing": None,
        "model": "resnet18",
    }
    space = parse_search_space(params, ["gamma=interval(0.1, 1)", "seed=range(0, 3)", "+extra=1", "~drop"])
    assert space.names == ["C", "kernel", "gamma", "seed"]
    assert space.d == 4 and space.has_categorical
    assert space.fixed_overrides == (
        "n=3", "ratio=0.5", "flag=true", "nothing=null", "model=resnet18", "+extra=1", "~drop",
    )
    assert space.describe() == {
        "C": "tag(log, interval(1e-3, 1e3))",
        "kernel": "choice(rbf, linear)",
        "gamma": "interval(0.1, 1)",
        "seed": "range(0, 3)",
    }
    assert space.dims[0] == FloatDim("C", 1e-3, 1e3, log=True, spec="tag(log, interval(1e-3, 1e3))")


def test_from_specs_and_empty_inputs() -> None:
    space = parse_specs({"C": "tag(log, interval(1e-3, 1e3))", "kernel": "choice(rbf, linear)"})
    assert space.names == ["C", "kernel"]
    assert parse_search_space(None, []) == SearchSpace(())
    assert not parse_specs({"x": "interval(0, 1)"}).has_categorical


# ----------------------------------------------------------------------------- validation

P = "hydra.sweeper.params"


@pytest.mark.parametrize(
    ("params", "overrides", "message"),
    [
        (
            {"C": "tag(log, interval(0, 10))"}, [],
            f"{P}.C='tag(log, interval(0, 10))': a log-scaled dimension needs lower bound > 0, got 0.0. "
            f"Use e.g. {P}.C='tag(log, interval(1e-05, 10))'.",
        ),
        (
            {}, ["n=tag(log, int(interval(0, 64)))"],
            "n='tag(log, int(interval(0, 64)))': a log-scaled dimension needs lower bound >= 1, got 0. "
            "Use e.g. n='tag(log, int(interval(1, 64)))'.",
        ),
        (
            {}, ["gamma=interval(5, 1)"],
            "gamma='interval(5, 1)': lower bound 5.0 must be below upper bound 1.0. Use e.g. gamma='interval(1, 5)'.",
        ),
        (
            {}, ["n=int(interval(8, 2))"],
            "n='int(interval(8, 2))': lower bound 8 must be below upper bound 2. Use e.g. n='int(interval(2, 8))'.",
        ),
        (
            {}, ["n=int(interval(3, 3))"],
            "n='int(interval(3, 3))': lower bound 3 must be below upper bound 3. Use e.g. n='3'.",
        ),
        (
            {}, ["x=interval(0, inf)"],
            "x='interval(0, inf)': bounds must be finite, got 0.0 and inf. Use e.g. x='interval(0, 1)'.",
        ),
        (
            {"k": "choice()"}, [],
            f"{P}.k='choice()': a choice needs at least one value (two to sweep). Use e.g. {P}.k='choice(a, b)'.",
        ),
        (
            {}, ["x=interval(1,"],
            "x='interval(1,': not valid override grammar (no viable alternative at input 'interval(1,')",
        ),
        (
            {}, ["x=tag(foo, interval(1, 2))"],
            "x='tag(foo, interval(1, 2))': unknown tag 'foo' (the only tag understood is 'log'). "
            "Use e.g. x='interval(1, 2)'.",
        ),
        (
            {}, ["x=tag(log, foo, interval(1, 2))"],
            "unknown tag 'foo' (the only tag understood is 'log'). Use e.g. x='tag(log, interval(1, 2))'.",
        ),
        (
            {}, ["k=tag(log, choice(a, b))"],
            "k='tag(log, choice(a, b))': a choice is categorical and cannot be log-scaled; drop the tag. "
            "Use e.g. k='choice(a, b)'.",
        ),
        (
            {}, ["n=tag(log, range(1, 100))"],
            "n='tag(log, range(1, 100))': a range is a grid of values and cannot be log-scaled; sweep a "
            "log-scaled interval instead. Use e.g. n='tag(log, int(interval(1, 99)))'.",
        ),
        (
            {}, ["r=range(5, 1)"],
            "r='range(5, 1)': the range is empty: start + step*i must stay below the stop 1. Use e.g. r='range(1, 5)'.",
        ),
        (
            {}, ["r=range(0, 1, 0)"],
            "r='range(0, 1, 0)': needs finite bounds and a nonzero step, got step 0.",
        ),
        (
            {}, ["r=range(0, 1000000)"],
            "more than the 10000 a grid may hold. Use e.g. r='int(interval(0, 999999))'.",
        ),
        (
            {}, ["lr=0.1", "lr=interval(0, 1)"],
            "'lr=interval(0, 1)': 'lr' is given twice (also as 'lr=0.1'); give each key once. "
            "Use e.g. 'lr=interval(0, 1)' alone.",
        ),
        (
            {"x": [1, 2]}, [],
            f"{P}.x=[1, 2]: a YAML list or mapping is not a search-space entry; write the dimension as an "
            f"override string. Use e.g. {P}.x='choice(1, 2)'.",
        ),
        (
            {"x": {"a": 1}}, [],
            f"{P}.x={{'a': 1}}: a YAML list or mapping is not a search-space entry",
        ),
        (
            {}, ["k=choice(a, a, b)"],
            "k='choice(a, a, b)': choices must be distinct, got a more than once. Use e.g. k='choice(a, b)'.",
        ),
        ({}, ["~k=a,b"], "'~k=a,b': a deletion (~) cannot be swept. Use e.g. ~k alone."),
        ({}, ["k=glob(*)"], "k='glob(*)': glob() selects config-group options"),
    ],
)
def test_invalid_configuration_message(params: dict[str, Any], overrides: list[str], message: str) -> None:
    with pytest.raises(SweeperConfigError, match=re.escape(message)) as info:
        parse_search_space(params, overrides)
    assert len(info.value.problems) == 1
    assert isinstance(info.value, ValueError)


def test_from_specs_names_keys_bare() -> None:
    message = "C='tag(log, interval(0, 10))': a log-scaled dimension needs lower bound > 0"
    with pytest.raises(SweeperConfigError, match=re.escape(message)):
        parse_specs({"C": "tag(log, interval(0, 10))"})


def test_every_problem_is_reported_at_once() -> None:
    params = {"C": "tag(log, interval(0, 10))", "k": "choice()", "ok": "interval(0, 1)"}
    overrides = ["gamma=interval(5, 1)", "x=interval(1,", "fine=1", "r=range(5, 1)", "fine=a,b"]
    with pytest.raises(SweeperConfigError) as info:
        parse_search_space(params, overrides)
    problems = info.value.problems
    assert len(problems) == 6
    for key in (f"{P}.C=", f"{P}.k=", "gamma=", "x=", "'fine=a,b'", "r="):
        assert sum(p.startswith(key) for p in problems) == 1, key
    assert "(6 problems)" in str(info.value)


def test_two_problems_on_one_dimension() -> None:
    with pytest.raises(SweeperConfigError) as info:
        parse_search_space(None, ["x=tag(log, interval(10, -1))"])
    assert info.value.problems == [
        "x='tag(log, interval(10, -1))': lower bound 10.0 must be below upper bound -1.0. "
        "Use e.g. x='tag(log, interval(1e-05, 10))'.",
        "x='tag(log, interval(10, -1))': a log-scaled dimension needs lower bound > 0, got -1.0. "
        "Use e.g. x='tag(log, interval(1e-05, 10))'.",
    ]


@pytest.mark.parametrize(
    "make",
    [
        lambda: FloatDim("x", 1.0, 1.0),
        lambda: FloatDim("x", 0.0, math.inf),
        lambda: FloatDim("x", 0.0, 1.0, log=True),
        lambda: IntDim("x", 5, 2),
        lambda: IntDim("x", 0, 5, log=True),
        lambda: IntDim("x", 0.5, 5),
        lambda: GridDim("x", ()),
        lambda: ChoiceDim("x", ()),
        lambda: ChoiceDim("x", ("a", "b"), ("a",)),
        lambda: SearchSpace((FloatDim("x", 0, 1), IntDim("x", 0, 1))),
    ],
)
def test_direct_construction_is_checked(make: Any) -> None:
    with pytest.raises(ValueError):
        make()


# ----------------------------------------------------------------------------- unit cube

DIMS: list[Dimension] = [
    FloatDim("f", -2.0, 3.0),
    FloatDim("fl", 1e-4, 1e2, log=True),
    IntDim("i", -3, 4),
    IntDim("il", 1, 1000, log=True),
    IntDim("i2", 0, 1),
    GridDim("g", (0.0, 0.25, 0.5, 0.75)),
    GridDim("g1", (7,)),
    ChoiceDim("c", ("a", 1, 2.5, True, None, [1, 2])),
]


def legal_values(dim: Dimension) -> list[Any]:
    if isinstance(dim, IntDim):
        return list(range(dim.low, dim.high + 1))
    if isinstance(dim, GridDim):
        return list(dim.values)
    if isinstance(dim, ChoiceDim):
        return list(dim.choices)
    return [dim.low, dim.high, *np.linspace(dim.low, dim.high, 11)[1:-1].tolist()]


def in_bounds(dim: Dimension, value: Any) -> bool:
    if isinstance(dim, FloatDim | IntDim):
        return dim.low <= value <= dim.high
    options = dim.values if isinstance(dim, GridDim) else dim.choices
    return any(type(o) is type(value) and o == value for o in options)


@pytest.mark.parametrize("dim", DIMS, ids=lambda d: d.name)
def test_bounds_at_ends_and_random_points(dim: Dimension) -> None:
    us = [0.0, 1.0, 0.5, 1e-300, 1 - 1e-16, *np.random.default_rng(0).random(200)]
    for u in us:
        value = dim.from_unit(u)
        assert in_bounds(dim, value), (u, value)
        if isinstance(dim, IntDim):
            assert type(value) is int
        assert 0.0 <= dim.to_unit(value) <= 1.0
    assert dim.from_unit(-0.5) == dim.from_unit(0.0) and dim.from_unit(1.5) == dim.from_unit(1.0)
    if isinstance(dim, FloatDim | IntDim):
        assert dim.from_unit(0.0) == dim.low and dim.from_unit(1.0) == dim.high


@pytest.mark.parametrize("dim", DIMS, ids=lambda d: d.name)
def test_value_round_trip(dim: Dimension) -> None:
    for value in legal_values(dim):
        back = dim.from_unit(dim.to_unit(value))
        if isinstance(dim, FloatDim):
            assert back == pytest.approx(value, rel=1e-12, abs=1e-12 * (dim.high - dim.low))
        else:
            assert back == value and type(back) is type(value)


def test_float_unit_round_trip() -> None:
    for dim in DIMS[:2]:
        for u in np.linspace(0, 1, 101):
            assert dim.to_unit(dim.from_unit(u)) == pytest.approx(u, abs=1e-12)


def test_linear_int_cells_have_equal_mass() -> None:
    dim = IntDim("i", -3, 6)
    n = 10 * 1000
    values = [dim.from_unit(u) for u in (np.arange(n) + 0.5) / n]
    counts = np.bincount(np.array(values) - dim.low)
    assert counts.tolist() == [1000] * 10


def test_log_int_cells_are_equal_in_log_space() -> None:
    dim = IntDim("i", 1, 100, log=True)
    n = 200_000
    values = np.array([dim.from_unit(u) for u in (np.arange(n) + 0.5) / n])
    assert np.all(np.diff(values) >= 0)  # monotone in u
    counts = np.bincount(values - 1, minlength=100)
    edges = np.log(np.arange(0.5, 101.5))
    expected = n * np.diff(edges) / (edges[-1] - edges[0])
    np.testing.assert_allclose(counts, expected, atol=2)
    assert counts.min() > 0  # every integer reachable
    for v in range(1, 101):  # to_unit lies inside v's cell
        assert (edges[v - 1] - edges[0]) / (edges[-1] - edges[0]) < dim.to_unit(v)
        assert dim.to_unit(v) < (edges[v] - edges[0]) / (edges[-1] - edges[0])


def test_grid_and_choice_cells() -> None:
    grid = GridDim("g", (1, 2, 3, 4))
    assert [grid.from_unit(u) for u in (0, 0.24, 0.25, 0.5, 0.99, 1)] == [1, 1, 2, 3, 4, 4]
    assert [grid.to_unit(v) for v in grid.values] == [0.125, 0.375, 0.625, 0.875]
    choice = ChoiceDim("c", (1, True))  # 1 == True in Python; the type tells them apart
    assert choice.to_unit(True) == 0.75 and choice.to_unit(1) == 0.25
    assert choice.format_value(True) == "true" and choice.format_value(1) == "1"


@pytest.mark.parametrize(
    ("dim", "value"),
    [
        (FloatDim("f", 0, 1), 1.5),
        (IntDim("i", 0, 3), 4),
        (IntDim("i", 0, 3), 1.5),
        (GridDim("g", (0.0, 0.5)), 0.25),
        (ChoiceDim("c", ("a", "b")), "z"),
    ],
)
def test_to_unit_rejects_illegal_values(dim: Dimension, value: Any) -> None:
    with pytest.raises(ValueError, match=dim.name):
        dim.to_unit(value)


@FAST
@given(
    low=st.floats(-1e3, 1e3),
    width=st.floats(1.0, 1e3),
    log=st.booleans(),
    u=st.floats(0.0, 1.0),
)
def test_float_dim_properties(low: float, width: float, log: bool, u: float) -> None:
    if log:
        low, width = abs(low) / 1e3 + 1e-6, width * 10
    dim = FloatDim("f", low, low + width, log=log)
    value = dim.from_unit(u)
    assert dim.low <= value <= dim.high
    assert dim.to_unit(value) == pytest.approx(u, abs=1e-12)
    assert dim.from_unit(dim.to_unit(value)) == pytest.approx(value, rel=1e-12, abs=1e-12 * width)
    assert parse_value(dim.format_value(value)) == value


@FAST
@given(
    low=st.integers(-50, 50),
    size=st.integers(1, 300),
    log=st.booleans(),
    u=st.floats(0.0, 1.0),
    data=st.data(),
)
def test_int_dim_properties(low: int, size: int, log: bool, u: float, data: st.DataObject) -> None:
    low = abs(low) + 1 if log else low
    dim = IntDim("i", low, low + size, log=log)
    value = dim.from_unit(u)
    assert type(value) is int and dim.low <= value <= dim.high
    v = data.draw(st.integers(dim.low, dim.high))
    assert dim.from_unit(dim.to_unit(v)) == v
    assert parse_value(dim.format_value(v)) == v


@FAST
@given(
    options=st.lists(st.one_of(st.integers(), st.text(max_size=8), st.booleans()), min_size=1, max_size=30),
    u=st.floats(0.0, 1.0),
    data=st.data(),
)
def test_choice_and_grid_properties(options: list[Any], u: float, data: st.DataObject) -> None:
    unique = [o for i, o in enumerate(options) if not any(type(p) is type(o) and p == o for p in options[:i])]
    choice = ChoiceDim("c", tuple(unique))
    grid = GridDim("g", tuple(sorted({float(i) / 7 for i in range(len(unique))})))
    for dim in (choice, grid):
        assert in_bounds(dim, dim.from_unit(u))
        value = data.draw(st.sampled_from(legal_values(dim)))
        back = dim.from_unit(dim.to_unit(value))
        assert back == value and type(back) is type(value)
        assert parse_value(dim.format_value(value)) == value


# ----------------------------------------------------------------------------- SearchSpace


def test_space_from_unit_shapes() -> None:
    space = SearchSpace((FloatDim("a", 0, 1), ChoiceDim("b", ("x", "y"))), ("+z=1",))
    assert space.from_unit(np.array([0.5, 0.9])) == [{"a": 0.5, "b": "y"}]
    points = space.from_unit(np.array([[0.0, 0.0], [1.0, 1.0], [0.25, 0.49]]))
    assert points == [{"a": 0.0, "b": "x"}, {"a": 1.0, "b": "y"}, {"a": 0.25, "b": "x"}]
    X = space.to_unit(points)
    assert X.shape == (3, 2) and X.dtype == np.float64
    np.testing.assert_allclose(X, [[0.0, 0.25], [1.0, 0.75], [0.25, 0.25]])
    assert space.to_unit([]).shape == (0, 2)
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        space.from_unit(np.zeros((2, 3)))


def test_space_snaps_points_to_legal_values() -> None:
    space = SearchSpace((IntDim("i", 0, 9), GridDim("g", (0.0, 0.5, 1.0)), FloatDim("f", 1e-3, 1, log=True)))
    X = np.random.default_rng(1).random((50, 3))
    snapped = space.to_unit(space.from_unit(X))
    assert space.from_unit(snapped) == space.from_unit(X)
    np.testing.assert_allclose(snapped[:, 2], X[:, 2], atol=1e-12)


TRICKY = ("a b", "it's", "back\\slash'", "1.5", "true", "null", "nan", "", "abc", "a,b", "${x}", "trailing\\")


def test_to_overrides_reparse_to_the_same_values() -> None:
    space = SearchSpace(
        (
            FloatDim("f", 1e-5, 1e5, log=True),
            IntDim("i", 1, 5, override_key="+i"),
            GridDim("g", (0.1 * k for k in range(10))),
            ChoiceDim("s", (*TRICKY, 1, 2.5, True, False, None, [1, "a b"], {"k": "v w"})),
        ),
        ("+fixed=1", "~y"),
    )
    rng = np.random.default_rng(2)
    for row in np.vstack([rng.random((100, 4)), np.linspace(0, 1, 17)[:, None].repeat(4, axis=1)]):
        [point] = space.from_unit(row)
        overrides = space.to_overrides(point)
        assert overrides[:2] == ["+fixed=1", "~y"]
        parsed = PARSER.parse_overrides(overrides[2:])
        assert [o.get_key_element() for o in parsed] == ["f", "+i", "g", "s"]
        for override, name in zip(parsed, space.names, strict=True):
            assert not override.is_sweep_override()
            got, want = override.value(), point[name]
            assert got == want and type(got) is type(want), (got, want)


def test_parsed_tricky_choices_round_trip() -> None:
    text = "choice(" + ", ".join(format_override_value(s) for s in TRICKY) + ", 1, 2.5, true)"
    dim = parse_specs({"s": text}).dims[0]
    assert isinstance(dim, ChoiceDim)
    assert dim.choices == (*TRICKY, 1, 2.5, True)
    for choice, string in zip(dim.choices, dim.choice_strings, strict=True):
        assert parse_value(string) == choice
        assert type(parse_value(string)) is type(choice)


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "null"), (True, "true"), (False, "false"), (3, "3"), (0.1, "0.1"), (1e-05, "1e-05"),
     ("abc", "abc"), ("a.b-c/d", "a.b-c/d"), ("1.5", "'1.5'"), ("True", "'True'"), ("a b", "'a b'"),
     ("it's", "'it\\'s'"), ([1, "a"], "[1,a]"), (np.float64(0.5), "0.5"), (np.int64(2), "2")],
)
def test_format_override_value(value: Any, text: str) -> None:
    assert format_override_value(value) == text


def test_yaml_fixed_values_reparse_as_typed() -> None:
    params = {"a": "1.5", "b": 1.5, "c": False, "d": None, "e": "hello world"}
    space = parse_search_space(params, [])
    parsed = {o.key_or_group: o.value() for o in PARSER.parse_overrides(list(space.fixed_overrides))}
    # YAML strings are grammar, as in Hydra's optuna sweeper: "1.5" means the float 1.5
    assert parsed == {"a": 1.5, "b": 1.5, "c": False, "d": None, "e": "hello world"}


def test_to_dict_round_trip_through_json() -> None:
    space = parse_search_space(
        {"C": "tag(log, interval(1e-3, 1e3))", "fixed": 2},
        ["n=tag(log, int(interval(1, 64)))", "r=range(0, 1, 0.1)", "k=choice(1, 2.5, abc, true, [1,2])", "+m@p=a,b"],
    )
    data = json.loads(json.dumps(space.to_dict()))
    restored = SearchSpace.from_dict(data)
    assert restored == space
    assert restored.describe() == space.describe()
    assert SearchSpace.from_dict(SearchSpace((FloatDim("x", 0, 1),)).to_dict()) != space


def test_default_override_key_and_spec() -> None:
    assert type(FloatDim("x", 0, 1).low) is float and type(IntDim("n", 1.0, 4.0).high) is int
    assert FloatDim("x", 0.0, 10.0).override_key == "x"
    assert FloatDim("x", 1e-3, 10.0, log=True).spec == "tag(log, interval(0.001, 10))"
    assert IntDim("n", 1, 8, log=True).spec == "tag(log, int(interval(1, 8)))"
    assert ChoiceDim("k", ("a", 1)).spec == "choice(a, 1)"
    assert [d.is_categorical for d in DIMS].count(True) == 1


def test_the_command_line_replaces_the_same_key_of_params_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    # Hydra's rule (and the Optuna sweeper's): what the user types last wins over the YAML (issue 16).
    from sweeper.search.grammar import parse_search_space

    params = {"lr": "tag(log, interval(1e-5, 1e-1))", "env.seed": "range(0, 4)", "C": "interval(0, 1)"}
    with caplog.at_level("INFO", logger="sweeper.search.grammar"):
        space = parse_search_space(params, ["lr=tag(log, interval(1e-4, 1e-2))", "env.seed=range(0,8)", "+C=0.5"])
    assert space.names == ["lr", "env.seed"]
    assert space.dims[0] == FloatDim("lr", 1e-4, 1e-2, log=True, spec="tag(log, interval(1e-4, 1e-2))")
    assert space.dims[1].spec == "range(0,8)" and space.fixed_overrides == ("+C=0.5",)
    replaced = [r.getMessage() for r in caplog.records if "replaced by the command line" in r.getMessage()]
    assert replaced == [
        "hydra.sweeper.params.lr='tag(log, interval(1e-5, 1e-1))' is replaced by the command line's "
        "'lr=tag(log, interval(1e-4, 1e-2))'",
        "hydra.sweeper.params.env.seed='range(0, 4)' is replaced by the command line's 'env.seed=range(0,8)'",
        "hydra.sweeper.params.C='interval(0, 1)' is replaced by the command line's '+C=0.5'",
    ]
