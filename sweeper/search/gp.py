"""The GP surrogate: a Matern-5/2 ARD Gaussian process, fitted and predicted in numpy.

The hyperparameters are fitted by type-II maximum likelihood with L-BFGS-B
(:mod:`sweeper.search.gp_fit`, its objective :mod:`sweeper.search.marginal_likelihood`: the
model, boxes and optimiser of GPy's bounded ``GPRegression``, tested against it); everything
downstream (prediction, acquisition functions) uses them through this module's pure-numpy
:class:`GPFit`, which is small and picklable.

Modelling assumptions:
    * Inputs live in the unit cube ``[0, 1]^d`` (see ``sweeper.search.space``).
    * Outputs are standardised, ``(y - mean(y)) / std(y)`` (``ddof=0``; ``std = 1`` when
      it is 0 or ``n == 1``), so the kernel variance and the noise variance are on the
      standardised scale, and their bounds are data-independent.
    * Observation noise is homoscedastic Gaussian, learned, and at least ``noise_floor``; the
      analysis's posterior draws of a metric with two bounds add a noise in the metric's own units,
      which the warp makes heteroscedastic (:attr:`GPFit.metric_noise`).

References:
    Rasmussen, C. E., & Williams, C. K. I. (2006). Gaussian Processes for Machine
    Learning. MIT Press. Eq. 4.17 (Matern 5/2), Algorithm 2.1 (Cholesky prediction).
    Bell, S. J., Kampman, O. P., Dodge, J., & Lawrence, N. D. (2022). Modeling the Machine
    Learning Multiverse. NeurIPS 2022 (the GP surrogate over the decision space).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import InitVar, dataclass, field
from typing import Any

import numpy as np
import scipy.linalg
from numpy.typing import NDArray

from sweeper.search.design import as_generator
from sweeper.search.gp_linalg import cholesky_with_jitter as cholesky_with_jitter  # re-exported: its old home
from sweeper.search.gp_linalg import log_marginal_likelihood, posterior_factor, posterior_root, sum_of_terms
from sweeper.search.kernels import CategoryFactor, KernelTerm
from sweeper.search.warping import OutputWarp

# GPy's exact inference factorises K + (noise + 1e-8) I, and so does the fit's objective (its model);
# GPFit.noise_variance includes it, so that GPFit's posterior is exactly the one whose likelihood was maximised.
GPY_JITTER = 1e-8


def metric_noise_share(warp: OutputWarp, scale: float, y: NDArray[np.float64], tau: float) -> NDArray[np.float64]:
    """The standardised noise variance that a noise of sd ``tau`` in the metric's units adds to a result ``y``:
    ``(warp.spread(y, tau) / scale)^2``, with ``warp`` and ``scale`` the point fit's (decision 0086). Shared by
    :meth:`GPFit.noise_at` and the sampler's log posterior (:mod:`sweeper.search.log_posterior`)."""
    spread = warp.spread(y, tau) / scale
    share: NDArray[np.float64] = spread * spread
    return share


