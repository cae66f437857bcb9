"""Each trial's point as the search space names it, read back from its recorded params."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sweeper.record.mlflow_keys import clean_key

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.analysis.runs import SweepRecords


def trial_points(kept: pd.DataFrame, records: SweepRecords) -> list[dict[str, Any]]:
    """Each trial's point under the space's dimension names (MLflow keys replace odd characters by ``_``).

    Read column by column (NOTE: docs/decisions/0027-trial-points-by-column.md); no space: empty
    points, which :func:`~sweeper.report.surrogate.unit_points` turns into its explanation.
    """
    if records.space is None:
        return [{} for _ in range(len(kept))]
    columns: dict[str, list[Any]] = {}
    for name, dim in zip(records.space.names, records.space.dims, strict=True):
        key = f"param.{name}"
        if key not in kept.columns:
            key = "param." + clean_key(name)
        values = kept[key].tolist() if key in kept.columns else [None] * len(kept)
        columns[name] = [as_choice(dim, v) for v in values] if key in kept.columns else values
    if not columns:
        return [{} for _ in range(len(kept))]
    return [dict(zip(columns, cells, strict=True)) for cells in zip(*columns.values(), strict=True)]


def as_choice(dim: Any, value: Any) -> Any:
    """A recorded param as the dimension's own value: MLflow keeps text, so ``'False'`` means False."""
    choices = getattr(dim, "choices", None)
    if choices is None or any(value == c and type(value) is type(c) for c in choices):
        return value
    for choice, text in zip(choices, dim.choice_strings, strict=True):
        if str(value) in (str(choice), text):
            return choice
    return value
