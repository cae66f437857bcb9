"""Hydra's override grammar to a :class:`~sweeper.search.space.SearchSpace`, with every problem at once.

A search space comes from two places: the ``hydra.sweeper.params`` mapping in YAML and the
sweep overrides on the command line. :func:`parse_search_space` parses both with Hydra's
own override parser, turns each swept key into a dimension (see :mod:`sweeper.search.space` for
the forms), passes plain overrides through as fixed ones, and collects every problem —
bad bounds, a log scale on a non-positive range, an empty choice, unparseable text, a key
given twice — into one :class:`~sweeper.errors.SweeperConfigError`. Each problem names the
dotted key as the user types it, the bad value, the rule and a corrected example.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sweeper.errors import SweeperConfigError
from sweeper.search.space import (
    ChoiceDim,
    Dimension,
    FloatDim,
    GridDim,
    IntDim,
    SearchSpace,
    _interval_text,
    _num,
    _same,
    format_override_value,
)

if TYPE_CHECKING:
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep

log = logging.getLogger(__name__)

_KNOWN_TAGS = frozenset({"log"})
_MAX_GRID = 10_000  # a range with more values than this is a mistake: use int(interval(...))

# Each builder returns (dimension, fixed value text or None, rules broken, corrected spec).
_Built = tuple[Dimension | None, str | None, list[str], str]


def _cast_int(*args: Any, value: Any = None) -> Any:
    """Hydra's ``int(...)``, which keeps on an interval the bounds it truncated (``given_bounds``).

    Hydra casts ``int(interval(4.5, 64))`` to ``interval(4, 64)``: a bound below the one written.
    :func:`_int_bounds_rules` refuses non-integer bounds instead, from what was written.
    """
    from hydra._internal.grammar.grammar_functions import cast_int
    from hydra.core.override_parser.types import IntervalSweep

    cast = cast_int(*args, value=value)
    given = value if value is not None else (args[0] if len(args) == 1 else None)
    if isinstance(given, IntervalSweep) and isinstance(cast, IntervalSweep):
        cast.given_bounds = (given.start, given.end)  # type: ignore[attr-defined]
    return cast


def _parser() -> Any:
    """Hydra's override parser, with :func:`_cast_int` for ``int(...)`` (same signature, so same checks)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser, create_functions

    functions = create_functions()
    functions.functions["int"] = _cast_int
    return OverridesParser(functions)


def _int_bounds_rules(sweep: IntervalSweep, is_log: bool) -> tuple[list[str], str]:
    """Rules an ``int(interval(a, b))`` with a non-integer bound breaks, and the interval of the integers
    within ``[a, b]`` to write instead (or the one integer, or the nearest integers around an empty one)."""
    low, high = getattr(sweep, "given_bounds", (sweep.start, sweep.end))
    if all(float(b).is_integer() for b in (low, high) if math.isfinite(b)):
        return [], ""
    cut = low if not float(low).is_integer() else high
    rule = (f"int(interval({_num(low)}, {_num(high)})) needs integer bounds (Hydra's int() would cut {_num(cut)} "
            f"to {int(cut)})")
    first, last = math.ceil(low), math.floor(high)
    if first > last:
        return [f"{rule}, and no integer lies between them"], _interval_text(math.floor(low), math.ceil(high),
                                                                             True, is_log)
    if first == last:
        return [f"{rule}; the one integer between them is {first}"], str(first)
    return [rule], _interval_text(first, last, True, is_log)


