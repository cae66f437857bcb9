"""The GP surrogate: a Matern-5/2 ARD Gaussian process fitted with GPy, predicted in numpy.

This is the only module in the project that imports GPy, and it does so lazily inside
:func:`fit_gp`, so importing :mod:`sweeper.search.gp` is cheap. GPy is used to *fit* the
hyperparameters (type-II maximum likelihood with L-BFGS-B); everything downstream
(prediction, acquisition functions) uses the fitted hyperparameters through the
pure-numpy :class:`GPFit`, which is small, picklable and independent of GPy's objects.

Modelling assumptions:
    * Inputs live in the unit cube ``[0, 1]^d`` (see ``sweeper.search.space``).
    * Outputs are standardised, ``(y - mean(y)) / std(y)`` (``ddof=0``; ``std = 1`` when
      it is 0 or ``n == 1``), so the kernel variance and the noise variance are on the
      standardised scale, and their bounds are data-independent.
    * Observation noise is homoscedastic Gaussian, learned, and at least ``noise_floor``.

References:
    Rasmussen, C. E., & Williams, C. K. I. (2006). Gaussian Processes for Machine
    Learning. MIT Press. Eq. 4.17 (Matern 5/2), Algorithm 2.1 (Cholesky prediction).
    Bell, S. J., Kampman, O. P., Dodge, J., & Lawrence, N. D. (2022). Modeling the Machine
    Learning Multiverse. NeurIPS 2022 (the GP surrogate over the decision space).
"""

from __future__ import annotations

import functools
import logging
import operator
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg
from numpy.typing import NDArray

from sweeper.search.design import as_generator
from sweeper.search.kernels import CategoryFactor, KernelTerm, category_index, category_labels, kernel_family
from sweeper.search.warping import OutputWarp

log = logging.getLogger(__name__)

# Hyperparameter boxes on the standardised scale, inputs in the unit cube.
LENGTHSCALE_BOUNDS = (1e-3, 1e2)
VARIANCE_BOUNDS = (1e-3, 1e2)
# Coregionalization B = W Wᵀ + diag(kappa): W's entries and kappa, standardised scale.
W_BOUNDS = (-10.0, 10.0)
KAPPA_BOUNDS = (1e-6, 1e2)
NOISE_MAX = 10.0
# GPy's exact inference factorises K + (noise + 1e-8) I; GPFit.noise_variance includes it,
# so that GPFit's posterior is exactly the posterior GPy maximised the likelihood of.
GPY_JITTER = 1e-8
# Starting points of the restarts: restart 0 is fixed, the others are random.
DEFAULT_LENGTHSCALE = 0.3
INIT_LENGTHSCALE_RANGE = (0.05, 2.0)
INIT_VARIANCE = 1.0
INIT_NOISE = 1e-2
INIT_W = 0.5
INIT_KAPPA = 0.5
#: Observations of each category kept in a hyperparameter subset however rare it is (:func:`fit_subset`).
MIN_PER_CATEGORY = 3