@dataclass(frozen=True)
class GPFit:
    """A fitted GP: hyperparameters on the standardised scale plus its training data.

    Attributes:
        terms: The covariance, a sum of :class:`~sweeper.search.kernels.KernelTerm` (one term for
            the shared kernel the sweeper searches with).
        noise_variance: Gaussian noise variance, standardised scale (for a fit from
            :func:`~sweeper.search.gp_fit.fit_gp`, the fitted noise parameter plus the ``GPY_JITTER`` that its
            objective adds to it, as GPy's exact inference does).
        y_mean: Mean of the modelled outputs (``warp(y)`` with a warp, else ``y``).
        y_std: Standard deviation used to standardise them (> 0).
        log_likelihood: Log marginal likelihood of the standardised outputs.
        X: Training inputs in the unit cube, shape ``(n, d)``.
        y: Training outputs in original units, shape ``(n,)``.
        kernel_name: One of :data:`~sweeper.search.kernels.KERNELS`.
        warp: The output warp of a bounded metric (:mod:`sweeper.search.warping`), or None. With a
            warp the GP models ``warp(y)``, and :meth:`predict`, :meth:`sample_posterior`
            and :meth:`predict_mean` answer in original units, inside the bounds;
            :meth:`predict_warped` gives the Gaussian on the modelled scale.
    """

    terms: tuple[KernelTerm, ...]
    noise_variance: float
    y_mean: float
    y_std: float
    log_likelihood: float
    X: NDArray[np.float64]
    y: NDArray[np.float64]
    kernel_name: str = "matern52-ard"
    warp: OutputWarp | None = None
    #: Kumaraswamy CDF ``u -> 1 - (1 - u^a)^b`` applied to column ``c`` before the kernel, per ``(c, a, b)``
    #: (Snoek et al. 2014's input warping; see :mod:`sweeper.search.hyperposterior`).
    input_warp: tuple[tuple[int, float, float], ...] = ()
    #: sd of a noise in the metric's own units (a two-sided warp only; 0: none), on top of ``noise_variance``:
    #: at a value ``y`` it adds ``(noise_warp.spread(y, metric_noise) / noise_scale)^2`` to the standardised
    #: noise variance (:meth:`noise_at`), so a plateau the warp stretches gets the noise its trials show in
    #: accuracy points. ``noise_warp`` and ``noise_scale`` are the point fit's warp and sd of ``w(y)``, fixed:
    #: a noise that moved with the sampled warp would cancel its Jacobian (decision 0086).
    #: NOTE: docs/decisions/0086-metric-unit-noise.md
    metric_noise: float = 0.0
    noise_warp: OutputWarp | None = None
    noise_scale: float = 1.0
    #: ``(L, alpha)`` of :func:`~sweeper.search.gp_linalg.posterior_factor` for these hyperparameters and data,
    #: when the caller has it already (:func:`~sweeper.search.gp_fit.fit_gp` needs it for the likelihood);
    #: None factorises here. Not stored as given: it fills the cache below.
    factor: InitVar[tuple[NDArray[np.float64], NDArray[np.float64]] | None] = None
    _L: NDArray[np.float64] = field(init=False, repr=False, compare=False)
    _alpha: NDArray[np.float64] = field(init=False, repr=False, compare=False)

    def __post_init__(self, factor: tuple[NDArray[np.float64], NDArray[np.float64]] | None) -> None:
        # Cache the Cholesky factor L of K + noise I and alpha = (K + noise I)^-1 z (derived fields, set once).
        if factor is None:
            factor = posterior_factor(self.kernel(self.X, self.X), self.noise_at(self.y), self.standardized())
        object.__setattr__(self, "_L", factor[0])
        object.__setattr__(self, "_alpha", factor[1])

    @classmethod
    def matern(
        cls, lengthscales: NDArray[np.float64], variance: float, noise_variance: float, y_mean: float,
        y_std: float, log_likelihood: float, X: NDArray[np.float64], y: NDArray[np.float64],
    ) -> GPFit:
        """A GP with one Matern-5/2 ARD term over every column and given hyperparameters."""
        ls = np.asarray(lengthscales, dtype=np.float64)
        term = KernelTerm(tuple(range(ls.shape[0])), ls, float(variance))
        return cls((term,), noise_variance, y_mean, y_std, log_likelihood, X, y)

    def modelled(self) -> NDArray[np.float64]:
        """The outputs on the scale the GP models: ``warp(y)``, or ``y`` without a warp."""
        return self.y if self.warp is None else self.warp.forward(self.y)

    def standardized(self) -> NDArray[np.float64]:
        """The modelled outputs standardised, ``(modelled - y_mean) / y_std``: what the kernel describes."""
        return (self.modelled() - self.y_mean) / self.y_std

    def noise_at(self, y: NDArray[np.float64]) -> float | NDArray[np.float64]:
        """The noise variance (standardised scale) of a result ``y`` (metric units): ``noise_variance``, plus
        the metric-unit noise's share where there is one (see :attr:`metric_noise`)."""
        if self.metric_noise <= 0.0 or self.noise_warp is None:
            return self.noise_variance
        return self.noise_variance + metric_noise_share(self.noise_warp, self.noise_scale, y, self.metric_noise)

    @property
    def noise_varies(self) -> bool:
        """Whether a result's noise depends on its value: a metric-unit noise on a warped fit (:attr:`metric_noise`)."""
        return self.metric_noise > 0.0 and self.noise_warp is not None and self.warp is not None

    def noise_at_mean(self, mean: NDArray[np.float64]) -> float | NDArray[np.float64]:
        """The noise variance (standardised scale) of a new result whose latent mean (modelled scale) is ``mean``:
        :meth:`noise_at` the value it stands for, ``warp^-1(mean)``; ``noise_variance`` where the noise is one."""
        if not self.noise_varies or self.warp is None:
            return self.noise_variance
        return self.noise_at(self.warp.inverse(mean))

    @property
    def noise_sd(self) -> float:
        """Observation noise sd on the modelled scale."""
        return float(np.sqrt(self.noise_variance) * self.y_std)

    @property
    def dim(self) -> int:
        """Input dimension ``d``."""
        return int(self.X.shape[1])

    @property
    def cholesky(self) -> NDArray[np.float64]:
        """Lower Cholesky factor ``L`` of ``K(X, X) + noise I`` (standardised scale), shape ``(n, n)``.

        Read-only use: the acquisition extends it by the pending points instead of
        factorising ``O(n^3)`` again (see :mod:`sweeper.search.acquisition`).
        """
        return self._L

    def log_marginal_likelihood(self) -> float:
        """``log p(z | X)`` of the standardised outputs under these hyperparameters.

        ``-z^T alpha / 2 - sum_i log L_ii - n log(2 pi) / 2`` (Rasmussen & Williams 2006,
        Algorithm 2.1), from the cached factor: no new factorisation.
        """
        return log_marginal_likelihood(self.standardized(), self._L, self._alpha)

    @property
    def factors(self) -> tuple[CategoryFactor, ...]:
        """Every coregionalization factor, in term order."""
        return tuple(f for t in self.terms for f in t.factors)

    def _plain_term(self) -> KernelTerm:
        if len(self.terms) != 1 or self.terms[0].factors:
            raise AttributeError("this GP's covariance is not one stationary kernel; read .terms instead")
        return self.terms[0]

    @property
    def lengthscales(self) -> NDArray[np.float64]:
        """Lengthscales of a GP whose covariance is one stationary term (AttributeError otherwise)."""
        return self._plain_term().lengthscales

    @property
    def variance(self) -> float:
        """Signal variance of a GP whose covariance is one stationary term (AttributeError otherwise)."""
        return self._plain_term().variance

    def hyperparameters(self) -> dict[str, Any]:
        """The fitted hyperparameters as plain JSON-able values (for reports and logs)."""
        out: dict[str, Any] = {"kernel": self.kernel_name, "noise_variance": float(self.noise_variance)}
        if len(self.terms) == 1 and not self.terms[0].factors:
            out["lengthscales"] = [float(v) for v in self.terms[0].lengthscales]
            out["variance"] = float(self.terms[0].variance)
        else:
            out["terms"] = [t.to_dict() for t in self.terms]
        if self.warp is not None:
            out["warp"] = self.warp.to_dict()
        if self.input_warp:
            out["input_warp"] = [[int(c), float(a), float(b)] for c, a, b in self.input_warp]
        if self.metric_noise > 0.0:
            out["metric_noise"] = float(self.metric_noise)
        return out

    def describe(self) -> str:
        """The hyperparameters in one line of text (see :func:`describe_hyperparameters`)."""
        return describe_hyperparameters(self.hyperparameters())

    def kernel(self, X1: NDArray[np.float64], X2: NDArray[np.float64]) -> NDArray[np.float64]:
        """Evaluate the covariance on the standardised scale, identical to the model fitted.

        Args:
            X1: Points in the unit cube, shape ``(a, d)``.
            X2: Points, shape ``(b, d)``.

        Returns:
            Covariance matrix, shape ``(a, b)``.
        """
        X1 = warp_inputs(np.asarray(X1, dtype=np.float64), self.input_warp)
        X2 = warp_inputs(np.asarray(X2, dtype=np.float64), self.input_warp)
        return sum_of_terms(self.terms, X1, X2)

    def kernel_diag(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """Prior variance at each point, shape ``(a,)`` (it varies with the category)."""
        X = np.asarray(X, dtype=np.float64)
        diag: NDArray[np.float64] = np.sum([t.diag(X) for t in self.terms], axis=0)
        return diag

    def predict_warped(
        self, X: NDArray[np.float64], noise: bool = False
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Gaussian posterior mean and sd on the modelled scale (``warp(y)``; ``y`` without a warp).

        Args:
            X: Points, shape ``(a, d)``.
            noise: Include the observation noise: the predictive of a new trial's
                result, not of the latent function.

        Returns:
            ``(mean, sd)``, each shape ``(a,)``, de-standardised (``sd >= 0``).
        """
        X = np.asarray(X, dtype=np.float64)
        Ks = self.kernel(self.X, X)  # (n, a)
        mean = Ks.T @ self._alpha
        V = scipy.linalg.solve_triangular(self._L, Ks, lower=True, check_finite=False)
        var = np.maximum(self.kernel_diag(X) - np.sum(V * V, axis=0), 0.0)
        mean = self.y_mean + self.y_std * mean
        if noise:
            var += self.noise_at_mean(mean)
        return mean, self.y_std * np.sqrt(var)

    def predict(
        self, X: NDArray[np.float64], noise: bool = False
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Posterior mean and sd in original units.

        Without a warp this is the Gaussian of :meth:`predict_warped`. With one, the mean and
        sd of ``warp^{-1}(g)`` over that Gaussian (:meth:`~sweeper.search.warping.OutputWarp.moments`),
        both inside the metric's bounds.

        Args:
            X: Points, shape ``(a, d)``.
            noise: Include the observation noise (the predictive of a new trial's result);
                by default the sd is the uncertainty about the latent ``f``, not ``y``.

        Returns:
            ``(mean, sd)``, each shape ``(a,)``, original units (``sd >= 0``).
        """
        mean, sd = self.predict_warped(X, noise)
        return (mean, sd) if self.warp is None else self.warp.moments(mean, sd)

    def predict_mean(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """Posterior mean of the latent function, original units, shape ``(a,)``.

        :meth:`predict` without the sd, whose triangular solve costs ``O(n^2 a)``; the mean
        alone costs ``O(n a)``. NOTE: docs/decisions/0011-gp-prediction-costs.md
        """
        if self.warp is not None:  # the mean of a warped Gaussian needs its sd
            return self.predict(X)[0]
        Ks = self.kernel(self.X, np.asarray(X, dtype=np.float64))  # (n, a)
        return self.y_mean + self.y_std * (Ks.T @ self._alpha)

    def sample_posterior(
        self, X: NDArray[np.float64], n_samples: int, seed: int | Sequence[int] | np.random.Generator | None,
    ) -> NDArray[np.float64]:
        """Draw joint posterior samples of the latent function at ``X``, in original units.

        With a warp the samples are drawn on the modelled scale and mapped back through
        ``warp^{-1}``, so every sample lies inside the metric's bounds.

        The posterior covariance ``k(X, X) - k(X, X_train) (K + noise I)^-1 k(X_train, X)``
        is factorised by Cholesky. IMPORTANT: it is singular wherever points repeat or lie
        much closer than a lengthscale, so a diagonal jitter is added when needed, from
        ``1e-10`` up to ``1e-4`` times the kernel variance (standardised scale); a sample
        then carries extra independent noise of at most ``1e-2 * sqrt(variance) * y_std``,
        and in practice ``1e-5`` of that. Should every jitter fail, the samples come from
        an eigendecomposition with negative eigenvalues clipped to 0. Cost: ``O(a^3)``.

        Args:
            X: Points in the unit cube, shape ``(a, d)``.
            n_samples: Number ``S`` of joint samples, ``>= 1``.
            seed: Seed of the standard normal draws (see :func:`sweeper.search.design.as_generator`).

        Returns:
            Samples of ``f``, shape ``(S, a)``; row ``s`` is one function drawn from the
            posterior, evaluated at every point of ``X``. Observation noise is not added.

        Raises:
            ValueError: If ``X`` is not ``(a, d)`` with this fit's ``d``, or ``n_samples < 1``.

        Example:
            >>> X = np.array([[0.1], [0.5], [0.9]])
            >>> fit = GPFit.matern(np.array([0.3]), 1.0, 1e-6, 0.0, 1.0, 0.0, X, np.array([0.0, 1.0, 0.0]))
            >>> fit.sample_posterior(np.array([[0.2], [0.8]]), 4, seed=0).shape
            (4, 2)
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.dim or X.shape[0] < 1:
            raise ValueError(f"X must have shape (a, {self.dim}) with a >= 1; got shape {X.shape}")
        if isinstance(n_samples, bool) or int(n_samples) != n_samples or n_samples < 1:
            raise ValueError(f"n_samples must be a positive int; got {n_samples!r}")
        Ks = self.kernel(self.X, X)  # (n, a)
        mean = Ks.T @ self._alpha  # (a,)
        V = scipy.linalg.solve_triangular(self._L, Ks, lower=True, check_finite=False)  # (n, a)
        cov = self.kernel(X, X)
        cov -= V.T @ V  # (a, a), standardised scale
        cov = 0.5 * (cov + cov.T)
        z = as_generator(seed).standard_normal((X.shape[0], int(n_samples)))  # (a, S)
        root = posterior_root(cov, float(np.mean(self.kernel_diag(X))))
        f = mean[:, None] + root @ z  # (a, S)
        f = (self.y_mean + self.y_std * f).T
        return f if self.warp is None else self.warp.inverse(f)


def warp_inputs(X: NDArray[np.float64], warp: Sequence[tuple[int, float, float]]) -> NDArray[np.float64]:
    """``X`` with column ``c`` mapped by the Kumaraswamy CDF ``1 - (1 - u^a)^b`` for each ``(c, a, b)``."""
    if not warp:
        return X
    X = X.copy()
    for c, a, b in warp:
        X[:, c] = kumaraswamy_cdf(np.clip(X[:, c], 0.0, 1.0), a, b)
    return X


def kumaraswamy_cdf(u: NDArray[np.float64], a: float, b: float) -> NDArray[np.float64]:
    """``1 - (1 - u^a)^b`` of inputs ``u`` already clipped to ``[0, 1]`` (the input warp of one column)."""
    cdf: NDArray[np.float64] = -np.expm1(b * np.log1p(-(u ** a) * (1.0 - 1e-12)))
    return cdf


def _upper(matrix: Any) -> NDArray[np.float64]:
    m = np.asarray(matrix, dtype=np.float64)
    return m[np.triu_indices(m.shape[0], 1)]


def describe_hyperparameters(hp: dict[str, Any]) -> str:
    """One line of text for :meth:`GPFit.hyperparameters`, e.g. for a report.

    Example:
        >>> describe_hyperparameters({"kernel": "rbf", "noise_variance": 0.01, "lengthscales": [0.3, 2.0],
        ...                           "variance": 1.5})
        'rbf kernel; lengthscales 0.3, 2; variance 1.5; noise variance 0.01'
    """
    def terms() -> list[str]:
        if "terms" not in hp:
            return [f"lengthscales {', '.join(f'{v:.3g}' for v in hp['lengthscales'])}; variance {hp['variance']:.3g}"]
        out = []
        for t in hp["terms"]:
            parts = [f"lengthscales {', '.join(f'{v:.3g}' for v in t['lengthscales'])} on columns {t['columns']}"
                     f" (variance {t['variance']:.3g})"] if t["columns"] else []
            parts += [f"coregionalization of column {f['column']} with correlations "
                      + ", ".join(f"{v:.2f}" for v in _upper(f["correlation"]))
                      for f in t["factors"]]
            out.append(" times ".join(parts))
        return [" plus ".join(out)]

    warp = hp.get("warp")
    shapes = [] if not warp else [
        f"output warp onto {OutputWarp.from_dict(warp).bounds.text()} with Kumaraswamy shapes a={warp['a']:.3g}, "
        f"b={warp['b']:.3g}"]
    return "; ".join([f"{hp.get('kernel', 'matern52-ard')} kernel", *terms(),
                      f"noise variance {hp['noise_variance']:.3g}", *shapes])

