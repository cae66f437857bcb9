"""The numeric sweeps, ``interval(...)`` (and ``int(interval(...))``) and ``range(...)``, to search-space
dimensions, or the rules they break and a corrected spec.

An interval becomes a :class:`~sweeper.search.space.FloatDim` or :class:`~sweeper.search.space.IntDim`, a range
a :class:`~sweeper.search.space.GridDim`; a range of one value is a fixed override instead.
:mod:`sweeper.search.grammar` parses the text with Hydra's parser and collects the problems; this module reads
the parsed sweeps through :class:`IntervalSweepLike` and :class:`RangeSweepLike`, so it imports no Hydra.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

from sweeper.search.space import Dimension, FloatDim, GridDim, IntDim, _interval_text, _num, format_override_value

_MAX_GRID = 10_000  # a range with more values than this is a mistake: use int(interval(...))

#: What a builder returns: (dimension, fixed value text or None, rules broken, corrected spec).
Built = tuple[Dimension | None, str | None, list[str], str]
#: A builder: (name, key, spec, sweep, is_log) -> :data:`Built`, for one kind of Hydra sweep.
Builder = Callable[[str, str, str, Any, bool], Built]


class IntervalSweepLike(Protocol):
    """What is read of Hydra's ``IntervalSweep``."""

    @property
    def start(self) -> float | None: ...

    @property
    def end(self) -> float | None: ...


class RangeSweepLike(Protocol):
    """What is read of Hydra's ``RangeSweep``."""

    @property
    def start(self) -> float | None: ...

    @property
    def stop(self) -> float | None: ...

    @property
    def step(self) -> float: ...


def _written_bounds(sweep: IntervalSweepLike) -> tuple[float, float]:
    """An interval's bounds as written: those :func:`sweeper.search.grammar._cast_int` kept, else the sweep's own."""
    low, high = getattr(sweep, "given_bounds", (sweep.start, sweep.end))
    assert low is not None and high is not None  # the grammar always sets both
    return low, high


def _int_bounds_rules(sweep: IntervalSweepLike, is_log: bool) -> tuple[list[str], str]:
    """Rules an ``int(interval(a, b))`` with a non-integer bound breaks, and the interval of the integers
    within ``[a, b]`` to write instead (or the one integer, or the nearest integers around an empty one)."""
    low, high = _written_bounds(sweep)
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


def build_interval(name: str, key: str, spec: str, sweep: IntervalSweepLike, is_log: bool) -> Built:
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
    dim: Dimension = (IntDim(name, low, high, is_log, override_key=key, spec=spec)
                      if isinstance(low, int) and isinstance(high, int)
                      else FloatDim(name, low, high, is_log, override_key=key, spec=spec))
    return dim, None, [], fix


def _range_text(start: float, stop: float, step: float) -> str:
    return f"range({_num(start)}, {_num(stop)}" + (f", {_num(step)})" if step != 1 else ")")


def _range_values(start: float, stop: float, step: float) -> list[float | int]:
    if all(isinstance(x, int) for x in (start, stop, step)):
        return list(range(int(start), int(stop), int(step)))
    n = max(math.ceil((stop - start) / step), 0) + 1  # one extra, filtered below, absorbs rounding
    values = [float(start + step * i) for i in range(n)]  # Hydra's r[i] = start + step*i, no accumulation
    return [v for v in values if (v < stop if step > 0 else v > stop)]


def build_range(name: str, key: str, spec: str, sweep: RangeSweepLike, is_log: bool) -> Built:
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
