"""ray.init through Ray Client is tried again when the head's per-driver server dies as it starts.

The failures are Ray 2.60's own messages, recorded from CI and test runs: a Ray Client server that
dies on start cannot be made to on demand, so ``ray.init`` here is a stand-in that raises them.
"""

from __future__ import annotations

from typing import Any

import pytest

from sweeper.run import ray_connect

ZOMBIE = ("Initialization failure from server:\nTraceback (most recent call last):\n  File \".../ray/util/client/"
          "server/proxier.py\", line 765, in Datapath\n    if not self.proxy_manager.start_specific_server(\n"
          "psutil.ZombieProcess: PID still exists but it's a zombie (pid=26259)")
EPOLL = "ray client connection timeout: Starting Ray client server failed. See ray_client_server_23000.err"


class FakeRay:
    """``ray.init`` raising the given errors in turn, then connecting."""

    def __init__(self, *errors: str) -> None:
        self.errors = list(errors)
        self.inits = self.shutdowns = 0

    def init(self, **kwargs: Any) -> None:
        self.inits += 1
        if self.errors:
            raise ConnectionError(self.errors.pop(0))

    def shutdown(self) -> None:
        self.shutdowns += 1


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_connect.time, "sleep", lambda s: None)


@pytest.mark.parametrize("message", [ZOMBIE, EPOLL])
def test_a_client_server_that_died_as_it_started_is_started_again(message: str) -> None:
    ray = FakeRay(message, message)
    ray_connect.init_ray(ray, {"address": "ray://head:10001"}, {}, client=True)
    assert (ray.inits, ray.shutdowns) == (3, 2)


def test_it_gives_up_after_its_attempts_and_other_failures_are_not_retried() -> None:
    ray = FakeRay(*[ZOMBIE] * ray_connect.CLIENT_START_ATTEMPTS)
    with pytest.raises(ConnectionError, match="zombie"):
        ray_connect.init_ray(ray, {"address": "ray://head:10001"}, {}, client=True)
    assert ray.inits == ray_connect.CLIENT_START_ATTEMPTS
    for message, client in (("Connection refused", True), (ZOMBIE, False)):
        ray = FakeRay(message)
        with pytest.raises(ConnectionError):
            ray_connect.init_ray(ray, {"address": "10.0.0.1:6379"}, {}, client=client)
        assert ray.inits == 1
