"""The rows MLflow's SQLite store writes for a run, written with Python's ``sqlite3``, one transaction per call.

MLflow's ``SqlAlchemyStore`` spends about 28 ms of CPU on one trial's records, nearly all of it in
SQLAlchemy's ORM (sessions, identity maps, a query per check), in the sweep's writer process, on the
cores the trials and Ray Tune's loop need. These functions write the same rows into the same tables:
a run with its tags (``create_run``), params, metrics and tags with the run's latest metrics kept
(``log_batch``), and a run's status and end (``update_run_info``), and refuse what MLflow's store
refuses, with its messages (NOTE: docs/decisions/0063-sqlite-fast-writes.md).

Only for the schema of ``mlflow==3.17.2`` (requirements.lock): :meth:`RunRows.open` reads the store's
``alembic_version`` and answers None for any other, and the caller keeps MLflow's client. What MLflow
decides itself (its checks of names and lengths, its exceptions, a run's artifact URI) is handed in
as :class:`MlflowRules` by :mod:`sweeper.record.tracking`, the only module that imports mlflow: this
one holds the rows, the SQL and the order of MLflow's writes.
"""

from __future__ import annotations

import logging
import math
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger(__name__)

#: The alembic revision of the tables ``mlflow==3.17.2`` creates and migrates to (its migrations' head).
KNOWN_SCHEMA_REVISION = "dc11669786a5"
#: How long a write waits for another process's write transaction (``sweeper report``, ``mlflow ui``,
#: a second sweep) before SQLite says "database is locked": MLflow's own wait for SQLite. The spool
#: (:mod:`sweeper.record.spool`) retries that error, then keeps the write for later; it never drops it.
BUSY_TIMEOUT_MS = 20_000
#: What the run table holds for a run MLflow's ``create_run`` makes (no source: the client sets none).
_SOURCE_TYPE_UNKNOWN = "UNKNOWN"
_ACTIVE = "active"
#: The tag MLflow's client takes a run's user from.
_USER_TAG = "mlflow.user"
#: SQL cannot hold infinities: MLflow stores the largest double in their place.
_LARGEST_DOUBLE = 1.7976931348623157e308
#: The stores whose schema was found unknown, each named in the log once.
_warned_unknown: set[str] = set()


class KeyValue(Protocol):
    """A param or a tag, checked by MLflow's validation first (``mlflow.entities.Param``, ``RunTag``)."""

    @property
    def key(self) -> str: ...

    @property
    def value(self) -> str: ...


class MetricPoint(Protocol):
    """One value of a metric (``mlflow.entities.Metric``), checked by MLflow's validation first."""

    @property
    def key(self) -> str: ...

    @property
    def value(self) -> float: ...

    @property
    def timestamp(self) -> int: ...

    @property
    def step(self) -> int: ...


@dataclass(frozen=True)
class Batch:
    """What one ``log_batch`` of MLflow's client would carry to its store."""

    params: Sequence[KeyValue] = ()
    metrics: Sequence[MetricPoint] = ()
    tags: Sequence[KeyValue] = ()


@dataclass(frozen=True)
class MlflowRules:
    """What MLflow decides about a write, from :mod:`sweeper.record.tracking`.

    Attributes:
        check: MLflow's checks of one ``log_batch`` of a run (its ``mlflow.utils.validation``):
            the batch as MLflow's store takes it (values truncated where MLflow truncates), or
            MLflow's exception.
        refuse: the exception MLflow's store raises, from its message and its error code's name
            (``RESOURCE_DOES_NOT_EXIST``, ``INVALID_PARAMETER_VALUE``).
        join_uri: MLflow's ``append_to_uri_path``, which makes a run's artifact URI
            (``<experiment's artifact location>/<run id>/artifacts``).

    Functions of modules, not lambdas: Ray Tune pickles the sweep's callbacks, the tracker among them.
    """

    check: Callable[[str, Batch], Batch]
    refuse: Callable[[str, str], Exception]
    join_uri: Callable[..., str]


