"""Load one sweep's records from MLflow into a DataFrame: the only analysis code touching MLflow.

MLflow is imported inside :func:`load_sweep` only, so :mod:`sweeper.analysis` stays
importable without it, and pandas only when a sweep is loaded. Every trial run of the
sweep is fetched with paginated ``search_runs`` calls of up to 50,000 runs each (MLflow's
own maximum), one query per page whatever the number of runs.

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
                          measurement, ``seed``, ``pkg.numpy``, ...)
========================  ===========================================================
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sweeper.space import SearchSpace

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

ROLE_TAG = "sweeper.role"
PARENT_TAG = "mlflow.parentRunId"
TAG_PREFIX = "sweeper."
PAGE_SIZE = 50_000  # MLflow's SEARCH_MAX_RESULTS_THRESHOLD
BASE_COLUMNS = ("index", "run_id", "status", "phase", "batch", "duration_s", "start_time", "end_time", "error")
DURATION_METRIC = "sweeper.duration_s"


class SweepNotFoundError(LookupError):
    """The tracking store holds no such experiment or sweep; the message says what to check."""


@dataclass(frozen=True)
class SweepRecords:
    """Everything MLflow holds about one sweep.

    Attributes:
        experiment: The MLflow experiment name.
        tracking_uri: Where the records are (absolute for SQLite).
        parent_run_id: The sweep's parent run.
        settings: The parent run's params as recorded (text): ``strategy``, ``metric``,
            ``mode``, ``seed``, ``num_trials``, ``space.<name>``, ...
        space: The search space, from ``search_space.json`` or the ``space.*`` params;
            None if neither can be read.
        metric: The modelled metric's name.
        mode: ``"max"`` or ``"min"``.
        strategy: How points were chosen: ``random``, ``sobol``, ``ivr`` or ``ucb``.
        trials: One row per trial run (see the module docstring).
        parent_tags: The parent run's tags (command, overrides, driver conditions).
    """

    experiment: str
    tracking_uri: str
    parent_run_id: str
    settings: Mapping[str, str]
    space: SearchSpace | None
    metric: str
    mode: str
    strategy: str
    trials: pd.DataFrame
    parent_tags: Mapping[str, str] = field(default_factory=dict)

    def finished(self, metric: str | None = None) -> pd.DataFrame:
        """Trials that FINISHED with a finite value of ``metric`` (default: the sweep's)."""
        column = f"metric.{metric or self.metric}"
        if column not in self.trials:
            return self.trials.iloc[:0]
        values = self.trials[column].to_numpy(dtype=np.float64, na_value=np.nan)
        return self.trials[(self.trials["status"] == "FINISHED").to_numpy() & np.isfinite(values)]

    def failed(self) -> pd.DataFrame:
        """Trials whose run ended FAILED or KILLED (exception, NaN score, dead worker, ...)."""
        return self.trials[self.trials["status"].isin(["FAILED", "KILLED"])]


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


def load_sweep(experiment: str, tracking_uri: str = "sqlite:///mlruns.db", run_id: str | None = None) -> SweepRecords:
    """Load a sweep's parent run and every trial run from MLflow.

    Args:
        experiment: The MLflow experiment name (``mlflow.experiment_name`` of the sweep).
        tracking_uri: Any MLflow tracking URI; a relative SQLite path is made absolute.
        run_id: The sweep's parent run id; default: the latest sweep of the experiment.

    Returns:
        The sweep's :class:`SweepRecords`.

    Raises:
        SweepNotFoundError: No store at a SQLite path, no such experiment, no sweep in it,
            or ``run_id`` is not a sweep of this experiment.
    """
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from sweeper.tracking import absolute_tracking_uri

    uri = absolute_tracking_uri(tracking_uri)
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).exists():
        raise SweepNotFoundError(
            f"no MLflow store at {uri}: the file does not exist. Pass --tracking-uri (the sweep's "
            f"mlflow.tracking_uri), e.g. --tracking-uri sqlite:///path/to/mlruns.db"
        )
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        names = sorted(e.name for e in client.search_experiments(max_results=1000))
        raise SweepNotFoundError(
            f"no experiment {experiment!r} at {uri}; experiments there: {names}. Check --experiment "
            f"(the sweep's mlflow.experiment_name) and --tracking-uri."
        )
    if run_id is None:
        sweeps = client.search_runs([exp.experiment_id], f"tags.`{ROLE_TAG}` = 'sweep'",
                                    order_by=["attributes.start_time DESC"], max_results=1)
        if not sweeps:
            raise SweepNotFoundError(f"experiment {experiment!r} at {uri} holds no sweep (no run tagged "
                                     f"{ROLE_TAG}=sweep).")
        parent = sweeps[0]
    else:
        try:
            parent = client.get_run(run_id)
        except MlflowException as exc:
            raise SweepNotFoundError(f"no run {run_id!r} at {uri}: {exc.message}") from None
        if parent.info.experiment_id != exp.experiment_id or parent.data.tags.get(ROLE_TAG) != "sweep":
            hint = (f" it is a trial of sweep {parent.data.tags[PARENT_TAG]}" if PARENT_TAG in parent.data.tags
                    else "")
            raise SweepNotFoundError(f"run {run_id!r} is not a sweep of experiment {experiment!r};{hint}. "
                                     f"Pass the sweep's parent run id, or leave --run out for the latest sweep.")
    parent_id = parent.info.run_id
    runs = []
    token = None
    while True:
        page = client.search_runs([exp.experiment_id], f"tags.`{PARENT_TAG}` = '{parent_id}'",
                                  max_results=PAGE_SIZE, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            break
    settings = dict(parent.data.params)
    return SweepRecords(
        experiment=experiment,
        tracking_uri=uri,
        parent_run_id=parent_id,
        settings=settings,
        space=_space(client, parent_id, settings),
        metric=settings.get("metric", ""),
        mode=settings.get("mode", "max"),
        strategy=settings.get("strategy", parent.data.tags.get("sweeper.strategy", "unknown")),
        trials=trials_frame(runs),
        parent_tags=dict(parent.data.tags),
    )


def _space(client: Any, run_id: str, settings: Mapping[str, str]) -> SearchSpace | None:
    """The space from the ``search_space.json`` artifact, else from the ``space.*`` params."""
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = client.download_artifacts(run_id, "search_space.json", tmp)
            return SearchSpace.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
    except Exception as exc:  # noqa: BLE001 - a missing or unreadable artifact: fall back to params
        log.debug("search_space.json of run %s unreadable (%s); using space.* params", run_id, exc)
    specs = {k[len("space."):]: v for k, v in settings.items() if k.startswith("space.")}
    if not specs:
        return None
    try:
        return SearchSpace.from_specs(specs)
    except Exception as exc:  # noqa: BLE001 - report without a space rather than not at all
        log.warning("cannot rebuild the search space from the space.* params: %s", exc)
        return None


def trials_frame(runs: list[Any]) -> pd.DataFrame:
    """Turn MLflow ``Run`` objects into the trial table (see the module docstring), sorted by index."""
    import pandas as pd

    rows = []
    for run in runs:
        tags, info = run.data.tags, run.info
        metrics = dict(run.data.metrics)
        duration = metrics.pop(DURATION_METRIC, None)
        if duration is None:
            duration = parse_number(tags.get("sweeper.duration_s", "nan"))
        row: dict[str, Any] = {
            "index": int(parse_number(tags.get("sweeper.trial_index", "-1"))),
            "run_id": info.run_id,
            "status": info.status,
            "phase": tags.get("sweeper.phase"),
            "batch": parse_number(tags.get("sweeper.batch", "-1")),
            "duration_s": float(duration) if isinstance(duration, (int, float)) else math.nan,
            "start_time": info.start_time,
            "end_time": info.end_time,
            "error": tags.get("sweeper.error"),
        }
        row.update({f"param.{k}": v for k, v in run.data.params.items()})
        row.update({f"metric.{k}": v for k, v in metrics.items()})
        row.update({f"tag.{k[len(TAG_PREFIX):]}": v for k, v in tags.items() if k.startswith(TAG_PREFIX)})
        rows.append(row)
    frame = pd.DataFrame(rows, columns=None if rows else list(BASE_COLUMNS))
    for name in ("start_time", "end_time"):
        frame[name] = pd.to_datetime(frame[name], unit="ms", utc=True)
    for name in [c for c in frame.columns if c.startswith("param.")]:
        frame[name] = _numeric_column(frame[name])
    frame["batch"] = _numeric_column(frame["batch"])
    ordered = [*BASE_COLUMNS, *sorted(c for c in frame.columns if c not in BASE_COLUMNS)]
    frame = frame[ordered].sort_values(["index", "start_time"], kind="stable").reset_index(drop=True)
    return frame


def _numeric_column(column: pd.Series) -> pd.Series:
    """Parse a text column's numbers: int64 if all whole, float64 if all numeric, else per cell."""
    import pandas as pd

    parsed = [parse_number(v) for v in column]
    present = [v for v in parsed if v is not None and not (isinstance(v, float) and math.isnan(v))]
    missing = len(present) < len(parsed)
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present) and not missing:
        return pd.Series(parsed, index=column.index, dtype="int64")
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return pd.Series([math.nan if v is None else v for v in parsed], index=column.index, dtype="float64")
    return pd.Series(parsed, index=column.index, dtype="object")
