"""The SVC accuracy map: cross-validated accuracy of an RBF SVC on breast cancer over log C x log gamma.

A hyperparameter map with the features real sweeps have and test functions lack: a plateau
at the majority-class accuracy (too small ``C`` or too large ``gamma``), a ridge of good
settings along a diagonal, and steep cliffs between them. Training 5-fold SVCs inside a
benchmark would cost far more than the searchers being compared, so the map is computed
once, on a grid, and committed (``bench/data/svc_grid.npz``); trials look it up by bilinear
interpolation in (log10 C, log10 gamma), so no SVC is trained during the benchmark.

How the grid was made (:func:`compute_grid`, ``python -m bench.svc_grid``):
scikit-learn's bundled ``load_breast_cancer`` (569 samples, 30 features);
``make_pipeline(StandardScaler(), SVC(kernel="rbf", C=C, gamma=gamma))``; mean accuracy of
``StratifiedKFold(5, shuffle=True, random_state=0)``; ``C`` log-spaced over ``[1e-3, 1e3]``
and ``gamma`` over ``[1e-5, 1e1]``, 40 values each (``np.logspace``). The unit square maps to
``(log10 C, log10 gamma)`` linearly, so grid node ``(i, j)`` sits at ``(i / 39, j / 39)``.
"""

from __future__ import annotations

import argparse
import functools
import time
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

GRID_PATH = Path(__file__).resolve().parent / "data" / "svc_grid.npz"
LOG10_C = (-3.0, 3.0)
LOG10_GAMMA = (-5.0, 1.0)
GRID_SIZE = 40
CV_FOLDS = 5
CV_SEED = 0


def compute_grid(size: int = GRID_SIZE) -> dict[str, NDArray[np.float64]]:
    """Cross-validated accuracy on a ``size x size`` grid; rows index ``C``, columns ``gamma``."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    X, y = load_breast_cancer(return_X_y=True)
    folds = StratifiedKFold(CV_FOLDS, shuffle=True, random_state=CV_SEED)
    log_c = np.linspace(*LOG10_C, size)
    log_gamma = np.linspace(*LOG10_GAMMA, size)
    accuracy = np.empty((size, size))
    for i, lc in enumerate(log_c):
        for j, lg in enumerate(log_gamma):
            model = make_pipeline(StandardScaler(), SVC(kernel="rbf", C=10.0**lc, gamma=10.0**lg))
            accuracy[i, j] = cross_val_score(model, X, y, cv=folds, scoring="accuracy").mean()
    return {"log10_C": log_c, "log10_gamma": log_gamma, "accuracy": accuracy}


@functools.cache
def load_grid(path: Path = GRID_PATH) -> dict[str, NDArray[np.float64]]:
    """The committed grid: ``log10_C`` (m,), ``log10_gamma`` (m,), ``accuracy`` (m, m)."""
    with np.load(path) as data:
        return {k: np.array(data[k]) for k in ("log10_C", "log10_gamma", "accuracy")}


def svc_accuracy(X_unit: ArrayLike) -> NDArray[np.float64]:
    """Accuracy at points of the unit square, ``(n, 2)`` -> ``(n,)``, bilinear between grid nodes.

    Column 0 is ``log10 C`` scaled to [0, 1], column 1 ``log10 gamma``. At a grid node the
    value is exactly the cross-validated accuracy computed there.
    """
    from scipy.interpolate import RegularGridInterpolator

    X = np.clip(np.atleast_2d(np.asarray(X_unit, dtype=np.float64)), 0.0, 1.0)
    if X.shape[1] != 2:
        raise ValueError(f"expected points with 2 coordinates, got shape {X.shape}")
    grid = load_grid()
    m = grid["accuracy"].shape[0]
    axis = np.linspace(0.0, 1.0, m)
    return RegularGridInterpolator((axis, axis), grid["accuracy"], method="linear")(X)


def grid_points() -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Every grid node in the unit square, ``(m * m, 2)``, and its accuracy ``(m * m,)``: the test set."""
    acc = load_grid()["accuracy"]
    axis = np.linspace(0.0, 1.0, acc.shape[0])
    U = np.stack(np.meshgrid(axis, axis, indexing="ij"), axis=-1).reshape(-1, 2)
    return U, acc.reshape(-1)


def main() -> None:
    parser = argparse.ArgumentParser(description="compute and save the SVC accuracy grid")
    parser.add_argument("--size", type=int, default=GRID_SIZE)
    parser.add_argument("--out", type=Path, default=GRID_PATH)
    args = parser.parse_args()
    start = time.perf_counter()
    grid = compute_grid(args.size)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, **grid)
    acc = grid["accuracy"]
    print(f"wrote {args.out}: {acc.shape}, accuracy {acc.min():.4f}..{acc.max():.4f}, "
          f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
