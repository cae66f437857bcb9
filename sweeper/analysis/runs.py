"""Load one sweep's records from MLflow into a DataFrame: the only analysis code touching MLflow.

MLflow is imported inside :func:`load_sweep` and its helpers only, so :mod:`sweeper.analysis` stays
importable without it, and pandas only when a sweep is loaded. Every trial run of the
sweep is fetched with paginated ``search_runs`` calls of up to 50,000 runs each (MLflow's
own maximum), one query per page whatever the number of runs.

The trial runs of a SQLite store are read with four read-only SQL queries instead (the runs,
then their params, tags and latest metrics), with the filters of MLflow's SQL store (the
experiment, ``lifecycle_stage = 'active'``, the parent tag) and in its order; any SQLite error
falls back to ``search_runs``, and a unit test checks that both give the same frame
(``tests/unit/test_runs_sqlite.py``). NOTE: docs/decisions/0016-sqlite-trial-reads.md

The conditions every trial shares are recorded once, on the sweep's run
(:mod:`sweeper.record.shared_conditions`); :func:`with_shared_conditions` puts them back into each
trial that points to them, so the runs become the trial table of :mod:`sweeper.analysis.trial_table`
as if each trial had recorded every condition itself.
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import tempfile
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sweeper.analysis.trial_table import (
    BASE_COLUMNS,
    DURATION_METRIC,
    TAG_PREFIX,
    RunRecord,
    parse_number,
    run_record,
    trials_frame,
)
from sweeper.record.shared_conditions import merged_tags, shared_from_tags
from sweeper.record.tracking_uri import absolute_tracking_uri, sqlite_path
from sweeper.search.grammar import parse_specs
from sweeper.search.space import SearchSpace
from sweeper.search.warping import MetricBounds

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

ROLE_TAG = "sweeper.role"
PARENT_TAG = "mlflow.parentRunId"
PAGE_SIZE = 50_000  # MLflow's SEARCH_MAX_RESULTS_THRESHOLD


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
        trials: One row per trial run (:mod:`sweeper.analysis.trial_table`).
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
    from sweeper.record.tracking import read_client

    uri = absolute_tracking_uri(tracking_uri)
    db = sqlite_path(uri)
    if db is not None and not Path(db).exists():
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
    parent = _sweep_run(client, uri, exp.experiment_id, experiment, run_id)
    parent_id = parent.info.run_id
    runs = with_shared_conditions(child_runs(client, uri, exp.experiment_id, parent_id), parent.data.tags)
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


def _sweep_run(client: Any, uri: str, experiment_id: str, experiment: str, run_id: str | None) -> Any:
    """The sweep's parent run: ``run_id``'s, checked to be a sweep of the experiment, or the latest sweep's.

    Raises:
        SweepNotFoundError: The experiment holds no sweep, or ``run_id`` is not one of its sweeps.
    """
    from sweeper.record.tracking import get_run

    if run_id is None:
        sweeps = client.search_runs([experiment_id], f"tags.`{ROLE_TAG}` = 'sweep'",
                                    order_by=["attributes.start_time DESC"], max_results=1)
        if not sweeps:
            raise SweepNotFoundError(f"experiment {experiment!r} at {uri} holds no sweep (no run tagged "
                                     f"{ROLE_TAG}=sweep).")
        return sweeps[0]
    try:
        parent = get_run(uri, run_id)
    except LookupError as exc:
        raise SweepNotFoundError(f"no run {run_id!r} at {uri}: {exc.__cause__ or exc}") from None
    if parent.info.experiment_id != experiment_id or parent.data.tags.get(ROLE_TAG) != "sweep":
        hint = (f" it is a trial of sweep {parent.data.tags[PARENT_TAG]}" if PARENT_TAG in parent.data.tags
                else "")
        raise SweepNotFoundError(f"run {run_id!r} is not a sweep of experiment {experiment!r};{hint}. "
                                 f"Pass the sweep's parent run id, or leave --run out for the latest sweep.")
    return parent


def child_runs(client: Any, tracking_uri: str, experiment_id: str, parent_id: str) -> list[RunRecord]:
    """Every active run of the experiment tagged as a child of ``parent_id``, latest started first.

    SQLite stores are read directly (:func:`sqlite_child_runs`, see the module docstring);
    other stores, or a SQLite file whose tables do not read as expected, through
    ``search_runs`` pages.
    """
    db = sqlite_path(tracking_uri)
    if db is not None:
        try:
            return sqlite_child_runs(Path(db), experiment_id, parent_id)
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


def with_shared_conditions(runs: list[RunRecord], parent_tags: Mapping[str, Any]) -> list[RunRecord]:
    """The trial runs with the conditions they share put back from the sweep's run
    (:func:`sweeper.record.shared_conditions.merged_tags`): each as if it had recorded them all itself."""
    shared = shared_from_tags(parent_tags)
    return [run._replace(tags=merged_tags(run.tags, shared)) for run in runs]


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


__all__ = [
    "BASE_COLUMNS",
    "DURATION_METRIC",
    "PAGE_SIZE",
    "PARENT_TAG",
    "ROLE_TAG",
    "SEED_KEYS",
    "TAG_PREFIX",
    "RunRecord",
    "SweepNotFoundError",
    "SweepRecords",
    "child_runs",
    "is_environment_param",
    "load_sweep",
    "parse_number",
    "run_record",
    "search_child_runs",
    "sqlite_child_runs",
    "trials_frame",
    "unfinished_note",
    "with_shared_conditions",
]
