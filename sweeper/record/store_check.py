"""The tracking store checked before a sweep starts: something answers there, and it takes writes.

A sweep whose store is down or cannot be written would start Ray, then fail at its first
write with pages of tracebacks. :func:`store_problem` finds that in about a second, before
anything starts, and says what to do. It is cheap and leaves the store as it was:

- ``http(s)://``: one ``GET <uri>/api/2.0/mlflow/experiments/search?max_results=1``, through
  ``requests`` as MLflow's own client (so its proxies, CA bundle and TLS settings apply), with a
  :data:`TIMEOUT_S` timeout. Refused, unanswered, not HTTP, not MLflow's API (a 404, an HTML
  page) or a server error (5xx) is a problem. A server that asks for credentials (401/403)
  answers: the credentials are MLflow's business.
- ``sqlite:///path``: the folder exists and a file can be created in it (SQLite creates its
  ``-wal``/``-shm``/journal files beside the database), and the file, if it exists, is a
  SQLite database (or empty) that can be opened for writing. Neither MLflow nor SQLite opens
  it: the database is not created here. In-memory databases are not checked.
- PostgreSQL, MySQL, SQL Server (``postgresql://``, ``mysql+pymysql://``, ...): a TCP connection
  to the host and port within :data:`TIMEOUT_S`, then a real connection through SQLAlchemy with
  a connect timeout where the driver has one (which also finds a missing driver, a wrong
  password or a database that does not exist: MLflow creates neither).

Other URIs (a local folder, ``databricks``) are not checked. Nothing here imports MLflow.
"""

from __future__ import annotations

import math
import os
import socket
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

#: Seconds one check waits for a server: to connect, then (HTTP) to answer.
TIMEOUT_S = 3.0

#: The REST call an MLflow tracking server answers with JSON, cheap on any store.
PROBE_PATH = "/api/2.0/mlflow/experiments/search?max_results=1"

_DATABASES = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306, "mssql": 1433}
#: The connect-timeout argument of each SQLAlchemy driver that has one.
_TIMEOUT_ARGS = {"psycopg2": "connect_timeout", "psycopg": "connect_timeout", "pg8000": "timeout",
                 "mysqldb": "connect_timeout", "pymysql": "connect_timeout", "mysqlconnector": "connection_timeout",
                 "pyodbc": "timeout", "pymssql": "login_timeout"}
_EXAMPLE_DRIVERS = {"postgresql": "postgresql+psycopg://", "mysql": "mysql+pymysql://", "mariadb": "mariadb+pymysql://",
                    "mssql": "mssql+pyodbc://"}
#: pip packages of the drivers whose module name differs.
_DRIVER_PACKAGES = {"psycopg2": "psycopg2-binary", "psycopg": "psycopg[binary]", "MySQLdb": "mysqlclient"}


def store_problem(uri: str, timeout_s: float = TIMEOUT_S) -> str | None:
    """Say why the tracking store at ``uri`` cannot take a sweep's records, and the fix; None when it can.

    The URI must have passed :func:`sweeper.record.tracking_uri.tracking_uri_problem`. The answer
    is a clause such as ``no server answers there (connection refused). Start it ...``; it may
    hold the URI as given, so redact it before showing it (``sweeper.record.redaction.redact_text``).
    """
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower()
    backend = scheme.split("+", 1)[0]
    try:
        parsed.port  # noqa: B018 - parses, or says why not
    except ValueError:
        return (f"its port is not a number from 1 to 65535: give host:PORT, e.g. "
                f"{scheme}://127.0.0.1:{_DATABASES.get(backend, 5000)}")
    if scheme in ("http", "https"):
        return _server_problem(uri, timeout_s)
    if backend == "sqlite":
        return _sqlite_problem(uri)
    if backend in _DATABASES:
        return _database_problem(uri, backend, timeout_s)
    return None


