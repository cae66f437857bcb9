"""How a GP strategy chooses a batch: the fits (the one that chooses, the one that tags the
points with predictions), then candidates and the greedy IVR or GP-BUCB batch among them.

One :class:`GPBatchStep` per GP strategy (:class:`IVRBatch`, :class:`UCBBatch`, chosen by
:func:`gp_batch_step`); :class:`~sweeper.search.gp_source.GPSource` keeps the state (what was
asked, what came back, the warm starts) and calls the step with it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from sweeper.search.acquisition import BatchSelection, select_ivr_batch, select_mixture_ivr_batch, select_ucb_batch
from sweeper.search.bounded import fit_bounded_gp
from sweeper.search.design import as_generator, balance_categories, sobol_design
from sweeper.search.ensemble import GPEnsemble
from sweeper.search.gp import GPFit
from sweeper.search.gp_fit import dimension_scaled_prior, fit_gp
from sweeper.search.hyperposterior import fit_posterior
from sweeper.search.local_search import local_ivr_candidates
from sweeper.search.settings import (
    STREAM_CANDIDATES,
    STREAM_GP,
    STREAM_INTEGRATION,
    STREAM_LOCAL,
    STREAM_TAG,
    PolicySettings,
    Strategy,
)
from sweeper.search.slope_weights import metric_variance_weights, slope_weights
from sweeper.search.space import SearchSpace
from sweeper.search.warping import MetricBounds

#: Optimiser starts of a refit when a previous fit exists (non-deterministic mode): the
#: previous optimum, then the fixed start of :func:`sweeper.search.gp_fit.fit_gp`.
WARM_RESTARTS = 2
#: Up to this many results, a bounded metric's chosen points are tagged by a posterior mixture of
#: ``TAG_MEMBERS`` draws (:func:`bounded_tagger`).
TAG_MIXTURE_MAX_TRIALS = 100
TAG_MEMBERS = 16
#: With ``ivr_mixture``, the raw fit's share of the IVR summed over it and the bounded mixture's members: without it
#: the warp's delta method leaves a plateau near a bound almost unsampled (the demo's top plateau).
#: NOTE: docs/decisions/0071-mixture-ivr-keeps-the-raw-fit.md
RAW_FIT_SHARE = 0.5
#: With ``ivr_mixture``, the mixture's members integrate over this many first points of IVR's integration set (a
#: Sobol prefix: still space-filling, and balanced per block of category combinations), the raw fit over all of them:
#: a third of the cost, and maps as good or better.
#: NOTE: docs/decisions/0074-mixture-members-integrate-over-fewer-points.md
MEMBER_INTEGRATION = 256

Points = NDArray[np.float64]


class GPBatchStep(ABC):
    """A GP strategy's batch: fit the GP on the results so far, then pick ``size`` candidates.

    The subclasses differ in the fits (which model chooses, which tags the points) and in the
    acquisition that picks; the candidates are common: a Sobol design in which every
    combination of categories has an equal share, snapped to legal values.
    """

    #: The phase written into the suggestions it chooses (the strategy's name).
    phase: ClassVar[str]

    def __init__(self, space: SearchSpace, settings: PolicySettings) -> None:
        self.space = space
        self.settings = settings

    @property
    def adaptive(self) -> bool:
        """Whether fits start warm from the previous one and a batch is re-planned as results arrive."""
        return False

    def fit(self, X: Points, y: Points, stream: Sequence[int], init: Mapping[str, Any] | None,
            warm_bounded: Mapping[str, Any] | None) -> tuple[GPFit, GPFit | GPEnsemble]:
        """The GP that chooses the batch and the model that tags its points (often the same fit).

        ``init`` / ``warm_bounded``: the previous fits' hyperparameters to warm-start from (None
        fits from scratch, as deterministic mode must: its points must not depend on earlier fits).

        Raises:
            RuntimeError, numpy.linalg.LinAlgError: the fit failed.
        """
        s = self.settings
        categories = self.space.categories()
        n_continuous = self.space.d - len(categories)
        prior = dimension_scaled_prior(n_continuous) if s.gp_lengthscale_prior and n_continuous else None
        fit_kwargs: dict[str, Any] = dict(
            seed=[*stream, STREAM_GP], n_restarts=s.gp_restarts if init is None else min(s.gp_restarts, WARM_RESTARTS),
            categories=categories, kernel=s.kernel, rank=s.coregion_rank, max_fit_points=s.gp_max_fit_points,
            refine_max_points=s.gp_refine_max_points, init=init, lengthscale_prior=prior)
        return self._fit(X, y, fit_kwargs, stream, warm_bounded)

    def pick(self, gp: GPFit, X_asked: Points, size: int, stream: Sequence[int],
             tagger: GPFit | GPEnsemble | None = None) -> tuple[Points, BatchSelection]:
        """The candidates and the ``size`` of them chosen, conditioning on every point asked so far.

        ``tagger``: the model :meth:`fit` returned beside ``gp``, for a step that chooses with it.

        Conditioning on every asked point (finished, failed and pending) keeps the plan exact for
        IVR's variance as results arrive; for ``ucb`` this is GP-BUCB's batch rule.
        """
        cand_stream = [*stream, STREAM_CANDIDATES]
        cand = balance_categories(sobol_design(self.settings.n_candidates, self.space.d, cand_stream),
                                  self.space.categories(), cand_stream)
        return self._select(gp, X_asked, self.space.to_unit(self.space.from_unit(cand)), size, stream, tagger)

    @abstractmethod
    def _fit(self, X: Points, y: Points, fit_kwargs: dict[str, Any], stream: Sequence[int],
             warm_bounded: Mapping[str, Any] | None) -> tuple[GPFit, GPFit | GPEnsemble]:
        """The choosing fit and the tagging model, given :func:`sweeper.search.gp_fit.fit_gp`'s arguments."""

    @abstractmethod
    def _select(self, gp: GPFit, X_asked: Points, cand: Points, size: int, stream: Sequence[int],
                tagger: GPFit | GPEnsemble | None) -> tuple[Points, BatchSelection]:
        """The candidates (``cand``, possibly extended) and the batch picked among them."""


