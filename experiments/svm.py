"""RBF-kernel SVC on scikit-learn's bundled Wisconsin breast-cancer data.

The multiverse paper's motivating example (Bell et al. 2022, Fig. 1): how test accuracy
depends on the regularisation C and the kernel width gamma, both over many decades.

    python experiments/svm.py --multirun hydra/sweeper=multiverse
    python experiments/svm.py C=10 gamma=0.01          # one configuration, no sweep

The fit itself is :func:`svc_scores`, a plain function (``experiments/svm_maps.py``
calls it on a grid for the ground truth).
"""

from __future__ import annotations

import time

import hydra
from omegaconf import DictConfig
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC


def svc_scores(C: float, gamma: float, *, test_size: float = 0.3, split_seed: int = 0,
               max_iter: int = 1_000_000) -> dict[str, float]:
    """Fit one standardised RBF SVC on a stratified split; return test and train accuracy and fit time."""
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=test_size, random_state=split_seed, stratify=y
    )
    model = make_pipeline(
        StandardScaler(),
        SVC(C=float(C), gamma=float(gamma), kernel="rbf", max_iter=max_iter),
    )
    started = time.perf_counter()
    model.fit(X_train, y_train)
    return {
        "test_acc": float(model.score(X_test, y_test)),
        "train_acc": float(model.score(X_train, y_train)),
        "fit_time_s": time.perf_counter() - started,
    }


@hydra.main(config_path="../conf", config_name="svm", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, float]:
    """Fit one SVC and return its train and test accuracy."""
    return svc_scores(cfg.C, cfg.gamma, test_size=cfg.data.test_size, split_seed=cfg.data.split_seed,
                      max_iter=cfg.max_iter)


if __name__ == "__main__":
    main()
