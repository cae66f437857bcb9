"""A SQLite tracking store's file: the lock a tracker opens it under, and its journal mode.

Without MLflow: :mod:`sweeper.record.tracking` opens the store with these around MLflow's client.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager

log = logging.getLogger(__name__)


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
