"""Real services for the cluster tests: PostgreSQL, an ``mlflow server``, a multi-node Ray.

Each is a context manager that starts the service as this machine's own processes on
loopback ports, waits until it answers, and always stops it on exit, test failure or not:
every service runs in a process group of its own, which is terminated and then killed.
Nothing here is a stand-in: the PostgreSQL server is Debian's, the MLflow server is started
by ``cluster/mlflow/serve.sh`` exactly as docs/clusters.md says, and the Ray nodes are
``ray start`` processes.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import REPO

SERVE_SCRIPT = REPO / "cluster" / "mlflow" / "serve.sh"
VENV_BIN = Path(sys.executable).parent
INSTALL_HINT = "run `make test` (it installs PostgreSQL and Chromium with apt-get when they are missing)"


def free_port() -> int:
    """A TCP port nobody listens on now, on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check, what: str, timeout: float, proc: subprocess.Popen | None = None, log: Path | None = None):
    """Poll ``check()`` until it returns a truthy value; fail naming ``what`` (and the log tail)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with {proc.returncode}\n{_tail(log)}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not ready after {timeout:.0f} s\n{_tail(log)}")
        time.sleep(0.25)


def _tail(log: Path | None, lines: int = 40) -> str:
    if log is None or not log.exists():
        return ""
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


@contextlib.contextmanager
def process_group(cmd: list[str], log: Path, *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
                  stop_signal: int = signal.SIGTERM, user: str | None = None) -> Iterator[subprocess.Popen]:
    """Run ``cmd`` in a new session (its own process group); on exit stop the whole group."""
    if user is not None:
        cmd = ["runuser", "-u", user, "--", *cmd]
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=dict(env or os.environ),
                                cwd=cwd, start_new_session=True)
    try:
        yield proc
    finally:
        stop_group(proc, stop_signal)


#: A test's Ray node is thrown away with its temp dir: its process group is SIGKILLed at once.
#: ``ray start --block`` sat out SIGTERM, and often SIGINT, for stop_group's whole grace (20 s a
#: node, measured at the end of the suite's clusters).
RAY_STOP_SIGNAL = signal.SIGKILL


def stop_group(proc: subprocess.Popen, first: int = signal.SIGTERM, grace: float = 20.0) -> None:
    """Signal the process group of ``proc``, wait up to ``grace`` seconds, then SIGKILL what is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, first)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


# ---------------------------------------------------------------- PostgreSQL
@dataclass
class Postgres:
    """A running PostgreSQL server with one database and a password-authenticated user."""

    port: int
    user: str
    password: str
    bin_dir: Path
    pid: int  # the server's process, leader of its process group

    def url(self, database: str) -> str:
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create database ``name``; return its URL."""
        subprocess.run([str(self.bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user,
                        name], check=True, env={**os.environ, "PGPASSWORD": self.password}, capture_output=True)
        return self.url(name)

    def query(self, database: str, sql: str) -> list[tuple]:
        import psycopg

        with psycopg.connect(self.url(database)) as conn:
            return list(conn.execute(sql).fetchall())


def postgres_bin_dir() -> Path:
    """The folder of Debian's (or any) PostgreSQL server binaries."""
    on_path = shutil.which("initdb")
    if on_path:
        return Path(os.path.realpath(on_path)).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise RuntimeError(f"PostgreSQL's server (initdb, postgres) is not installed: {INSTALL_HINT}, "
                           f"or `apt-get install postgresql`")
    return Path(found[-1]).parent


