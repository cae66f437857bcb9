"""Joining Ray: a local Ray or a cluster (GCS address, ``auto``, or Ray Client), with a fast
check that an address answers, retries where Ray Client's server fails to start, and errors
that say how to fix an address, a missing token or a driver outside the cluster.
"""

from __future__ import annotations

import copy
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sweeper.errors import SweeperConfigError
from sweeper.run.cluster import runtime_env

log = logging.getLogger(__name__)


#: The notice Ray logs when a local Ray it starts turns on token authentication by default.
TOKEN_NOTICE = "Token authentication is enabled for this Ray cluster"


class _DropTokenNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(TOKEN_NOTICE)


@contextmanager
def _quiet_token_notice(local: bool) -> Iterator[None]:
    """Leave out Ray's notice that the local Ray the sweep starts uses token authentication.

    It is the default, and the secure one: the sweep's own Ray, on this machine, needs nothing
    from the user, so a warning on every sweep ("Set RAY_AUTH_MODE=disabled to opt out") only
    invites turning it off. The mode itself is unchanged, and every other message passes.
    """
    if not local:
        yield
        return
    logger, notice = logging.getLogger("ray._private.authentication.authentication_token_setup"), _DropTokenNotice()
    logger.addFilter(notice)
    try:
        yield
    finally:
        logger.removeFilter(notice)


def start_ray(ray_cfg: dict[str, Any], code_dir: str | None, client: bool = False) -> tuple[bool, dict[str, Any]]:
    """Start a local Ray (address null) or connect to a cluster.

    Returns whether this call started it, and the runtime_env its workers get.
    """
    import ray

    if ray.is_initialized():
        return False, {}
    address = ray_cfg.get("address")
    try:
        env = runtime_env(ray_cfg, code_dir=code_dir, launch_dir=os.getcwd())
    except ValueError as exc:
        raise SweeperConfigError(str(exc)) from exc
    kwargs: dict[str, Any] = {
        # "local", not None: None would join a cluster named by RAY_ADDRESS or `ray start`.
        "address": address if address is not None else "local",
        "include_dashboard": False,
        "log_to_driver": bool(ray_cfg.get("log_to_driver")),
        "logging_level": logging.WARNING,
        "runtime_env": env,
    }
    if address is None:
        kwargs.update(num_cpus=ray_cfg.get("num_cpus"), num_gpus=ray_cfg.get("num_gpus"),
                      # Ray starts a worker per CPU for its first driver, ahead of its first tasks; the sweep's
                      # trials are actors with the sweep's runtime_env, which never run in them (each cost a
                      # Python process and ~0.4 CPU-seconds, for nothing).
                      _system_config={"prestart_worker_first_driver": False})
    try:
        with ray_processes_apart(address is None), _quiet_token_notice(address is None):
            init_ray(ray, kwargs, env, client)
    except ConnectionError as exc:
        if auth_refused(exc):
            raise SweeperConfigError(
                f"ray.address={address!r}: the cluster uses Ray's token authentication and refused this "
                f"driver. Run the sweep with RAY_AUTH_MODE=token and the cluster's token in RAY_AUTH_TOKEN "
                f"(or in ~/.ray/auth_token); see docs/clusters.md."
            ) from exc
        raise SweeperConfigError(
            f"ray.address={address!r}: cannot connect to a Ray cluster there ({exc}). Start one with "
            f"`ray start --head`, or use ray.address=null to run on a local Ray."
        ) from exc
    except RuntimeError as exc:
        if "node info" not in str(exc).lower():
            raise
        raise SweeperConfigError(
            f"ray.address={address!r}: this machine is not a node of that cluster, and a driver joining by "
            f"GCS address must run on one ({exc}). From outside the cluster use ray.address=ray://HEAD:10001 "
            f"(Ray Client) or `ray job submit`; see docs/clusters.md."
        ) from exc
    resources = ray.cluster_resources()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    log.info("Ray: %s, %d node(s), %g CPUs, %g GPUs%s", "local" if address is None else address, len(nodes),
             resources.get("CPU", 0), resources.get("GPU", 0),
             f", code from {env['working_dir']}" if "working_dir" in env else "")
    return True, env