# ---------------------------------------------------------------------- a tracking server
def _server_problem(uri: str, timeout_s: float) -> str | None:
    import requests

    parsed = urlparse(uri)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    if parsed.hostname in ("127.0.0.1", "localhost", "::1"):
        start = ("Start it (e.g. `mlflow server --backend-store-uri sqlite:///mlruns.db --host 127.0.0.1 "
                 f"--port {port}`)")
    else:
        start = (f"Start it on {parsed.hostname} (e.g. MLFLOW_PORT={port} cluster/mlflow/serve.sh; see "
                 f"docs/clusters.md), or check the host and port")
    start += ", or record into a local file with mlflow.tracking_uri=sqlite:///mlruns.db"
    try:
        response = requests.get(uri.rstrip("/") + PROBE_PATH, timeout=timeout_s, **_tls_options())
    except requests.exceptions.SSLError as exc:
        return (f"the TLS handshake with the server failed ({_reason(exc)}). Point MLFLOW_TRACKING_SERVER_CERT_PATH "
                f"at its CA certificate (or set MLFLOW_TRACKING_INSECURE_TLS=true), or check the URI")
    except requests.exceptions.Timeout:
        return f"no server answered there within {timeout_s:g} s. {start}"
    except requests.exceptions.RequestException as exc:  # refused, unknown host, not HTTP
        return f"no server answers there ({_reason(exc)}). {start}"
    status = response.status_code
    if status in (401, 403):
        return None  # a server that wants credentials: MLflow sends them (MLFLOW_TRACKING_USERNAME, ...)
    if status >= 500:
        return (f"the server answers with HTTP {status} ({_body(response)}): its store is failing. "
                f"Check the tracking server's log and its --backend-store-uri")
    try:
        body = response.json() if status == 200 else None
    except ValueError:
        body = None
    if not isinstance(body, dict):
        kind = response.headers.get("content-type", "no content type").split(";")[0]
        return (f"something answers there, but not an MLflow tracking server (GET {PROBE_PATH} gave HTTP "
                f"{status}, {kind}). Check the host, the port and the path (a server started with "
                f"--static-prefix /p is at http://host:port/p)")
    return None


def _tls_options() -> dict[str, Any]:
    """The TLS settings MLflow's client takes from its environment variables."""
    options: dict[str, Any] = {}
    if os.environ.get("MLFLOW_TRACKING_INSECURE_TLS", "").lower() in ("true", "1"):
        options["verify"] = False
    elif os.environ.get("MLFLOW_TRACKING_SERVER_CERT_PATH"):
        options["verify"] = os.environ["MLFLOW_TRACKING_SERVER_CERT_PATH"]
    if os.environ.get("MLFLOW_TRACKING_CLIENT_CERT_PATH"):
        options["cert"] = os.environ["MLFLOW_TRACKING_CLIENT_CERT_PATH"]
    return options


def _reason(exc: BaseException) -> str:
    """The innermost cause of a connection error, in a few words (``connection refused``)."""
    seen: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in seen:
        seen.append(cause)
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, socket.gaierror):
            return f"host name not found: {cause.strerror}"
        nested = getattr(cause, "reason", None)
        cause = nested if isinstance(nested, BaseException) else (
            cause.args[0] if cause.args and isinstance(cause.args[0], BaseException)
            else cause.__cause__ or cause.__context__)
    innermost = seen[-1]
    return str(innermost).splitlines()[0][:200] if str(innermost) else type(innermost).__name__


def _body(response: Any) -> str:
    """An error answer's message: MLflow's JSON ``message``, or the first line of the text."""
    try:
        message = response.json().get("message")
    except (ValueError, AttributeError):
        message = None
    text = str(message or response.text or response.reason or "no message").strip()
    return text.splitlines()[0][:200] if text else "no message"