def cholesky_with_jitter(K: NDArray[np.float64], max_tries: int = 6) -> NDArray[np.float64]:
    """Lower Cholesky factor of a symmetric PSD matrix, adding diagonal jitter if needed.

    Args:
        K: Symmetric matrix, shape ``(n, n)``.
        max_tries: Number of jitter levels tried (``1e-10`` times the mean diagonal,
            growing tenfold each time) after the plain factorisation fails.

    Returns:
        ``L`` with ``L @ L.T == K + jitter * I``, shape ``(n, n)``.

    Raises:
        numpy.linalg.LinAlgError: If every jitter level fails.
    """
    try:
        return scipy.linalg.cholesky(K, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        pass
    scale = float(np.mean(np.diag(K))) if K.size else 1.0
    jitter = 1e-10 * (scale if scale > 0 else 1.0)
    for _ in range(max_tries):
        try:
            L = scipy.linalg.cholesky(
                K + jitter * np.eye(K.shape[0]), lower=True, check_finite=False
            )
            log.debug("Cholesky needed jitter %.1e", jitter)
            return L
        except np.linalg.LinAlgError:
            jitter *= 10.0
    raise np.linalg.LinAlgError(f"matrix not positive definite even with jitter {jitter / 10:.1e}")


@dataclass(frozen=True)
class GPFit:
    """A fitted GP: hyperparameters on the standardised scale plus its training data.

    Attributes:
        terms: The covariance, a sum of :class:`~sweeper.search.kernels.KernelTerm` (one term for
            the shared kernel the sweeper searches with).
        noise_variance: Gaussian noise variance, standardised scale (for a fit from
            :func:`fit_gp`, GPy's likelihood variance plus the ``GPY_JITTER`` that GPy's
            exact inference adds to it).
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
    _L: NDArray[np.float64] = field(init=False, repr=False, compare=False)
    _alpha: NDArray[np.float64] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Cache the Cholesky factor of K + noise * I and alpha = (K + noise I)^-1 y_std.
        K = self.kernel(self.X, self.X)
        K[np.diag_indices_from(K)] += self.noise_variance
        L = cholesky_with_jitter(K)
        z = self.standardized()
        alpha = scipy.linalg.cho_solve((L, True), z, check_finite=False)
        object.__setattr__(self, "_L", L)
        object.__setattr__(self, "_alpha", alpha)

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
        z = self.standardized()
        n = z.shape[0]
        return float(-0.5 * z @ self._alpha - np.sum(np.log(np.diag(self._L))) - 0.5 * n * np.log(2.0 * np.pi))

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
        return out

    def describe(self) -> str:
        """The hyperparameters in one line of text (see :func:`describe_hyperparameters`)."""
        return describe_hyperparameters(self.hyperparameters())

    def kernel(self, X1: NDArray[np.float64], X2: NDArray[np.float64]) -> NDArray[np.float64]:
        """Evaluate the covariance on the standardised scale, identical to the GPy model fitted.

        Args:
            X1: Points in the unit cube, shape ``(a, d)``.
            X2: Points, shape ``(b, d)``.

        Returns:
            Covariance matrix, shape ``(a, b)``.
        """
        X1 = warp_inputs(np.asarray(X1, dtype=np.float64), self.input_warp)
        X2 = warp_inputs(np.asarray(X2, dtype=np.float64), self.input_warp)
        K = self.terms[0](X1, X2)
        for term in self.terms[1:]:
            K += term(X1, X2)
        return K

    def kernel_diag(self, X: NDArray[np.float64]) -> NDArray[np.float64]:
        """Prior variance at each point, shape ``(a,)`` (it varies with the category)."""
        X = np.asarray(X, dtype=np.float64)
        return np.sum([t.diag(X) for t in self.terms], axis=0)

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
        if noise:
            var += self.noise_variance
        return self.y_mean + self.y_std * mean, self.y_std * np.sqrt(var)

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

        :meth:`predict` without the sd, whose triangular solve costs ``O(n^2 a)``: at
        ``n = 5000`` that is seconds for a few thousand points, the mean alone ``O(n a)``.
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
        an eigendecomposition with negative eigenvalues clipped to 0. Cost: ``O(a^3)``
        (``a = 1000`` takes a few tenths of a second).

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
        root = _posterior_root(cov, float(np.mean(self.kernel_diag(X))))
        f = mean[:, None] + root @ z  # (a, S)
        f = (self.y_mean + self.y_std * f).T
        return f if self.warp is None else self.warp.inverse(f)


def warp_inputs(X: NDArray[np.float64], warp: Sequence[tuple[int, float, float]]) -> NDArray[np.float64]:
    """``X`` with column ``c`` mapped by the Kumaraswamy CDF ``1 - (1 - u^a)^b`` for each ``(c, a, b)``."""
    if not warp:
        return X
    X = X.copy()
    for c, a, b in warp:
        u = np.clip(X[:, c], 0.0, 1.0)
        X[:, c] = -np.expm1(b * np.log1p(-(u ** a) * (1.0 - 1e-12)))
    return X


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


def _posterior_root(cov: NDArray[np.float64], variance: float) -> NDArray[np.float64]:
    """A matrix ``R`` with ``R @ R.T ~= cov``: Cholesky with jitter, else clipped eigenvectors."""
    jitter = 1e-10 * variance
    eye = np.eye(cov.shape[0])
    while jitter <= 1e-4 * variance * (1 + 1e-9):
        try:
            return scipy.linalg.cholesky(cov + jitter * eye, lower=True, check_finite=False)
        except np.linalg.LinAlgError:
            jitter *= 10.0
    log.debug("posterior covariance not positive definite with jitter; using its eigendecomposition")
    w, Q = np.linalg.eigh(cov)
    return Q * np.sqrt(np.clip(w, 0.0, None))[None, :]


def _standardize(y: NDArray[np.float64]) -> tuple[float, float]:
    mean = float(np.mean(y))
    std = float(np.std(y)) if y.shape[0] > 1 else 0.0
    if not np.isfinite(std) or std <= 0.0:
        std = 1.0
    return mean, std


def _check_data(X: Any, y: Any) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must have shape (n, d) with n, d >= 1; got shape {X.shape}")
    if y.shape != (X.shape[0],):
        raise ValueError(f"y must have shape ({X.shape[0]},) to match X; got shape {y.shape}")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise ValueError("X and y must be finite; drop failed trials before fitting the GP")
    return X, y


@dataclass(frozen=True)
class _TermLayout:
    """Which columns a term's stationary part and factors act on (see :func:`_layout`)."""

    continuous: tuple[int, ...]
    categorical: tuple[tuple[int, int], ...]  # (column, number of categories)


def _layout(
    d: int, categories: Mapping[int, int], terms: Sequence[Sequence[int]] | None
) -> list[_TermLayout]:
    groups = [list(range(d))] if terms is None else [list(t) for t in terms]
    flat = sorted(c for g in groups for c in g)
    if flat != list(range(d)) or any(not g for g in groups):
        raise ValueError(f"terms must split the columns 0..{d - 1} into non-empty groups; got {terms!r}")
    for c, k in categories.items():
        if not 0 <= c < d or int(k) < 2:
            raise ValueError(f"categories maps a column in 0..{d - 1} to a count >= 2; got {c!r}: {k!r}")
    return [_TermLayout(tuple(c for c in g if c not in categories),
                        tuple((c, int(categories[c])) for c in g if c in categories)) for g in groups]


def fit_gp(
    X: NDArray[np.float64],
    y: NDArray[np.float64],
    *,
    seed: int | Sequence[int] | np.random.Generator | None,
    n_restarts: int = 3,
    noise_floor: float = 1e-6,
    max_iters: int = 500,
    categories: Mapping[int, int] | None = None,
    kernel: str = "matern52-ard",
    terms: Sequence[Sequence[int]] | None = None,
    rank: int = 1,
    max_fit_points: int | None = None,
    refine_max_points: int | None = None,
    init: GPFit | Mapping[str, Any] | None = None,
    lengthscale_prior: tuple[float, float] | None = None,
    warp: OutputWarp | None = None,
) -> GPFit:
    """Fit a GP by maximum marginal likelihood with seeded restarts.

    The covariance is a sum of terms (default: one term over every column); each is a
    stationary kernel (``kernel``) over its continuous columns times an intrinsic
    coregionalization factor ``B = W Wᵀ + diag(kappa)`` of rank ``rank`` for each of its
    categorical columns (see :mod:`sweeper.search.kernels`). When a term has factors, its
    stationary variance is fixed to 1: the factors carry the scale.

    Restart 0 starts from lengthscale 0.3, variance 1, noise 1e-2, ``W = 0.5``, ``kappa
    = 0.5``; each further restart draws its lengthscales log-uniformly in ``[0.05, 2]`` and
    ``W`` normal with sd 0.5 from ``seed`` (never from numpy's global RNG, unlike GPy's
    ``optimize_restarts``), so the same data and seed give bit-identical hyperparameters.
    A restart that fails numerically is skipped. With ``n == 1`` there is nothing to
    learn: the starting hyperparameters are kept.

    Scale: each likelihood evaluation costs ``O(n^3)`` and an optimisation needs tens to
    hundreds of them, so above ``max_fit_points`` observations the restarts run on a
    seeded uniform random subset of that many (:func:`fit_subset`; "subset of data",
    Rasmussen & Williams 2006 §8.3.3; a strong baseline in Chalupka, Williams & Murray
    2013, JMLR 14). While ``n <= refine_max_points``, the best of them is then refined by
    one more L-BFGS-B run on all observations, from whichever restart's optimum has the
    highest likelihood on all of them: it starts in the right basin and converges
    in tens of evaluations, where the restarts on all of them would need hundreds (a
    subset's optimum alone maps Hartmann-6 at n = 1000 about 20 % worse than the full
    fit; see bench/scale.py). The returned GP conditions on *every* observation exactly
    (one ``O(n^3)`` Cholesky: about 3 s at ``n = 5000`` on one core), and its
    ``log_likelihood`` is that of all the data. At or below ``max_fit_points`` (or with
    ``None``) nothing changes: every observation is fitted, bit-identically to a call
    without it.

    Warm start (``init``): the first restart starts from ``init``'s hyperparameters (e.g.
    the previous fit of a sweep, on fewer observations), and the other ``n_restarts - 1``
    follow the usual sequence (the fixed start, then random ones). A refit after a few more
    results converges from it in a handful of L-BFGS-B iterations; the fixed start guards
    against the warm one staying in a basin the new results have left (see
    :class:`sweeper.search.policy.MultiversePolicy`). Above ``max_fit_points`` with a refinement,
    the warm start skips the subset: it is scored on all observations next to the other
    restarts' subset optima, and the refinement starts from the best of them (usually the
    warm one, which then converges in a few iterations). An ``init`` of another layout
    (dimension, categories, terms, rank, kernel) is ignored.

    Lengthscale prior (``lengthscale_prior=(mu, sigma)``): the lengthscales of continuous
    columns get a ``LogNormal(mu, sigma)`` prior and the fit maximises the posterior (MAP)
    instead of the likelihood; see :func:`dimension_scaled_prior`. Restarts are then ranked
    by likelihood plus log prior; ``log_likelihood`` stays the likelihood alone.

    Args:
        X: Inputs in the unit cube, shape ``(n, d)``, ``n >= 1``.
        y: Outputs in original units, shape ``(n,)``, finite.
        seed: Seed of the restarts (see :func:`sweeper.search.design.as_generator`).
        n_restarts: Number of L-BFGS-B runs, ``>= 1``.
        noise_floor: Lower bound of the noise variance (standardised scale).
        max_iters: Iteration limit of each L-BFGS-B run.
        categories: Categorical columns: column -> number of categories ``k >= 2``;
            the category of a coordinate ``u`` is ``floor(u k)``.
        kernel: One of :data:`~sweeper.search.kernels.KERNELS`.
        terms: Groups of columns, one additive term each, together every column once;
            ``[[0], [1], ...]`` is the additive kernel of the interaction test.
        rank: Rank of every ``W``, ``>= 1``.
        max_fit_points: Most observations the restarts run on (``>= 2``), or None for all.
        refine_max_points: Most observations for which a subset fit is refined on all of
            them (None: never refine).
        init: A previous fit, or its :meth:`GPFit.hyperparameters`, to start the first
            restart from (None: the usual starts only).
        lengthscale_prior: ``(mu, sigma)`` of a LogNormal prior on every continuous
            lengthscale, ``sigma > 0`` (None: maximum likelihood).
        warp: A fixed output warp of a bounded metric: the GP models ``warp(y)`` (see
            :mod:`sweeper.search.warping`; :func:`sweeper.search.bounded.fit_bounded_gp` learns one).

    Returns:
        The fit with the highest log marginal likelihood found (on the subset, or on all
        of ``X`` after a refinement), whose posterior conditions on all of ``X``.

    Raises:
        ValueError: If the data or the settings are malformed.
        RuntimeError: If every restart fails numerically.
    """
    X, y = _check_data(X, y)
    if n_restarts < 1:
        raise ValueError(f"n_restarts must be >= 1; got {n_restarts!r}")
    if not 0.0 < noise_floor < NOISE_MAX:
        raise ValueError(f"noise_floor must be in (0, {NOISE_MAX}); got {noise_floor!r}")
    if rank < 1:
        raise ValueError(f"rank must be >= 1; got {rank!r}")
    if max_fit_points is not None and (isinstance(max_fit_points, bool) or int(max_fit_points) != max_fit_points
                                       or max_fit_points < 2):
        raise ValueError(f"max_fit_points must be an int >= 2 or None; got {max_fit_points!r}")
    if refine_max_points is not None and (isinstance(refine_max_points, bool)
                                          or int(refine_max_points) != refine_max_points or refine_max_points < 1):
        raise ValueError(f"refine_max_points must be an int >= 1 or None; got {refine_max_points!r}")
    if lengthscale_prior is not None:
        mu, sigma = (float(v) for v in lengthscale_prior)
        if not (np.isfinite(mu) and np.isfinite(sigma) and sigma > 0):
            raise ValueError(f"lengthscale_prior must be (mu, sigma) with sigma > 0, finite; got {lengthscale_prior!r}")
        lengthscale_prior = (mu, sigma)
    family, ard = kernel_family(kernel)
    layout = _layout(X.shape[1], dict(categories or {}), terms)
    warm = None if init is None else _values_from_fit(init, layout, family, ard, rank, noise_floor)
    rng = as_generator(seed)
    if warp is not None:
        outside = [v for v in y if not warp.bounds.contains(float(v))]
        if outside:
            raise ValueError(f"{len(outside)} output(s) outside the warp's bounds {warp.bounds.text()}, "
                             f"e.g. {outside[0]!r}")
    g = y if warp is None else warp.forward(y)
    y_mean, y_std = _standardize(g)
    z = (g - y_mean) / y_std
    subset = None
    if max_fit_points is not None and X.shape[0] > max_fit_points:
        subset = fit_subset(X.shape[0], int(max_fit_points), rng, category_labels(X, categories))
    X_fit, z_fit = (X, z) if subset is None else (X[subset], z[subset])
    optima: list[list[NDArray[np.float64]]] = []
    refine = subset is not None and refine_max_points is not None and X.shape[0] <= refine_max_points
    if refine and warm is not None:
        # The warm start (an optimum for most of these observations) goes straight to the
        # refinement on all of them, next to the other starts' optima on the subset.
        best = None
        if n_restarts > 1:
            best = _maximise_likelihood(X_fit, z_fit, noise_floor, layout, family, ard, rank, n_restarts - 1,
                                        max_iters, rng, optima, None, lengthscale_prior)
        refined = _refine(X, z, noise_floor, layout, family, ard, rank, [warm, *optima], max_iters,
                          lengthscale_prior)
        if refined is None and best is None:  # nothing else to fall back on: the subset from the warm start
            best = _maximise_likelihood(X_fit, z_fit, noise_floor, layout, family, ard, rank, 1, max_iters, rng,
                                        optima, warm, lengthscale_prior)
        ll, values = refined if refined is not None else best  # type: ignore[misc]
    else:
        ll, values = _maximise_likelihood(X_fit, z_fit, noise_floor, layout, family, ard, rank, n_restarts,
                                          max_iters, rng, optima, warm, lengthscale_prior)
        if refine:
            refined = _refine(X, z, noise_floor, layout, family, ard, rank, optima, max_iters, lengthscale_prior)
            if refined is not None:  # else keep the subset's optimum
                ll, values = refined
    fitted_terms, noise = _read_terms(values, layout, family)
    gp = GPFit(
        terms=fitted_terms, noise_variance=noise + GPY_JITTER, y_mean=y_mean, y_std=y_std,
        log_likelihood=ll, X=X.copy(), y=y.copy(), kernel_name=kernel, warp=warp,
    )
    if subset is not None:
        # The subset's likelihood would not compare with other fits of the same data; the
        # full data's comes from the factor just computed (frozen dataclass, set once here).
        object.__setattr__(gp, "log_likelihood", gp.log_marginal_likelihood())
        log.debug("GP hyperparameters fitted on %d of %d observations", subset.shape[0], X.shape[0])
    return gp


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


def _maximise_likelihood(
    X: NDArray[np.float64], z: NDArray[np.float64], noise_floor: float, layout: list[_TermLayout],
    family: str, ard: bool, rank: int, n_restarts: int, max_iters: int, rng: np.random.Generator,
    optima: list[list[NDArray[np.float64]]] | None = None,
    warm: list[NDArray[np.float64]] | None = None,
    lengthscale_prior: tuple[float, float] | None = None,
) -> tuple[float, list[NDArray[np.float64]]]:
    """The best restart's log likelihood and parameter values (order of :func:`_start`).

    Every successful restart's optimum is appended to ``optima`` when given. ``warm``
    replaces restart 0's fixed start. With a prior, restarts are ranked by likelihood plus
    log prior (the MAP objective); the likelihood alone is returned.
    """
    n, d = X.shape
    best: tuple[float, list[NDArray[np.float64]]] | None = None
    errors: list[str] = []
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # GPy/paramz warn on every overflow and re-constraint
        try:
            model = _build_model(X, z, noise_floor, layout, family, ard, rank, lengthscale_prior)
        except np.linalg.LinAlgError as exc:
            raise RuntimeError(f"GP fit failed to start (n={n}, d={d}): {exc}") from exc
        for i in range(n_restarts):
            # With a warm start it comes first, then the usual sequence (fixed, random, ...).
            j = i if warm is None else i - 1
            start = warm if j < 0 else _start(layout, ard, rank, max(INIT_NOISE, noise_floor), rng if j else None)
            try:
                model[:] = np.concatenate(start)
                if n > 1:
                    model.optimize(optimizer="lbfgsb", max_iters=max_iters, messages=False)
                ll = float(model.log_likelihood())
                score = ll + float(model.log_prior())
            except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
                errors.append(f"restart {i}: {type(exc).__name__}: {exc}")
                log.debug("GP restart %d failed: %s", i, exc)
                continue
            if not (np.isfinite(ll) and np.isfinite(score)):
                errors.append(f"restart {i}: non-finite log likelihood {ll}")
                continue
            log.debug("GP restart %d: log likelihood %.4f", i, ll)
            values = [np.array(p.values, dtype=np.float64) for p in model.flattened_parameters]
            if optima is not None:
                optima.append(values)
            if best is None or score > best[0]:
                best = (score, ll, values)
            if n == 1:
                break  # nothing to optimise: every restart would give the same fit
    if best is None:
        raise RuntimeError(
            f"GP fit failed in all {n_restarts} restarts (n={n}, d={d}): " + "; ".join(errors)
        )
    return best[1], best[2]


def _refine(
    X: NDArray[np.float64], z: NDArray[np.float64], noise_floor: float, layout: list[_TermLayout],
    family: str, ard: bool, rank: int, starts: list[list[NDArray[np.float64]]], max_iters: int,
    lengthscale_prior: tuple[float, float] | None = None,
) -> tuple[float, list[NDArray[np.float64]]] | None:
    """Optimise from the start with the highest likelihood on this data (None if all fail).

    Scoring every start first costs one factorisation each; optimising costs tens. The
    optimum that is best on a subset need not be best on all the data (a lengthscale
    that switches a dimension off fits 300 Hartmann-6 points, not 500), so the subset's
    restarts are re-ranked here before the one refinement.
    """
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            model = _build_model(X, z, noise_floor, layout, family, ard, rank, lengthscale_prior)
            scored = []
            for start in starts:
                model[:] = np.concatenate(start)
                scored.append(float(model.log_likelihood()) + float(model.log_prior()))
            finite = [i for i, ll in enumerate(scored) if np.isfinite(ll)]
            if not finite:
                return None
            model[:] = np.concatenate(starts[max(finite, key=scored.__getitem__)])
            model.optimize(optimizer="lbfgsb", max_iters=max_iters, messages=False)
            ll = float(model.log_likelihood())
        except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
            log.debug("refining the GP fit on all %d observations failed: %s", X.shape[0], exc)
            return None
    if not np.isfinite(ll):
        return None
    return ll, [np.array(p.values, dtype=np.float64) for p in model.flattened_parameters]


def _build_model(
    X: NDArray[np.float64], z: NDArray[np.float64], noise_floor: float, layout: list[_TermLayout],
    family: str, ard: bool, rank: int, lengthscale_prior: tuple[float, float] | None = None,
) -> Any:
    """A bounded GPy ``GPRegression`` with the given terms (lazy GPy import).

    ``lengthscale_prior=(mu, sigma)`` puts ``GPy.priors.LogGaussian(mu, sigma)`` on the
    lengthscales of every stationary part (continuous columns only; coregionalization
    factors get none). The lengthscales keep their box: the bounded (logistic) transform
    has no log-Jacobian in GPy, so the MAP maximises likelihood times the LogNormal density
    of the lengthscale itself, as BoTorch/GPyTorch do.

    GPy copies kernels when it combines them, so the fitted values are read back from
    ``model.flattened_parameters``, whose order is the order built here: per term the
    stationary variance and lengthscale(s), then ``W`` and ``kappa`` of each factor;
    the noise variance last (see :func:`_start` and :func:`_read_terms`).
    """
    import GPy

    # GPy announces every model construction at INFO ("initializing Y", ...): one line per
    # fit would drown the sweep's own console output.
    logging.getLogger("GP").setLevel(max(logging.getLogger("GP").getEffectiveLevel(), logging.WARNING))
    if lengthscale_prior is not None:
        # paramz warns at every evaluation that the logistic transform's log-Jacobian is 0
        # (which is what the MAP here wants).
        quiet = logging.getLogger("paramz.transformations")
        quiet.setLevel(max(quiet.getEffectiveLevel(), logging.ERROR))
    stationary = {"matern52": GPy.kern.Matern52, "rbf": GPy.kern.RBF}[family]
    X_gpy = X.copy()
    summands = []
    for t, term in enumerate(layout):
        parts = []
        if term.continuous:
            k = stationary(len(term.continuous), active_dims=list(term.continuous), ARD=ard,
                           lengthscale=DEFAULT_LENGTHSCALE, name=f"t{t}_{family}")
            if lengthscale_prior is not None:
                # set_prior constrains the parameter positive (Logexp); the box is restored after.
                k.lengthscale.set_prior(GPy.priors.LogGaussian(*lengthscale_prior), warning=False)
            k.lengthscale.constrain_bounded(*LENGTHSCALE_BOUNDS, warning=False)
            if term.categorical:
                k.variance.constrain_fixed(INIT_VARIANCE, warning=False)
            else:
                k.variance.constrain_bounded(*VARIANCE_BOUNDS, warning=False)
            parts.append(k)
        for c, n_cat in term.categorical:
            X_gpy[:, c] = category_index(X[:, c], n_cat)
            b = GPy.kern.Coregionalize(1, output_dim=n_cat, rank=rank, active_dims=[c],
                                       W=np.full((n_cat, rank), INIT_W), kappa=np.full(n_cat, INIT_KAPPA),
                                       name=f"t{t}_c{c}")
            b.W.constrain_bounded(*W_BOUNDS, warning=False)
            b.kappa.constrain_bounded(*KAPPA_BOUNDS, warning=False)
            parts.append(b)
        summands.append(functools.reduce(operator.mul, parts))
    kern = functools.reduce(operator.add, summands)
    model = GPy.models.GPRegression(X_gpy, z[:, None], kernel=kern, noise_var=max(INIT_NOISE, noise_floor))
    model.likelihood.variance.constrain_bounded(noise_floor, NOISE_MAX, warning=False)
    return model


def _start(
    layout: list[_TermLayout], ard: bool, rank: int, noise: float, rng: np.random.Generator | None
) -> list[NDArray[np.float64]]:
    """A restart's starting values in the order of ``model.flattened_parameters`` (None: restart 0)."""
    lo, hi = np.log(INIT_LENGTHSCALE_RANGE[0]), np.log(INIT_LENGTHSCALE_RANGE[1])
    values: list[NDArray[np.float64]] = []
    for term in layout:
        if term.continuous:
            m = len(term.continuous) if ard else 1
            ls = np.full(m, DEFAULT_LENGTHSCALE) if rng is None else np.exp(rng.uniform(lo, hi, size=m))
            values += [np.array([INIT_VARIANCE]), ls]
        for _, n_cat in term.categorical:
            W = np.full(n_cat * rank, INIT_W) if rng is None else rng.normal(0.0, INIT_W, size=n_cat * rank)
            values += [W, np.full(n_cat, INIT_KAPPA)]
    return [*values, np.array([noise])]


def _values_from_fit(
    init: GPFit | Mapping[str, Any], layout: list[_TermLayout], family: str, ard: bool, rank: int,
    noise_floor: float,
) -> list[NDArray[np.float64]] | None:
    """``init``'s hyperparameters as a start in the order of :func:`_start`, inside the boxes.

    ``init`` is a :class:`GPFit` or its :meth:`GPFit.hyperparameters` (JSON-able, e.g. from
    a saved searcher state). None when it has another layout (terms, columns, categories,
    rank or kernel family), or is malformed.
    """
    hp = init.hyperparameters() if isinstance(init, GPFit) else init
    try:
        if "terms" in hp:
            terms = list(hp["terms"])
        else:
            terms = [{"columns": list(layout[0].continuous) if len(layout) == 1 else None,
                      "family": kernel_family(str(hp.get("kernel", "matern52-ard")))[0],
                      "lengthscales": hp["lengthscales"], "variance": hp["variance"], "factors": []}]
        if len(terms) != len(layout):
            return None

        def inside(v: Any, bounds: tuple[float, float]) -> NDArray[np.float64]:
            lo, hi = bounds  # strictly inside: the logistic transform is infinite on the bounds
            margin = 1e-9 * (hi - lo)
            return np.clip(np.asarray(v, dtype=np.float64).ravel(), lo + margin, hi - margin)

        values: list[NDArray[np.float64]] = []
        for term, t in zip(layout, terms):
            factors = list(t.get("factors", []))
            shapes = [np.asarray(f["W"], dtype=np.float64).reshape(len(f["kappa"]), -1).shape for f in factors]
            if (t["columns"] is None or tuple(t["columns"]) != term.continuous or t.get("family", family) != family
                    or tuple((int(f["column"]), k) for f, (k, _) in zip(factors, shapes)) != term.categorical
                    or any(r != rank for _, r in shapes)):
                return None
            if term.continuous:
                ls = np.asarray(t["lengthscales"], dtype=np.float64).ravel()
                if ls.shape[0] != len(term.continuous):
                    return None
                ls = ls if ard else np.array([float(np.exp(np.mean(np.log(ls))))])
                variance = np.array([INIT_VARIANCE]) if term.categorical else inside([t["variance"]], VARIANCE_BOUNDS)
                values += [variance, inside(ls, LENGTHSCALE_BOUNDS)]
            for f in factors:
                values += [inside(f["W"], W_BOUNDS), inside(f["kappa"], KAPPA_BOUNDS)]
        noise = float(hp["noise_variance"]) - GPY_JITTER
        values.append(inside([max(noise, noise_floor)], (noise_floor, NOISE_MAX)))
    except (KeyError, TypeError, ValueError) as exc:
        log.debug("warm start ignored: %s", exc)
        return None
    if not all(np.all(np.isfinite(v)) for v in values):
        return None
    return values


def dimension_scaled_prior(d: int) -> tuple[float, float]:
    """``(mu, sigma)`` of the LogNormal lengthscale prior of Hvarfner et al. (2024) for ``d`` inputs.

    ``mu = sqrt(2) + log(d) / 2``, ``sigma = sqrt(3)`` on unit-cube inputs, BoTorch's default
    since 0.12 (whose ``SingleTaskGP`` the efficiency benchmark compares with). As a MAP
    penalty its mode is ``exp(mu - sigma^2)``: 0.29 for ``d = 2``, 0.5 for ``d = 6``; it
    keeps a lengthscale fitted on a handful of points from running off to the box's edge.

    Reference:
        Hvarfner, C., Hellsten, E. O., Nardi, L. (2024). Vanilla Bayesian Optimization
        Performs Great in High Dimensions. ICML 2024.
    """
    if d < 1:
        raise ValueError(f"d must be >= 1; got {d!r}")
    return float(np.sqrt(2.0) + 0.5 * np.log(d)), float(np.sqrt(3.0))


def _read_terms(
    values: list[NDArray[np.float64]], layout: list[_TermLayout], family: str
) -> tuple[tuple[KernelTerm, ...], float]:
    """Fitted terms and noise variance from parameter values in the order of :func:`_start`."""
    it = iter(values)
    terms = []
    for term in layout:
        variance, ls = 1.0, np.zeros(0)
        if term.continuous:
            variance = float(next(it)[0])
            ls = np.broadcast_to(next(it), (len(term.continuous),)).astype(np.float64)
        factors = tuple(
            CategoryFactor(c, next(it).reshape(n_cat, -1).copy(), next(it).copy()) for c, n_cat in term.categorical
        )
        terms.append(KernelTerm(term.continuous, ls, variance, factors, family))
    noise = float(next(it)[0])
    return tuple(terms), noise
