"""Whether a tracking store holds a sweep's run of a given id, read without MLflow.

A sweep's driver checks ``hydra.sweeper.rerun_of`` before it forks its MLflow writer, which must not share a
store or a connection the driver opened (:class:`sweeper.record.writer_process.WriterStart`). So the run is looked
up here, as :mod:`sweeper.record.store_check` checks a store, opening nothing that stays open:

- ``sqlite:///path``: read-only SQL on the file (MLflow's ``runs`` and ``tags`` tables), closed after;
- ``http(s)://``: one ``GET <uri>/api/2.0/mlflow/runs/get?run_id=...`` through ``requests``, with MLflow's TLS
  settings; a server that asks for credentials cannot be asked here;
- any other store (PostgreSQL, ...): not looked up.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

from sweeper.record.store_check import TIMEOUT_S, _tls_options
from sweeper.record.tracking_uri import sqlite_path

ROLE_TAG = "sweeper.role"
FOUND, MISSING, NOT_A_SWEEP, UNKNOWN = "found", "missing", "not a sweep", "unknown"


def sweep_run_state(uri: str, run_id: str, timeout_s: float = TIMEOUT_S) -> str:
    """``found`` (an active run of that id tagged ``sweeper.role=sweep``), ``missing``, ``not a sweep``, or
    ``unknown`` (the store cannot be asked here). ``uri`` is absolute (a SQLite path resolved)."""
    db = sqlite_path(uri)
    if db is not None:
        return _sqlite_state(Path(db), run_id)
    if uri.split(":", 1)[0].lower() in ("http", "https"):
        return _server_state(uri, run_id, timeout_s)
    return UNKNOWN


def _sqlite_state(db: Path, run_id: str) -> str:
    if not db.is_file():
        return MISSING  # not created here
    try:
        with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)) as con:
            row = con.execute("SELECT lifecycle_stage FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
            if row is None or row[0] != "active":
                return MISSING
            role = con.execute("SELECT value FROM tags WHERE run_uuid = ? AND key = ?", (run_id, ROLE_TAG)).fetchone()
    except sqlite3.Error:
        return UNKNOWN  # not MLflow's tables as expected: the sweep's own open says what is wrong
    return FOUND if role is not None and role[0] == "sweep" else NOT_A_SWEEP


def _server_state(uri: str, run_id: str, timeout_s: float) -> str:
    import requests

    try:
        response = requests.get(f"{uri.rstrip('/')}/api/2.0/mlflow/runs/get?run_id={quote(run_id)}",
                                timeout=timeout_s, **_tls_options())
        body = response.json()
    except (requests.exceptions.RequestException, ValueError):
        return UNKNOWN
    if response.status_code == 404 or (isinstance(body, dict) and body.get("error_code") == "RESOURCE_DOES_NOT_EXIST"):
        return MISSING
    run = body.get("run") if response.status_code == 200 and isinstance(body, dict) else None
    if not isinstance(run, dict):
        return UNKNOWN
    tags = {t.get("key"): t.get("value") for t in run.get("data", {}).get("tags", []) if isinstance(t, dict)}
    return FOUND if tags.get(ROLE_TAG) == "sweep" else NOT_A_SWEEP
