"""The service fixtures leave no process behind, also when the test inside them fails."""

from __future__ import annotations

import pytest

from tests.integration.services import (
    group_alive,
    group_gone,
    mlflow_server,
    postgres_server,
    processes_mentioning,
    ray_cluster,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


class Boom(Exception):
    pass


def test_postgres_and_mlflow_server_stop_when_the_test_raises(tmp_path) -> None:
    groups: list[int] = []
    with pytest.raises(Boom), postgres_server() as pg, mlflow_server(tmp_path, pg.create_database("m")) as server:
        groups += [pg.pid, server.proc.pid]
        assert group_alive(pg.pid) and group_alive(server.proc.pid)
        raise Boom
    assert all(group_gone(g) for g in groups)
    assert not processes_mentioning(f"--port {server.url.rsplit(':', 1)[1]}")


def test_ray_nodes_stop_when_the_test_raises() -> None:
    with pytest.raises(Boom), ray_cluster({"only_node": {}}) as cluster:
        port = cluster.address.rsplit(":", 1)[1]
        assert processes_mentioning(f":{port}")  # the raylet names the GCS address it joined
        leaders = [node.proc.pid for node in cluster.nodes]
        raise Boom
    assert all(group_gone(g) for g in leaders)
    assert not processes_mentioning(f":{port}")
