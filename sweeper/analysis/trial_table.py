"""A sweep's trial runs as one table: a pandas DataFrame with a row per trial run.

:mod:`sweeper.analysis.runs` fetches the runs from MLflow; this module turns them into the
table every analysis reads. pandas is imported inside the functions that build it.

The trial table has one row per trial run (a retried trial has one row per attempt):

========================  ===========================================================
column                    content
========================  ===========================================================
``index``                 ``sweeper.trial_index`` (-1 if absent)
``run_id``                the MLflow run id
``status``                MLflow's run status: FINISHED, FAILED, KILLED or RUNNING
``phase``, ``batch``      how the point was chosen (``sobol``, ``ivr``, ...) and its batch
``duration_s``            seconds the task ran (``sweeper.duration_s``)
``start_time``            run start and end, ``pandas.Timestamp`` in UTC
``end_time``
``error``                 ``sweeper.error`` (None for a finished trial)
``param.<k>``             the point and the composed config; text that parses as a number
                          becomes one (a column of whole numbers is ``int64``)
``metric.<k>``            what the task returned (latest value of each metric)
``tag.<k>``               the ``sweeper.*`` tags without the prefix (conditions of
                          measurement, ``seed``, ``pkg.numpy``, ...; those the trials
                          share put back from the sweep's run by ``runs.load_sweep``)
========================  ===========================================================
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import pandas as pd

TAG_PREFIX = "sweeper."
BASE_COLUMNS = ("index", "run_id", "status", "phase", "batch", "duration_s", "start_time", "end_time", "error")
DURATION_METRIC = "sweeper.duration_s"


class RunRecord(NamedTuple):
    """What the trial table needs of one MLflow run (the parts of ``mlflow.entities.Run`` it reads)."""

    run_id: str
    status: str
    start_time: int | None
    end_time: int | None
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str | None]


def run_record(run: Any) -> RunRecord:
    """The :class:`RunRecord` of an MLflow ``Run`` (or anything with its ``info`` and ``data``)."""
    info, data = run.info, run.data
    return RunRecord(info.run_id, info.status, info.start_time, info.end_time, dict(data.params),
                     dict(data.metrics), dict(data.tags))


def parse_number(text: Any) -> Any:
    """Return ``text`` as an int or float if it reads as one, else unchanged.

    Example:
        >>> parse_number("3"), parse_number("0.25"), parse_number("1e-3"), parse_number("rbf")
        (3, 0.25, 0.001, 'rbf')
    """
    if not isinstance(text, str):
        return text
    s = text.strip()
    if "_" in s:  # Python reads "1_000" as 1000; MLflow text never means that
        return text
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return text


def trials_frame(runs: Sequence[Any]) -> pd.DataFrame:
    """Turn MLflow ``Run`` objects or :class:`RunRecord` s into the trial table (module docstring), sorted by index.

    Built column by column (a missing param, metric or tag is NaN, as in a frame built
    from one dict per run), and each distinct param text is parsed once.
    NOTE: docs/decisions/0017-trial-table-by-column.md
    """
    records = [run if isinstance(run, RunRecord) else run_record(run) for run in runs]
    n = len(records)
    base: dict[str, list[Any]] = {name: [] for name in BASE_COLUMNS}
    extra: dict[str, list[Any]] = {}
    for i, run in enumerate(records):
        _append_base(base, run)
        for name, value in _extra_cells(run):
            values = extra.get(name)
            if values is None:
                values = extra[name] = [math.nan] * n
            values[i] = value
    return _frame(base, extra, n)


def _append_base(base: dict[str, list[Any]], run: RunRecord) -> None:
    """Append ``run``'s value of each of :data:`BASE_COLUMNS` to its column."""
    tags = run.tags
    duration: Any = run.metrics.get(DURATION_METRIC)
    if duration is None:
        duration = parse_number(tags.get("sweeper.duration_s", "nan"))
    base["index"].append(int(parse_number(tags.get("sweeper.trial_index", "-1"))))
    base["run_id"].append(run.run_id)
    base["status"].append(run.status)
    base["phase"].append(tags.get("sweeper.phase"))
    base["batch"].append(tags.get("sweeper.batch", "-1"))
    base["duration_s"].append(float(duration) if isinstance(duration, (int, float)) else math.nan)
    base["start_time"].append(run.start_time)
    base["end_time"].append(run.end_time)
    base["error"].append(tags.get("sweeper.error"))


def _extra_cells(run: RunRecord) -> Iterator[tuple[str, Any]]:
    """``run``'s ``param.<k>``, ``metric.<k>`` and ``tag.<k>`` cells: (column name, value)."""
    for key, text in run.params.items():
        yield f"param.{key}", text
    for key, value in run.metrics.items():
        if key != DURATION_METRIC:
            yield f"metric.{key}", value
    for key, tag in run.tags.items():
        if key.startswith(TAG_PREFIX):
            yield f"tag.{key[len(TAG_PREFIX):]}", tag


def _frame(base: dict[str, list[Any]], extra: dict[str, list[Any]], n: int) -> pd.DataFrame:
    """The table of ``n`` runs from its columns: params parsed as numbers, times as UTC, sorted by index."""
    import pandas as pd

    data: dict[str, Any] = {name: base[name] for name in BASE_COLUMNS}
    data["batch"] = _numeric_column(base["batch"])
    for name in sorted(extra):
        data[name] = _numeric_column(extra[name]) if name.startswith("param.") else extra[name]
    frame = pd.DataFrame(data) if n else pd.DataFrame([], columns=list(BASE_COLUMNS))
    for name in ("start_time", "end_time"):
        frame[name] = pd.to_datetime(frame[name], unit="ms", utc=True)
    if not n:
        frame["batch"] = _numeric_column([])
    return frame.sort_values(["index", "start_time"], kind="stable").reset_index(drop=True)


def _numeric_column(column: Sequence[Any]) -> pd.Series:
    """Parse a text column's numbers: int64 if all whole, float64 if all numeric, else per cell."""
    import pandas as pd

    memo: dict[Any, Any] = {}  # each distinct text is parsed once
    parsed = []
    for v in column:
        try:
            p = memo[v]
        except KeyError:
            p = memo[v] = parse_number(v)
        parsed.append(p)
    distinct = list(memo.values())
    present = [v for v in distinct if v is not None and not (isinstance(v, float) and math.isnan(v))]
    missing = len(present) < len(distinct)
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present) and not missing:
        return pd.Series(parsed, dtype="int64")
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return pd.Series([math.nan if v is None else v for v in parsed], dtype="float64")
    return pd.Series(parsed, dtype="object")
