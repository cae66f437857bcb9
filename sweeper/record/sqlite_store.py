"""A SQLite tracking store's file: the lock a tracker opens it under, its journal mode, and a new
store's tables copied from an empty store MLflow built once.

Without MLflow: :mod:`sweeper.record.tracking` opens the store with :func:`open_store` around MLflow's client.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TypeVar

log = logging.getLogger(__name__)
_T = TypeVar("_T")
#: What MLflow's schema migrations fail with when another process runs them on the same new file.
_MIGRATION_RACE = ("already exists", "duplicate column", "database is locked", "alembic_version")


def open_store(path: str, open_client: Callable[[], _T], template_key: str, build: Callable[[str], None],
               attempts: int = 6) -> _T:
    """Open the SQLite store at ``path`` with ``open_client`` (MLflow's client, which creates a new store's
    tables as it opens it), a new store's tables copied from the empty store ``build`` made once per
    ``template_key`` (:func:`empty_store_template`), and the store put in write-ahead-log mode.

    Two processes opening the same new SQLite file at once (sweeps started together, a
    sweep and ``mlflow ui``, a script polling for runs) both run MLflow's schema
    migrations, and the slower one fails ("table ... already exists", "duplicate column
    name", an ``alembic_version`` mismatch): MLflow does not lock around them. Trackers
    take turns through an exclusive ``flock`` on the database's folder
    (:func:`folder_lock`, never on the file itself); against any other process, opening
    again once the other has finished succeeds.
    """
    for attempt in range(attempts):
        try:
            with folder_lock(path):
                if not os.path.exists(path) and os.path.isdir(os.path.dirname(path) or "."):
                    template = empty_store_template(template_key, build)
                    if template is not None:
                        copy_new_store(template, path)
                client = open_client()
                use_write_ahead_log(path)
                return client
        except Exception as exc:  # SQLAlchemy's or alembic's error, wrapped or not
            if attempt == attempts - 1 or not any(m in str(exc) for m in _MIGRATION_RACE):
                raise
            log.info("another process is creating the MLflow tables of %s; opening it again", path)
            time.sleep(1.0 + attempt)
    raise AssertionError("unreachable")


@contextmanager
def folder_lock(path: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the folder of the database file ``path``.

    The lock is on the folder, never on a descriptor of the database file: closing any
    descriptor of that file drops every POSIX lock the process holds on it, SQLite's
    included (``fcntl(2)``). A writer that lost its shared lock let a reader's closing
    connection take the exclusive lock, checkpoint and delete the write-ahead log under it,
    and its next commits failed with "disk I/O error" (NOTE: docs/decisions/0001-sqlite-readers.md).
    """
    folder = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        yield
    finally:
        os.close(folder)  # releases the flock


def use_write_ahead_log(path: str) -> None:
    """Put a SQLite store in write-ahead-log mode (a setting the database file keeps).

    In SQLite's default rollback-journal mode every commit syncs the database and its
    journal, and an MLflow run takes about a dozen commits; in WAL mode a commit appends to
    the log (NOTE: docs/decisions/0022-sqlite-write-ahead-log.md). Durability is unchanged at
    SQLite's default ``synchronous=FULL``: a commit is on disk when it returns, and a killed
    process loses nothing. Readers (the MLflow UI, ``sweeper report``) do not block the
    sweep's writes. SQLite's one limit on WAL, a database on a network file system, is a
    limit of SQLite stores anyway.
    """
    try:
        with closing(sqlite3.connect(path, timeout=5)) as connection:
            connection.execute("PRAGMA journal_mode=WAL")
    except sqlite3.Error as exc:  # e.g. locked by another writer: the default mode works, slower
        log.debug("SQLite store %s stays in its journal mode: %s", path, exc)


def empty_store_template(key: str, build: Callable[[str], None]) -> str | None:
    """An empty store that ``build`` (MLflow creating its tables in a new file) made once per ``key``, kept in
    the user's cache folder; None where that folder cannot be written.

    MLflow creates a new SQLite store's tables by running every one of its schema migrations, about 2.5 s of
    CPU; a copy of the result takes milliseconds (NOTE: docs/decisions/0055-new-store-from-a-template.md).
    ``key`` names the versions that decide the schema (MLflow's, SQLAlchemy's). The only row that depends on
    where and when the store was made, MLflow's Default experiment (its artifact folder is under the working
    directory of the process that made it), is deleted from the template: MLflow adds it again, as it would
    have been, when it first opens the copy.
    """
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "multiverse-sweeper"
    template = cache / f"empty-store-{key}.db"
    if template.is_file():
        return str(template)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache) as folder:
            built = os.path.join(folder, "store.db")
            build(built)
            with closing(sqlite3.connect(built)) as connection:
                connection.execute("DELETE FROM experiments WHERE experiment_id = 0")
                connection.commit()
            os.replace(built, template)  # atomic: a process building it beside this one gets the same file
    except (OSError, sqlite3.Error) as exc:
        log.debug("no template for new MLflow stores in %s (%s): MLflow creates each one's tables", cache, exc)
        return None
    return str(template)


def copy_new_store(template: str, path: str) -> None:
    """Put a copy of ``template`` at ``path`` unless a file appeared there meanwhile (another process's store).

    The copy is written beside ``path`` and linked into place, so no reader ever sees half a file.
    """
    partial = f"{path}.{os.getpid()}.partial"
    shutil.copyfile(template, partial)
    try:
        os.link(partial, path)
    except FileExistsError:
        log.debug("%s appeared while its tables were copied; it is kept", path)
    finally:
        os.unlink(partial)
