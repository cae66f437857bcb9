"""Search space: Hydra sweep overrides parsed into dimensions mapped onto the unit cube.

A search space comes from two places, written in Hydra's override grammar: the
``hydra.sweeper.params`` mapping in YAML and the sweep overrides on the command line.
Each swept key becomes one dimension:

==================================  ==========  =======================================
grammar                             dimension   unit-cube mapping ``u -> value``
==================================  ==========  =======================================
``interval(a, b)``                  FloatDim    ``a + u (b - a)``; ``tag(log, ...)``: in log space
``int(interval(a, b))``             IntDim      equal-mass cells, bounds inclusive; log: cells in log space
``range(a, b[, step])``             GridDim     k ordered values, cell ``floor(u k)``
``choice(x, y, z)`` / ``x,y,z``     ChoiceDim   categorical, cell ``floor(u k)``
==================================  ==========  =======================================

Plain overrides (``lr=0.1``, ``+x=1``, ``~y``) and sweeps with a single value
(``choice(x)``, ``range(0, 1)``) are not dimensions: they are passed verbatim to every
trial as fixed overrides. Every mapping satisfies ``from_unit(to_unit(v)) == v`` for a
legal value ``v`` (up to float rounding for ``FloatDim``) and ``from_unit`` stays inside
the bounds for every ``u`` in ``[0, 1]``, both ends included.

Parsing the grammar lives in :mod:`sweeper.search.grammar` (it imports Hydra); the numeric part
of this module needs nothing but numpy.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[-./][A-Za-z0-9_]+)*")
_KEYWORDS = frozenset({"true", "false", "null", "inf", "nan"})  # Hydra reads these case-insensitively


def format_override_value(value: Any) -> str:
    """Write a value as override text that Hydra's grammar parses back to the same value.

    Args:
        value: None, bool, int, float, str, or a list/dict of these.

    Returns:
        ``null``, ``true``/``false``, ``repr`` of a float, a bare word for an identifier-like
        string that is not a keyword, otherwise a single-quoted string.
    """
    if value is None:
        return "null"
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return repr(float(value))
    if isinstance(value, str):
        if _BARE.fullmatch(value) and value.lower() not in _KEYWORDS:
            return value
        # Hydra keeps backslashes literal except a run right before a quote (or the closing quote).
        text = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", value)
        text = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, text)
        return f"'{text}'"
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{k}:{format_override_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(format_override_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} ({type(value).__name__}) as an override value")


def _num(x: float) -> str:
    """Write a bound compactly for a suggested override (10.0 -> '10')."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


def _interval_text(low: float, high: float, is_int: bool, is_log: bool) -> str:
    text = f"interval({_num(low)}, {_num(high)})"
    text = f"int({text})" if is_int else text
    return f"tag(log, {text})" if is_log else text


def _unit(u: float) -> float:
    u = float(u)
    if math.isnan(u):
        raise ValueError("a unit-cube coordinate is NaN")
    return min(max(u, 0.0), 1.0)


def _cell(u: float, k: int) -> int:
    """Index of the equal-width cell of ``[0, 1]`` (k cells) holding ``u``."""
    return min(int(math.floor(_unit(u) * k)), k - 1)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and bool(a == b)


def _index(name: str, options: tuple[Any, ...], value: Any, tol: bool = False) -> int:
    """Position of ``value`` in ``options``: same type first, then ``==``, then isclose."""
    for test in (_same, lambda a, b: bool(a == b)):
        for i, option in enumerate(options):
            if test(option, value):
                return i
    if tol and isinstance(value, int | float):
        for i, option in enumerate(options):
            if math.isclose(option, value, rel_tol=1e-9, abs_tol=1e-12):
                return i
    raise ValueError(f"{name}: {value!r} is not one of {list(options)!r}")


def _defaults(dim: Any, spec: str) -> None:
    if not dim.override_key:
        object.__setattr__(dim, "override_key", dim.name)
    if not dim.spec:
        object.__setattr__(dim, "spec", spec)


