"""Parse a trial's overrides into what Hydra's override parser gives, without its grammar for ``key=<number>``.

Why: Hydra's ``OverridesParser`` runs its ANTLR grammar on every override, about 0.1 ms each, and a
worker composes each trial's config from its overrides (``x=0.7320...``, one per dimension); the key
part of each is the same trial after trial (NOTE: docs/decisions/0064-per-trial-job-work.md).

What: :class:`OverrideReader` parses an override with Hydra's parser the first time its key part
(everything before the first ``=``) comes with a number, and keeps that ``Override``. After that, an
override with the same key part and a value that is one number token of Hydra's grammar, spelled
without ``_`` (``INT``: ``[+-]?(0|[1-9][0-9]*)``; ``FLOAT``: ``1.``, ``.5``, ``0.25``, ``1e-05``,
``-2.5E+3``, not ``inf`` or ``nan``), is that ``Override`` with the value Hydra's visitor computes
from the token (``int(text)``, ``float(text)``) and its own input line. Anything else (strings,
lists, sweeps, interpolations, a key never seen with a number) goes through Hydra's parser, errors
and all. tests/unit/test_override_parse.py compares the two on a table of overrides.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, ValueType

_UNSIGNED = r"(?:0|[1-9][0-9]*)"
_POINT_FLOAT = rf"(?:{_UNSIGNED}\.|{_UNSIGNED}?\.[0-9]+)"
#: Hydra's lexer's INT and FLOAT tokens (OverrideLexer.g4) without '_' separators, inf or nan.
_NUMBERS: tuple[tuple[re.Pattern[str], type], ...] = (
    (re.compile(rf"[+-]?{_UNSIGNED}\Z"), int),
    (re.compile(rf"[+-]?(?:{_POINT_FLOAT}|(?:{_UNSIGNED}|{_POINT_FLOAT})[eE][+-]?[0-9]+)\Z"), float),
)


class OverrideReader:
    """Hydra's ``OverridesParser.create().parse_overrides``, with parsed numbers' overrides kept by key part."""

    def __init__(self) -> None:
        self._parser = OverridesParser.create()
        self._parsed: dict[tuple[str, type], Override] = {}  # (key part, int or float) -> an override Hydra parsed

    def parse(self, overrides: Sequence[str]) -> list[Override]:
        """The ``Override`` of each of ``overrides``, field for field what Hydra's parser gives."""
        return [self._one(line) for line in overrides]

    def _one(self, line: str) -> Override:
        key, equal, text = line.partition("=")
        kind = _number_kind(text) if equal else None
        if kind is None:
            return self._parser.parse_overrides([line])[0]
        known = self._parsed.get((key, kind))
        if known is not None:
            return dataclasses.replace(known, _value=kind(text), input_line=line)
        parsed = self._parser.parse_overrides([line])[0]
        if parsed.value_type == ValueType.ELEMENT and type(parsed._value) is kind:  # noqa: SLF001 - the parsed value
            self._parsed[(key, kind)] = parsed
        return parsed


def _number_kind(text: str) -> Any:
    """``int`` or ``float`` if ``text`` is one such token of Hydra's grammar (see the module doc), else None."""
    for pattern, kind in _NUMBERS:
        if pattern.match(text):
            return kind
    return None
