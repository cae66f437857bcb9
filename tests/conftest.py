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
