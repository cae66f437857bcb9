"""Shared paths and fixtures for the test suite."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# One OpenMP thread in every process the tests start, unless the caller chose: on the two cores of make test,
# beside the other pytest worker, PyTorch's second intra-op thread only spins. Ray workers have one already
# (Ray sets OMP_NUM_THREADS to a trial's CPUs); this is for what runs outside Ray (the documented train.py
# runs, gpu_check's workers, the unit tests). The sweeps still record the variable among their conditions.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="module")
def one_blas_thread() -> Iterator[None]:
    """GP fits on one BLAS thread, as the sweeper runs them (sweeper.blas.one_blas_thread).

    The matrices of the unit tests are tens of rows: more BLAS threads only spin, and on a
    busy machine they made a fit 100x slower (a bounded fit 22 s instead of 0.2 s).
    """
    from sweeper.blas import one_blas_thread as limit

    with limit():
        yield


#: The modules that take longest in ``make test`` (over ~90 s of the two workers' time each, measured with
#: ``--durations``), longest first. They are collected first, and ``make test`` keeps that order
#: (``--no-loadscope-reorder``; pytest-xdist otherwise sends the modules with the most tests first, and the
#: long ones of one or two tests came last, alone on the machine, with a core idle). The many short tests
#: of the other modules fill the gaps of the long ones and the end of the run.
LONGEST_FIRST = tuple(f"integration/{name}" for name in (
    "test_checkpoints", "test_experiments", "test_cluster", "test_tracking_outage", "test_user_apps",
    "test_documented_commands", "test_svm_maps", "test_cluster_readme"))


#: Modules that spend much of their time waiting (trials sleeping through a kill, servers and clusters starting
#: and stopping), each followed by a unit module that computes for about as long: after the other modules, so
#: that a worker waiting on one has the other computing beside it (two of them side by side left a core idle).
WAITING_BESIDE_UNITS = tuple(f"{folder}/{name}" for folder, name in (
    ("integration", "test_resume"), ("unit", "test_fidelity_demo_map"),
    ("integration", "test_services_cleanup"), ("unit", "test_hyperposterior")))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    paired = {name: i for i, name in enumerate(WAITING_BESIDE_UNITS)}

    def place(item: pytest.Item) -> tuple[int, int]:
        module = f"{item.path.parent.name}/{item.path.stem}"
        if module in rank:
            return 0, rank[module]
        if module in paired:
            return 2, paired[module]
        return (1 if item.path.parent.name == "integration" else 3), 0

    # A stable sort: the other modules keep their order.
    items.sort(key=place)