@contextlib.contextmanager
def postgres_server() -> Iterator[Postgres]:
    """Start a PostgreSQL server on a free loopback port; stop it and remove its data at the end.

    Its data lives in a new folder of the system's temp dir, which the ``postgres`` user can
    reach (as root, the server runs as that user: it refuses to run as root).
    """
    bin_dir = postgres_bin_dir()
    user = "postgres" if os.geteuid() == 0 else None
    root = Path(tempfile.mkdtemp(prefix="sweeper-postgres-"))
    try:
        with _postgres(root, bin_dir, user) as server:
            yield server
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def _postgres(root: Path, bin_dir: Path, user: str | None) -> Iterator[Postgres]:
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    password = secrets.token_hex(12)
    pwfile = root / "pwfile"
    pwfile.write_text(password + "\n")
    if user:
        shutil.chown(root, user)
        for p in (sockets, pwfile):
            shutil.chown(p, user)
    log = root / "postgres.log"
    initdb = [str(bin_dir / "initdb"), "-D", str(data), "-U", "sweeper", f"--pwfile={pwfile}",
              "--auth-host=scram-sha-256", "--auth-local=scram-sha-256", "--encoding=UTF8", "--locale=C"]
    done = subprocess.run(["runuser", "-u", user, "--", *initdb] if user else initdb, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"initdb failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    port = free_port()
    cmd = [str(bin_dir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(sockets),
           "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]
    # SIGINT is PostgreSQL's fast shutdown: it ends the sessions and stops cleanly.
    with process_group(cmd, log, user=user, stop_signal=signal.SIGINT) as proc:
        ready = [str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)]
        wait_until(lambda: subprocess.run(ready, capture_output=True).returncode == 0, "PostgreSQL", 60, proc, log)
        yield Postgres(port=port, user="sweeper", password=password, bin_dir=bin_dir, pid=proc.pid)


# ---------------------------------------------------------------- MLflow tracking server
@dataclass
class MLflowServer:
    """A running ``mlflow server`` started by cluster/mlflow/serve.sh."""

    url: str
    artifacts: Path
    proc: subprocess.Popen
    log: Path
    env: dict[str, str] = field(default_factory=dict)


def http_status(url: str, headers: Mapping[str, str] | None = None) -> int | None:
    """The HTTP status of GET ``url``, or None when nothing answers."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=dict(headers or {})), timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError):
        return None


@contextlib.contextmanager
def mlflow_server(root: Path, backend_store_uri: str, port: int | None = None, *, command: str | None = None,
                  **settings: str) -> Iterator[MLflowServer]:
    """Run cluster/mlflow/serve.sh with ``backend_store_uri``; ``settings`` are its other env vars.

    ``port``: the port to serve on (default: a free one); give the same one to restart a server.
    ``command``: a documented command line that runs ``cluster/mlflow/serve.sh`` (with its own
    settings before it and options after it), run with bash instead of the bare script.
    """
    root.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    artifacts = root / "artifacts"
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "MLFLOW_BACKEND_STORE_URI": backend_store_uri, "MLFLOW_ARTIFACTS_DESTINATION": str(artifacts),
           "MLFLOW_PORT": str(port), "MLFLOW_WORKERS": "1", **settings}
    log = root / "mlflow-server.log"
    cmd = ["bash", "-c", command.replace("cluster/mlflow/serve.sh", str(SERVE_SCRIPT))] if command else \
        ["bash", str(SERVE_SCRIPT)]
    with process_group(cmd, log, env=env, cwd=root) as proc:
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: http_status(f"{url}/health") == 200, "mlflow server", 180, proc, log)
        yield MLflowServer(url=url, artifacts=artifacts, proc=proc, log=log, env=settings)


# ---------------------------------------------------------------- multi-node Ray
@dataclass
class RayNode:
    name: str
    resources: dict[str, float]
    proc: subprocess.Popen


@dataclass
class RayCluster:
    """A Ray head and worker nodes, each a ``ray start --block`` process group of this machine.

    The cluster uses Ray's token authentication (as Ray >= 2.5x does by default once a token
    exists); a driver joins it with :attr:`client_env` in its environment.
    """

    address: str
    nodes: list[RayNode]
    client_env: dict[str, str]
    client_address: str  # ray://127.0.0.1:PORT, the head's Ray Client server

    def node_ids(self) -> dict[str, str]:
        """Ray node id -> our node name, read from the cluster (each node's custom resource names it)."""
        code = (
            f"import json, ray; ray.init(address={self.address!r}, logging_level='ERROR');"
            "print(json.dumps({n['NodeID']: sorted(n['Resources']) for n in ray.nodes() if n['Alive']}))"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             env={**os.environ, **self.client_env})
        if out.returncode != 0:
            raise RuntimeError(f"cannot read the nodes of the Ray cluster at {self.address}:\n{out.stderr[-3000:]}")
        resources = json.loads(out.stdout.strip().splitlines()[-1])
        names = {n.name for n in self.nodes}
        return {node_id: next(r for r in res if r in names) for node_id, res in resources.items()}


def _ray(*args: str) -> list[str]:
    return [str(VENV_BIN / "ray"), *args]


@contextlib.contextmanager
def ray_cluster(nodes: Mapping[str, Mapping[str, float]], cpus_per_node: int = 1,
                log_monitor: bool = True) -> Iterator[RayCluster]:
    """Start one Ray head plus a worker per further entry of ``nodes`` (name -> custom resources).

    ``log_monitor=False``: the nodes run no log monitor, which forwards the workers' output to drivers
    that ask for it (``ray.log_to_driver=true``, Ray Client) and polls every log file of the node to do
    so, about 2 % of a core on a node that has run a few hundred workers.

    Each node also gets a custom resource named after it (``{name: 1}``), so a test can tell
    from Ray which node is which. Every node's process group is stopped at the end.

    Each node keeps its sessions in a temp dir of its own, not /tmp/ray, so the cluster never
    becomes the machine's "current cluster" (what ``ray.address=auto`` joins, and what ``ray
    start`` on any node writes): tests that start a cluster of their own the way the docs say, and
    join it by ``auto``, run beside these.
    """
    port, client_port = free_port(), free_port()
    address = f"127.0.0.1:{port}"
    logs = Path(tempfile.mkdtemp(prefix="ray-cluster-logs-"))
    client_env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    # RAY_prestart_worker_first_driver=0: a node started this way otherwise starts a Python worker per CPU when
    # the first driver joins, which no sweep's trial uses (each job's actors get workers of their own): on the
    # shared 2-CPU head, two workers idle from the first sweep to the session's end, ~3 CPU-seconds each; without
    # them three sweeps on it took as long (7.0-7.8 s against 7.3-8.7 s). Measured 2026-12-07.
    env = {**os.environ, **client_env, "RAY_USAGE_STATS_ENABLED": "0", "RAY_prestart_worker_first_driver": "0",
           "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    started: list[RayNode] = []
    temp_dirs: list[str] = []
    try:
        with contextlib.ExitStack() as stack:
            for i, (name, resources) in enumerate(nodes.items()):
                res = json.dumps({name: 1, **resources})
                # Short: Ray's socket paths (AF_UNIX, at most 107 bytes) live under it.
                temp_dirs.append(tempfile.mkdtemp(prefix="rs", dir="/tmp"))
                common = [f"--num-cpus={cpus_per_node}", "--num-gpus=0", f"--resources={res}", "--block",
                          "--disable-usage-stats", "--object-store-memory=100000000", f"--temp-dir={temp_dirs[-1]}",
                          f"--include-log-monitor={str(log_monitor).lower()}"]
                cmd = (_ray("start", "--head", f"--port={port}", f"--ray-client-server-port={client_port}",
                            "--include-dashboard=false", *common) if i == 0 else
                       _ray("start", f"--address={address}", *common))
                log = logs / f"{name}.log"
                proc = stack.enter_context(process_group(cmd, log, env=env, stop_signal=RAY_STOP_SIGNAL))
                started.append(RayNode(name, dict(resources), proc))
                if i == 0:
                    wait_until(lambda: _port_open(port), "Ray head", 120, proc, log)
            cluster = RayCluster(address, started, client_env, f"ray://127.0.0.1:{client_port}")
            wait_until(lambda: len(cluster.node_ids()) == len(nodes), f"{len(nodes)} Ray nodes", 120)
            yield cluster
    finally:
        # Each node's processes (GCS, raylet, workers) live in its `ray start` process group, which
        # the exit stack killed. No `ray stop`: it would end every Ray of the machine, not only ours.
        for folder in (logs, *temp_dirs):
            shutil.rmtree(folder, ignore_errors=True)


def group_alive(pgid: int) -> bool:
    """Whether a process of process group ``pgid`` runs now.

    Zombies do not count: a killed process whose parent died waits for PID 1 to reap it,
    which a container's init may never do; it holds no resources.
    """
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":  # fields: state, ppid, pgrp, ...
                return True
    return False


def group_gone(pgid: int, wait_s: float = 10.0) -> bool:
    """Whether process group ``pgid`` has no running process within ``wait_s`` seconds (polled)."""
    deadline = time.monotonic() + wait_s
    while group_alive(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.25)
    return True


def processes_mentioning(text: str) -> list[str]:
    """Command lines of running processes that contain ``text`` (read from /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if text in args:
                found.append(args)
    return found


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0
