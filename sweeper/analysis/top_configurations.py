"""The best configurations of a finished sweep, and the key that seeds its trials: what ``sweeper rerun`` runs again.

A **configuration** is a trial's values of the sweep's dims that are neither its seed nor an environment
condition (``env.*``, ``seed``: :func:`~sweeper.analysis.runs.is_environment_param`), the object measured in
Belz et al.'s (2022) terms. A configuration the sweep ran more than once (over a seed dim, say) is scored by
the mean of its finished trials; one whose every trial failed is no candidate. The values are read back typed
through the sweep's own dims, so that a rerun gives each trial exactly what the sweep gave it.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from sweeper.analysis.runs import SEED_KEYS, is_environment_param
from sweeper.search.space import Dimension, FloatDim, GridDim, IntDim, _same, format_override_value

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.analysis.runs import SweepRecords


class RerunRefusal(ValueError):
    """The rerun asked for cannot be made from this sweep; the message says why and what to give instead."""


@dataclass(frozen=True)
class SeedKey:
    """The config key that seeds a trial, and why it was chosen.

    Attributes:
        key: The key, e.g. ``env.seed``.
        override_key: The key as an override writes it (``+seed`` for a key the config lacks).
        reason: Why this key, in words.
        used: The integer values the sweep's trials ran with (its seeds).
    """

    key: str
    override_key: str
    reason: str
    used: tuple[int, ...] = ()

    def fresh(self, n: int) -> list[int]:
        """``n`` seeds none of the sweep's trials ran with: the integers after the largest it used (from 0)."""
        start = max(self.used) + 1 if self.used else 0
        return list(range(start, start + n))


@dataclass(frozen=True)
class Candidate:
    """One configuration of the sweep with its score.

    Attributes:
        rank: 1 for the best.
        values: Override key -> its value, typed as the sweep gave it.
        score: The mean of its finished trials' metric.
        n: Its finished trials; ``failed``: its trials that failed.
        first_trial: The index of its first finished trial (ties go to the configuration run first).
    """

    rank: int
    values: dict[str, Any]
    score: float
    n: int
    failed: int
    first_trial: int

    def text(self) -> str:
        """``key=value ...`` as overrides write them."""
        return " ".join(f"{k}={format_override_value(v)}" for k, v in self.values.items())


@dataclass(frozen=True)
class TopConfigurations:
    """The ``k`` best configurations of a sweep, best first, and what the choice had to decide.

    Attributes:
        chosen: The best ``k``.
        candidates: Configurations with a finished trial.
        notes: Ties, failures and repeated configurations, in words.
    """

    chosen: list[Candidate]
    candidates: int
    notes: list[str] = field(default_factory=list)


def typed_value(dim: Dimension, value: Any) -> Any:
    """A recorded param (the trial table's number or text) as the value ``dim`` gave the trial.

    Raises:
        LookupError: The param is missing, or none of the dim's values.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise LookupError(f"{dim.name}: no value recorded")
    if isinstance(dim, FloatDim):
        return float(value)
    if isinstance(dim, IntDim):
        return int(value)
    options = dim.values if isinstance(dim, GridDim) else dim.choices
    for test in (_same, _equal_number, lambda o, v: str(o) == str(v)):  # MLflow records str(value)
        for option in options:
            if test(option, value):
                return option
    raise LookupError(f"{dim.name}: {value!r} is not one of {list(options)!r}")


def _equal_number(a: Any, b: Any) -> bool:
    numbers = (int, float, np.integer, np.floating)
    return isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and bool(a == b)


def configuration_key(values: Sequence[Any]) -> str:
    """One text key per configuration: its values as overrides write them."""
    return "\x1f".join(format_override_value(v) for v in values)


def configuration_keys(trials: pd.DataFrame, dims: Sequence[Dimension]) -> pd.Series:
    """Each trial's configuration over ``dims`` as its :func:`configuration_key`; None for a trial whose value of
    a dim is missing or none of the dim's."""
    import pandas as pd

    def key(row: pd.Series) -> str | None:
        try:
            return configuration_key([typed_value(d, row.get(f"param.{d.name}")) for d in dims])
        except LookupError:
            return None

    return trials.apply(key, axis=1) if len(trials) else pd.Series([], dtype=object)


