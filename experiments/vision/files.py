"""Datasets read from disk by torchvision's own classes, with errors that say how to get them.

Nothing is downloaded at run time (``download=False`` always): a sweep of hundreds of
trials must not fetch the same archive hundreds of times, and a cluster's workers often
have no internet. Download each dataset once by hand into ``data.root``:

- ``cifar10``: ``<root>/cifar-10-batches-py/{data_batch_1..5, test_batch, batches.meta}``;
  download https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz and
  ``tar -xzf cifar-10-python.tar.gz -C <root>``.
- ``cifar100``: ``<root>/cifar-100-python/{train, test, meta}``;
  download https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz and
  ``tar -xzf cifar-100-python.tar.gz -C <root>``.
- ``tiny_imagenet``: ``<root>/tiny-imagenet-200/train/<wnid>/images/*.JPEG`` and
  ``<root>/tiny-imagenet-200/val/<wnid>/*.JPEG`` (200 wnids each); download
  http://cs231n.stanford.edu/tiny-imagenet-200.zip, ``unzip tiny-imagenet-200.zip -d <root>``,
  then reorganise the validation split (:data:`TINY_VAL_COMMAND`).

The official Tiny ImageNet validation split is one flat ``val/images/`` folder with the
labels in ``val/val_annotations.txt``; :class:`torchvision.datasets.ImageFolder` needs one
folder per class, so it must be reorganised once (:data:`TINY_VAL_COMMAND`, or
:func:`reorganise_tiny_imagenet_val`). Its test split has no public labels and is not
used: "test" accuracy on Tiny ImageNet is accuracy on the official validation split.

torchvision's CIFAR classes verify the md5 sum of every file against the official release,
even with ``download=False``. ``verify_md5=False`` reads the same files through a subclass
whose file lists carry no md5 sums (torchvision's ``check_integrity`` then checks existence
only), for copies that are legitimately different, e.g. the synthetic ones of the tests.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch

from .data import ImageData, TensorSplit, normalise

TINY_URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"
TINY_FOLDER = "tiny-imagenet-200"
TINY_VAL_COMMAND = ("cd {root}/tiny-imagenet-200/val && while read -r f c _; do mkdir -p \"$c\" && "
                    "mv \"images/$f\" \"$c/\"; done < val_annotations.txt && rmdir images")
IMAGENET_MEAN, IMAGENET_SD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class DatasetNotFoundError(FileNotFoundError):
    """A dataset's files are not under ``data.root``; the message says what to download and where."""


class DatasetCorruptError(RuntimeError):
    """A dataset's files are there but are not the official release (md5 mismatch)."""


def load_cifar(name: str, root: str | Path, *, verify_md5: bool = True) -> ImageData:
    """Read CIFAR-10 or CIFAR-100 with torchvision's class into normalised tensors.

    Args:
        name: ``cifar10`` or ``cifar100``.
        root: ``data.root``, the folder holding ``cifar-10-batches-py/`` or ``cifar-100-python/``.
        verify_md5: check every file against torchvision's md5 sums.

    Returns:
        Train (50,000) and test (10,000) images as (N, 3, 32, 32) float32 tensors.

    Raises:
        DatasetNotFoundError: a file is missing (the message lists them and the download).
        DatasetCorruptError: the files fail torchvision's md5 check.
    """
    from torchvision.datasets import CIFAR10, CIFAR100

    cls: Any = CIFAR10 if name == "cifar10" else CIFAR100
    title = "CIFAR-10" if name == "cifar10" else "CIFAR-100"
    root = Path(root).expanduser().resolve()
    folder = root / cls.base_folder
    expected = [f for f, _ in cls.train_list + cls.test_list] + [cls.meta["filename"]]
    missing = [f for f in expected if not (folder / f).is_file()]
    if missing:
        absent = "none of them is there" if len(missing) == len(expected) else f"missing: {', '.join(missing)}"
        raise DatasetNotFoundError(
            f"{title} not found: expected {folder}/{{{', '.join(expected)}}} ({absent}). "
            f"Nothing is downloaded at run time: download {cls.url} by hand and unpack it into data.root "
            f"with `tar -xzf {cls.filename} -C {root}`, or set data.root to the folder that holds "
            f"{cls.base_folder}/."
        )
    reader = cls if verify_md5 else files_only(cls)
    try:
        train, test = reader(str(root), train=True, download=False), reader(str(root), train=False, download=False)
    except RuntimeError as exc:  # torchvision: "Dataset not found or corrupted" (md5 mismatch)
        raise DatasetCorruptError(
            f"{title} files under {folder} fail torchvision's md5 check ({exc}): a partial download or not the "
            f"official release. Download {cls.url} again and unpack it with `tar -xzf {cls.filename} -C {root}`, "
            f"or set data.verify_md5=false to read them anyway."
        ) from exc
    x_train, x_test = normalise(_chw(train.data), _chw(test.data))
    return ImageData(name, TensorSplit(x_train, torch.as_tensor(train.targets, dtype=torch.int64)),
                     TensorSplit(x_test, torch.as_tensor(test.targets, dtype=torch.int64)),
                     len(train.classes), 3, 32)


