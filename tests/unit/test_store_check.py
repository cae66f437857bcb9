"""The tracking store is checked before a sweep starts (sweeper.record.store_check, issue 31).

Real sockets and files, no mocks: a port with nothing listening, a local HTTP server that is
not MLflow, one that answers like MLflow (JSON), one that wants credentials, one whose store
fails, a TCP port that closes every connection (for PostgreSQL), and SQLite paths that cannot
take a database. The tests run as root, where file modes stop nothing: an unwritable folder
is /proc (no file can be created there) and a path below a regular file.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sweeper.record.store_check import PROBE_PATH, store_problem


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_server(status: int, body: str, content_type: str) -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server answering every GET with ``status`` and ``body``; yields its URL and the paths asked."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's name
            asked.append(self.path)
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def hanging_up_port() -> Iterator[int]:
    """A TCP port that accepts each connection and closes it at once (no database behind it)."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                listener.accept()[0].close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join()
        listener.close()


# ---------------------------------------------------------------------- http(s)
def test_a_port_with_nothing_listening_is_named_with_the_command_that_starts_a_server() -> None:
    port = closed_port()
    started = time.monotonic()
    problem = store_problem(f"http://127.0.0.1:{port}")
    assert time.monotonic() - started < 3
    assert problem is not None and problem.startswith("no server answers there (connection refused). Start it")
    assert f"mlflow server --backend-store-uri sqlite:///mlruns.db --host 127.0.0.1 --port {port}" in problem
    assert "mlflow.tracking_uri=sqlite:///mlruns.db" in problem


def test_an_unknown_host_is_named() -> None:
    problem = store_problem("http://no-such-host.invalid:5000")
    assert problem is not None and problem.startswith("no server answers there (host name not found")
    assert "Start it on no-such-host.invalid (e.g. MLFLOW_PORT=5000 cluster/mlflow/serve.sh" in problem


def test_a_web_server_that_is_not_mlflow_is_refused() -> None:
    with http_server(404, "<html><body>Not Found</body></html>", "text/html") as (url, asked):
        problem = store_problem(url)
    assert asked == [PROBE_PATH]
    assert problem is not None and problem.startswith("something answers there, but not an MLflow tracking server")
    assert "HTTP 404, text/html" in problem and "Check the host, the port and the path" in problem


def test_a_page_that_answers_every_path_is_not_mlflow_either() -> None:
    with http_server(200, "<!doctype html><title>app</title>", "text/html") as (url, _):
        problem = store_problem(url)
    assert problem is not None and "not an MLflow tracking server" in problem and "HTTP 200, text/html" in problem


def test_an_mlflow_answer_passes_and_a_trailing_slash_or_path_prefix_is_kept() -> None:
    with http_server(200, json.dumps({"experiments": [{"experiment_id": "0"}]}), "application/json") as (url, asked):
        assert store_problem(url) is None
        assert store_problem(url + "/") is None
        assert store_problem(url + "/mlflow") is None
    assert asked == [PROBE_PATH, PROBE_PATH, "/mlflow" + PROBE_PATH]


def test_a_server_that_wants_credentials_answers() -> None:
    with http_server(401, "You are not authenticated.", "text/plain") as (url, _):
        assert store_problem(url) is None  # MLflow's client sends the credentials; the server is there


def test_a_server_whose_store_fails_says_so() -> None:
    body = json.dumps({"error_code": "INTERNAL_ERROR", "message": "database is locked"})
    with http_server(500, body, "application/json") as (url, _):
        problem = store_problem(url)
    assert problem == ("the server answers with HTTP 500 (database is locked): its store is failing. "
                       "Check the tracking server's log and its --backend-store-uri")


def test_a_server_that_does_not_answer_in_time_is_given_up() -> None:
    # A listener that never accepts: the TCP handshake completes (the backlog), no HTTP answer ever comes.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        started = time.monotonic()
        problem = store_problem(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=0.2)
        elapsed = time.monotonic() - started
    assert problem is not None and problem.startswith("no server answered there within 0.2 s. Start it")
    assert elapsed < 3


# ---------------------------------------------------------------------- sqlite
def test_a_new_database_in_a_writable_folder_passes_and_nothing_is_created(tmp_path: Path) -> None:
    assert store_problem(f"sqlite:///{tmp_path / 'mlruns.db'}") is None
    assert list(tmp_path.iterdir()) == []  # the database is not created, the write probe is gone