def _build_interval(name: str, key: str, spec: str, sweep: IntervalSweep, is_log: bool) -> _Built:
    low, high = sweep.start, sweep.end
    assert low is not None and high is not None  # the grammar always sets both
    is_int = isinstance(low, int) and isinstance(high, int)
    if is_int:
        rules, fix = _int_bounds_rules(sweep, is_log)
        if rules:
            return None, None, rules, fix
    rules = []
    fix_low, fix_high, fix_log, fixed_value = low, high, is_log, None
    if not (math.isfinite(low) and math.isfinite(high)):
        rules.append(f"bounds must be finite, got {low!r} and {high!r}")
        fix_low, fix_high = (1e-05, 1.0) if is_log else (0.0, 1.0)
    elif low >= high:
        rules.append(f"lower bound {low!r} must be below upper bound {high!r}")
        fix_low, fix_high = high, low
        fixed_value = _num(low) if low == high else None
    if is_log and (fix_low < 1 if is_int else fix_low <= 0):
        need = ">= 1" if is_int else "> 0"
        rules.append(f"a log-scaled dimension needs lower bound {need}, got {fix_low!r}")
        if fix_high > (1 if is_int else 0):
            fix_low = 1 if is_int else min(1e-05, fix_high / 1000)
        else:
            fix_log = False
    fix = fixed_value or _interval_text(fix_low, fix_high, is_int, fix_log)
    if rules:
        return None, None, rules, fix
    dim_cls = IntDim if is_int else FloatDim
    return dim_cls(name, low, high, is_log, override_key=key, spec=spec), None, [], fix


def _range_text(start: float, stop: float, step: float) -> str:
    return f"range({_num(start)}, {_num(stop)}" + (f", {_num(step)})" if step != 1 else ")")


def _range_values(start: float, stop: float, step: float) -> list[float | int]:
    if all(isinstance(x, int) for x in (start, stop, step)):
        return list(range(int(start), int(stop), int(step)))
    n = max(math.ceil((stop - start) / step), 0) + 1  # one extra, filtered below, absorbs rounding
    values = [float(start + step * i) for i in range(n)]  # Hydra's r[i] = start + step*i, no accumulation
    return [v for v in values if (v < stop if step > 0 else v > stop)]


def _build_range(name: str, key: str, spec: str, sweep: RangeSweep, is_log: bool) -> _Built:
    start, stop, step = sweep.start, sweep.stop, sweep.step
    assert start is not None and stop is not None  # the grammar always sets both
    if not all(math.isfinite(x) for x in (start, stop, step)) or step == 0:
        return None, None, [f"needs finite bounds and a nonzero step, got step {step!r}"], "range(0, 5)"
    count = (stop - start) / step
    if count > _MAX_GRID:
        rule = f"it has about {int(count)} values, more than the {_MAX_GRID} a grid may hold"
        last = start + step * (math.ceil(count) - 1)
        return None, None, [rule], _interval_text(min(start, last), max(start, last), isinstance(last, int), False)
    values = _range_values(start, stop, step)
    if not values:
        side = "below" if step > 0 else "above"
        rule = f"the range is empty: start + step*i must stay {side} the stop {stop!r}"
        return None, None, [rule], _num(start) if start == stop else _range_text(stop, start, step)
    if is_log:
        is_int = all(isinstance(v, int) for v in values)
        low, high = min(values), max(values)
        log_ok = high > (1 if is_int else 0)
        low = low if low > 0 or not log_ok else (1 if is_int else min(1e-05, high / 1000))
        rule = "a range is a grid of values and cannot be log-scaled; sweep a log-scaled interval instead"
        return None, None, [rule], _interval_text(low, high, is_int, log_ok)
    fix = _range_text(start, stop, step)
    if len(values) == 1:
        return None, format_override_value(values[0]), [], fix
    return GridDim(name, tuple(values), override_key=key, spec=spec), None, [], fix


def _flatten(items: list[Any]) -> list[Any]:
    from hydra.core.override_parser.types import ChoiceSweep

    out: list[Any] = []
    for item in items:
        out.extend(_flatten(item.list) if isinstance(item, ChoiceSweep) else [_plain(item)])
    return out


