"""Which trials are repeated measurements: QRA groups (Belz 2022) and paired conditions (Crane 2018).

Vocabulary (Belz et al. 2022): a **measurement** is one trial's value of one **measurand**
(a metric) of one **object** (the system measured). Two trials measured the same object
when every param that is *not* an environment condition is equal; environment params are
those whose key starts with ``env.`` or equals ``seed``. What differs between them are the
**conditions of measurement**: the environment params and the recorded ``sweeper.*`` tags
(seed, host, threads, BLAS, package versions, CPU, git commit, ...), less the sweep's own
bookkeeping (trial index, phase, status, process id, ...).

Crane (2018) compares two values of one condition on paired runs: here, two trials are a
pair when every other param (the object and the other environment params, the seed
among them) is equal.

References:
    Belz, A., Popovic, M., & Mille, S. (2022). Quantified Reproducibility Assessment of
    NLP Results. ACL 2022 (Tables 3, 5, 7: conditions of measurement per measurement).
    Crane, M. (2018). Questionable Answers in Question Answering Research. TACL 6.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from sweeper.analysis.environment_effects import (
    ConditionComparison,
    ConditionSummary,
    compare_conditions,
    summarize_conditions,
)
from sweeper.analysis.qra import QRA, qra_replicates
from sweeper.analysis.runs import SEED_KEYS, is_environment_param

if TYPE_CHECKING:
    import pandas as pd

#: ``sweeper.*`` tags that describe the sweep's bookkeeping, not how a score was obtained.
BOOKKEEPING_TAGS = frozenset({
    "trial_index", "phase", "batch", "strategy", "acquisition", "predicted_mean", "predicted_sd", "predicted_from",
    "predicted_quantiles",
    "tune_trial_id", "status", "duration_s", "error", "pid", "role", "unit_point", "writer_handle",
    "trial_dir", "checkpoint_step", "restart_error",  # where a trial's checkpoints live, the newest's step
})
MISSING = "—"


def value_text(value: Any) -> str:
    """A param value as text for grouping and tables; missing values as an em dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return f"{value:.10g}" if isinstance(value, float) else str(value)