def test_an_existing_database_and_an_empty_file_pass(tmp_path: Path) -> None:
    with contextlib.closing(sqlite3.connect(tmp_path / "mlruns.db")) as con:
        con.execute("CREATE TABLE t (x)")
        con.commit()
    (tmp_path / "empty.db").touch()
    assert store_problem(f"sqlite:///{tmp_path / 'mlruns.db'}") is None
    assert store_problem(f"sqlite:///{tmp_path / 'empty.db'}") is None


def test_a_relative_path_is_read_from_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert store_problem("sqlite:///mlruns.db") is None
    assert store_problem("sqlite:///missing/mlruns.db") == (
        f"the folder {tmp_path / 'missing'} does not exist: create it (mkdir -p {tmp_path / 'missing'}), "
        f"or give a file in an existing one")


@pytest.mark.parametrize("uri", ["sqlite:///:memory:", "sqlite://", "sqlite:///file:mem?mode=memory&uri=true"])
def test_in_memory_databases_are_not_checked(uri: str) -> None:
    assert store_problem(uri) is None


def test_a_folder_where_no_file_can_be_created_is_refused() -> None:
    problem = store_problem("sqlite:////proc/mlruns.db")  # even root cannot create a file in /proc
    assert problem is not None and problem.startswith("no file can be created in /proc (")
    assert "SQLite creates its journal beside the database" in problem and "choose a folder you can write" in problem


def test_a_path_below_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("not a folder")
    problem = store_problem(f"sqlite:///{tmp_path / 'file.txt' / 'mlruns.db'}")
    assert problem == (f"{tmp_path / 'file.txt'} is a file, not a folder: give a path such as "
                       f"sqlite:///{tmp_path / 'mlruns.db'}")


def test_a_file_that_is_not_sqlite_or_a_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    problem = store_problem(f"sqlite:///{tmp_path / 'notes.txt'}")
    assert problem is not None and problem.startswith(f"{tmp_path / 'notes.txt'} is not a SQLite database")
    assert store_problem(f"sqlite:///{tmp_path}") == (
        f"{tmp_path} is a folder, not a database file: give a file in it, e.g. sqlite:///{tmp_path / 'mlruns.db'}")
    assert (tmp_path / "notes.txt").read_text() == "hello"  # opened for writing, never written


# ---------------------------------------------------------------------- database servers
def test_a_postgresql_port_with_nothing_listening_is_refused_fast() -> None:
    port = closed_port()
    started = time.monotonic()
    problem = store_problem(f"postgresql+psycopg://mlflow:hunter2@127.0.0.1:{port}/mlflow")
    assert time.monotonic() - started < 3
    assert problem == (f"nothing accepts connections at 127.0.0.1:{port} (connection refused). Start the postgresql "
                       f"server, or check the host and port in the URI")


def test_a_port_that_does_not_speak_postgresql_fails_the_connection() -> None:
    pytest.importorskip("psycopg")
    with hanging_up_port() as port:
        problem = store_problem(f"postgresql+psycopg://mlflow:hunter2@127.0.0.1:{port}/mlflow")
    assert problem is not None and problem.startswith("connecting to the postgresql server failed (")
    assert "Check that it runs, the user, the password and the database name" in problem
    assert "hunter2" not in problem


def test_a_missing_driver_is_named_with_its_package() -> None:
    if importlib.util.find_spec("MySQLdb") is not None:
        pytest.skip("mysqlclient is installed here")
    with hanging_up_port() as port:
        problem = store_problem(f"mysql://mlflow:hunter2@127.0.0.1:{port}/mlflow")
    assert problem == ("the database driver MySQLdb that SQLAlchemy uses for mysql:// is not installed: "
                       "`pip install mysqlclient`, or name an installed driver in the URI (e.g. mysql+pymysql://)")


def test_a_port_that_is_not_a_number_is_named() -> None:
    assert store_problem("http://127.0.0.1:50OO") == (
        "its port is not a number from 1 to 65535: give host:PORT, e.g. http://127.0.0.1:5000")
    assert store_problem("postgresql://mlflow@127.0.0.1:99999/mlflow") == (
        "its port is not a number from 1 to 65535: give host:PORT, e.g. postgresql://127.0.0.1:5432")


@pytest.mark.parametrize("uri", ["databricks", "file:///tmp/mlruns", "mlruns"])
def test_other_stores_are_left_to_mlflow(uri: str) -> None:
    assert store_problem(uri) is None