class IVRBatch(GPBatchStep):
    """Integrated variance reduction (Bell et al. 2022, eq. 6-7): the batch that most shrinks the
    GP's variance integrated over the space, greedily (:func:`sweeper.search.acquisition.select_ivr_batch`).

    It chooses with the fit on the raw scale even for a bounded metric: IVR's choice needs no
    prediction inside the bounds, and a bounded model (:func:`bounded_tagger`) tags the chosen
    points. NOTE: docs/decisions/0013-ivr-chooses-on-the-raw-scale.md
    Not with the tagger's hyperparameter mixture by default either: the yardstick scored its points worse on every
    real map (NOTE: docs/decisions/0065-ivr-keeps-the-single-raw-fit.md); the map users see scores them better on
    most, and ``ivr_mixture`` chooses with it (NOTE: docs/decisions/0070-ivr-over-the-bounded-mixture.md).
    """

    phase = Strategy.IVR.value

    @property
    def adaptive(self) -> bool:
        """Outside deterministic mode: the hyperparameters fitted on the first results move a lot, and IVR's
        plan depends on them. NOTE: docs/decisions/0012-replan-ivr-batches.md"""
        return not self.settings.deterministic

    def _fit(self, X: Points, y: Points, fit_kwargs: dict[str, Any], stream: Sequence[int],
             warm_bounded: Mapping[str, Any] | None) -> tuple[GPFit, GPFit | GPEnsemble]:
        gp = fit_gp(X, y, **fit_kwargs)
        bounds = self.settings.bounds
        if bounds is None:
            return gp, gp
        return gp, bounded_tagger(X, y, bounds, fit_kwargs, self.settings, stream, warm_bounded)

    def _select(self, gp: GPFit, X_asked: Points, cand: Points, size: int, stream: Sequence[int],
                tagger: GPFit | GPEnsemble | None) -> tuple[Points, BatchSelection]:
        """IVR over integration points that give every category combination an equal share, the variance
        weighted by the slope of the fit's mean (``ivr_slope_weight``); with ``ivr_local_search``, local
        candidates around the best Sobol ones join the Sobol candidates. With ``ivr_mixture`` and a
        mixture tagging (a bounded metric), IVR is summed over the raw fit (share ``RAW_FIT_SHARE``) and
        the mixture's members (over the first ``MEMBER_INTEGRATION`` integration points), each one's variance in
        the metric's units (:func:`sweeper.search.slope_weights.metric_variance_weights`), the slope weights kept,
        and each member conditioning every point with the noise its posterior gives it
        (:func:`sweeper.search.conditioning.observation_noise`).
        NOTE: docs/decisions/0070-ivr-over-the-bounded-mixture.md,
        docs/decisions/0071-mixture-ivr-keeps-the-raw-fit.md,
        docs/decisions/0075-metric-variance-over-the-members-doubt.md,
        docs/decisions/0087-members-choose-with-their-own-noise.md"""
        s, space = self.settings, self.space
        categories = space.categories()
        mc_stream = [*stream, STREAM_INTEGRATION]
        X_mc = balance_categories(sobol_design(s.n_integration, space.d, mc_stream), categories, mc_stream)
        weights = slope_weights(gp, X_mc, s.ivr_slope_weight) if s.ivr_slope_weight > 0 else None
        continuous = np.array([c for c in range(space.d) if c not in categories], dtype=np.intp)
        if s.ivr_local_search and continuous.size:
            local = local_ivr_candidates(gp, X_asked, cand, X_mc, as_generator([*stream, STREAM_LOCAL]), continuous,
                                         weights=weights)
            cand = np.vstack([cand, space.to_unit(space.from_unit(local))])
        if s.ivr_mixture and isinstance(tagger, GPEnsemble):
            base = np.ones(X_mc.shape[0]) if weights is None else weights
            members = [gp, *tagger.members]
            shares = [RAW_FIT_SHARE] + [(1.0 - RAW_FIT_SHARE) / len(tagger.members)] * len(tagger.members)
            mcs = [X_mc] + [X_mc[:MEMBER_INTEGRATION]] * len(tagger.members)
            bases = [base] + [base[:MEMBER_INTEGRATION]] * len(tagger.members)
            weighted = [b * metric_variance_weights(m, x) for m, x, b in zip(members, mcs, bases, strict=True)]
            return cand, select_mixture_ivr_batch(members, X_asked, cand, mcs, size, weighted, shares)
        return cand, select_ivr_batch(gp, X_asked, cand, X_mc, size, weights)