def schema_revision(path: str) -> str | None:
    """The alembic revision of the SQLite store at ``path``, or None where it has none (not an MLflow store)."""
    connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        rows = connection.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.Error:
        return None
    finally:
        connection.close()
    return rows[0][0] if len(rows) == 1 else None


@dataclass
class RunRows:
    """Writes runs into the MLflow SQLite store at ``path``, each call one ``BEGIN IMMEDIATE`` transaction.

    ``BEGIN IMMEDIATE`` takes the write lock first, so a busy store is waited for (up to
    :data:`BUSY_TIMEOUT_MS`) before anything is read, never failed half-way. One connection per
    process, opened on first use: a process forked with an open connection opens its own and
    never closes the one it inherited (SQLite connections must not cross ``fork``). Calls from
    several threads take turns.
    """

    path: str
    rules: MlflowRules
    _connection: sqlite3.Connection | None = field(default=None, repr=False)
    _pid: int = field(default=0, repr=False)
    _inherited: list[sqlite3.Connection] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __getstate__(self) -> dict[str, object]:
        """Pickled as its store and rules (Ray Tune pickles the tracker): a connection and a lock stay behind."""
        return {"path": self.path, "rules": self.rules}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path, self.rules, self._connection, self._pid = state["path"], state["rules"], None, 0
        self._inherited, self._lock = [], threading.Lock()

    @classmethod
    def open(cls, path: str, rules: MlflowRules) -> RunRows | None:
        """Rows for the store at ``path`` if its schema is :data:`KNOWN_SCHEMA_REVISION`'s; else None,
        logged as a warning once per store: the caller writes through MLflow's client instead."""
        revision = schema_revision(path)
        if revision == KNOWN_SCHEMA_REVISION:
            return cls(path, rules)
        if path not in _warned_unknown:
            _warned_unknown.add(path)
            log.warning("MLflow store %s has schema revision %s, not %s (mlflow 3.17.2's) that the sweeper's fast "
                        "SQLite writes know: its records are written through MLflow's client, slower",
                        path, revision, KNOWN_SCHEMA_REVISION)
        return None

    # -------------------------------------------------------------- the calls
    def create_run(self, experiment_id: str, run_name: str, tags: Mapping[str, str],
                   batches: Sequence[Batch] = ()) -> tuple[str, str]:
        """MLflow's client's ``create_run`` (a RUNNING run with ``tags``, its user ``mlflow.user``'s or
        ``unknown``), then its ``log_batch`` of each of ``batches``, in one transaction.

        Returns:
            The run's id (a new ``uuid4`` in hex, as MLflow's) and its artifact URI.
        Raises:
            Exception: ``rules.refuse``'s, as MLflow's store raises it: the experiment is missing or
                deleted (nothing written); or ``rules.check``'s, or a batch changes a param a batch
                before it logged: the run and the batches before that one are written.
        """
        run_id, start_time = uuid.uuid4().hex, int(time.time() * 1000)
        checked, refusal = self._checked(run_id, batches)
        with self._transaction() as db:
            row = db.execute("SELECT lifecycle_stage, artifact_location FROM experiments WHERE experiment_id = ?",
                             (int(experiment_id),)).fetchone()
            if row is None:
                raise self.rules.refuse(f"No Experiment with id={int(experiment_id)} exists", "RESOURCE_DOES_NOT_EXIST")
            if row[0] != _ACTIVE:
                raise self.rules.refuse(f"The experiment {int(experiment_id)} must be in the 'active' state. Current "
                                        f"state is {row[0]}.", "INVALID_PARAMETER_VALUE")
            uri = self.rules.join_uri(row[1], run_id, "artifacts")
            db.execute("INSERT INTO runs (run_uuid, name, source_type, source_name, entry_point_name, user_id, "
                       "status, start_time, end_time, deleted_time, source_version, lifecycle_stage, artifact_uri, "
                       "experiment_id) VALUES (?, ?, ?, '', '', ?, 'RUNNING', ?, NULL, NULL, '', ?, ?, ?)",
                       (run_id, run_name, _SOURCE_TYPE_UNKNOWN, tags.get(_USER_TAG, "unknown"), start_time, _ACTIVE,
                        uri, int(experiment_id)))
            db.executemany("INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?)",
                           [(key, value, run_id) for key, value in tags.items()])
            self._write_batches(db, run_id, checked)
        if refusal is not None:
            raise refusal
        return run_id, uri

    def log_batches(self, run_id: str, batches: Sequence[Batch]) -> None:
        """MLflow's client's ``log_batch`` of each of ``batches`` in turn, in one transaction.

        Raises:
            Exception: ``rules.refuse``'s, as MLflow's store raises it: no such run, or a deleted
                one (nothing written); or ``rules.check``'s, or a batch changes a param's value:
                the batches before that one are written.
        """
        checked, refusal = self._checked(run_id, batches)
        if checked:
            with self._transaction() as db:
                self._active_run(db, run_id)
                self._write_batches(db, run_id, checked)
        if refusal is not None:
            raise refusal

    def update_run(self, run_id: str, status: str, end_time: int | None = None) -> None:
        """MLflow's ``update_run_info`` without a new name: the run's status, and its end time unless None."""
        with self._transaction() as db:
            self._active_run(db, run_id)
            if end_time is None:
                db.execute("UPDATE runs SET status = ? WHERE run_uuid = ?", (status, run_id))
            else:
                db.execute("UPDATE runs SET status = ?, end_time = ? WHERE run_uuid = ?", (status, end_time, run_id))

    # -------------------------------------------------------------- MLflow's checks and refusals
    def _checked(self, run_id: str, batches: Sequence[Batch]) -> tuple[list[Batch], Exception | None]:
        """The batches MLflow's checks pass, in order, up to the first they refuse, and that refusal
        (None if none): MLflow's client has written the batches before it when it meets it."""
        checked: list[Batch] = []
        for batch in batches:
            try:
                checked.append(self.rules.check(run_id, batch))
            except Exception as refusal:  # noqa: BLE001 - MLflow's exception, raised once the others are written
                return checked, refusal
        return checked, None

    def _active_run(self, db: sqlite3.Connection, run_id: str) -> None:
        """MLflow's ``_get_run`` and ``_check_run_is_active``: refuse a run that is missing or deleted."""
        row = db.execute("SELECT lifecycle_stage FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
        if row is None:
            raise self.rules.refuse(f"Run with id={run_id} not found", "RESOURCE_DOES_NOT_EXIST")
        if row[0] != _ACTIVE:
            raise self.rules.refuse(f"The run {run_id} must be in the 'active' state. Current state is {row[0]}.",
                                    "INVALID_PARAMETER_VALUE")

    def _write_batches(self, db: sqlite3.Connection, run_id: str, batches: Sequence[Batch]) -> None:
        """Each batch's params, metrics and tags, in MLflow's order; a changed param refuses its batch
        (the ones before it are committed, as MLflow's client has written them)."""
        for i, batch in enumerate(batches):
            changed = _changed_params(db, run_id, batch.params)
            if changed:
                refusal = self.rules.refuse(f"Changing param values is not allowed. Params were already logged="
                                            f"'{changed}' for run ID='{run_id}'.", "INVALID_PARAMETER_VALUE")
                raise refusal if i == 0 else _PartlyWritten(refusal)
            db.executemany("INSERT OR IGNORE INTO params (key, value, run_uuid) VALUES (?, ?, ?)",
                           [(p.key, p.value, run_id) for p in batch.params])
            _write_metrics(db, run_id, batch.metrics)
            _write_tags(db, run_id, batch.tags)

    # -------------------------------------------------------------- the connection
    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed when the block ends, rolled back on any error but a refusal
        after some batches were written (:class:`_PartlyWritten`: committed, then the refusal raised)."""
        with self._lock:
            db = self._open()
            db.execute("BEGIN IMMEDIATE")
            refusal = None
            try:
                try:
                    yield db
                except _PartlyWritten as partly:
                    refusal = partly.refusal
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            if refusal is not None:
                raise refusal

    def _open(self) -> sqlite3.Connection:
        """This process's connection; a new one after a fork (the inherited one is kept, never closed)."""
        if self._connection is not None and self._pid == os.getpid():
            return self._connection
        if self._connection is not None:
            self._inherited.append(self._connection)
        # isolation_level=None: no transactions of the sqlite3 module's own; _transaction opens each one.
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                             check_same_thread=False)
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        db.execute("PRAGMA foreign_keys = ON")  # as MLflow's sessions do
        self._connection, self._pid = db, os.getpid()
        return db


