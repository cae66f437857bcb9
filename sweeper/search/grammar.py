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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from sweeper.errors import SweeperConfigError
from sweeper.search.numeric_sweeps import Builder, Built, build_interval, build_range
from sweeper.search.space import ChoiceDim, Dimension, SearchSpace, _same, format_override_value

if TYPE_CHECKING:
    from hydra.core.override_parser.types import ChoiceSweep

log = logging.getLogger(__name__)

_KNOWN_TAGS = frozenset({"log"})
#: The rule for a choice of no value: ``choice()``, which Hydra's parser refuses, and ``shuffle()``, which it parses.
EMPTY_CHOICE = "a choice needs at least one value (two to sweep)"


def _cast_int(*args: Any, value: Any = None) -> Any:
    """Hydra's ``int(...)``, which keeps on an interval the bounds it truncated (``given_bounds``).

    Hydra casts ``int(interval(4.5, 64))`` to ``interval(4, 64)``: a bound below the one written.
    :func:`sweeper.search.numeric_sweeps.build_interval` refuses non-integer bounds instead, from what was written.
    """
    from hydra._internal.grammar.grammar_functions import cast_int
    from hydra.core.override_parser.types import IntervalSweep

    cast = cast_int(*args, value=value)
    given = value if value is not None else (args[0] if len(args) == 1 else None)
    if isinstance(given, IntervalSweep) and isinstance(cast, IntervalSweep):
        cast.given_bounds = (given.start, given.end)  # type: ignore[attr-defined]  # ours, on Hydra's sweep
    return cast


def _parser() -> Any:
    """Hydra's override parser, with :func:`_cast_int` for ``int(...)`` (same signature, so same checks)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser, create_functions

    functions = create_functions()
    functions.functions["int"] = _cast_int
    return OverridesParser(functions)


def _flatten(items: list[Any]) -> list[Any]:
    """The values of a choice, those of nested choices in their place, quoted strings made plain."""
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


def _build_choice(name: str, key: str, spec: str, sweep: ChoiceSweep, is_log: bool) -> Built:
    choices = _flatten(sweep.list)
    if not choices:  # ``shuffle()`` parses to an empty choice (Hydra refuses ``choice()`` itself)
        return None, None, [EMPTY_CHOICE], "choice(a, b)"
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


def _builder(sweep: Any) -> Builder | None:
    """The builder of a sweep's kind; None for ``glob(...)``, which needs the config repository to list options."""
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep

    builders: dict[type, Builder] = {IntervalSweep: build_interval, RangeSweep: build_range,
                                      ChoiceSweep: _build_choice}
    return next((b for cls, b in builders.items() if isinstance(sweep, cls)), None)


def _parse_error(exc: Exception) -> tuple[str, str]:
    """A rule and a corrected spec for an override Hydra could not parse."""
    lines = [ln for ln in str(exc).splitlines() if ln and not ln.startswith(("See https", "Error parsing"))]
    if any("empty choice" in ln for ln in lines):
        return EMPTY_CHOICE, "choice(a, b)"
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


class _NotASpecError(Exception):
    """A ``hydra.sweeper.params`` entry written as a YAML list or mapping: a problem unless the command line
    gives the same key, which replaces it. It stands in the entry's place as a parse error does."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(problem)
        self.key, self.problem = key, problem


def _not_a_spec(where: str, value: Any) -> str:
    """The problem of a YAML list or mapping given as a search-space entry, with the override string to write."""
    is_list = not isinstance(value, Mapping) and len(value) > 0
    fix = "choice(" + ", ".join(map(format_override_value, value)) + ")" if is_list else "choice(a, b)"
    return (f"{where}={value!r}: a YAML list or mapping is not a search-space entry; write the "
            f"dimension as an override string. Use e.g. {where}={fix!r}.")


class _Entry(NamedTuple):
    """One search-space entry, from ``hydra.sweeper.params`` or the command line."""

    where: str  # the key as the user wrote it, for messages
    text: str  # the override text (``key=spec``)
    spec: str  # the text after ``=``
    from_yaml: bool
    parsed: Any  # Hydra's Override, or the exception that stands in its place; None until parsed


def _entries(params: Mapping[str, Any] | None, overrides: Sequence[str], params_key: str) -> list[_Entry]:
    """The YAML entries, then the command line's, in order; a YAML list or mapping comes parsed as its problem."""
    entries: list[_Entry] = []
    for key, value in (params or {}).items():
        where = f"{params_key}.{key}" if params_key else str(key)
        if isinstance(value, Mapping) or (isinstance(value, Sequence) and not isinstance(value, str)):
            entries.append(_Entry(where, str(key), repr(value), True,
                                  _NotASpecError(str(key), _not_a_spec(where, value))))
            continue
        spec = value if isinstance(value, str) else format_override_value(value)
        entries.append(_Entry(where, f"{key}={spec}", spec, True, None))
    for text in overrides:
        entries.append(_Entry(text.split("=", 1)[0].strip(), text, text.split("=", 1)[1] if "=" in text else "",
                              False, None))
    return entries


