"""Load one sweep's records from MLflow into a DataFrame: the only analysis code touching MLflow.

MLflow is imported inside :func:`load_sweep` only, so :mod:`sweeper.analysis` stays
importable without it, and pandas only when a sweep is loaded. Every trial run of the
sweep is fetched with paginated ``search_runs`` calls of up to 50,000 runs each (MLflow's
own maximum), one query per page whatever the number of runs.

The trial runs of a SQLite store are read with four read-only SQL queries
instead (the runs, then their params, tags and latest metrics): ``search_runs`` builds a
SQLAlchemy object for every param, tag and metric, about 4 ms per trial run of ~55
values (measured: 45 s of a 60 s load of 10,000 trials on 2 cores), while the SQL reads
the same rows in 1-2 s. It reads MLflow's own tables (``runs``, ``tags``, ``params``,
``latest_metrics``) with the filters of MLflow's SQL store (the experiment,
``lifecycle_stage = 'active'``, the parent tag) and in its order; any SQLite error falls
back to ``search_runs``, and a unit test checks that both give the same frame
(``tests/unit/test_runs_sqlite.py``).

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
import sqlite3
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from sweeper.search.grammar import parse_specs
from sweeper.search.space import SearchSpace
from sweeper.search.warping import MetricBounds

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


#: Params that are seeds: conditions of measurement, and the replicate key of QRA.
SEED_KEYS = ("seed", "env.seed")


def is_environment_param(key: str) -> bool:
    """Whether a param is an environment condition (``env.*`` or ``seed``), not part of the object measured."""
    return key.startswith("env.") or key == "seed"

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
        parent_status: The parent run's MLflow status: FINISHED or FAILED once the sweep ended,
            KILLED once it was interrupted or preempted, RUNNING while it runs (or if its driver died).
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
    parent_status: str = ""

    @property
    def unfinished(self) -> str | None:
        """Why the sweep holds fewer trials than it planned, with how to go on (see :func:`unfinished_note`).
        Reports say it first: a curve of 3 trials is not the sweep's."""
        ended = int(self.trials["status"].isin(["FINISHED", "FAILED"]).sum()) if len(self.trials) else 0
        return unfinished_note(self.parent_tags, self.parent_status, ended, self.settings.get("num_trials", "?"),
                               self.parent_run_id)

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

    @property
    def bounds(self) -> MetricBounds | None:
        """The sweep metric's declared bounds (``hydra.sweeper.metric_bounds``), None when it had none.

        A sweep recorded before bounds existed has no such param: None. An unreadable value
        is reported as a ValueError naming it.
        """
        return MetricBounds.from_text(self.settings.get("metric_bounds"))


def unfinished_note(tags: Mapping[str, Any], status: str, ended: int, planned: Any, run_id: str) -> str | None:
    """Why a sweep's run holds fewer trials than planned, and how to go on, in a sentence (None: it ended).

    Args:
        tags: the sweep's run's tags (``sweeper.status``, ``sweeper.sweep_dir``).
        status: its MLflow status (RUNNING: still running, or its driver died).
        ended: its trials that ended (finished or failed); planned: its ``num_trials``.
        run_id: its id, named for ``sweeper resume`` where its folder is not recorded.
    """
    stopped = {"INTERRUPTED": "was interrupted (Ctrl-C)", "PREEMPTED": "was preempted (SIGTERM)"}
    how = stopped.get(str(tags.get(f"{TAG_PREFIX}status", "")))
    resume = f"sweeper resume {tags.get(f'{TAG_PREFIX}sweep_dir') or run_id}"
    if how is not None:
        return f"this sweep {how} after {ended} of {planned} trials; continue it with: {resume}"
    if status == "RUNNING":
        return (f"this sweep has not ended: {ended} of {planned} trials so far. It is still running, or its "
                f"driver died; then continue it with: {resume}")
    return None


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
    from sweeper.record.tracking import get_run, read_client
    from sweeper.record.tracking_uri import absolute_tracking_uri

    uri = absolute_tracking_uri(tracking_uri)
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).exists():
        raise SweepNotFoundError(
            f"no MLflow store at {uri}: the file does not exist. Pass --tracking-uri (the sweep's "
            f"mlflow.tracking_uri), e.g. --tracking-uri sqlite:///path/to/mlruns.db"
        )
    client = read_client(uri)
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
            parent = get_run(uri, run_id)
        except LookupError as exc:
            raise SweepNotFoundError(f"no run {run_id!r} at {uri}: {exc.__cause__ or exc}") from None
        if parent.info.experiment_id != exp.experiment_id or parent.data.tags.get(ROLE_TAG) != "sweep":
            hint = (f" it is a trial of sweep {parent.data.tags[PARENT_TAG]}" if PARENT_TAG in parent.data.tags
                    else "")
            raise SweepNotFoundError(f"run {run_id!r} is not a sweep of experiment {experiment!r};{hint}. "
                                     f"Pass the sweep's parent run id, or leave --run out for the latest sweep.")
    parent_id = parent.info.run_id
    runs = child_runs(client, uri, exp.experiment_id, parent_id)
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
        parent_status=parent.info.status,
    )


class RunRecord(NamedTuple):
    """What the trial table needs of one MLflow run (the parts of ``mlflow.entities.Run`` it reads)."""

    run_id: str
    status: str
    start_time: int | None
    end_time: int | None
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str | None]