def _plain(value: Any) -> Any:
    """The value Hydra means: the bare ``a,'b c'`` form (and lists, in any form) keep quoted items as QuotedString."""
    from hydra.core.override_parser.types import QuotedString

    if isinstance(value, QuotedString):
        return value.text
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _build_choice(name: str, key: str, spec: str, sweep: ChoiceSweep, is_log: bool) -> _Built:
    choices = _flatten(sweep.list)
    unique = [c for i, c in enumerate(choices) if not any(_same(c, p) for p in choices[:i])]
    strings = tuple(format_override_value(c) for c in unique)
    fix = "choice(" + ", ".join(strings) + ")"
    rules = []
    if is_log:
        rules.append("a choice is categorical and cannot be log-scaled; drop the tag")
    if len(unique) < len(choices):
        dups = sorted({format_override_value(c) for c in choices if sum(_same(c, o) for o in choices) > 1})
        rules.append(f"choices must be distinct, got {', '.join(dups)} more than once")
    if rules:
        return None, None, rules, fix
    if len(unique) == 1:  # a one-category dimension carries no information: a fixed value
        return None, strings[0], [], fix
    return ChoiceDim(name, tuple(unique), strings, override_key=key, spec=spec), None, [], fix


def _parse_error(exc: Exception) -> tuple[str, str]:
    """A rule and a corrected spec for an override Hydra could not parse."""
    lines = [ln for ln in str(exc).splitlines() if ln and not ln.startswith(("See https", "Error parsing"))]
    if any("empty choice" in ln for ln in lines):
        return "a choice needs at least one value (two to sweep)", "choice(a, b)"
    detail = "; ".join(lines) or type(exc).__name__
    forms = "interval, int(interval), tag(log, ...), choice, a,b,c or range"
    return f"not valid override grammar ({detail}); the forms are {forms}", "interval(0, 1)"


def _parse(parser: Any, text: str) -> Any:
    """The one override ``text`` parses to, or the exception it raises (reported by the caller)."""
    try:
        [override] = parser.parse_overrides([text])
    except Exception as exc:  # noqa: BLE001 - OverrideParseException, or ValueError from a grammar function
        return exc
    return override