def row_keys(trials: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """One text key per row: the values of ``columns`` joined (rows with equal keys have equal values)."""
    import pandas as pd

    if not columns:
        return pd.Series("", index=trials.index, dtype=object)
    texts = [trials[c].map(value_text).astype(object) for c in columns]
    return texts[0].str.cat(texts[1:], sep="\x1f") if len(texts) > 1 else texts[0]


def object_columns(trials: pd.DataFrame, replicates: Sequence[str] = ()) -> list[str]:
    """The ``param.*`` columns that define the object measured (``replicates``: params that replicate it)."""
    return [c for c in trials.columns
            if c.startswith("param.") and not is_environment_param(c[6:]) and c[6:] not in replicates]


def condition_columns(trials: pd.DataFrame, replicates: Sequence[str] = ()) -> list[str]:
    """The columns that are conditions of measurement: environment params and ``replicates``, then condition tags."""
    env = [c for c in trials.columns
           if c.startswith("param.") and (is_environment_param(c[6:]) or c[6:] in replicates)]
    tags = [c for c in trials.columns if c.startswith("tag.") and c[4:] not in BOOKKEEPING_TAGS
            and not c[4:].startswith("driver.")]
    return env + tags


@dataclass(frozen=True)
class QRAGroup:
    """Repeated measurements of one object under differing conditions of measurement.

    Attributes:
        number: 1-based label of the group in the report.
        object: The object's params that vary across the sweep (those equal in every trial
            say nothing about which object this is), ``{key: value}``.
        conditions: Condition columns that vary within the group (``param.env.seed``,
            ``tag.host``, ...); the conditions-of-measurement table's columns.
        table: One row per measurement: ``index``, ``run_id``, the varying conditions (as
            text, keys without the ``param.``/``tag.`` prefix) and each measurand's value.
        results: Measurand -> its :class:`~sweeper.analysis.QRA`, or the reason it has none.
    """

    number: int
    object: dict[str, Any]
    conditions: list[str]
    table: pd.DataFrame
    results: dict[str, QRA | str] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Number of measurements (trials) in the group."""
        return int(len(self.table))


def qra_groups(trials: pd.DataFrame, measurands: Sequence[str], *, scale_min: float = 0.0,
               replicates: Sequence[str] = ()) -> list[QRAGroup]:
    """Group trials that measured the same object, with their QRA per measurand.

    Args:
        trials: The trials to group (finished and kept), the trial table's columns.
        measurands: Metric names, e.g. ``["test_acc", "train_acc"]``.
        scale_min: Lowest possible score, passed to :func:`~sweeper.analysis.qra`.
        replicates: Params that replicate an object rather than name it, besides ``env.*`` and ``seed``: the
            seed key and conditions of a sweep with listed configurations (``data.split_seed``).

    Returns:
        One :class:`QRAGroup` per object with two or more trials, largest first.
    """
    import pandas as pd

    objects = object_columns(trials, replicates)
    varying = [c for c in objects if trials[c].map(value_text).nunique() > 1]
    keys = row_keys(trials, objects)
    sizes = keys.value_counts()
    repeated = trials[keys.isin(sizes.index[sizes >= 2]).to_numpy()]
    conditions = condition_columns(trials, replicates)
    fixed = fixed_measurands(trials, measurands[1:], scale_min=scale_min)
    groups: list[QRAGroup] = []
    parts = [rows.sort_values("index") for _, rows in repeated.groupby(keys[repeated.index], sort=False)]
    for rows in sorted(parts, key=lambda r: (-len(r), int(r["index"].iloc[0]))):
        texts = {c: rows[c].map(value_text) for c in conditions}
        vary = [c for c in conditions if texts[c].nunique() > 1]
        seed_params = [f"param.{k}" for k in SEED_KEYS if f"param.{k}" in vary]
        if "tag.seed" in vary and any(texts[c].equals(texts["tag.seed"]) for c in seed_params):
            vary.remove("tag.seed")  # the seed tag repeats the seed param
        table = pd.DataFrame({"index": rows["index"].to_numpy(), "run_id": rows["run_id"].to_numpy()})
        for c in vary:
            table[c.split(".", 1)[1]] = texts[c].to_numpy()
        label = object_label({c[6:]: rows[c].iloc[0] for c in varying})
        seeds = replicate_keys(rows, [k for k in replicates if not is_environment_param(k)])
        results: dict[str, QRA | str] = {}
        for m in measurands:
            values = rows[f"metric.{m}"].to_numpy(dtype=np.float64, na_value=np.nan) if f"metric.{m}" in rows \
                else np.full(len(rows), np.nan)
            table[m] = values
            ok = np.isfinite(values)
            try:
                results[m] = fixed[m] if m in fixed else qra_replicates(
                    values[ok], None if seeds is None else seeds[ok], scale_min, name=m, label=label)
            except ValueError as exc:
                results[m] = str(exc)
        first = rows.iloc[0]
        groups.append(QRAGroup(number=len(groups) + 1, object={c[6:]: first[c] for c in varying},
                               conditions=vary, table=table, results=results))
    return groups


def object_label(obj: dict[str, Any]) -> str:
    """The object in words for QRA's notes, e.g. ``configuration `lr=0.1, model=a```."""
    return "configuration `" + ", ".join(f"{k}={value_text(v)}" for k, v in obj.items()) + "`" if obj \
        else "the configuration"


def replicate_keys(rows: pd.DataFrame, seed_params: Sequence[str] = ()) -> np.ndarray | None:
    """Each trial's seed as text (``seed_params``' values where given, else the first seed column present), or
    ``None`` when no seed is recorded.

    Bit-identical results under the same seed are one measurement repeated (see
    :func:`~sweeper.analysis.qra.distinct_measurements`); without a recorded seed any
    bit-identical results count once.
    """
    given = [f"param.{k}" for k in seed_params if f"param.{k}" in rows]
    if given:
        return row_keys(rows, given).to_numpy(dtype=object)
    for c in (*(f"param.{k}" for k in SEED_KEYS), "tag.seed"):
        if c in rows and rows[c].notna().any():
            return rows[c].map(value_text).to_numpy(dtype=object)
    return None


def fixed_measurands(trials: pd.DataFrame, measurands: Sequence[str], *, scale_min: float = 0.0) -> dict[str, QRA]:
    """Measurands with one value in every trial of the sweep (e.g. ``epochs``, ``n_params``): no QRA.

    A value that no trial changed is a constant of the configuration, not a measurement
    of precision; it gets status ``fixed`` and one line of words, never CV* 0. The sweep's
    own metric is left to :func:`~sweeper.analysis.qra.qra_replicates` (a constant metric
    there asks whether the task uses its seed).
    """
    out: dict[str, QRA] = {}
    for m in measurands:
        column = f"metric.{m}"
        values = trials[column].to_numpy(dtype=np.float64, na_value=np.nan) if column in trials else np.array([])
        values = values[np.isfinite(values)]
        if values.size >= 2 and np.ptp(values) == 0.0:
            v = float(values[0])
            out[m] = QRA(n=1, mean=v - scale_min, mean_original=v, std=0.0, std_ci=(math.nan, math.nan), cv=math.nan,
                         cv_star=math.nan, scale_min=scale_min, name=m, status="fixed", n_total=int(values.size),
                         note=f"`{m}` is {v:.6g} in every trial of the sweep: a constant of the configuration, "
                              f"not a measurement, so it has no CV*")
    return out


@dataclass(frozen=True)
class PairedConditions:
    """Two values of one environment condition on paired trials (Crane 2018).

    Attributes:
        condition: The param, e.g. ``env.threads``.
        values: Its two values ``(a, b)``, sorted.
        measurand: The metric compared.
        pairs: One row per pair: ``index_a``, ``index_b``, ``value_a``, ``value_b``.
        comparison: Paired tests and rank correlations.
        summaries: Spread of the paired scores under each value.
        scores: Per value label, the paired scores (for the distribution plot).
    """

    condition: str
    values: tuple[Any, Any]
    measurand: str
    pairs: pd.DataFrame
    comparison: ConditionComparison
    summaries: dict[str, ConditionSummary]
    scores: dict[str, np.ndarray]


def paired_conditions(trials: pd.DataFrame, measurand: str) -> tuple[list[PairedConditions], list[str]]:
    """Compare every two-valued environment param on trials paired by all other params.

    Args:
        trials: The trials (finished and kept).
        measurand: The metric compared.

    Returns:
        The comparisons, and notes on two-valued conditions that could not be compared.
    """
    import pandas as pd

    column = f"metric.{measurand}"
    if column not in trials:
        return [], []
    trials = trials[np.isfinite(trials[column].to_numpy(dtype=np.float64, na_value=np.nan))]
    params = [c for c in trials.columns if c.startswith("param.")]
    out: list[PairedConditions] = []
    notes: list[str] = []
    for c in params:
        key = c[6:]
        if not is_environment_param(key) or key in SEED_KEYS:
            continue
        texts = trials[c].map(value_text)
        distinct = sorted(set(texts) - {MISSING}, key=lambda t: (natural_key(t), t))
        if len(distinct) != 2:
            continue
        # The first trial (by index) of each (other params, value) cell; a pair is a key with both values.
        cells = pd.DataFrame({"key": row_keys(trials, [p for p in params if p != c]).to_numpy(),
                              "value": texts.to_numpy(), "index": trials["index"].to_numpy(),
                              "score": trials[column].to_numpy(dtype=np.float64)})
        cells = cells[cells["value"] != MISSING].sort_values("index", kind="stable").drop_duplicates(["key", "value"])
        wide = cells.pivot(index="key", columns="value").dropna()
        labels = (f"{key}={distinct[0]}", f"{key}={distinct[1]}")
        if len(wide) < 2:
            notes.append(f"{key} takes two values ({distinct[0]}, {distinct[1]}) but only {len(wide)} pair(s) of "
                         f"trials share every other param (seed included): sweep the seed across both values.")
            continue
        wide = wide.sort_values(("index", distinct[0]))
        table = pd.DataFrame({"index_a": wide[("index", distinct[0])].astype(int).to_numpy(),
                              "index_b": wide[("index", distinct[1])].astype(int).to_numpy(),
                              "value_a": wide[("score", distinct[0])].to_numpy(dtype=np.float64),
                              "value_b": wide[("score", distinct[1])].to_numpy(dtype=np.float64)})
        scores = {labels[0]: table["value_a"].to_numpy(), labels[1]: table["value_b"].to_numpy()}
        first_value = {t: trials.loc[(texts == t).to_numpy(), c].iloc[0] for t in distinct}
        out.append(PairedConditions(
            condition=key, values=(first_value[distinct[0]], first_value[distinct[1]]), measurand=measurand,
            pairs=table, comparison=compare_conditions(table["value_a"], table["value_b"], names=labels,
                                                       keys=pair_seeds(trials, table["index_a"])),
            summaries=summarize_conditions(scores), scores=scores))
    return out, notes


def pair_seeds(trials: pd.DataFrame, index_a: pd.Series) -> np.ndarray:
    """The seed of each pair (of its first trial), so that pairs repeated under one seed count once (Crane 2018).

    Without a recorded seed every pair gets the same key: bit-identical pairs then count once.
    """
    seeds = replicate_keys(trials)
    if seeds is None:
        return np.zeros(len(index_a), dtype=object)
    by_index = dict(zip(trials["index"].astype(int).tolist(), seeds.tolist(), strict=True))
    return np.asarray([by_index[int(i)] for i in index_a], dtype=object)


def natural_key(text: str) -> float:
    """Sort numbers by value and text after them (use with the text as a tie-breaker)."""
    try:
        return float(text)
    except ValueError:
        return math.inf
