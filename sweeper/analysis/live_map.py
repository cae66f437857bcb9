"""The live map of a running sweep: the GP a batch was planned with, as ``sweeper multiverse`` draws it.

Before each GP batch the searcher fits its GP on the trials in so far
(:class:`~sweeper.search.policy.BatchFit`). :func:`live_map` turns that fit into a map with
the code of ``sweeper multiverse`` (:mod:`sweeper.analysis.map_view`): the posterior mean and
sd over the two continuous dims the fit's posterior mean is most sensitive to (total Sobol
effects, :func:`~sweeper.analysis.multiverse.most_sensitive_continuous`), a facet per
category combination, the other continuous dims at the centre of their range, the trials so
far on top (failed ones as crosses); checks the fit by leave-one-out
(:func:`~sweeper.search.loo.loo_check`, the check behind ``sweeper multiverse``'s maps); and asks
whether the trials so far show that the metric depends on any choice at all
(:func:`~sweeper.analysis.effect_test.effect_test`, ``sweeper multiverse``'s first question): until
they do, the map's colours may be noise between seeds, and its title says so.
:mod:`sweeper.run.live_map_painter` does this off Tune's loop and logs the figures and the numbers
on the sweep's run.

What differs from ``sweeper multiverse``'s map, on purpose: it is the searcher's own fit
(maximum likelihood; for a bounded metric the warped fit that tags the searcher's points)
rather than the analysis model averaged over the hyperparameters' posterior, one pair of
dims rather than all, on a coarser grid (:data:`LIVE_RESOLUTION`).
NOTE: docs/decisions/0089-live-maps-say-when-no-effect-is-shown.md
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np

from sweeper.analysis.effect_test import EffectTest, effect_test
from sweeper.analysis.map_view import MapTrials, MapView, draw_map, map_view
from sweeper.analysis.multiverse import MultiverseFit, most_sensitive_continuous
from sweeper.analysis.plotting import _new_figure
from sweeper.search.ensemble import GPEnsemble
from sweeper.search.loo import PredictiveCheck, loo_check
from sweeper.search.policy import BatchFit
from sweeper.search.space import SearchSpace

#: Grid points per axis of a live map (``sweeper multiverse`` draws 40 by default).
LIVE_RESOLUTION = 30
#: Resolution of a live map's PNG (matplotlib's default): 40-100 KB for a figure of one to four facets.
LIVE_DPI = 100


@dataclass(frozen=True)
class LiveMap:
    """One batch's live map: its numbers, the trials it rests on, and the leave-one-out check of its fit.

    Attributes:
        batch: The batch the fit planned.
        fit: The searcher's fit, as the analysis reads a fit.
        view: The map's numbers (mean and sd per facet).
        trials: The trials the fit rests on (dots) and those failed so far (crosses).
        loo: The leave-one-out check of the fit.
        effect: Whether the trials so far show an effect of any choice (the permutation test).
    """

    batch: int
    fit: MultiverseFit
    view: MapView
    trials: MapTrials
    loo: PredictiveCheck
    effect: EffectTest

    @property
    def n_trials(self) -> int:
        """Trials the map rests on: the finished trials the fit was conditioned on."""
        return int(self.trials.kept.shape[0])

    def metrics(self) -> dict[str, float]:
        """``live_trials``, the check's ``live_loo_coverage95``, ``live_loo_rmse``, ..., and the effect test's
        ``live_effect_p`` and ``live_effect_log10_K`` (none for a metric constant so far: nothing was tested).

        The check's metrics are :meth:`~sweeper.search.loo.PredictiveCheck.metrics` with the prefix ``live_``.
        """
        effect = {} if self.effect.p_value is None else {"live_effect_p": self.effect.p_value,
                                                         "live_effect_log10_K": self.effect.log10_K}
        return {**self.loo.metrics("live_"), **effect, "live_trials": float(self.n_trials)}

    def note(self) -> str:
        """What the figures' titles add: the batch and its trials, how the dims left out were set, and a
        caution while the trials show no effect of any choice."""
        left_out = len(self.fit.continuous) > len(self.view.columns)
        note = f"after batch {self.batch}: {self.n_trials} trials" + ("; others at their centre" if left_out else "")
        if self.effect.note:
            return note + "; every score equal so far: nothing to map"
        if not self.effect.shown:
            return note + f"; no effect of any choice shown yet (p = {self.effect.p_value:.2f}): colours may be noise"
        return note


def live_map(space: SearchSpace, fitted: BatchFit, *, resolution: int = LIVE_RESOLUTION, seed: int = 0) -> LiveMap:
    """The live map of the fit a batch was planned with (see the module docstring)."""
    gp = fitted.gp if isinstance(fitted.gp, GPEnsemble) else GPEnsemble(fitted.gp, (fitted.gp,))
    fit = MultiverseFit(space, gp, gp.X, gp.y, None if gp.warp is None else gp.warp.bounds)
    columns = most_sensitive_continuous(fit, seed=seed)
    view = map_view(fit, columns, resolution=resolution, seed=seed, contour_band=False)  # its figures draw none
    trials = MapTrials(gp.X, gp.y, np.asarray(fitted.failed, dtype=np.float64).reshape(-1, space.d))
    effect = effect_test(space, gp.X, gp.y, warp=gp.warp, kernel=gp.point.kernel_name, seed=seed)
    return LiveMap(fitted.batch, fit, view, trials, loo_check(gp), effect)


def prepare_drawing() -> None:
    """Import what drawing needs (matplotlib's Agg), ahead of the first map.

    Raises:
        MissingDependencyError: matplotlib is not installed (the message says how to add it).
    """
    _new_figure((1.0, 1.0))


def live_map_pngs(live: LiveMap, metric: str, *, digits: int = 3, dpi: int = LIVE_DPI) -> dict[str, bytes]:
    """The map's figures as PNGs, named so they sort by batch: ``batch_003_mean.png``, ``batch_003_sd.png``
    (``batch_003_map.png`` over fewer than two continuous dims); ``digits`` pads the batch number."""
    pngs = {}
    for kind, figure in draw_map(live.view, live.fit.space, live.trials, metric, note=live.note()).items():
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=dpi)
        pngs[f"batch_{live.batch:0{digits}d}_{kind}.png"] = buffer.getvalue()
    return pngs