class _PartlyWritten(Exception):
    """A batch was refused after earlier ones in the same call were written: commit those, then refuse."""

    def __init__(self, refusal: Exception) -> None:
        super().__init__(str(refusal))
        self.refusal = refusal


def _changed_params(db: sqlite3.Connection, run_id: str, params: Sequence[KeyValue]) -> list[dict[str, str]]:
    """MLflow's ``_log_params``' check: each param the run has with another value (one with the same
    value is left as it is), as MLflow's refusal lists them."""
    if not params:
        return []
    keys = [p.key for p in params]
    existing = dict(db.execute(f"SELECT key, value FROM params WHERE run_uuid = ? AND key IN ({_marks(keys)})",
                               (run_id, *keys)).fetchall())
    return [{"key": p.key, "old_value": existing[p.key], "new_value": p.value}
            for p in params if p.key in existing and p.value != existing[p.key]]


def _write_metrics(db: sqlite3.Connection, run_id: str, metrics: Sequence[MetricPoint]) -> None:
    """MLflow's ``_log_metrics``: each value once (a value already there is left), and the run's latest
    value of each metric kept in ``latest_metrics`` (the greatest ``(step, timestamp, value)``)."""
    if not metrics:
        return
    rows = [(m.key, *_stored_value(m.value), int(m.timestamp), int(m.step)) for m in metrics]
    db.executemany("INSERT OR IGNORE INTO metrics (key, value, is_nan, timestamp, step, run_uuid) "
                   "VALUES (?, ?, ?, ?, ?, ?)", [(*row, run_id) for row in rows])
    keys = sorted({row[0] for row in rows})
    stored = {key: (step, timestamp, value) for key, value, timestamp, step in db.execute(
        f"SELECT key, value, timestamp, step FROM latest_metrics WHERE run_uuid = ? AND key IN ({_marks(keys)})",
        (run_id, *keys))}
    latest: dict[str, tuple[int, int, float, int]] = {}  # key -> (step, timestamp, value, is_nan), strictly newer
    for key, value, is_nan, timestamp, step in rows:
        newest = latest.get(key)
        current = newest[:3] if newest else stored.get(key)
        if current is None or (step, timestamp, value) > current:
            latest[key] = (step, timestamp, value, is_nan)
    db.executemany("INSERT INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid) "
                   "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key, run_uuid) DO UPDATE SET value = excluded.value, "
                   "timestamp = excluded.timestamp, step = excluded.step, is_nan = excluded.is_nan",
                   [(key, value, timestamp, step, is_nan, run_id)
                    for key, (step, timestamp, value, is_nan) in latest.items()])


def _write_tags(db: sqlite3.Connection, run_id: str, tags: Sequence[KeyValue]) -> None:
    """MLflow's ``_set_tags``: a tag's value set (the last of a key given twice wins); ``mlflow.runName``
    renames the run too."""
    db.executemany("INSERT INTO tags (key, value, run_uuid) VALUES (?, ?, ?) "
                   "ON CONFLICT (key, run_uuid) DO UPDATE SET value = excluded.value",
                   [(t.key, t.value, run_id) for t in tags])
    for name in [t.value for t in tags if t.key == "mlflow.runName"][-1:]:
        db.execute("UPDATE runs SET name = ? WHERE run_uuid = ?", (name, run_id))


def _stored_value(value: float) -> tuple[float, int]:
    """A metric value as MLflow stores it, with its ``is_nan`` flag: NaN as 0, infinities as the largest double."""
    if math.isnan(value):
        return 0.0, 1
    if math.isinf(value):
        return (_LARGEST_DOUBLE if value > 0 else -_LARGEST_DOUBLE), 0
    return float(value), 0


def _marks(values: Sequence[object]) -> str:
    """``?, ?, ?``: one SQL parameter per value."""
    return ", ".join("?" * len(values))
