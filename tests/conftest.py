"""Shared paths and fixtures for the test suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def one_blas_thread() -> Iterator[None]:
    """GP fits on one BLAS thread, as the sweeper runs them (sweeper.search.gp_batch.single_threaded_blas).

    The matrices of the unit tests are tens of rows: more BLAS threads only spin, and on a
    busy machine they made a fit 100x slower (a bounded fit 22 s instead of 0.2 s).
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


#: The modules that take longest in ``make test`` (over ~90 s of the two workers' time each, measured with
#: ``--durations``), longest first. They are collected first, and ``make test`` keeps that order
#: (``--no-loadscope-reorder``; pytest-xdist otherwise sends the modules with the most tests first, and the
#: long ones of one or two tests came last, alone on the machine, with a core idle). The many short tests
#: of the other modules fill the gaps of the long ones and the end of the run.
LONGEST_FIRST = tuple(f"integration/{name}" for name in (
    "test_checkpoints", "test_experiments", "test_cluster", "test_tracking_outage", "test_user_apps",
    "test_documented_commands", "test_svm_maps", "test_cluster_readme"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    # A stable sort: the other modules keep their order.
    items.sort(key=lambda item: rank.get(f"{item.path.parent.name}/{item.path.stem}", len(rank)))