def _name(override: Any) -> str | None:
    """The key an override sets (``group@package`` for a package); None for a text that did not parse."""
    if isinstance(override, _NotASpecError):
        return override.key
    if isinstance(override, Exception):
        return None
    return str(override.key_or_group + (f"@{override.package}" if override.package is not None else ""))


def _command_line_wins(entries: list[_Entry]) -> list[_Entry]:
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


@dataclass
class _SpaceParts:
    """The dimensions, fixed overrides and problems of the entries added so far (:meth:`add`)."""

    dims: list[Dimension] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seen: dict[str, str] = field(default_factory=dict)  # key -> the override text that set it first

    def add(self, entry: _Entry) -> None:
        """Take one parsed entry: a dimension, a fixed override, or its problems."""
        where, text, spec, _, override = entry
        if isinstance(override, _NotASpecError):
            self.problems.append(override.problem)
            return
        if isinstance(override, Exception):
            rule, fix = _parse_error(override)
            self.problems.append(f"{where}={spec!r}: {rule}. Use e.g. {where}={fix!r}.")
            return
        name = _name(override)
        assert name is not None
        duplicate = self._given_before(name, text)  # still validated below, so every problem shows at once
        if not override.is_sweep_override():
            if not duplicate:
                self.fixed.append(text)
            return
        self._add_sweep(entry, name, duplicate)

    def _given_before(self, name: str, text: str) -> bool:
        """Whether key ``name`` was given already (twice on the command line: a YAML entry gave way to it)."""
        if name not in self.seen:
            self.seen[name] = text
            return False
        self.problems.append(f"{text!r}: {name!r} is given twice (also as {self.seen[name]!r}); give each key once. "
                             f"Use e.g. {text!r} alone.")
        return True

    def _add_sweep(self, entry: _Entry, name: str, duplicate: bool) -> None:
        """Take a sweep override: its dimension (or fixed value), or the rules it breaks."""
        from hydra.core.override_parser.types import OverrideType

        where, text, spec, _, override = entry
        if override.type == OverrideType.DEL:
            self.problems.append(f"{text!r}: a deletion (~) cannot be swept. Use e.g. {where} alone.")
            return
        sweep = override.value()
        key = override.get_key_element()
        build = _builder(sweep)
        if build is None:
            rule = "glob() selects config-group options, which the sweeper cannot list; list them"
            self.problems.append(f"{where}={spec!r}: {rule}. Use e.g. {where}='choice(a, b)'.")
            return
        tags = set(sweep.tags)
        rules = [f"unknown tag {t!r} (the only tag understood is 'log')" for t in sorted(tags - _KNOWN_TAGS)]
        dim, fixed_value, more, fix = build(name, key, spec, sweep, "log" in tags)
        rules += more
        self.problems.extend(f"{where}={spec!r}: {rule}. Use e.g. {where}={fix!r}." for rule in rules)
        if rules or duplicate:
            return
        if dim is not None:
            self.dims.append(dim)
        elif fixed_value is not None:
            self.fixed.append(f"{key}={fixed_value}")


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
    parser = _parser()
    parts = _SpaceParts()
    entries = _entries(params, overrides, params_key)
    for entry in _command_line_wins([e._replace(parsed=_parse(parser, e.text)) if e.parsed is None else e
                                     for e in entries]):
        parts.add(entry)
    if parts.problems:
        raise SweeperConfigError(parts.problems)
    space = SearchSpace(tuple(parts.dims), tuple(parts.fixed))
    log.debug("Search space %s; fixed overrides %s", space.describe(), list(space.fixed_overrides))
    return space


def parse_specs(specs: Mapping[str, Any]) -> SearchSpace:
    """A space from ``{name: grammar text}``, e.g. ``{"k": "choice(rbf, linear)"}``.

    Raises:
        SweeperConfigError: listing every invalid entry.
    """
    return parse_search_space(specs, (), params_key="")
