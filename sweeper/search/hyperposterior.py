"""The analysis GP with its hyperparameters' uncertainty: a posterior sample of fits, not one fit.

With a few dozen trials the likelihood cannot pin down a real ML map's lengthscales, its noise
(a plateau's small ripples, or seed noise) or the warp of a bounded metric, and one
maximum-likelihood fit takes one value of each as if it were known: its maps, bands and
expected-max curves are too sure of themselves. So the analysis of a metric with declared
bounds (``sweeper report``'s surrogate curve, ``sweeper multiverse``'s maps and sensitivity)
averages over the hyperparameters' posterior (the "fully Bayesian" GP of Snoek et al. 2012
§3.2, Lalchand & Rasmussen 2020): starting at the maximum-likelihood fit, a slice sampler
(Neal 2003, §4, stepping out, one coordinate at a time in random order) draws the log
lengthscales, log signal variance, coregionalization ``W`` and ``log kappa``, log noise, for a
bounded metric the log Kumaraswamy shapes of the output warp, its ceiling and the log sd of a noise
in the metric's own units, and the log shapes of an input warp of every continuous dim, from

    p(theta | y) ∝ p(y | theta) p(theta)

with ``p(y | theta)`` the warped likelihood of :func:`sweeper.search.bounded.warped_log_likelihood`
(Snelson et al. 2004, eq. 6) and weakly informative priors on the standardised scale
(:mod:`sweeper.search.hyper_vector`): lengthscales LogNormal(sqrt 2 + log(d) / 2, sqrt 3)
(Hvarfner et al. 2024, ``d`` the term's continuous dims), signal variance and kappa
LogNormal(0, 1) and (0, 1.5), ``W`` N(0, 1), the noise variance LogNormal(log 3e-3, 1) (a real
map has small-scale roughness a stationary kernel cannot follow, which a maximum-likelihood
fit of spread trials calls 1e-6), the warp's shapes LogNormal(0, 2) (the shapes that flatten
a map's ceiling lie far from the plain logit) and, with two bounds, the metric-unit noise's sd
LogNormal(log 3e-3, 0.5) times their range, at most 1 % of it (a plateau's roughness in accuracy points,
which the warp stretches; :attr:`sweeper.search.gp.GPFit.metric_noise`, decision 0086); each inside the boxes of
:mod:`sweeper.search.gp_model`. Every kept draw is a :class:`~sweeper.search.gp.GPFit` (with
its own warp and standardisation) conditioned on all trials; predictions are the equal-weight
mixture.

The input warp (Snoek et al. 2014, BoTorch's ``Warp``) maps each continuous coordinate
``u`` through a Kumaraswamy CDF ``1 - (1 - u^a)^b`` before the kernel (shapes LogNormal(0,
0.75) in [0.1, 10]): a stationary kernel then sees a cliff near one end of a range (a
learning rate that diverges) stretched and a plateau squeezed. It belongs to the analysis
only; the search keeps its plain kernel.

The ceiling (:attr:`sweeper.search.warping.OutputWarp.top`): a real accuracy map often
saturates below its bound, a plateau at one value with the best configurations tied there. A
GP, warped or not, interpolates between such ties with bumps above them, and random search's
expected best score under it overshoots. So the warp rescales onto ``[low, top]`` instead of
``[low, high]``, with ``top`` between the best trial and the bound: ``top = y_max + s (high -
y_max)``, ``logit(s) ~ N(3, 1.5)`` (a ceiling near the bound is the prior's median, one 60 % of
the way from the best trial to it is 2 sd away). Values at the best trial sit ``eps`` below the
ceiling. The draws of ``s`` mix a saturating map with a free one, and the curve's band carries
that doubt. Because that posterior can have two modes, ``CHAINS`` chains run, from the fit and
from jittered starts with the ceiling spread over its prior, and their draws are pooled. A
chain stranded in a mode of negligible mass, or in a white-noise mode (a lengthscale below
BoTorch's floor: a flat map with a spike at each trial), would get a quarter of the mixture,
so it is sampled again from the best chain (:func:`_restart_stranded`).

Without declared bounds the analysis keeps the single maximum-likelihood fit (``kept=1``):
the priors above describe real ML maps (bounded, rough at small scales), and on a smooth
noise-free function the averaged map is worse. Declaring a metric's bounds (``[0, null]`` for
a loss) opts into this model.

Cost: one likelihood evaluation is one Cholesky of the ``n x n`` covariance. The sampler
runs on at most ``MAX_SAMPLER_POINTS`` trials (a seeded subset that keeps every category,
:func:`sweeper.search.gp_subset.fit_subset`; a broader, so conservative, posterior), and the
number of kept draws falls with ``n`` (:func:`members_for`): above a few thousand trials the
hyperparameters are known well and the mixture is the single fit.

NOTE: docs/decisions/0004-analysis-gp-hyperparameter-posterior.md (the priors and sizes: 0012-0016)

References:
    Neal, R. M. (2003). Slice sampling. Annals of Statistics 31(3).
    Snoek, J., Larochelle, H., Adams, R. P. (2012). Practical Bayesian Optimization of
    Machine Learning Algorithms. NIPS 25.
    Lalchand, V., Rasmussen, C. E. (2020). Approximate Inference for Fully Bayesian
    Gaussian Process Regression. AABI 2019, PMLR 118.
    Snelson, E., Rasmussen, C. E., Ghahramani, Z. (2004). Warped Gaussian Processes. NIPS 16.
    Hvarfner, C., Hellsten, E. O., Nardi, L. (2024). Vanilla Bayesian Optimization Performs
    Great in High Dimensions. ICML 2024.
    Snoek, J., Swersky, K., Zemel, R., Adams, R. P. (2014). Input Warping for Bayesian
    Optimization of Non-Stationary Functions. ICML 2014.
    Yao, Y., Vehtari, A., Gelman, A. (2022). Stacking for Non-mixing Bayesian Computations: The
    Curse and Blessing of Multimodal Posteriors. JMLR 23(79).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sweeper.search.bounded import fit_bounded_gp
from sweeper.search.design import as_generator
from sweeper.search.ensemble import GPEnsemble
from sweeper.search.gp import GPFit
from sweeper.search.gp_fit import fit_gp
from sweeper.search.gp_subset import fit_subset
from sweeper.search.hyper_vector import (
    CEILING_PRIOR,
    SHAPE_PRIOR_SD,
    has_ceiling,
    pack,
    parameter_slots,
    shortest_lengthscale,
    unpack,
)
from sweeper.search.kernels import category_labels
from sweeper.search.log_posterior import LogPosterior
from sweeper.search.warping import MetricBounds

#: Most trials the sampler's likelihood is evaluated on (a seeded subset above it).
MAX_SAMPLER_POINTS = 150
#: Slice-sampler sweeps discarded, then kept draws and the sweeps between two of them.
#: NOTE: docs/decisions/0008-analysis-gp-kept-draws.md
BURN_IN, KEPT, THIN = 40, 64, 2
#: Independent slice-sampling chains (their draws pooled). NOTE: docs/decisions/0009-analysis-gp-ceiling.md
CHAINS = 4
#: Where chains 2.. start the ceiling, in prior sds from its prior mean: one ceiling halfway from the best
#: trial to the bound, one at 82 % of the way, one at 99 %. NOTE: docs/decisions/0068-restart-stranded-chains.md
CEILING_STARTS = (-2.0, -1.0, 1.0)
#: A chain whose draws' mean log posterior is this far below the best chain's is sampled again (see
#: :func:`_restart_stranded`), after this many discarded sweeps from the best chain's last draw.
STRANDED_NATS, RESTART_BURN_IN = 10.0, 10
#: A chain whose draws' median shortest lengthscale (unit cube, after the input warp) is below this is in
#: the white-noise mode and is sampled again, with this as a floor: BoTorch's floor under the same prior
#: (``GreaterThan(2.5e-2)`` in ``get_covar_module_with_dim_scaled_prior``).
#: NOTE: docs/decisions/0076-white-noise-chains.md
WHITE_NOISE_LENGTHSCALE = 2.5e-2


def members_for(n: int) -> int:
    """Kept draws for ``n`` trials: each conditions on all of them (one ``O(n^3)`` factorisation, and
    every prediction costs ``O(n^2)`` per point and member), while more trials pin the hyperparameters down."""
    return KEPT if n <= 100 else 16 if n <= 500 else 4 if n <= 2000 else 1


def slice_sample(
    logp: Callable[[NDArray[np.float64]], float], x0: NDArray[np.float64], rng: np.random.Generator, *,
    burn_in: int = BURN_IN, kept: int = KEPT, thin: int = THIN, width: float = 1.0, max_steps: int = 12,
) -> NDArray[np.float64]:
    """Coordinate-wise slice sampling with stepping out and shrinkage (Neal 2003, Fig. 3 and 5).

    Returns ``kept`` draws, shape ``(kept, p)``, taken every ``thin`` sweeps after ``burn_in``.
    ``x0`` must have a finite ``logp``.
    """
    x = np.array(x0, dtype=np.float64)
    fx = logp(x)
    if not math.isfinite(fx):
        raise ValueError("the sampler's start has zero posterior density")
    out = []
    for sweep in range(burn_in + kept * thin):
        for j in rng.permutation(x.size):
            x, fx = _slice_step(logp, x, fx, int(j), rng, width, max_steps)
        if sweep >= burn_in and (sweep - burn_in) % thin == thin - 1:
            out.append(x.copy())
    return np.array(out)


def _with(x: NDArray[np.float64], j: int, v: float) -> NDArray[np.float64]:
    """A copy of ``x`` with coordinate ``j`` set to ``v``."""
    trial = x.copy()
    trial[j] = v
    return trial


def _slice_step(
    logp: Callable[[NDArray[np.float64]], float], x: NDArray[np.float64], fx: float, j: int,
    rng: np.random.Generator, width: float, max_steps: int,
) -> tuple[NDArray[np.float64], float]:
    """One update of coordinate ``j``: a level under ``fx``, an interval stepped out around ``x[j]``
    (Neal 2003, Fig. 3), then points drawn in it, shrinking it towards ``x[j]`` until one is above
    the level (Fig. 5). Returns the new point and its ``logp`` (``x`` itself if the interval
    shrinks to nothing)."""
    level = fx + math.log(rng.uniform())
    lo = x[j] - width * rng.uniform()
    hi = lo + width
    for _ in range(max_steps):
        if logp(_with(x, j, lo)) <= level:
            break
        lo -= width
    for _ in range(max_steps):
        if logp(_with(x, j, hi)) <= level:
            break
        hi += width
    while True:
        v = rng.uniform(lo, hi)
        trial = _with(x, j, v)
        f = logp(trial)
        if f > level:
            return trial, f
        if v < x[j]:
            lo = v
        else:
            hi = v
        if hi - lo < 1e-10:
            return x, fx


def sample_members(gp: GPFit, *, seed: int | Sequence[int] | np.random.Generator | None,
                   categories: Mapping[int, int] | None = None, kept: int | None = None) -> tuple[GPFit, ...]:
    """Posterior draws of ``gp``'s hyperparameters (and warp), each a fit conditioned on all of ``gp``'s data."""
    n = gp.X.shape[0]
    kept = members_for(n) if kept is None else kept
    if kept <= 1 or n < 3:
        return (gp,)
    rng = as_generator(seed)
    rows = fit_subset(n, MAX_SAMPLER_POINTS, rng, category_labels(gp.X, categories))
    logp = LogPosterior(gp, gp.X[rows], gp.y[rows])
    theta0 = pack(gp)
    if not math.isfinite(logp(theta0)):  # e.g. the fit's noise sits on the floor below the prior's box
        theta0 = np.clip(theta0, *_box_in_sampler_units(gp))
        if not math.isfinite(logp(theta0)):
            return (gp,)
    chains = [slice_sample(logp, start, rng, kept=count)
              for start, count in zip(_chain_starts(gp, theta0, logp, rng), _split(kept, CHAINS), strict=True)
              if count > 0]
    draws = np.vstack(_restart_stranded(chains, logp, rng, lambda theta: shortest_lengthscale(theta, gp)))
    members = []
    for theta in draws:
        terms, noise, warp, inputs, metric_noise = unpack(theta, gp)
        g = gp.y if warp is None else warp.forward(gp.y)
        y_mean, y_std = (gp.y_mean, gp.y_std) if warp is None else (float(np.mean(g)), float(np.std(g)) or 1.0)
        members.append(GPFit(terms, noise, y_mean, y_std, gp.log_likelihood, gp.X, gp.y, gp.kernel_name, warp,
                             inputs, metric_noise, gp.warp if metric_noise else None, gp.y_std))
    return tuple(members)


def _restart_stranded(chains: list[NDArray[np.float64]], logp: Callable[[NDArray[np.float64]], float],
                      rng: np.random.Generator,
                      shortest: Callable[[NDArray[np.float64]], float] = lambda theta: math.inf,
                      ) -> list[NDArray[np.float64]]:
    """The chains, each one stranded in a mode the map should not be drawn from sampled again from the best
    other chain's last draw (decisions 0068 and 0076); the mixture keeps its size.

    - **Negligible mass.** A chain whose draws' mean log posterior lies more than ``STRANDED_NATS`` below
      the best chain's (within one mode, chains differ by 1-3 nats) holds a millionth of the mass, yet
      pooling would give it a quarter of the mixture. Chains that do not mix should not be weighted
      equally (Yao, Vehtari & Gelman 2022).
    - **White noise.** A chain whose draws' median ``shortest(theta)`` lengthscale is below
      ``WHITE_NOISE_LENGTHSCALE`` relates almost no two trials: a flat map, a spike at each trial. On IVR's
      pairs of trials either side of a cliff that mode can be heavier than the real one (svm, 30 trials: by
      4 nats, with a better leave-one-out fit too), so only the lengthscale tells them apart. Its new draws
      stay above that floor. The best chain is the best other; if all are white noise, only the first rule applies.
    """
    mean_logp = [float(np.mean([logp(theta) for theta in draws])) for draws in chains]
    white = [float(np.median([shortest(theta) for theta in draws])) < WHITE_NOISE_LENGTHSCALE
             for draws in chains]
    if all(white):
        white = [False] * len(chains)
    best = max((k for k in range(len(chains)) if not white[k]), key=lambda k: mean_logp[k])

    def above_floor(theta: NDArray[np.float64]) -> float:
        return logp(theta) if shortest(theta) >= WHITE_NOISE_LENGTHSCALE else -math.inf

    stranded = [white[k] or mean_logp[best] - mean_logp[k] > STRANDED_NATS for k in range(len(chains))]
    if not any(stranded):
        return chains
    restart_logp = above_floor if any(white) else logp
    start = next(theta for theta in chains[best][::-1] if math.isfinite(restart_logp(theta)))
    return [slice_sample(restart_logp, start, rng, burn_in=RESTART_BURN_IN, kept=draws.shape[0]) if again else draws
            for draws, again in zip(chains, stranded, strict=True)]


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _chain_starts(gp: GPFit, theta0: NDArray[np.float64], logp: Callable[[NDArray[np.float64]], float],
                  rng: np.random.Generator) -> list[NDArray[np.float64]]:
    """Where the ``CHAINS`` chains start: the fit's values, then jittered copies (``N(0, 0.5)`` in
    sampler units) with the ceiling at ``CEILING_STARTS``, so that a posterior with two modes (a
    ceiling near the best trial, or none) is explored by more than one chain. A chain whose start
    leads it into a mode of negligible mass is sampled again (:func:`_restart_stranded`)."""
    starts = [theta0]
    ceiling = _ceiling_index(gp)
    for k in range(1, CHAINS):
        for _ in range(20):
            start = theta0 + rng.normal(0.0, 0.5, size=theta0.size)
            if ceiling is not None:
                start[ceiling] = CEILING_PRIOR[0] + CEILING_PRIOR[1] * CEILING_STARTS[(k - 1) % len(CEILING_STARTS)]
            if math.isfinite(logp(start)):
                break
        else:
            start = theta0
        starts.append(start)
    return starts


def _ceiling_index(gp: GPFit) -> int | None:
    """Position of the ceiling's coordinate in the parameter vector, or None."""
    if not has_ceiling(gp):
        return None
    i = 0
    for s in parameter_slots(gp):
        if s.prior == CEILING_PRIOR and s.size == 1 and not s.log:
            return i
        i += s.size
    return None