@dataclass(frozen=True)
class FloatDim:
    """A float in ``[low, high]``, linear or log-scaled (``log`` needs ``low > 0``)."""

    name: str
    low: float
    high: float
    log: bool = False
    override_key: str = ""  # the key as typed ("+lr", "model@pkg"); defaults to name
    spec: str = ""  # the grammar text, for logging; defaults to a canonical one
    is_categorical: ClassVar[bool] = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "low", float(self.low))
        object.__setattr__(self, "high", float(self.high))
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise ValueError(f"{self.name}: need finite low < high, got {self.low!r}, {self.high!r}")
        if self.log and self.low <= 0:
            raise ValueError(f"{self.name}: log scale needs low > 0, got {self.low!r}")
        _defaults(self, _interval_text(self.low, self.high, False, self.log))

    def from_unit(self, u: float) -> float:
        """Map ``u`` in [0, 1] to a float in ``[low, high]`` (log space if ``log``)."""
        u = _unit(u)
        if u in (0.0, 1.0):  # the ends exactly, whatever exp/log rounding does
            return float(self.high if u else self.low)
        if self.log:
            a, b = math.log(self.low), math.log(self.high)
            value = math.exp(a + u * (b - a))
        else:
            value = self.low + u * (self.high - self.low)
        return min(max(value, self.low), self.high)  # absorb rounding at the ends

    def to_unit(self, value: float) -> float:
        """Map a value in ``[low, high]`` to [0, 1]; the inverse of :meth:`from_unit`."""
        v = float(value)
        if not self.low <= v <= self.high:
            raise ValueError(f"{self.name}: {value!r} is outside [{self.low!r}, {self.high!r}]")
        if self.log:
            a, b = math.log(self.low), math.log(self.high)
            return _unit((math.log(v) - a) / (b - a))
        return _unit((v - self.low) / (self.high - self.low))

    def format_value(self, value: float) -> str:
        """Write a value as override text."""
        return repr(float(value))


@dataclass(frozen=True)
class IntDim:
    """An integer in ``[low, high]``, bounds inclusive; ``log`` needs ``low >= 1``.

    ``[0, 1]`` is cut into ``high - low + 1`` cells, one per integer: of equal width when
    linear, of equal width in log space (edges at ``v +- 0.5``) when ``log``.
    """

    name: str
    low: int
    high: int
    log: bool = False
    override_key: str = ""
    spec: str = ""
    is_categorical: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.low != int(self.low) or self.high != int(self.high):
            raise ValueError(f"{self.name}: integer bounds needed, got {self.low!r}, {self.high!r}")
        object.__setattr__(self, "low", int(self.low))
        object.__setattr__(self, "high", int(self.high))
        if self.low >= self.high:
            raise ValueError(f"{self.name}: need low < high, got {self.low!r}, {self.high!r}")
        if self.log and self.low < 1:
            raise ValueError(f"{self.name}: log scale needs low >= 1, got {self.low!r}")
        _defaults(self, _interval_text(self.low, self.high, True, self.log))

    def _log_edges(self) -> tuple[float, float]:
        return math.log(self.low - 0.5), math.log(self.high + 0.5)

    def from_unit(self, u: float) -> int:
        """Map ``u`` in [0, 1] to the integer whose cell holds it."""
        if self.log:
            a, b = self._log_edges()
            value = round(math.exp(a + _unit(u) * (b - a)))
        else:
            value = self.low + _cell(u, self.high - self.low + 1)
        return int(min(max(value, self.low), self.high))

    def to_unit(self, value: int) -> float:
        """Map an integer in ``[low, high]`` to a point inside its cell."""
        if value != int(value) or not self.low <= value <= self.high:
            raise ValueError(f"{self.name}: {value!r} is not an integer in [{self.low}, {self.high}]")
        if self.log:
            a, b = self._log_edges()
            return (math.log(int(value)) - a) / (b - a)
        return (int(value) - self.low + 0.5) / (self.high - self.low + 1)

    def format_value(self, value: int) -> str:
        """Write a value as override text."""
        return str(int(value))


