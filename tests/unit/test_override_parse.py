"""Overrides read with kept parses (sweeper.run.override_parse) equal, field for field, Hydra's parser's."""

from __future__ import annotations

import math
import random

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException

from sweeper.run import override_parse
from sweeper.run.override_parse import OverrideReader

NUMBERS = ["0", "7", "-3", "+5", "0.5", "-0.25", "+1.5", "1.", ".5", "-.5", "1e-05", "1E+20", "2.5e3", "-1.e-3",
           "0.30000000000000004", "123456789012345678901234567890", "1.7976931348623157e+308", "5e-324"]
NOT_NUMBERS = ["007", "1_000", "1.5_0", "inf", "-inf", "nan", "1e", "1.5e", "1.2.3", "0x10", " 1", "1 ", "", "true",
               "null", "abc", "a b", "'0.5'", '"1"', "[1,2]", "{a:1}", "${x}", "choice(1,2)", "interval(0,1)", "1,2",
               "--1", "1e5x", "١"]
KEYS = ["x", "model.lr", "+new", "++forced", "~gone", "a_b-c.d", "list.0", "group/option", "key@pkg", "db"]


def _parsed(line: str) -> object:
    """Hydra's parse, as its repr (every field, types of values included, NaN equal to NaN), or its error."""
    try:
        override = OverridesParser.create().parse_overrides([line])[0]
    except OverrideParseException as exc:
        return ("error", str(exc))
    return repr(override), type(override._value)


def _read(reader: OverrideReader, line: str) -> object:
    try:
        override = reader.parse([line])[0]
    except OverrideParseException as exc:
        return ("error", str(exc))
    return repr(override), type(override._value)


@pytest.mark.parametrize("key", KEYS)
def test_every_override_equals_hydra_s(key: str) -> None:
    reader = OverrideReader()
    for _ in range(2):  # the second round reads numbers from the kept parse
        for value in NUMBERS + NOT_NUMBERS:
            line = f"{key}={value}"
            assert _read(reader, line) == _parsed(line), line
        for line in (key, f"~{key}", f"{key}="):
            assert _read(reader, line) == _parsed(line), line


def test_numbers_come_from_the_kept_parse_after_the_first() -> None:
    reader, calls = OverrideReader(), []
    original = reader._parser.parse_overrides

    def counted(lines: list[str]) -> object:  # Hydra's own, counted
        calls.append(lines[0])
        return original(lines)

    reader._parser.parse_overrides = counted  # type: ignore[method-assign]  # counts the calls, runs Hydra's own
    rng = random.Random(0)
    for _ in range(200):
        values = [repr(rng.uniform(-1, 1)), repr(10 ** rng.uniform(-8, 8)), str(rng.randint(-100, 100))]
        lines = [f"x={values[0]}", f"lr={values[1]}", f"n={values[2]}", "name=adam"]
        got = reader.parse(lines)
        assert got == OverridesParser.create().parse_overrides(lines)
        assert [type(o.value()) for o in got] == [float, float, int, str]
        assert math.isclose(got[0].value(), float(values[0]), rel_tol=0, abs_tol=0)
    assert calls.count("name=adam") == 200  # a string: Hydra's parser each time
    assert len([c for c in calls if c != "name=adam"]) <= 4  # x and lr once, n once or twice (0 has no sign)


def test_the_number_patterns_match_hydra_s_tokens() -> None:
    for text in NUMBERS:
        kind = override_parse._number_kind(text)
        assert kind is not None and type(OverridesParser.create().parse_overrides([f"x={text}"])[0].value()) is kind
    for text in NOT_NUMBERS:
        assert override_parse._number_kind(text) is None, text