def _box_in_sampler_units(gp: GPFit) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    lo, hi = [], []
    for s in parameter_slots(gp):
        a, b = (math.log(s.box[0]), math.log(s.box[1])) if s.log else s.box
        margin = 1e-6 * (b - a)
        lo += [a + margin] * s.size
        hi += [b - margin] * s.size
    return np.array(lo), np.array(hi)


def fit_posterior(
    X: ArrayLike, y: ArrayLike, *, seed: int | Sequence[int] = 0, bounds: MetricBounds | None = None,
    categories: Mapping[int, int] | None = None, kernel: str = "matern52-ard", rank: int = 1,
    n_restarts: int = 3, terms: Sequence[Sequence[int]] | None = None, kept: int | None = None,
) -> GPEnsemble:
    """The analysis GP: with ``bounds``, the MAP fit (warp learned) and its posterior draws; without, the single fit.

    Args:
        X: Trials' points in the unit cube, ``(n, d)``.
        y: Their scores, original units (inside ``bounds``).
        seed: Seeds the fit's restarts and the sampler.
        bounds: The metric's declared bounds, or None (no warp).
        categories: Categorical columns -> number of choices.
        kernel: Stationary kernel family.
        rank: Coregionalization rank.
        n_restarts: Restarts of the maximum-likelihood fit.
        terms: Additive terms (see :func:`sweeper.search.gp_fit.fit_gp`).
        kept: Posterior draws to keep (default: :func:`members_for` with bounds, 1 without; 1 is
            the point fit alone). A constant metric keeps the point fit alone: its warped likelihood is
            ``-inf`` everywhere (0/0 standardised values), there is no posterior to draw from.

    Raises:
        ValueError: Malformed data, or a score outside ``bounds``.
        RuntimeError: The maximum-likelihood fit failed in every restart.
    """
    seeds = [*np.atleast_1d(seed).tolist()]
    kept = 1 if np.unique(np.asarray(y, dtype=np.float64)).size == 1 else kept
    common: dict[str, Any] = {"seed": [*seeds, 0], "categories": categories, "kernel": kernel, "rank": rank,
                              "n_restarts": n_restarts, "terms": terms}
    if bounds is None:  # without bounds: the single maximum-likelihood fit (see the module docstring)
        point = fit_gp(X, y, **common)
        return GPEnsemble(point, sample_members(point, seed=[*seeds, 1], categories=categories,
                                                kept=1 if kept is None else kept))
    point = fit_bounded_gp(X, y, bounds, shape_prior_sd=SHAPE_PRIOR_SD, **common)
    return GPEnsemble(point, sample_members(point, seed=[*seeds, 1], categories=categories, kept=kept))