def choose_seed_key(records: SweepRecords, given: str | None) -> SeedKey:
    """The key that seeds the sweep's trials: ``given`` (``--seed-key``), else its seed dim, else ``env.seed`` or
    ``seed`` where its trials' configs hold one.

    Raises:
        RerunRefusal: ``given`` is no key of the sweep's trials, the sweep has several seed dims, or no seed key.
    """
    space = records.space
    dims = {d.name: d for d in space.dims} if space is not None else {}
    columns = {c[len("param."):] for c in records.trials.columns if c.startswith("param.")}
    if given is not None:
        name = given.lstrip("+")
        if name not in dims and name not in columns and not given.startswith("+"):
            close = difflib.get_close_matches(name, sorted(columns), n=3)
            raise RerunRefusal(f"--seed-key {given}: the sweep's trials have no such key (no dim and no config key "
                               f"of that name). {_try(close, '--seed-key')}")
        override = dims[name].override_key if name in dims else given
        return SeedKey(name, override, "given by --seed-key", _used(records.trials, name))
    seed_dims = [d for d in dims.values() if _looks_like_a_seed(d.name)]
    if len(seed_dims) > 1:
        raise RerunRefusal(f"the sweep has several seed dims ({', '.join(d.name for d in seed_dims)}): choose the "
                           f"one to vary with --seed-key, e.g. --seed-key {seed_dims[0].name}.")
    if seed_dims:
        d = seed_dims[0]
        return SeedKey(d.name, d.override_key, f"the sweep's seed dim, {d.override_key}={d.spec}",
                       _used(records.trials, d.name))
    for key in ("env.seed", *(k for k in SEED_KEYS if k != "env.seed")):
        if key in columns:
            return SeedKey(key, key, f"the sweep has no seed dim; its trials' configs hold {key}",
                           _used(records.trials, key))
    like = [c for c in sorted(columns) if _looks_like_a_seed(c)]
    hint = (f"Its configs hold {', '.join(like)}: e.g. --seed-key {like[0]}." if like else
            "E.g. --seed-key trainer.seed.")
    raise RerunRefusal("no seed key found: the sweep has no seed dim and its trials' configs hold no env.seed or "
                       "seed. Give the config key the task seeds itself with (or that draws its data split): "
                       f"--seed-key KEY (+KEY for a key the config lacks and the task reads). {hint}")


def _looks_like_a_seed(name: str) -> bool:
    last = name.rsplit(".", 1)[-1].rsplit("/", 1)[-1]
    return last == "seed" or last.endswith("_seed")


def _used(trials: pd.DataFrame, key: str) -> tuple[int, ...]:
    column = f"param.{key}"
    if column not in trials:
        return ()
    whole = [v for v in trials[column] if isinstance(v, int | float | np.number) and not isinstance(v, bool)
             and math.isfinite(v) and float(v).is_integer()]
    return tuple(sorted({int(v) for v in whole}))


def _try(close: list[str], option: str) -> str:
    return f"Did you mean {option} {close[0]}?" if close else "Give a key of the task's config."


def configuration_dims(records: SweepRecords, seed: SeedKey, env_keys: Sequence[str]) -> list[Dimension]:
    """The sweep's dims that make a configuration: all but the seed, environment conditions and ``env_keys``.

    Raises:
        RerunRefusal: The sweep has no readable search space, or no dim is left.
    """
    if records.space is None:
        raise RerunRefusal(f"the search space of sweep {records.parent_run_id} cannot be read (no search_space.json "
                           f"and no space.* params): nothing tells its configurations apart.")
    left_out = {seed.key, *(k.lstrip("+") for k in env_keys)}
    dims = [d for d in records.space.dims if d.name not in left_out and not is_environment_param(d.name)]
    if not dims:
        raise RerunRefusal(f"every dim of sweep {records.parent_run_id} is a seed or an environment condition "
                           f"({', '.join(records.space.names)}): it measured one configuration, so there is nothing "
                           f"to rank. Sweep it again over more seeds instead, e.g. {seed.override_key}='range(0,10)'.")
    return dims


