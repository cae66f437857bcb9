"""Which observations a GP's hyperparameters are fitted on when there are too many to fit on all.

The restarts of :func:`sweeper.search.gp_fit.fit_gp` above its ``max_fit_points``, the analysis
GP's slice sampler (:mod:`sweeper.search.hyperposterior`) and the multiverse report's maps fit
on a seeded subset; the posterior still conditions on every observation.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from sweeper.search.design import as_generator

#: Observations of each category kept in a hyperparameter subset however rare it is (:func:`fit_subset`).
MIN_PER_CATEGORY = 3


def fit_subset(
    n: int, size: int, seed: int | Sequence[int] | np.random.Generator | None,
    labels: Sequence[NDArray[np.intp]] = (),
) -> NDArray[np.intp]:
    """Which ``size`` of ``n`` observations to fit hyperparameters on: a seeded uniform draw.

    Uniform, not space-filling: the hyperparameters describe how fast the function varies
    over the distances the data actually has, and a uniform draw keeps the mix of near and
    far pairs (and so the noise and lengthscale evidence) of the whole set, only thinner;
    a maximin subset would drop exactly the close pairs that pin the noise down.

    Categories (``labels``: one category index per observation for each categorical
    column) are the exception: a category seen a few times in thousands of trials would
    often be missing from a uniform draw, and its row of the coregionalization matrix
    would then be fitted on nothing while the posterior conditions on its results. So up
    to ``MIN_PER_CATEGORY`` observations of every category present are drawn first, and
    the rest of the subset uniformly from the others. Without labels the draw is the
    plain uniform one.

    Returns:
        Sorted distinct indices into ``range(n)``, shape ``(min(size, n),)``.
    """
    if size >= n:
        return np.arange(n, dtype=np.intp)
    rng = as_generator(seed)
    if not labels:
        return np.sort(rng.choice(n, size=size, replace=False)).astype(np.intp)
    reserved: list[int] = []
    for column in labels:
        for level in np.unique(column):
            members = np.flatnonzero(column == level)
            reserved.extend(rng.choice(members, size=min(MIN_PER_CATEGORY, members.size), replace=False).tolist())
    kept = np.unique(np.asarray(reserved, dtype=np.intp))
    if kept.size >= size:  # more categories than the subset holds: a uniform draw among the reserved
        return np.sort(rng.choice(kept, size=size, replace=False)).astype(np.intp)
    rest = np.setdiff1d(np.arange(n, dtype=np.intp), kept)
    fill = rng.choice(rest, size=size - kept.size, replace=False)
    return np.sort(np.concatenate([kept, fill])).astype(np.intp)