class _NotASpec(Exception):  # a value in place of a parsed override, as a parse error is
    """A ``hydra.sweeper.params`` entry written as a YAML list or mapping: a problem unless the command line
    gives the same key, which replaces it."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(problem)
        self.key, self.problem = key, problem


def _not_a_spec(where: str, value: Any) -> str:
    """The problem of a YAML list or mapping given as a search-space entry, with the override string to write."""
    is_list = not isinstance(value, Mapping) and len(value) > 0
    fix = "choice(" + ", ".join(map(format_override_value, value)) + ")" if is_list else "choice(a, b)"
    return (f"{where}={value!r}: a YAML list or mapping is not a search-space entry; write the "
            f"dimension as an override string. Use e.g. {where}={fix!r}.")


def _name(override: Any) -> str | None:
    """The key an override sets (``group@package`` for a package); None for a text that did not parse."""
    if isinstance(override, _NotASpec):
        return override.key
    if isinstance(override, Exception):
        return None
    return str(override.key_or_group + (f"@{override.package}" if override.package is not None else ""))


def _command_line_wins(entries: list[tuple[str, str, str, bool, Any]]) -> list[tuple[str, str, str, bool, Any]]:
    """Drop each YAML entry whose key the command line also sets: Hydra's rule, and the Optuna sweeper's.

    ``python app.py --multirun 'lr=tag(log, interval(1e-4, 1e-1))'`` replaces the app's
    ``hydra.sweeper.params.lr``, with one log line saying so.
    """
    given = {name: text for _, text, _, from_yaml, parsed in entries
             if not from_yaml and (name := _name(parsed)) is not None}
    kept = []
    for entry in entries:
        where, _, spec, from_yaml, parsed = entry
        name = _name(parsed) if from_yaml else None
        if name is not None and name in given:
            log.info("%s=%r is replaced by the command line's %r", where, spec, given[name])
            continue
        kept.append(entry)
    return kept


def parse_search_space(
    params: Mapping[str, Any] | None,
    overrides: Sequence[str],
    *,
    params_key: str = "hydra.sweeper.params",
) -> SearchSpace:
    """Parse ``hydra.sweeper.params`` and command-line sweep overrides into a search space.

    Args:
        params: YAML mapping of key to grammar text (``"tag(log, interval(1e-3, 1e3))"``)
            or a plain scalar, which is a fixed value. None means empty.
        overrides: command-line overrides, e.g. ``["C=interval(0.1, 10)", "model=a,b", "+x=1"]``.
        params_key: the dotted path of ``params`` in messages; "" names keys bare.

    Returns:
        The dimensions (YAML first, then command line, in order) and the fixed overrides.

    Raises:
        SweeperConfigError: listing every problem found in both sources.
    """
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, OverrideType, RangeSweep

    parser = _parser()
    problems: list[str] = []
    entries: list[tuple[str, str, str, bool, Any]] = []  # (where, override text, spec, from YAML, parsed)
    for key, value in (params or {}).items():
        where = f"{params_key}.{key}" if params_key else str(key)
        if isinstance(value, Mapping) or (isinstance(value, Sequence) and not isinstance(value, str)):
            entries.append((where, str(key), repr(value), True, _NotASpec(str(key), _not_a_spec(where, value))))
            continue
        spec = value if isinstance(value, str) else format_override_value(value)
        entries.append((where, f"{key}={spec}", spec, True, None))
    for text in overrides:
        entries.append((text.split("=", 1)[0].strip(), text, text.split("=", 1)[1] if "=" in text else "", False, None))

    dims: list[Dimension] = []
    fixed: list[str] = []
    seen: dict[str, tuple[str, str, str, bool]] = {}
    builders = {IntervalSweep: _build_interval, RangeSweep: _build_range, ChoiceSweep: _build_choice}
    parsed_entries = _command_line_wins([(*e[:4], _parse(parser, e[1]) if e[4] is None else e[4]) for e in entries])
    for where, text, spec, from_yaml, override in parsed_entries:
        if isinstance(override, _NotASpec):
            problems.append(override.problem)
            continue
        if isinstance(override, Exception):
            rule, fix = _parse_error(override)
            problems.append(f"{where}={spec!r}: {rule}. Use e.g. {where}={fix!r}.")
            continue
        name = _name(override)
        assert name is not None
        if name in seen:  # twice on the command line (a YAML entry gave way to it above)
            first_text = seen[name][1]
            problems.append(
                f"{text!r}: {name!r} is given twice (also as {first_text!r}); give each key once. "
                f"Use e.g. {text!r} alone."
            )
        duplicate = name in seen  # still validated below, so every problem shows at once
        seen.setdefault(name, (where, text, spec, from_yaml))
        if not override.is_sweep_override():
            if not duplicate:
                fixed.append(text)
            continue
        if override.type == OverrideType.DEL:
            problems.append(f"{text!r}: a deletion (~) cannot be swept. Use e.g. {where} alone.")
            continue
        sweep = override.value()
        key = override.get_key_element()
        builder = next((b for cls, b in builders.items() if isinstance(sweep, cls)), None)
        if builder is None:  # glob(...) needs the config repository to list options
            rule = "glob() selects config-group options, which the sweeper cannot list; list them"
            problems.append(f"{where}={spec!r}: {rule}. Use e.g. {where}='choice(a, b)'.")
            continue
        tags = set(sweep.tags)
        rules = [f"unknown tag {t!r} (the only tag understood is 'log')" for t in sorted(tags - _KNOWN_TAGS)]
        dim, fixed_value, more, fix = builder(name, key, spec, sweep, "log" in tags)
        rules += more
        problems.extend(f"{where}={spec!r}: {rule}. Use e.g. {where}={fix!r}." for rule in rules)
        if rules or duplicate:
            continue
        if dim is not None:
            dims.append(dim)
        elif fixed_value is not None:
            fixed.append(f"{key}={fixed_value}")
    if problems:
        raise SweeperConfigError(problems)
    space = SearchSpace(tuple(dims), tuple(fixed))
    log.debug("Search space %s; fixed overrides %s", space.describe(), list(space.fixed_overrides))
    return space


def parse_specs(specs: Mapping[str, Any]) -> SearchSpace:
    """A space from ``{name: grammar text}``, e.g. ``{"k": "choice(rbf, linear)"}``.

    Raises:
        SweeperConfigError: listing every invalid entry.
    """
    return parse_search_space(specs, (), params_key="")