@dataclass(frozen=True)
class GridDim:
    """An ordered grid of numbers from ``range(a, b[, step])``, modelled as continuous."""

    name: str
    values: tuple[float | int, ...]
    override_key: str = ""
    spec: str = ""
    is_categorical: ClassVar[bool] = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(self.values))
        if not self.values:
            raise ValueError(f"{self.name}: a grid needs at least one value")
        _defaults(self, "grid(" + ", ".join(format_override_value(v) for v in self.values) + ")")

    def from_unit(self, u: float) -> float | int:
        """Map ``u`` in [0, 1] to the grid value whose cell holds it."""
        return self.values[_cell(u, len(self.values))]

    def to_unit(self, value: float | int) -> float:
        """Map a grid value to the centre of its cell."""
        return (_index(self.name, self.values, value, tol=True) + 0.5) / len(self.values)

    def format_value(self, value: float | int) -> str:
        """Write a value as override text."""
        return format_override_value(value)


@dataclass(frozen=True)
class ChoiceDim:
    """A categorical dimension; ``choice_strings`` are the choices as override text."""

    name: str
    choices: tuple[Any, ...]
    choice_strings: tuple[str, ...] = ()
    override_key: str = ""
    spec: str = ""
    is_categorical: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "choices", tuple(self.choices))
        if not self.choice_strings:
            strings = tuple(format_override_value(c) for c in self.choices)
            object.__setattr__(self, "choice_strings", strings)
        object.__setattr__(self, "choice_strings", tuple(self.choice_strings))
        if not self.choices or len(self.choices) != len(self.choice_strings):
            raise ValueError(f"{self.name}: need one or more choices, each with one override text")
        _defaults(self, "choice(" + ", ".join(self.choice_strings) + ")")

    def from_unit(self, u: float) -> Any:
        """Map ``u`` in [0, 1] to the choice whose cell holds it."""
        return self.choices[_cell(u, len(self.choices))]

    def to_unit(self, value: Any) -> float:
        """Map a choice to the centre of its cell; ValueError if it is not a choice."""
        return (_index(self.name, self.choices, value) + 0.5) / len(self.choices)

    def format_value(self, value: Any) -> str:
        """Write a choice as override text."""
        return self.choice_strings[_index(self.name, self.choices, value)]


Dimension = FloatDim | IntDim | GridDim | ChoiceDim
_KINDS: dict[str, type[Any]] = {"float": FloatDim, "int": IntDim, "grid": GridDim, "choice": ChoiceDim}
_TUPLE_FIELDS = ("values", "choices", "choice_strings")


