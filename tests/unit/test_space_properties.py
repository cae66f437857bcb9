"""Property-based tests of the search-space grammar and the unit-cube mapping of whole spaces.

tests/unit/test_space.py already checks single dimensions built directly (FloatDim, IntDim,
ChoiceDim, GridDim: bounds, value round trip, override text). Here the specs go through the
parser: random valid specs (any spacing and number spelling) parse to the dimension their
canonical text parses to, ``describe`` re-parses to the same space; random invalid specs
raise SweeperConfigError and nothing else, and the fix each message suggests is itself
valid. Then the mapping of mixed spaces of up to five dims: every point of ``[0, 1]^d``,
faces and corners included, lands inside the bounds; ints are ints; choices are members;
log dims stay positive; continuous coordinates round-trip; discrete ones snap idempotently.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from sweeper.errors import SweeperConfigError
from sweeper.search.grammar import parse_search_space
from sweeper.search.space import (
    ChoiceDim,
    Dimension,
    FloatDim,
    GridDim,
    IntDim,
    SearchSpace,
    _interval_text,
    format_override_value,
)

PROPS = settings(max_examples=150, deadline=None)

# ----------------------------------------------------------------------------- spec strategies

_IDENT = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda s: s not in {"true", "false", "null", "inf", "nan", "int", "float", "str", "bool", "tag",
                        "choice", "range", "interval", "glob", "shuffle", "sort", "json_str", "extend_list"})


def _spaces() -> st.SearchStrategy[str]:
    return st.sampled_from(["", " ", "  "])


@st.composite
def _number_text(draw: Any, value: float | int) -> str:
    """``value`` spelled any way Hydra reads back exactly: 3, 3.0, 0.001, 1e-03, 1.0E-3 ..."""
    if isinstance(value, int):
        return str(value)
    spellings = [repr(value)]
    if value.is_integer() and abs(value) < 1e15:
        spellings += [str(int(value)), f"{int(value)}.0"]
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        spellings.append(f"{mantissa}E{int(exponent):+03d}")
    return draw(st.sampled_from(spellings))


@st.composite
def _call(draw: Any, name: str, *args: str) -> str:
    """``name(a, b)`` with random spacing around the arguments."""
    sep = [draw(_spaces()) + "," + draw(_spaces()) for _ in args[1:]]
    inner = args[0] + "".join(s + a for s, a in zip(sep, args[1:], strict=True)) if args else ""
    return f"{name}({draw(_spaces())}{inner}{draw(_spaces())})"


@st.composite
def float_specs(draw: Any) -> tuple[str, FloatDim]:
    log = draw(st.booleans())
    if log:
        low = draw(st.floats(1e-12, 1e6))
        high = low * draw(st.floats(1.001, 1e12))
    else:
        low = draw(st.floats(-1e12, 1e12))
        high = low + max(draw(st.floats(1e-6, 1e12)), abs(low) * 1e-9)
    assume(math.isfinite(high) and low < high)
    inner = draw(_call("interval", draw(_number_text(low)), draw(_number_text(high))))
    spec = draw(_call("tag", "log", inner)) if log else inner
    return spec, FloatDim("d", low, high, log=log)


@st.composite
def int_specs(draw: Any) -> tuple[str, IntDim]:
    log = draw(st.booleans())
    low = draw(st.integers(1, 10_000) if log else st.integers(-10_000, 10_000))
    high = low + draw(st.integers(1, 100_000))
    inner = draw(_call("int", draw(_call("interval", str(low), str(high)))))
    spec = draw(_call("tag", "log", inner)) if log else inner
    return spec, IntDim("d", low, high, log=log)


@st.composite
def range_specs(draw: Any) -> tuple[str, GridDim]:
    n = draw(st.integers(2, 40))
    if draw(st.booleans()):
        start, step = draw(st.integers(-100, 100)), draw(st.integers(-7, 7).filter(bool))
        values: list[float | int] = [start + step * i for i in range(n)]
        stop: float | int = start + step * n
    else:  # steps that are exact in binary, so start + step*i is the decimal one expects
        start, step = draw(st.integers(-40, 40)) * 0.5, draw(st.sampled_from([0.25, 0.5, -0.5, 1.5, 0.125]))
        values = [start + step * i for i in range(n)]
        stop = start + step * n
    args = [draw(_number_text(start)), draw(_number_text(stop))]
    if step != 1 or draw(st.booleans()):
        args.append(draw(_number_text(step)))
    return draw(_call("range", *args)), GridDim("d", tuple(values))


_CHOICE_VALUE = st.one_of(
    _IDENT,
    st.integers(-10**6, 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.booleans(),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), max_size=6),
)


@st.composite
def choice_specs(draw: Any) -> tuple[str, ChoiceDim]:
    options = draw(st.lists(_CHOICE_VALUE, min_size=2, max_size=8,
                            unique_by=lambda v: (type(v).__name__, v if not isinstance(v, float) else repr(v))))
    assume(all(not (isinstance(v, float) and v == 0.0 and math.copysign(1, v) < 0) for v in options))
    distinct = [v for i, v in enumerate(options) if not any(type(v) is type(w) and v == w for w in options[:i])]
    assume(len(distinct) == len(options))
    texts = [format_override_value(v) for v in options]
    spec = draw(_call("choice", *texts)) if draw(st.booleans()) else ",".join(texts)  # else the bare a,b,c form
    return spec, ChoiceDim("d", tuple(options))


VALID_SPECS = st.one_of(float_specs(), int_specs(), range_specs(), choice_specs())


def same_dim(a: Dimension, b: Dimension) -> bool:
    """Same kind, name and values (override key and spec text may differ)."""
    if type(a) is not type(b) or a.name != b.name:
        return False
    if isinstance(a, FloatDim | IntDim):
        same_type = type(a.low) is type(b.low)  # type: ignore[union-attr]  # b is a's type, checked above
        return same_type and (a.low, a.high, a.log) == (b.low, b.high, b.log)  # type: ignore[union-attr]  # b: a's type
    items_a = a.values if isinstance(a, GridDim) else a.choices
    items_b = b.values if isinstance(b, GridDim) else b.choices  # type: ignore[union-attr]  # b is a's type
    return len(items_a) == len(items_b) and all(
        type(x) is type(y) and (x == y or (isinstance(x, float) and math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-12)))
        for x, y in zip(items_a, items_b, strict=True))


def canonical(dim: Dimension) -> str:
    """The text a dimension would be written as, had the user typed it the plainest way."""
    if isinstance(dim, FloatDim | IntDim):
        return _interval_text(dim.low, dim.high, isinstance(dim, IntDim), dim.log)
    if isinstance(dim, ChoiceDim):
        return "choice(" + ", ".join(dim.choice_strings) + ")"
    raise AssertionError("a grid's canonical text is its range(); compare values instead")


def one_dim(spec: str, name: str = "d") -> Dimension:
    space = parse_search_space({name: spec}, (), params_key="")
    assert space.fixed_overrides == (), space.fixed_overrides
    [dim] = space.dims
    return dim


# ----------------------------------------------------------------------------- grammar: valid specs


@PROPS
@given(VALID_SPECS)
def test_a_valid_spec_parses_to_its_dimension_and_its_canonical_text_agrees(case: tuple[str, Dimension]) -> None:
    spec, expected = case
    dim = one_dim(spec)
    assert same_dim(dim, expected), (spec, dim, expected)
    assert dim.spec == spec  # what the user wrote is what gets logged
    if not isinstance(dim, GridDim):
        again = one_dim(canonical(dim))
        assert same_dim(again, dim), (canonical(dim), again, dim)


@PROPS
@given(st.lists(VALID_SPECS, min_size=1, max_size=5), st.data())
def test_parse_describe_parse_gives_the_same_space(cases: list[tuple[str, Dimension]], data: st.DataObject) -> None:
    names = data.draw(st.lists(_IDENT, min_size=len(cases), max_size=len(cases), unique=True))
    # Each dim from YAML params or the command line (there with a random +/++ prefix).
    from_yaml = data.draw(st.lists(st.booleans(), min_size=len(cases), max_size=len(cases)))
    params = {n: spec for n, (spec, _), y in zip(names, cases, from_yaml, strict=True) if y}
    prefixes = data.draw(st.lists(st.sampled_from(["", "+", "++"]), min_size=len(cases), max_size=len(cases)))
    overrides = [f"{p}{n}={spec}"
                 for n, (spec, _), y, p in zip(names, cases, from_yaml, prefixes, strict=True) if not y]
    space = parse_search_space(params, overrides)
    order = ([n for n, y in zip(names, from_yaml, strict=True) if y]
             + [n for n, y in zip(names, from_yaml, strict=True) if not y])
    assert space.names == order  # YAML first, then the command line, each in order
    again = parse_search_space(space.describe(), (), params_key="")
    assert again.names == space.names
    assert all(same_dim(a, b) for a, b in zip(again.dims, space.dims, strict=True))
    assert SearchSpace.from_dict(space.to_dict()) == space


# ----------------------------------------------------------------------------- grammar: invalid specs


@st.composite
def invalid_specs(draw: Any) -> str:
    """Specs that break one rule each: bounds, log scale, steps, emptiness, duplicates, tags."""
    a = draw(st.floats(-1e6, 1e6))
    b = draw(st.floats(-1e6, 1e6))
    low, high = min(a, b), max(a, b)
    i, j = sorted(draw(st.lists(st.integers(-100, 100), min_size=2, max_size=2)))
    word = draw(_IDENT)
    kind = draw(st.sampled_from([
        "reversed", "equal", "log_nonpositive", "log_int_below_1", "nonfinite", "range_step_0", "range_empty",
        "range_huge", "range_log", "choice_duplicates", "choice_log", "unknown_tag", "empty_choice",
    ]))
    if kind == "reversed":
        assume(low < high)
        return f"interval({high!r}, {low!r})"
    if kind == "equal":
        return draw(st.sampled_from([f"interval({a!r}, {a!r})", f"int(interval({i}, {i}))"]))
    if kind == "log_nonpositive":
        return f"tag(log, interval({-abs(a)!r}, {abs(b) + 1!r}))"
    if kind == "log_int_below_1":
        return f"tag(log, int(interval({min(i, 0)}, {max(j, 1) + 1})))"
    if kind == "nonfinite":
        return draw(st.sampled_from([f"interval(-inf, {b!r})", f"interval({a!r}, inf)", f"interval(nan, {b!r})"]))
    if kind == "range_step_0":
        return f"range({i}, {j + 1}, 0)"
    if kind == "range_empty":
        return draw(st.sampled_from([f"range({j + 1}, {i})", f"range({i}, {j + 1}, -1)"]))
    if kind == "range_huge":
        return f"range(0, {draw(st.integers(10_001, 10**9))})"
    if kind == "range_log":
        return f"tag(log, range({i}, {j + 2}))"
    if kind == "choice_duplicates":
        return f"choice({word}, {word})" if draw(st.booleans()) else f"{i},{i},{j + 1}"
    if kind == "choice_log":
        return f"tag(log, choice({i}, {j + 1}))"
    if kind == "unknown_tag":
        return f"tag({word}x, interval(0, 1))"
    return "choice()"


FIX = re.compile(r"Use e\.g\. (?P<key>\S+?)=(?P<fix>'.*')\.$")


@PROPS
@given(invalid_specs(), st.booleans())
def test_an_invalid_spec_raises_a_config_error_whose_fix_is_valid(spec: str, on_command_line: bool) -> None:
    params, overrides = ({}, [f"lr={spec}"]) if on_command_line else ({"lr": spec}, [])
    with pytest.raises(SweeperConfigError) as info:
        parse_search_space(params, overrides)
    where = "lr" if on_command_line else "hydra.sweeper.params.lr"
    fixes = []
    for problem in info.value.problems:
        assert problem.startswith(f"{where}={spec!r}: "), problem  # names the key and the value
        match = FIX.search(problem)
        assert match is not None and match["key"] == where, problem  # and a fix, for that key
        fixes.append(ast.literal_eval(match["fix"]))
    for fix in set(fixes):
        parse_search_space({"lr": fix}, [])  # the suggested fix is itself valid


_TOKENS = ["interval(", "int(", "tag(", "choice(", "range(", "glob(", "shuffle(", "sort(", "log", "foo", ",", ")",
           "(", " ", "0", "1", "-1", "1e-3", "2.5", "inf", "nan", "'", '"', "a", "[", "]", "{", "}", ":", "=", "$",
           "${x}", "\\", "true", "null", "~", "+", "@"]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.lists(st.sampled_from(_TOKENS), max_size=12).map("".join), st.text(max_size=20)),
       st.booleans())
@example("shuffle()", False)  # an empty choice Hydra's parser lets through: once a ValueError
def test_any_text_either_parses_or_raises_a_config_error(text: str, on_command_line: bool) -> None:
    params, overrides = ({}, [f"lr={text}"]) if on_command_line else ({"lr": text}, [])
    try:
        space = parse_search_space(params, overrides)
    except SweeperConfigError as exc:
        assert exc.problems and all(isinstance(p, str) and p for p in exc.problems)
        return
    assert isinstance(space, SearchSpace) and space.d + len(space.fixed_overrides) == 1


# ----------------------------------------------------------------------------- unit cube


@st.composite
def dims(draw: Any, name: str) -> Dimension:
    kind = draw(st.sampled_from(["float", "int", "grid", "choice"]))
    if kind == "float":
        log = draw(st.booleans())
        if log:
            low = draw(st.floats(1e-12, 1e6))
            high = low * draw(st.floats(1.001, 1e12))
        else:
            low = draw(st.floats(-1e12, 1e12))
            high = low + max(draw(st.floats(1e-6, 1e12)), abs(low) * 1e-9)
        return FloatDim(name, low, high, log=log)
    if kind == "int":
        log = draw(st.booleans())
        low = draw(st.integers(1, 1000) if log else st.integers(-1000, 1000))
        return IntDim(name, low, low + draw(st.integers(1, 500)), log=log)
    if kind == "grid":
        values = draw(st.lists(st.one_of(st.integers(-100, 100), st.floats(-100, 100)), min_size=1, max_size=12,
                               unique=True))
        return GridDim(name, tuple(values))
    options = draw(st.lists(st.one_of(_IDENT, st.integers(-5, 5), st.booleans()), min_size=1, max_size=6,
                            unique_by=lambda v: (type(v).__name__, v)))
    return ChoiceDim(name, tuple(options))


@st.composite
def spaces(draw: Any) -> SearchSpace:
    d = draw(st.integers(1, 5))
    return SearchSpace(tuple(draw(dims(f"x{k}")) for k in range(d)))


UNIT = st.one_of(st.sampled_from([0.0, 1.0, 0.5, 5e-324, 1 - 2**-53]), st.floats(0.0, 1.0))


def members(dim: GridDim | ChoiceDim) -> tuple[Any, ...]:
    return dim.values if isinstance(dim, GridDim) else dim.choices


@PROPS
@given(spaces(), st.data())
def test_every_point_of_the_cube_maps_inside_the_space(space: SearchSpace, data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 4))
    U = np.array([[data.draw(UNIT) for _ in range(space.d)] for _ in range(n)])
    corners = np.array([[float(c) for c in data.draw(st.lists(st.booleans(), min_size=space.d, max_size=space.d))]])
    for point, u in zip(space.from_unit(np.vstack([U, corners])), np.vstack([U, corners]), strict=True):
        for dim, uk in zip(space.dims, u, strict=True):
            value = point[dim.name]
            if isinstance(dim, FloatDim):
                assert type(value) is float and dim.low <= value <= dim.high, (dim, uk, value)
                if dim.log:
                    assert value > 0
                if uk in (0.0, 1.0):
                    assert value == (dim.high if uk else dim.low)  # the ends exactly
            elif isinstance(dim, IntDim):
                assert type(value) is int and dim.low <= value <= dim.high, (dim, uk, value)
                if uk in (0.0, 1.0):
                    assert value == (dim.high if uk else dim.low)
            else:
                assert any(type(m) is type(value) and m == value for m in members(dim)), (dim, uk, value)


@PROPS
@given(spaces(), st.data())
def test_continuous_coordinates_round_trip_and_discrete_ones_snap(space: SearchSpace, data: st.DataObject) -> None:
    U = np.array([[data.draw(UNIT) for _ in range(space.d)] for _ in range(3)])
    points = space.from_unit(U)
    X = space.to_unit(points)
    assert X.shape == U.shape and np.all((X >= 0) & (X <= 1))
    for k, dim in enumerate(space.dims):
        if isinstance(dim, FloatDim):  # exact up to the float spacing at the bounds, relative to the width
            ends = [math.log(dim.low), math.log(dim.high)] if dim.log else [dim.low, dim.high]
            tol = 8 * np.finfo(float).eps * max(*map(abs, ends), 1.0) / (ends[1] - ends[0]) + 1e-12
            np.testing.assert_allclose(X[:, k], U[:, k], rtol=0, atol=tol)
    # Snapping is idempotent: the snapped point maps to the same values (floats up to rounding).
    for again, point in zip(space.from_unit(X), points, strict=True):
        for dim in space.dims:
            if isinstance(dim, FloatDim):
                assert again[dim.name] == pytest.approx(point[dim.name], rel=1e-12, abs=1e-12 * (dim.high - dim.low))
            else:
                assert again[dim.name] == point[dim.name] and type(again[dim.name]) is type(point[dim.name])
    discrete = [k for k, dim in enumerate(space.dims) if not isinstance(dim, FloatDim)]
    np.testing.assert_array_equal(space.to_unit(space.from_unit(X))[:, discrete], X[:, discrete])


@PROPS
@given(dims("x"), st.lists(UNIT, min_size=2, max_size=20))
def test_ordered_dims_are_monotone_in_u(dim: Dimension, us: list[float]) -> None:
    assume(isinstance(dim, FloatDim | IntDim))
    values = [dim.from_unit(u) for u in sorted(us)]
    assert values == sorted(values)


@PROPS
@given(spaces())
def test_levels_are_the_legal_values_one_cell_each(space: SearchSpace) -> None:
    for dim, levels in zip(space.dims, space.levels(), strict=True):
        if isinstance(dim, FloatDim):
            assert levels is None
            continue
        assert levels is not None and np.all((levels > 0) & (levels < 1)) and np.all(np.diff(levels) > 0)
        mapped = [dim.from_unit(float(u)) for u in levels]
        expected = list(range(dim.low, dim.high + 1)) if isinstance(dim, IntDim) else list(members(dim))
        assert mapped == expected and [type(v) for v in mapped] == [type(v) for v in expected]