class UCBBatch(GPBatchStep):
    """GP-UCB, GP-BUCB for a batch (Srinivas et al. 2010; Desautels et al. 2014): the optimising
    contrast the multiverse paper compares against. A bounded metric is fitted warped, and that fit
    both chooses and tags. It keeps its batches and full restarts (not :attr:`adaptive`).
    NOTE: docs/decisions/0012-replan-ivr-batches.md
    """

    phase = Strategy.UCB.value

    def _fit(self, X: Points, y: Points, fit_kwargs: dict[str, Any], stream: Sequence[int],
             warm_bounded: Mapping[str, Any] | None) -> tuple[GPFit, GPFit | GPEnsemble]:
        bounds = self.settings.bounds
        if bounds is None:
            gp = fit_gp(X, y, **fit_kwargs)
        else:  # the warp's shapes start from the previous fit's, like the hyperparameters
            gp = fit_bounded_gp(X, y, bounds, shapes=warm_shapes(fit_kwargs["init"]), **fit_kwargs)
        return gp, gp

    def _select(self, gp: GPFit, X_asked: Points, cand: Points, size: int, stream: Sequence[int],
                tagger: GPFit | GPEnsemble | None) -> tuple[Points, BatchSelection]:
        s = self.settings
        return cand, select_ucb_batch(gp, X_asked, cand, size, s.ucb_beta, maximize=s.mode == "max")


#: The batch step of each GP strategy.
GP_BATCH_STEPS: dict[Strategy, type[GPBatchStep]] = {Strategy.IVR: IVRBatch, Strategy.UCB: UCBBatch}


def gp_batch_step(space: SearchSpace, settings: PolicySettings) -> GPBatchStep:
    """The batch step of ``settings.strategy``, a GP strategy (KeyError for another)."""
    return GP_BATCH_STEPS[Strategy(settings.strategy)](space, settings)


def bounded_tagger(X: Points, y: Points, bounds: MetricBounds, fit_kwargs: dict[str, Any],
                   s: PolicySettings, stream: Sequence[int], warm: Mapping[str, Any] | None) -> GPFit | GPEnsemble:
    """The model whose predictions of the chosen points are recorded: the analysis's up to ``TAG_MIXTURE_MAX_TRIALS``.

    The maps and the curve are drawn from the posterior mixture of
    :mod:`sweeper.search.hyperposterior`; the prospective check (:mod:`sweeper.search.calibration`)
    scores these predictions, so they come from that model, which is also better calibrated than
    the maximum-likelihood bounded fit. Above ``TAG_MIXTURE_MAX_TRIALS`` the hyperparameters are
    pinned down and the sampler's cost is not worth it: the bounded fit, warm-started, tags.
    NOTE: docs/decisions/0014-tag-points-with-the-posterior-mixture.md
    """
    if X.shape[0] <= TAG_MIXTURE_MAX_TRIALS:
        return fit_posterior(X, y, seed=[*stream, STREAM_TAG], bounds=bounds, categories=fit_kwargs["categories"],
                             kernel=s.kernel, rank=s.coregion_rank, n_restarts=s.gp_restarts, kept=TAG_MEMBERS)
    return fit_bounded_gp(X, y, bounds, shapes=warm_shapes(warm), **{
        **fit_kwargs, "init": warm, "n_restarts": s.gp_restarts if warm is None else min(s.gp_restarts, WARM_RESTARTS)})


def warm_shapes(hyperparameters: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """The warp's shapes ``(a, b)`` in a previous fit's hyperparameters, or None."""
    warp = (hyperparameters or {}).get("warp")
    try:
        return (float(warp["a"]), float(warp["b"])) if warp else None
    except (KeyError, TypeError, ValueError):
        return None