@dataclass(frozen=True)
class SearchSpace:
    """Named dimensions plus the overrides every trial gets unchanged.

    Example:
        >>> from sweeper.search.grammar import parse_specs
        >>> space = parse_specs({"C": "tag(log, interval(1e-3, 1e3))", "k": "a,b"})
        >>> space.from_unit([0.5, 0.9])
        [{'C': 1.0, 'k': 'b'}]
        >>> space.to_overrides({"C": 1.0, "k": "b"})
        ['C=1.0', 'k=b']
    """

    dims: tuple[Dimension, ...]
    fixed_overrides: tuple[str, ...] = ()
    #: ``hydra.sweeper.configurations``: the dims whose values are set together, and the values of each
    #: configuration in that order, the only combinations of them a grid runs (sweeper.search.configurations).
    joint: tuple[str, ...] = ()
    configurations: tuple[tuple[Any, ...], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", tuple(self.dims))
        object.__setattr__(self, "fixed_overrides", tuple(self.fixed_overrides))
        if len(set(self.names)) != len(self.dims):
            raise ValueError(f"dimension names must be unique, got {self.names}")

    @property
    def names(self) -> list[str]:
        """Dimension names, in column order of the unit cube."""
        return [dim.name for dim in self.dims]

    @property
    def d(self) -> int:
        """Number of dimensions."""
        return len(self.dims)

    @property
    def has_categorical(self) -> bool:
        """Whether any dimension is a :class:`ChoiceDim`."""
        return any(dim.is_categorical for dim in self.dims)

    def levels(self) -> list[NDArray[np.float64] | None]:
        """Unit-cube coordinates of every legal value of each dimension; None for a float dimension."""
        out: list[NDArray[np.float64] | None] = []
        for dim in self.dims:
            if isinstance(dim, IntDim):
                out.append(np.array([dim.to_unit(v) for v in range(dim.low, dim.high + 1)]))
            elif isinstance(dim, GridDim | ChoiceDim):
                n = len(dim.values) if isinstance(dim, GridDim) else len(dim.choices)
                out.append((np.arange(n) + 0.5) / n)
            else:
                out.append(None)
        return out

    def categories(self) -> dict[int, int]:
        """Categorical columns: column -> number of choices (cell ``floor(u k)`` is the choice)."""
        return {i: len(dim.choices) for i, dim in enumerate(self.dims) if isinstance(dim, ChoiceDim)}

    def from_unit(self, X: ArrayLike) -> list[dict[str, Any]]:
        """Map unit-cube points ``X`` (n, d), or one point (d,), to parameter dicts."""
        X = np.asarray(X, dtype=np.float64)
        X = X.reshape(1, -1) if X.ndim == 1 else X
        if X.ndim != 2 or X.shape[1] != self.d:
            raise ValueError(f"expected points of shape (n, {self.d}), got {X.shape}")
        return [{dim.name: dim.from_unit(float(u)) for dim, u in zip(self.dims, row, strict=True)} for row in X]

    def to_unit(self, points: Sequence[Mapping[str, Any]]) -> NDArray[np.float64]:
        """Map parameter dicts to unit-cube points, shape (n, d)."""
        X = np.empty((len(points), self.d), dtype=np.float64)
        for i, point in enumerate(points):
            for j, dim in enumerate(self.dims):
                X[i, j] = dim.to_unit(point[dim.name])
        return X

    def to_overrides(self, point: Mapping[str, Any]) -> list[str]:
        """Write one trial's overrides: the fixed ones, then ``key=value`` for each dimension."""
        return [*self.fixed_overrides, *self.dim_overrides(point)]

    def dim_overrides(self, point: Mapping[str, Any]) -> list[str]:
        """Write ``key=value`` for each dimension of ``point`` (no fixed overrides)."""
        return [f"{dim.override_key}={dim.format_value(point[dim.name])}" for dim in self.dims]

    def describe(self) -> dict[str, str]:
        """Map each dimension name to its grammar text, for logging."""
        return {dim.name: dim.spec for dim in self.dims}

    def to_dict(self) -> dict[str, Any]:
        """Write the space as JSON-able data; :meth:`from_dict` reads it back equal."""
        dims = []
        for dim in self.dims:
            kind = next(k for k, cls in _KINDS.items() if isinstance(dim, cls))
            data = {f.name: getattr(dim, f.name) for f in fields(dim)}
            dims.append({"kind": kind, **{k: list(v) if k in _TUPLE_FIELDS else v for k, v in data.items()}})
        joint = {"joint": list(self.joint), "configurations": [list(r) for r in self.configurations]}
        return {"dims": dims, "fixed_overrides": list(self.fixed_overrides), **(joint if self.joint else {})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchSpace:
        """Read a space written by :meth:`to_dict`."""
        dims = []
        for item in data["dims"]:
            kwargs = {k: tuple(v) if k in _TUPLE_FIELDS else v for k, v in item.items() if k != "kind"}
            dims.append(_KINDS[item["kind"]](**kwargs))
        return cls(tuple(dims), tuple(data.get("fixed_overrides", ())), tuple(data.get("joint", ())),
                   tuple(tuple(row) for row in data.get("configurations", ())))
