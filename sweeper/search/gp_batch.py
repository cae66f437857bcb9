"""How a GP strategy chooses a batch: the fits (the one that chooses, the one that tags the
points with predictions), then candidates and the greedy IVR or GP-BUCB batch among them.

:class:`~sweeper.search.policy.MultiversePolicy` keeps the state (what was asked, what came
back, the warm starts); these functions are its GP step, given that state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sweeper.search.acquisition import BatchSelection, local_ivr_candidates, select_ivr_batch, select_ucb_batch
from sweeper.search.bounded import fit_bounded_gp
from sweeper.search.design import as_generator, balance_categories, sobol_design
from sweeper.search.ensemble import GPEnsemble
from sweeper.search.gp import GPFit
from sweeper.search.gp_fit import dimension_scaled_prior, fit_gp
from sweeper.search.hyperposterior import fit_posterior
from sweeper.search.settings import (
    STREAM_CANDIDATES,
    STREAM_GP,
    STREAM_INTEGRATION,
    STREAM_LOCAL,
    STREAM_TAG,
    PolicySettings,
)
from sweeper.search.space import SearchSpace
from sweeper.search.warping import MetricBounds

#: Optimiser starts of a refit when a previous fit exists (non-deterministic mode): the
#: previous optimum, then the fixed start of :func:`sweeper.search.gp_fit.fit_gp`.
WARM_RESTARTS = 2
#: Up to this many results, a bounded metric's chosen points are tagged by a posterior mixture of
#: ``TAG_MEMBERS`` draws (:func:`bounded_tagger`).
TAG_MIXTURE_MAX_TRIALS = 100
TAG_MEMBERS = 16


def fit_batch_gps(
    X: NDArray[np.float64], y: NDArray[np.float64], space: SearchSpace, s: PolicySettings, stream: Sequence[int],
    init: Mapping[str, Any] | None, warm_bounded: Mapping[str, Any] | None,
) -> tuple[GPFit, GPFit | GPEnsemble]:
    """The GP that chooses the batch and the model that tags its points (often the same fit).

    ``init`` / ``warm_bounded``: the previous fits' hyperparameters to warm-start from (None
    fits from scratch, as deterministic mode must: its points must not depend on earlier fits).

    Raises:
        RuntimeError, numpy.linalg.LinAlgError: the fit failed.
    """
    categories = space.categories()
    n_continuous = space.d - len(categories)
    prior = dimension_scaled_prior(n_continuous) if s.gp_lengthscale_prior and n_continuous else None
    fit_kwargs: dict[str, Any] = dict(
        seed=[*stream, STREAM_GP], n_restarts=s.gp_restarts if init is None else min(s.gp_restarts, WARM_RESTARTS),
        categories=categories, kernel=s.kernel, rank=s.coregion_rank, max_fit_points=s.gp_max_fit_points,
        refine_max_points=s.gp_refine_max_points, init=init, lengthscale_prior=prior)
    bounds = s.bounds
    if bounds is None or s.strategy == "ivr":
        gp = fit_gp(X, y, **fit_kwargs)
    else:  # the warp's shapes start from the previous fit's, like the hyperparameters
        gp = fit_bounded_gp(X, y, bounds, shapes=warm_shapes(init), **fit_kwargs)
    # IVR chooses its points with the raw-scale fit even when the metric is bounded: on the
    # SVC map, points chosen by the warped fit drew a worse map at every n <= 30 (the
    # efficiency benchmark, bench/README.md §3), and IVR's choice needs no prediction
    # inside the bounds. A bounded model tags the chosen points (predicted mean and sd).
    tagger: GPFit | GPEnsemble = gp
    if bounds is not None and s.strategy == "ivr":
        tagger = bounded_tagger(X, y, bounds, fit_kwargs, s, stream, warm_bounded)
    return gp, tagger


def bounded_tagger(X: NDArray[np.float64], y: NDArray[np.float64], bounds: MetricBounds, fit_kwargs: dict[str, Any],
                   s: PolicySettings, stream: Sequence[int], warm: Mapping[str, Any] | None) -> GPFit | GPEnsemble:
    """The model whose predictions of the chosen points are recorded: the analysis's up to ``TAG_MIXTURE_MAX_TRIALS``.

    The maps and the curve are drawn from the posterior mixture of
    :mod:`sweeper.search.hyperposterior`; the prospective check (:mod:`sweeper.search.calibration`)
    scores these predictions, so they come from that model. The maximum-likelihood bounded fit
    predicted too surely: 21-67 % of its SGD-map predictions held their results at 95 % (5 seeds),
    against 88-100 % for the mixture (bench/README.md §7). Above ``TAG_MIXTURE_MAX_TRIALS`` the
    hyperparameters are pinned down and the sampler's cost (6 s at 32 trials in 6 dims) is not
    worth it: the bounded fit, warm-started, tags.
    """
    if X.shape[0] <= TAG_MIXTURE_MAX_TRIALS:
        return fit_posterior(X, y, seed=[*stream, STREAM_TAG], bounds=bounds, categories=fit_kwargs["categories"],
                             kernel=s.kernel, rank=s.coregion_rank, n_restarts=s.gp_restarts, kept=TAG_MEMBERS)
    return fit_bounded_gp(X, y, bounds, shapes=warm_shapes(warm), **{
        **fit_kwargs, "init": warm, "n_restarts": s.gp_restarts if warm is None else min(s.gp_restarts, WARM_RESTARTS)})


def pick_batch(
    gp: GPFit, X_asked: NDArray[np.float64], size: int, space: SearchSpace, s: PolicySettings, stream: Sequence[int],
) -> tuple[NDArray[np.float64], BatchSelection]:
    """The candidates and the ``size`` of them chosen, conditioning on every point asked so far.

    Conditioning on every asked point (finished, failed and pending) keeps the plan exact for
    IVR's variance as results arrive; for ``ucb`` this is GP-BUCB's batch rule.
    """
    categories = space.categories()
    # Candidates and integration points give every category combination an equal share.
    cand_stream = [*stream, STREAM_CANDIDATES]
    cand = balance_categories(sobol_design(s.n_candidates, space.d, cand_stream), categories, cand_stream)
    cand = space.to_unit(space.from_unit(cand))
    if s.strategy == "ivr":
        mc_stream = [*stream, STREAM_INTEGRATION]
        X_mc = balance_categories(sobol_design(s.n_integration, space.d, mc_stream), categories, mc_stream)
        continuous = np.array([c for c in range(space.d) if c not in categories], dtype=np.intp)
        if s.ivr_local_search and continuous.size:
            local = local_ivr_candidates(gp, X_asked, cand, X_mc, as_generator([*stream, STREAM_LOCAL]), continuous)
            cand = np.vstack([cand, space.to_unit(space.from_unit(local))])
        return cand, select_ivr_batch(gp, X_asked, cand, X_mc, size)
    return cand, select_ucb_batch(gp, X_asked, cand, size, s.ucb_beta, maximize=s.mode == "max")


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Run the GP work of the search on one BLAS thread.

    IMPORTANT: the search runs in the sweep's driver while trials keep every core busy.
    Multi-threaded OpenBLAS then spins against them and small factorisations slow down
    by 5-20x (measured on 2 cores with 2 busy processes: a coregionalized fit at n=200
    took 24 s with 2 threads, 1.2 s with 1; n=400 continuous 11.5 s against 2.2 s).
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def warm_shapes(hyperparameters: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """The warp's shapes ``(a, b)`` in a previous fit's hyperparameters, or None."""
    warp = (hyperparameters or {}).get("warp")
    try:
        return (float(warp["a"]), float(warp["b"])) if warp else None
    except (KeyError, TypeError, ValueError):
        return None
