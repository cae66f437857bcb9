"""The stacked design of :func:`sweeper.analysis.sensitivity.sobol_indices`, evaluated in batches.

Each repeat of the estimator draws two ``N x d`` matrices ``A`` and ``B`` and builds
``A_B^(i)``: ``A`` with its column ``i`` taken from ``B`` (Saltelli et al. 2010, section 3).
``f`` is called on stacked rows (all matrices of all repeats, in order), in as few calls as
possible of at most ``batch_rows`` rows each, so that a GP prediction never sees more than
``batch_rows`` points at once; the rows of a call are built when it is made.

References:
    Saltelli, A., Annoni, P., Azzini, I., Campolongo, F., Ratto, M., & Tarantola, S.
    (2010). Variance based sensitivity analysis of model output. Design and estimator
    for the total sensitivity index. Comput. Phys. Commun. 181(2), 259-270.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

log = logging.getLogger("sweeper.analysis.sensitivity")  # what sobol_indices logs, under its module


def check_int(name: str, value: object, minimum: int) -> int:
    """``value`` as an int, or a ValueError naming ``name`` when it is not an int ``>= minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}; got {name}={value!r}")
    return int(value)


def check_names(names: Sequence[str] | None, d: int) -> tuple[str, ...]:
    """The ``d`` input names: ``names`` checked to be ``d`` distinct strings, default ``x0 .. x{d-1}``."""
    if names is None:
        return tuple(f"x{i}" for i in range(d))
    if isinstance(names, (str, bytes)):
        raise ValueError(f"names must be a sequence of {d} strings, not one string; got {names!r}")
    out = tuple(names)
    if len(out) != d:
        raise ValueError(
            f"names must have one entry per dimension (d={d}); got {len(out)}: {out!r}"
        )
    if not all(isinstance(n, str) for n in out):
        raise ValueError(f"names must be strings; got {out!r}")
    if len(set(out)) != d:
        raise ValueError(f"names must be distinct; got {out!r}")
    return out


def stacked_rows(
    a: NDArray[np.float64], b: NDArray[np.float64], start: int, stop: int
) -> NDArray[np.float64]:
    """Rows ``start:stop`` of the stacked design ``[A, B, A_B^(0), ..., A_B^(d-1)]`` per repeat.

    ``a`` and ``b`` have shape ``(repeats, N, d)``; the stacked design has
    ``repeats * (d + 2) * N`` rows, repeat-major, each block ``N`` rows.
    """
    _, n, d = a.shape
    g = np.arange(start, stop)
    rep, within = np.divmod(g, (d + 2) * n)
    block, k = np.divmod(within, n)
    x = a[rep, k]  # fancy indexing: a fresh (m, d) array
    is_b = block == 1
    x[is_b] = b[rep[is_b], k[is_b]]
    is_ab = block >= 2
    col = block[is_ab] - 2
    x[np.flatnonzero(is_ab), col] = b[rep[is_ab], k[is_ab], col]
    return x


def evaluate_stacked(
    f: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    a: NDArray[np.float64],
    b: NDArray[np.float64],
    batch_rows: int,
) -> NDArray[np.float64]:
    """Evaluate ``f`` on the stacked design in chunks of ``batch_rows``; shape ``(R, d + 2, N)``.

    Raises:
        ValueError: ``f`` returns the wrong shape, or NaN or infinite values.
    """
    repeats, n, d = a.shape
    total = repeats * (d + 2) * n
    y = np.empty(total)
    calls = 0
    for start in range(0, total, batch_rows):
        stop = min(start + batch_rows, total)
        out = np.asarray(f(stacked_rows(a, b, start, stop)), dtype=np.float64)
        calls += 1
        m = stop - start
        if out.shape not in ((m,), (m, 1)):
            raise ValueError(
                f"f must map an (m, d) array to shape (m,) (or (m, 1)); "
                f"got shape {out.shape} for m={m}, d={d}"
            )
        bad = ~np.isfinite(out)
        if bad.any():
            raise ValueError(f"f returned {int(bad.sum())} NaN or infinite value(s) out of {m}")
        y[start:stop] = out.reshape(m)
    log.debug("sobol_indices: %d rows in %d call(s) of f", total, calls)
    return y.reshape(repeats, d + 2, n)