def child_runs(client: Any, tracking_uri: str, experiment_id: str, parent_id: str) -> list[RunRecord]:
    """Every active run of the experiment tagged as a child of ``parent_id``, latest started first.

    SQLite stores are read directly (:func:`sqlite_child_runs`, see the module docstring);
    other stores, or a SQLite file whose tables do not read as expected, through
    ``search_runs`` pages.
    """
    if tracking_uri.startswith("sqlite:///"):
        try:
            return sqlite_child_runs(Path(tracking_uri[len("sqlite:///"):]), experiment_id, parent_id)
        except sqlite3.Error as exc:
            log.debug("reading %s with SQL failed (%s); using MLflow's search_runs", tracking_uri, exc)
    return search_child_runs(client, experiment_id, parent_id)


def search_child_runs(client: Any, experiment_id: str, parent_id: str) -> list[RunRecord]:
    """:func:`child_runs` through MLflow's public ``search_runs``, pages of ``PAGE_SIZE`` runs."""
    runs: list[RunRecord] = []
    token = None
    while True:
        page = client.search_runs([experiment_id], f"tags.`{PARENT_TAG}` = '{parent_id}'",
                                  max_results=PAGE_SIZE, page_token=token)
        runs.extend(run_record(run) for run in page)
        token = page.token
        if not token:
            return runs


def sqlite_child_runs(db_path: Path, experiment_id: str, parent_id: str) -> list[RunRecord]:
    """:func:`child_runs` read from MLflow's SQLite file with read-only SQL.

    The same selection and order as MLflow's ``search_runs`` with the filter
    ``tags.mlflow.parentRunId = '<parent_id>'`` (active runs of the experiment, ordered by
    ``start_time`` descending, then run id), and the same values: a metric's latest value,
    NaN where MLflow stored ``is_nan``.

    Raises:
        sqlite3.Error: The file cannot be opened read-only, or lacks MLflow's tables.
    """
    children = "SELECT c.run_uuid FROM tags c WHERE c.key = ? AND c.value = ?"
    bound = (PARENT_TAG, parent_id)
    with closing(sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True)) as con:
        rows = con.execute(
            f"SELECT run_uuid, status, start_time, end_time FROM runs WHERE run_uuid IN ({children}) "
            "AND experiment_id = ? AND lifecycle_stage = 'active' ORDER BY start_time DESC, run_uuid",
            (*bound, int(experiment_id))).fetchall()
        by_id = {r[0]: RunRecord(r[0], r[1], r[2], r[3], {}, {}, {}) for r in rows}
        for run_uuid, key, value in con.execute(
                f"SELECT run_uuid, key, value FROM params WHERE run_uuid IN ({children})", bound):
            if run_uuid in by_id:
                by_id[run_uuid].params[key] = value
        for run_uuid, key, value in con.execute(
                f"SELECT run_uuid, key, value FROM tags WHERE run_uuid IN ({children})", bound):
            if run_uuid in by_id:
                by_id[run_uuid].tags[key] = value
        for run_uuid, key, value, is_nan in con.execute(
                f"SELECT run_uuid, key, value, is_nan FROM latest_metrics WHERE run_uuid IN ({children})", bound):
            if run_uuid in by_id:
                by_id[run_uuid].metrics[key] = math.nan if is_nan else float(value)
    return list(by_id.values())


def run_record(run: Any) -> RunRecord:
    """The :class:`RunRecord` of an MLflow ``Run`` (or anything with its ``info`` and ``data``)."""
    info, data = run.info, run.data
    return RunRecord(info.run_id, info.status, info.start_time, info.end_time, dict(data.params),
                     dict(data.metrics), dict(data.tags))


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
        return parse_specs(specs)
    except Exception as exc:  # noqa: BLE001 - report without a space rather than not at all
        log.warning("cannot rebuild the search space from the space.* params: %s", exc)
        return None


def trials_frame(runs: Sequence[Any]) -> pd.DataFrame:
    """Turn MLflow ``Run`` objects or :class:`RunRecord` s into the trial table (module docstring), sorted by index.

    Built column by column (a missing param, metric or tag is NaN, as in a frame built
    from one dict per run), and each distinct param text is parsed once: a sweep's config
    leaves mostly repeat, which makes 10,000 runs take about a second, not five.
    """
    import pandas as pd

    records = [run if isinstance(run, RunRecord) else run_record(run) for run in runs]
    n = len(records)
    base: dict[str, list[Any]] = {name: [] for name in BASE_COLUMNS}
    extra: dict[str, list[Any]] = {}

    def column(name: str) -> list[Any]:
        values = extra.get(name)
        if values is None:
            values = extra[name] = [math.nan] * n
        return values

    for i, run in enumerate(records):
        tags = run.tags
        duration = run.metrics.get(DURATION_METRIC)
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
        for k, v in run.params.items():
            column(f"param.{k}")[i] = v
        for k, v in run.metrics.items():
            if k != DURATION_METRIC:
                column(f"metric.{k}")[i] = v
        for k, v in tags.items():
            if k.startswith(TAG_PREFIX):
                column(f"tag.{k[len(TAG_PREFIX):]}")[i] = v
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