def top_configurations(records: SweepRecords, dims: Sequence[Dimension], k: int) -> TopConfigurations:
    """The ``k`` best configurations over ``dims`` by the sweep's metric and mode, best first.

    Ties keep the configuration run first (the lowest trial index), and say so where they decide what is taken.

    Raises:
        RerunRefusal: ``k`` < 1, or more than the configurations with a finished trial.
    """
    metric, maximize = records.metric, records.mode != "min"
    finished = records.finished(metric)
    keys = configuration_keys(finished, dims)
    failed = records.failed()
    failed_keys = configuration_keys(failed, dims).value_counts().to_dict() if len(failed) else {}
    candidates = []
    for key, rows in finished.groupby(keys, sort=False):
        values = rows[f"metric.{metric}"].to_numpy(dtype=np.float64)
        first = rows.loc[rows["index"].idxmin()]
        typed = {d.override_key: typed_value(d, first.get(f"param.{d.name}")) for d in dims}
        candidates.append((float(values.mean()), int(first["index"]), typed, len(values),
                           int(failed_keys.get(key, 0))))
    candidates.sort(key=lambda c: (-c[0] if maximize else c[0], c[1]))
    if not 1 <= k <= len(candidates):
        n_failed = len(failed)
        raise RerunRefusal(f"--top {k}: the sweep has {len(candidates)} configuration(s) with a finished trial "
                           f"({len(records.trials)} trials, {n_failed} failed, {len(finished)} finished with a "
                           f"finite {metric}). Give --top between 1 and {len(candidates)}." if len(candidates) else
                           f"sweep {records.parent_run_id} has no finished trial with a finite {metric}: there is "
                           f"no configuration to re-run.")
    chosen = [Candidate(rank, typed, score, n, n_failed, first)
              for rank, (score, first, typed, n, n_failed) in enumerate(candidates[:k], 1)]
    return TopConfigurations(chosen, len(candidates), _notes(candidates, k, failed_keys, records, metric))


def _notes(candidates: list[tuple[float, int, dict[str, Any], int, int]], k: int, failed_keys: dict[str, int],
           records: SweepRecords, metric: str) -> list[str]:
    """What the choice had to decide: a tie at the cut, failures, configurations scored over several trials."""
    notes = []
    cut = candidates[k - 1][0]
    tied_after = sum(1 for c in candidates[k:] if c[0] == cut)
    if tied_after:
        tied_in = sum(1 for c in candidates[:k] if c[0] == cut)
        notes.append(f"a tie at the cut: {tied_in + tied_after} configurations score {cut:.6g}; the {tied_in} run "
                     f"first are taken. --top {k + tied_after} takes them all.")
    ties_inside = {c[0] for i, c in enumerate(candidates[:k]) if any(o[0] == c[0] for o in candidates[:i])}
    notes += [f"ranks {', '.join(str(i + 1) for i, c in enumerate(candidates[:k]) if c[0] == v)} tie at {v:.6g} "
              f"(ordered by the trial run first)" for v in sorted(ties_inside) if v != cut or not tied_after]
    n_failed = len(records.failed())
    if n_failed:
        scored = {configuration_key(list(c[2].values())) for c in candidates}
        only_failed = sum(1 for key in failed_keys if key not in scored)
        notes.append(f"{n_failed} failed trial(s) left out of the scores; {only_failed} configuration(s) whose every "
                     f"trial failed are no candidates")
    repeated = sum(1 for c in candidates if c[3] > 1)
    if repeated:
        notes.append(f"{repeated} configuration(s) ran more than once: each is scored by the mean {metric} of its "
                     f"finished trials")
    return notes
