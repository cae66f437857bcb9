"""Tracking URIs checked and made absolute without importing MLflow.

A sweep checks its ``mlflow.tracking_uri`` before anything starts, and a bad one must be named at
once; importing MLflow, which takes seconds, is left to :mod:`sweeper.record.tracking`, which
writes (NOTE: docs/decisions/0025-mlflow-import-costs.md).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from sweeper.record.mlflow_keys import clean_key

SQLITE_PREFIX = "sqlite:///"


def sqlite_path(uri: str) -> str | None:
    """The file of a ``sqlite:///path`` URI as written (relative or absolute), or None for any other URI."""
    return uri[len(SQLITE_PREFIX):] if uri.startswith(SQLITE_PREFIX) else None


def absolute_tracking_uri(uri: str) -> str:
    """Make a relative ``sqlite:///file.db`` absolute, so the records can be found from anywhere."""
    if uri.startswith(SQLITE_PREFIX) and not uri.startswith("sqlite:////"):
        path = sqlite_path(uri)
        if path and path != ":memory:":
            return "sqlite:///" + str(Path(path).resolve())
    return uri


def tracking_uri_problem(uri: str) -> str | None:
    """Say what is wrong with a tracking URI, or None if it looks usable."""
    parsed = urlparse(uri)
    if parsed.scheme in ("http", "https"):
        return None if parsed.netloc else "an http(s) tracking URI needs a host, e.g. http://127.0.0.1:5000"
    if parsed.scheme == "sqlite" and (path := sqlite_path(uri)) is not None:
        folder = Path(path).absolute().parent
        if path and path != ":memory:" and not folder.is_dir():
            return f"the folder {folder} does not exist: create it, or give a file in an existing folder"
    if parsed.scheme in ("sqlite", "postgresql", "mysql", "mssql", "file", "databricks") or "+" in parsed.scheme:
        return None
    if parsed.scheme == "" and uri:
        return None  # a local path: MLflow's file store (needs MLFLOW_ALLOW_FILE_STORE=true on MLflow >= 3.13)
    return f"unknown scheme {parsed.scheme!r}: use sqlite:///mlruns.db or http://host:5000"


def default_artifact_location(tracking_uri: str, experiment_name: str) -> str | None:
    """Artifacts of a SQLite store's experiment go next to the database file, not into the cwd.

    (MLflow's default is ``./mlruns`` of whatever directory the sweep was launched from.)
    None leaves other stores to MLflow (a tracking server decides for itself).
    """
    path = sqlite_path(tracking_uri)
    if path is None or not path.startswith("/"):  # a relative file, or not SQLite
        return None
    return (Path(path).parent / "mlruns" / clean_key(experiment_name).replace(" ", "_")).as_uri()
