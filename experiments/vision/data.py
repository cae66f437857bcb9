"""Datasets of the experiments, as tensors or torchvision datasets with one common shape.

:func:`load_dataset` returns an :class:`ImageData` for any ``data.name``:

- ``digits``: scikit-learn's bundled 8x8 handwritten digits (1,797 images, 10 classes),
  ships with scikit-learn, so the CPU-scale experiments need no download. One channel,
  upsampled (bilinear) to ``image_size`` pixels so the convolutional models have room for
  their pools; a stratified train/test split (75/25) seeded by ``split_seed``.
- ``breast_cancer``: scikit-learn's bundled Wisconsin breast-cancer table (569 examples,
  30 features, 2 classes), standardised on the training split and zero-padded to a 1x6x6
  "image", so that every model accepts it. It is the second dataset of the CPU-scale
  ``batch_size`` study (model x dataset is a categorical factor there, as in Bell et al.
  2022, case study 2), not an image task.
- ``cifar10``, ``cifar100``, ``tiny_imagenet``: read by torchvision's own classes from
  ``root``; see :mod:`vision.files` for the expected files and how to get them.

In-memory datasets are normalised per channel with the training split's statistics;
``subset`` keeps a seeded random ``subset`` of the training examples for quick runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, Subset

DATASETS = ("digits", "breast_cancer", "cifar10", "cifar100", "tiny_imagenet")


@dataclass(frozen=True)
class TensorSplit:
    """One split held in memory: images ``x`` (N, C, H, W) float32, labels ``y`` (N,) int64."""

    x: torch.Tensor
    y: torch.Tensor

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def to(self, device: str | torch.device) -> TensorSplit:
        return TensorSplit(self.x.to(device), self.y.to(device))


Split = TensorSplit | Dataset  # a torchvision dataset yields (image tensor, label) pairs


@dataclass(frozen=True)
class ImageData:
    """Train and test splits of one dataset, and the shape the models must accept."""

    name: str
    train: Split
    test: Split
    num_classes: int
    channels: int
    image_size: int


def load_dataset(name: str, root: str = "data", *, split_seed: int = 0, subset: int | None = None,
                 image_size: int = 16, verify_md5: bool = True) -> ImageData:
    """Load ``name`` (one of :data:`DATASETS`); nothing is ever downloaded.

    Args:
        name: dataset name.
        root: folder holding the downloaded datasets (CIFAR, Tiny ImageNet).
        split_seed: seed of the train/test split (the scikit-learn datasets; CIFAR and
            Tiny ImageNet have official splits) and of the ``subset`` draw.
        subset: keep at most this many training examples (seeded draw); None keeps all.
        image_size: side in pixels of the upsampled ``digits`` images.
        verify_md5: check the CIFAR files against torchvision's md5 sums.

    Returns:
        The splits, the number of classes, and the image shape.

    Raises:
        ValueError: an unknown ``name`` or a bad ``subset``/``image_size``.
        vision.files.DatasetNotFoundError: the files of a downloaded dataset are missing.
    """
    from . import files

    if name == "digits":
        data = _digits(split_seed, image_size)
    elif name == "breast_cancer":
        data = _breast_cancer(split_seed)
    elif name in ("cifar10", "cifar100"):
        data = files.load_cifar(name, root, verify_md5=verify_md5)
    elif name == "tiny_imagenet":
        data = files.load_tiny_imagenet(root)
    else:
        raise ValueError(f"data.name={name!r} is not a dataset here: use one of {', '.join(DATASETS)} "
                         f"(e.g. data.name=digits).")
    if subset is not None:
        data = _take_subset(data, subset, split_seed)
    return data


def normalise(train_x: torch.Tensor, test_x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Standardise both splits per channel, in place, with the training split's mean and sd."""
    mean = train_x.mean(dim=(0, 2, 3), keepdim=True)
    sd = train_x.std(dim=(0, 2, 3), keepdim=True).clamp_min(1e-8)
    return train_x.sub_(mean).div_(sd), test_x.sub_(mean).div_(sd)


def _digits(split_seed: int, image_size: int) -> ImageData:
    from sklearn.datasets import load_digits

    if image_size < 8:
        raise ValueError(f"data.image_size={image_size} is too small: digits are 8x8 pixels. Use data.image_size=16.")
    bunch: Any = load_digits()
    images = torch.as_tensor(bunch.images / 16.0, dtype=torch.float32).unsqueeze(1)  # (1797, 1, 8, 8) in [0, 1]
    if image_size != 8:
        images = torch.nn.functional.interpolate(images, size=(image_size, image_size), mode="bilinear",
                                                 align_corners=False)
    train, test = _split(images, bunch.target, split_seed)
    x_train, x_test = normalise(train.x, test.x)
    return ImageData("digits", TensorSplit(x_train, train.y), TensorSplit(x_test, test.y), 10, 1, image_size)


def _breast_cancer(split_seed: int) -> ImageData:
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    table = torch.as_tensor(X, dtype=torch.float32)
    train, test = _split(table, y, split_seed)
    mean, sd = train.x.mean(0), train.x.std(0).clamp_min(1e-8)

    def as_image(t: torch.Tensor) -> torch.Tensor:  # (n, 30) -> (n, 1, 6, 6), six zero pixels
        padded = torch.nn.functional.pad((t - mean) / sd, (0, 36 - t.shape[1]))
        return padded.reshape(-1, 1, 6, 6)

    return ImageData("breast_cancer", TensorSplit(as_image(train.x), train.y), TensorSplit(as_image(test.x), test.y),
                     2, 1, 6)


def _split(x: torch.Tensor, y: np.ndarray, split_seed: int) -> tuple[TensorSplit, TensorSplit]:
    """Stratified 75/25 split seeded by ``split_seed``."""
    from sklearn.model_selection import train_test_split

    index = np.arange(len(y))
    train_i, test_i = train_test_split(index, test_size=0.25, random_state=split_seed, stratify=y)
    labels = torch.as_tensor(y, dtype=torch.int64)
    train_t, test_t = torch.as_tensor(train_i), torch.as_tensor(test_i)
    return TensorSplit(x[train_t], labels[train_t]), TensorSplit(x[test_t], labels[test_t])


def _take_subset(data: ImageData, subset: int, seed: int) -> ImageData:
    n = len(data.train)  # type: ignore[arg-type]  # torch's Dataset type has no __len__; every split here has one
    if subset < 1:
        raise ValueError(f"data.subset={subset} is invalid: keep at least 1 training example, or data.subset=null "
                         f"for all {n}.")
    if subset >= n:
        return data
    keep = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:subset].sort().values
    if isinstance(data.train, TensorSplit):
        train: Split = TensorSplit(data.train.x[keep], data.train.y[keep])
    else:
        train = Subset(data.train, keep.tolist())
    return ImageData(data.name, train, data.test, data.num_classes, data.channels, data.image_size)
