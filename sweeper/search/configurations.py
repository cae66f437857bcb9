"""``hydra.sweeper.configurations``: a list of joint points, each run as one point of the grid.

A grid crosses every value of each dim with every value of the others (a full factorial). A list of
configurations, e.g. the best few of an earlier sweep, is not such a product: ``{lr: 0.1, depth: 2}`` and
``{lr: 0.01, depth: 8}`` are two points, not four. Each key of the configurations becomes a categorical dim of
its own, so that a trial records every key as a param of its own (and reports group trials by them), and the
space keeps which combinations exist (:attr:`SearchSpace.joint`, :attr:`SearchSpace.configurations`): the grid
crosses the configurations, as one factor, with the values of the other dims (e.g. ``env.seed: range(0, 5)``).
A key with one value in every configuration is a fixed value of every trial, as ``choice(x)`` is.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sweeper.errors import SweeperConfigError
from sweeper.search.design import Seed, factorial_design
from sweeper.search.space import ChoiceDim, SearchSpace, _same, format_override_value

SETTING = "configurations"
#: An override key: optional ``+``/``++``, then no whitespace, ``=`` or ``~``.
_KEY = re.compile(r"\+{0,2}[^\s=~+][^\s=~]*")
_EXAMPLE = "[{lr:0.1,depth:2},{lr:0.01,depth:8}]"


def with_configurations(space: SearchSpace | None, configurations: Any, *, strategy: str,
                        prefix: str = "hydra.sweeper.") -> SearchSpace | None:
    """``space`` with the configurations' keys as dims (first) and the combinations they may take.

    Args:
        space: The space of ``hydra.sweeper.params`` and the command line; None when it did not parse (the
            configurations are still checked, alone).
        configurations: The setting's value: None or ``[]`` (none), or a list of ``{key: value}`` mappings,
            every one over the same keys, no two equal.
        strategy: The sweep's strategy: only ``grid`` runs a list of configurations.
        prefix: How the setting is named in messages.

    Returns:
        The space (unchanged without configurations), or None when ``space`` is None.

    Raises:
        SweeperConfigError: Listing every problem of the configurations.
    """
    if configurations is None or (isinstance(configurations, Sequence) and not isinstance(configurations, str)
                                  and len(configurations) == 0):
        return space
    where = f"{prefix}{SETTING}"
    rows, problems = _rows(configurations, where)
    if strategy != "grid":
        problems.append(f"{where} runs each listed configuration once per point of the other dims' grid, so it "
                        f"needs strategy=grid, not {strategy!r}. Try {prefix}strategy=grid.")
    if space is not None and isinstance(configurations, Sequence) and not isinstance(configurations, str):
        keys = dict.fromkeys(k for c in configurations if isinstance(c, Mapping) for k in c if isinstance(k, str))
        problems += _clashes(space, list(keys), where)
    if problems:
        raise SweeperConfigError(problems)
    if space is None:
        return None
    return _joined(space, rows)


def _rows(configurations: Any, where: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The configurations as plain dicts (none when any is wrong), and what is wrong with them."""
    if isinstance(configurations, Mapping | str) or not isinstance(configurations, Sequence):
        return [], [f"{where}={configurations!r} is invalid: a list of mappings, one per configuration, each "
                    f"over the same keys. Try {where}={_EXAMPLE}."]
    problems: list[str] = []
    rows: list[tuple[int, dict[str, Any]]] = []
    for number, item in enumerate(configurations, 1):
        if not isinstance(item, Mapping) or not item:
            problems.append(f"{where}: configuration {number} ({item!r}) is not a mapping {{key: value}} with at "
                            f"least one key. Write each as {{key: value, ...}}, e.g. {where}={_EXAMPLE}.")
            continue
        problems += [p for key, value in item.items() if (p := _value_problem(where, number, key, value))]
        rows.append((number, dict(item)))
    first_number, keys = rows[0] if rows else (1, {})
    for number, row in rows[1:]:
        if set(row) != set(keys):
            problems.append(f"{where}: configuration {number} sets {sorted(row)}, configuration {first_number} sets "
                            f"{sorted(keys)}: every configuration sets the same keys. Give each of them a value in "
                            f"configuration {number}.")
    for i, (number, row) in enumerate(rows):
        earlier = next((n for n, other in rows[:i] if _equal(other, row)), None)
        if earlier is not None:
            problems.append(f"{where}: configuration {number} repeats configuration {earlier} ({_text(row)}): list "
                            f"each once; to measure one again, cross it with a seed, e.g. env.seed='range(0,5)'.")
    return ([] if problems else [row for _, row in rows]), problems