# ---------------------------------------------------------------------- a SQLite file
def _sqlite_problem(uri: str) -> str | None:
    rest = uri.split("://", 1)[1].split("?", 1)[0]
    path = rest[1:] if rest.startswith("/") else ""
    if path in ("", ":memory:") or path.startswith("file:"):
        return None  # in memory, or a SQLite URI filename: nothing on disk to check
    file = Path(path).expanduser().absolute()
    folder = file.parent
    if not folder.exists():
        return f"the folder {folder} does not exist: create it (mkdir -p {folder}), or give a file in an existing one"
    if not folder.is_dir():
        return f"{folder} is a file, not a folder: give a path such as sqlite:///{folder.parent / 'mlruns.db'}"
    if file.exists():
        if file.is_dir():
            return f"{file} is a folder, not a database file: give a file in it, e.g. sqlite:///{file / 'mlruns.db'}"
        # Never a descriptor of our own on the file: closing it would drop every SQLite lock this
        # process holds on it (docs/decisions/0001-sqlite-readers.md). SQLite opens and closes it safely.
        if not os.access(file, os.W_OK):
            return f"{file} cannot be opened for writing: make it writable, or give another file"
        try:
            with closing(sqlite3.connect(f"{file.as_uri()}?mode=ro", uri=True)) as connection:
                connection.execute("PRAGMA schema_version").fetchone()
        except sqlite3.DatabaseError as exc:
            return (f"{file} is not a SQLite database ({exc}): give a new file or an MLflow store's, e.g. "
                    f"sqlite:///{folder / 'mlruns.db'}")
    try:  # SQLite creates its journal (-wal, -shm) beside the database, on every write
        handle, probe = tempfile.mkstemp(dir=folder, prefix=".sweeper-write-check-")
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        return (f"no file can be created in {folder} ({exc.strerror}), and SQLite creates its journal beside the "
                f"database: choose a folder you can write, e.g. sqlite:///{Path.home() / 'mlruns.db'}")
    return None


# ---------------------------------------------------------------------- a database server
def _database_problem(uri: str, backend: str, timeout_s: float) -> str | None:
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    parsed = urlparse(uri)
    host, port = parsed.hostname, parsed.port or _DATABASES[backend]
    if host:  # else a Unix socket (?host=/run/postgresql): the driver's connection says
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
        except OSError as exc:
            reason = _reason(exc) if not isinstance(exc, TimeoutError) else f"no answer within {timeout_s:g} s"
            return (f"nothing accepts connections at {host}:{port} ({reason}). Start the {backend} server, or check "
                    f"the host and port in the URI")
    try:
        url = sqlalchemy.engine.make_url(uri)
        driver = url.get_driver_name()
        connect_args: dict[str, Any] = {}
        if driver in _TIMEOUT_ARGS:
            connect_args[_TIMEOUT_ARGS[driver]] = max(1, math.ceil(timeout_s))
        if backend in ("mysql", "mariadb"):  # TLS files from the environment, as MLflow's engine takes them
            for key in ("ssl_ca", "ssl_cert", "ssl_key"):
                if os.environ.get(f"MLFLOW_MYSQL_{key.upper()}"):
                    connect_args[key] = os.environ[f"MLFLOW_MYSQL_{key.upper()}"]
        engine = sqlalchemy.create_engine(url, connect_args=connect_args, poolclass=NullPool)
    except ModuleNotFoundError as exc:
        module = (exc.name or "").split(".")[0]
        package = _DRIVER_PACKAGES.get(module, module or "the driver")
        return (f"the database driver {module or exc} that SQLAlchemy uses for {parsed.scheme}:// is not installed: "
                f"`pip install {package}`, or name an installed driver in the URI (e.g. {_EXAMPLE_DRIVERS[backend]})")
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy's ArgumentError, NoSuchModuleError, ...
        return f"SQLAlchemy cannot use it ({str(exc).splitlines()[0]}): check the URI"
    try:
        with engine.connect():
            pass
    except Exception as exc:  # noqa: BLE001 - each driver raises its own errors
        cause = getattr(exc, "orig", None) or exc
        reason = " ".join(str(cause).split())[:300] or type(cause).__name__
        return (f"connecting to the {backend} server failed ({reason}). Check that it runs, the user, the "
                f"password and the database name (MLflow does not create the database)")
    finally:
        engine.dispose()
    return None