def unreachable(address: str | None, timeout_s: float = 5.0) -> str | None:
    """Say so if nothing accepts TCP connections at a ``HOST:PORT`` or ``ray://HOST[:PORT]`` address.

    ``ray.init`` retries an unreachable GCS address for minutes; a TCP probe fails in at most
    ``timeout_s``. Ray replaces a loopback host by this node's IP, so both are tried for one.
    """
    import re
    import socket

    match = re.fullmatch(r"(ray://)?([^\s:/]+)(?::(\d+))?", address or "")
    if match is None or address in ("auto", "local") or (match.group(3) is None and not match.group(1)):
        return None
    client, host, port = bool(match.group(1)), match.group(2), int(match.group(3) or 10001)

    def probe(candidate: str) -> OSError | None:
        try:
            socket.create_connection((candidate, port), timeout=timeout_s).close()
        except OSError as exc:
            return exc
        return None

    error = probe(host)
    if error is not None and host in ("localhost", "127.0.0.1") and not client:
        from ray._private.services import resolve_ip_for_localhost

        node_ip = resolve_ip_for_localhost(host)
        if node_ip != host and probe(node_ip) is None:
            return None
    if error is None:
        return None
    serves = "Ray Client (`ray start --head` serves it on port 10001)" if client else "a Ray head's GCS"
    start = "ray start --head" if client else f"ray start --head --port={port}"
    return (f"ray.address={address!r} is unreachable: nothing accepts connections at {host}:{port} ({error}); "
            f"the address must be where {serves} listens. Start the cluster there (`{start}`), correct "
            f"the host and port, or try ray.address=null to run on a local Ray.")


#: Ray Client's per-driver server on the head sometimes dies as it starts; a new try gets a new one.
CLIENT_START_ATTEMPTS = 3
#: How Ray 2.60 says so: "Starting Ray client server failed" (a gRPC epoll error in the server's log), or
#: an "Initialization failure from server" whose traceback is the proxy's start_specific_server finding
#: the new server a zombie.
CLIENT_START_FAILURES = ("Starting Ray client server failed", "start_specific_server")


@contextmanager
def ray_processes_apart(local: bool) -> Iterator[None]:
    """Start a local Ray's processes (its GCS, raylet, and so its workers) in process groups of their own.

    A signal to the sweep's process group (``kill -TERM -PGID``, a service manager stopping the job)
    then reaches the driver, which stops the sweep in order (sweeper.run.preemption), and not Ray:
    Ray blocks SIGINT in its processes but not SIGTERM, which ended the GCS under the driver; the
    driver waited 60 s for it and left the sweep's run RUNNING. The processes still end with the
    driver: Ray binds them to it (``PR_SET_PDEATHSIG``) where the kernel can, and only there are
    they moved, as Ray itself does on Windows.

    What it patches: ``ray._private.services.ConsolePopen`` (a private class of the pinned Ray, the
    ``Popen`` Ray starts its processes with), replaced by a subclass for the duration of the local
    Ray's start. Why no public API suffices: ``ray.init`` has no setting for its processes' group.
    How breakage shows: tests/integration/test_interrupts.py (SIGTERM to the sweep's process group
    stops the sweep in order, the sweep's run is closed, and ``sweeper resume`` completes it).
    """
    from ray._private import services, utils

    if not local or not sys.platform.startswith("linux") or not utils.detect_fate_sharing_support():
        yield
        return
    original = services.ConsolePopen

    class Apart(original):  # type: ignore[misc,valid-type]  # a class held in a variable, Ray's own
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("process_group", 0)
            super().__init__(*args, **kwargs)

    services.ConsolePopen = Apart
    try:
        yield
    finally:
        services.ConsolePopen = original


def init_ray(ray: Any, kwargs: dict[str, Any], env: dict[str, Any], client: bool) -> None:
    """``ray.init``, retried when Ray Client's server on the head fails to start for this driver."""
    for attempt in range(1, CLIENT_START_ATTEMPTS + 1):
        try:
            ray.init(**{**kwargs, "runtime_env": copy.deepcopy(env)})  # Ray rewrites it (working_dir -> gcs://)
            return
        except ConnectionError as exc:
            if not client or not any(sign in str(exc) for sign in CLIENT_START_FAILURES) \
                    or attempt == CLIENT_START_ATTEMPTS:
                raise
            log.warning("Ray Client's server on the head failed to start (attempt %d of %d); trying again",
                        attempt, CLIENT_START_ATTEMPTS)
            ray.shutdown()  # drop what the failed attempt left connected
            time.sleep(2.0 * attempt)


def auth_refused(exc: BaseException) -> bool:
    """Whether a failed ``ray.init`` was refused for want of the cluster's auth token."""
    seen: BaseException | None = exc
    while seen is not None:
        if "InvalidAuthToken" in str(seen) or type(seen).__name__ == "AuthenticationError":
            return True
        seen = seen.__cause__ or seen.__context__
    return False