def _value_problem(where: str, number: int, key: Any, value: Any) -> str:
    """What is wrong with one ``key: value`` of a configuration ("" when nothing)."""
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        return (f"{where}: configuration {number} has the key {key!r}, which is not an override key (a config "
                f"path such as model.lr, + in front for a new key). Use e.g. {{model.lr: 0.1}}.")
    if isinstance(value, float) and math.isnan(value):
        return f"{where}: configuration {number} gives {key} the value NaN, which equals nothing. Give a number."
    try:
        format_override_value(value)
    except TypeError:
        return (f"{where}: configuration {number} gives {key} the value {value!r} ({type(value).__name__}), which "
                f"cannot be written as an override. Use a number, a string, true/false, null, or a list of them.")
    return ""


def _equal(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return set(a) == set(b) and all(_same(a[k], b[k]) for k in a)


def _text(row: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={format_override_value(v)}" for k, v in row.items())


def _clashes(space: SearchSpace, keys: list[str], where: str) -> list[str]:
    """The keys of the configurations that the space sets too (a dim or a fixed value): each in one place."""
    given = {d.name: f"{d.override_key}={d.spec}" for d in space.dims}
    given.update({o.split("=", 1)[0].lstrip("+~"): o for o in space.fixed_overrides})
    return [f"{where}: {key} is set by the configurations and also as {given[key.lstrip('+')]!r}: give each key in "
            f"one place. Drop {key} from the configurations or the other." for key in keys
            if key.lstrip("+") in given]


def _joined(space: SearchSpace, rows: list[dict[str, Any]]) -> SearchSpace:
    """The space with one choice dim per key whose value varies and a fixed value per key whose does not."""
    dims, fixed, joint = [], [], []
    for key in rows[0]:
        values: list[Any] = []
        for row in rows:
            if not any(_same(row[key], v) for v in values):
                values.append(row[key])
        if len(values) == 1:
            fixed.append(f"{key}={format_override_value(values[0])}")
            continue
        dims.append(ChoiceDim(key.lstrip("+"), tuple(values), override_key=key))
        joint.append(key)
    configurations = tuple(tuple(row[key] for key in joint) for row in rows)
    return SearchSpace((*dims, *space.dims), (*space.fixed_overrides, *fixed),
                       tuple(k.lstrip("+") for k in joint), configurations if joint else ())


def joint_grid_size(space: SearchSpace) -> int | None:
    """The points of ``space``'s grid: its configurations times every combination of the other dims' values
    (None when one of those is a float interval)."""
    levels = [lv for name, lv in zip(space.names, space.levels(), strict=True) if name not in space.joint]
    if any(lv is None for lv in levels):
        return None
    return len(space.configurations) * math.prod(len(lv) for lv in levels if lv is not None)


def joint_grid(space: SearchSpace, seed: Seed) -> NDArray[np.float64]:
    """Every configuration crossed with every combination of the other dims' values, in a seeded random order
    (:func:`sweeper.search.design.factorial_design`, the configuration's number as one factor), as unit-cube
    points of shape ``(grid size, d)``."""
    columns = [space.names.index(name) for name in space.joint]
    others = [i for i in range(space.d) if i not in columns]
    levels = space.levels()
    rows = np.array([[space.dims[j].to_unit(v) for j, v in zip(columns, row, strict=True)]
                     for row in space.configurations], dtype=np.float64)
    other_levels = [lv for i in others if (lv := levels[i]) is not None]
    assert len(other_levels) == len(others), "the grid strategy refuses float intervals before this"
    design = factorial_design([np.arange(len(rows), dtype=np.float64), *other_levels], seed)
    points = np.empty((design.shape[0], space.d), dtype=np.float64)
    points[:, columns] = rows[design[:, 0].astype(int)]
    points[:, others] = design[:, 1:]
    return points


def configurations_changed(saved: SearchSpace, space: SearchSpace) -> str | None:
    """Why a sweep whose saved space is ``saved`` cannot continue as ``space``: other configurations (None: same)."""
    if (saved.joint, saved.configurations) == (space.joint, space.configurations):
        return None
    return (f"the configurations changed: the sweep ran {len(saved.configurations)} of {list(saved.joint)}, this "
            f"command runs {len(space.configurations)} of {list(space.joint)}; continue it with its own "
            f"hydra.sweeper.configurations (`sweeper resume` gives them)")