def files_only(cls: type) -> type:
    """``cls`` (a torchvision CIFAR class) with the md5 sums dropped: existence is checked, not content."""
    c: Any = cls
    return type(f"{c.__name__}FilesOnly", (c,), {
        "train_list": [[f, None] for f, _ in c.train_list],
        "test_list": [[f, None] for f, _ in c.test_list],
        "meta": {**c.meta, "md5": None},
    })


def load_tiny_imagenet(root: str | Path) -> ImageData:
    """Tiny ImageNet (200 classes, 64x64) as :class:`~torchvision.datasets.ImageFolder` datasets.

    The images stay on disk (100,000 training JPEGs); the training loop reads them in
    batches. Normalised with ImageNet's channel statistics.

    Raises:
        DatasetNotFoundError: the folders are missing, or ``val/`` is not yet reorganised
            into class folders (the message gives the command).
    """
    from torchvision import transforms
    from torchvision.datasets import ImageFolder

    root = Path(root).expanduser().resolve()
    base = root / TINY_FOLDER
    train_dir, val_dir = base / "train", base / "val"
    layout = (f"expected {train_dir}/<wnid>/images/*.JPEG and {val_dir}/<wnid>/*.JPEG (one folder per class, "
              f"200 classes)")
    if not train_dir.is_dir():
        raise DatasetNotFoundError(
            f"Tiny ImageNet not found: {layout}. Nothing is downloaded at run time: download {TINY_URL} by hand, "
            f"unpack it with `unzip tiny-imagenet-200.zip -d {root}`, then put the validation images into class "
            f"folders with `{TINY_VAL_COMMAND.format(root=root)}`."
        )
    if (val_dir / "images").is_dir() or not val_dir.is_dir():
        raise DatasetNotFoundError(
            f"Tiny ImageNet's validation split is not organised by class: {layout}. The official {val_dir} is one "
            f"flat images/ folder labelled by val_annotations.txt; move each image into its class folder once "
            f"with `{TINY_VAL_COMMAND.format(root=root)}`."
        )
    to_tensor = transforms.Compose([transforms.ToTensor(), transforms.Normalize(IMAGENET_MEAN, IMAGENET_SD)])
    train, val = ImageFolder(str(train_dir), transform=to_tensor), ImageFolder(str(val_dir), transform=to_tensor)
    if val.classes != train.classes:
        raise DatasetNotFoundError(
            f"Tiny ImageNet's {val_dir} has {len(val.classes)} class folders that differ from the {len(train.classes)} "
            f"in {train_dir}: reorganise the official val split with `{TINY_VAL_COMMAND.format(root=root)}`."
        )
    return ImageData("tiny_imagenet", train, val, len(train.classes), 3, 64)


def reorganise_tiny_imagenet_val(root: str | Path) -> int:
    """Move ``val/images/*.JPEG`` into ``val/<wnid>/`` by ``val_annotations.txt``; the shell command in Python.

    Returns:
        The number of images moved.
    """
    val_dir = Path(root).expanduser() / TINY_FOLDER / "val"
    moved = 0
    for line in (val_dir / "val_annotations.txt").read_text().splitlines():
        if not line.strip():
            continue
        filename, wnid = line.split("\t")[:2]
        (val_dir / wnid).mkdir(exist_ok=True)
        shutil.move(str(val_dir / "images" / filename), str(val_dir / wnid / filename))
        moved += 1
    (val_dir / "images").rmdir()
    return moved


def _chw(data: Any) -> torch.Tensor:
    """(N, H, W, C) uint8 -> (N, C, H, W) float32 in [0, 1]."""
    return torch.from_numpy(data).permute(0, 3, 1, 2).float().div_(255.0)
