"""One BLAS thread for the GP's small factorisations, which run beside busy trials.

Threaded OpenBLAS spins against the trials' processes for every core and slows the small
factorisations of a GP fit 5-20 fold (NOTE: docs/decisions/0002-one-blas-thread.md). The
searcher, the live-map painter, the report's surrogate and the multiverse maps all fit GPs
beside other work, so all of them take this one setting.
"""

from __future__ import annotations

from typing import Any


def one_blas_thread() -> Any:
    """threadpoolctl's limit of BLAS to one thread: a context manager, or in force until ``restore_original_limits``.

    threadpoolctl's limits are process-wide: in a thread of the driver the limit holds for the
    whole process while it is in force.
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")
