"""Datasets of experiments/train.py: bundled ones, and on-disk ones read by torchvision's own classes."""

from __future__ import annotations

import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import REPO
from tests.documented import documented

sys.path.insert(0, str(REPO / "experiments"))  # experiments/ is not a package: import its vision/ directly

from vision import DatasetCorruptError, DatasetNotFoundError, TensorSplit, load_dataset
from vision.files import files_only, reorganise_tiny_imagenet_val

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"


def test_digits_are_upsampled_one_channel_images_with_a_stratified_split() -> None:
    data = load_dataset("digits", split_seed=0, image_size=16)
    assert isinstance(data.train, TensorSplit) and isinstance(data.test, TensorSplit)
    assert data.train.x.shape == (1347, 1, 16, 16) and data.test.x.shape == (450, 1, 16, 16)
    assert (data.num_classes, data.channels, data.image_size) == (10, 1, 16)
    assert data.train.y.dtype == torch.int64 and set(data.test.y.tolist()) == set(range(10))
    assert abs(float(data.train.x.mean())) < 1e-5 and abs(float(data.train.x.std()) - 1) < 1e-3  # standardised
    assert np.bincount(data.test.y.numpy()).min() >= 43  # stratified: ~45 of each digit
    assert load_dataset("digits", image_size=8).train.x.shape == (1347, 1, 8, 8)


def test_the_digits_split_is_seeded() -> None:
    a, b, c = (load_dataset("digits", split_seed=s, image_size=8) for s in (0, 0, 1))
    assert (torch.equal(a.train.x, b.train.x)  # type: ignore[union-attr]  # a TensorSplit
            and torch.equal(a.test.y, b.test.y))  # type: ignore[union-attr]  # a TensorSplit
    assert not torch.equal(a.test.y, c.test.y)  # type: ignore[union-attr]  # a TensorSplit
    assert a.train.x.shape == c.train.x.shape  # type: ignore[union-attr]  # a TensorSplit


def test_subset_keeps_a_seeded_sample_of_the_training_split() -> None:
    full = load_dataset("digits", image_size=8)
    small, again, other = (load_dataset("digits", image_size=8, subset=100, split_seed=s) for s in (0, 0, 1))
    assert (len(small.train) == 100  # type: ignore[arg-type]  # torch's Dataset has no __len__
            and len(small.test) == len(full.test))  # type: ignore[arg-type]  # torch's Dataset has no __len__
    assert torch.equal(small.train.y, again.train.y)  # type: ignore[union-attr]  # a TensorSplit
    assert not torch.equal(small.train.x, other.train.x)  # type: ignore[union-attr]  # a TensorSplit
    with pytest.raises(ValueError, match="data.subset=0 is invalid"):
        load_dataset("digits", subset=0)


def test_breast_cancer_is_a_padded_one_channel_table() -> None:
    data = load_dataset("breast_cancer")
    assert (data.train.x.shape == (426, 1, 6, 6)  # type: ignore[union-attr]  # a TensorSplit
            and data.test.x.shape == (143, 1, 6, 6))  # type: ignore[union-attr]  # a TensorSplit
    assert data.num_classes == 2
    assert torch.all(data.train.x.flatten(1)[:, 30:] == 0)  # type: ignore[union-attr]  # a TensorSplit


def test_an_unknown_dataset_names_the_choices() -> None:
    with pytest.raises(ValueError, match=r"data.name='mnist' is not a dataset here: use one of digits, "):
        load_dataset("mnist")


@pytest.mark.parametrize(("name", "expected"), [
    ("cifar10", ["CIFAR-10 not found", "cifar-10-batches-py/{data_batch_1, data_batch_2, data_batch_3, data_batch_4, "
                 "data_batch_5, test_batch, batches.meta}", CIFAR10_URL, "tar -xzf cifar-10-python.tar.gz -C "]),
    ("cifar100", ["CIFAR-100 not found", "cifar-100-python/{train, test, meta}",
                  "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz", "tar -xzf cifar-100-python.tar.gz -C "]),
    ("tiny_imagenet", ["Tiny ImageNet not found", "tiny-imagenet-200/train/<wnid>/images/*.JPEG",
                       "tiny-imagenet-200/val/<wnid>/*.JPEG", "http://cs231n.stanford.edu/tiny-imagenet-200.zip",
                       "unzip tiny-imagenet-200.zip -d ", "val_annotations.txt"]),
])
def test_a_missing_dataset_names_the_files_and_how_to_get_them(tmp_path: Path, name: str, expected: list[str]) -> None:
    with pytest.raises(DatasetNotFoundError) as info:
        load_dataset(name, str(tmp_path))
    assert isinstance(info.value, FileNotFoundError)
    message = str(info.value)
    for text in expected:
        assert text in message
    assert str(tmp_path.resolve()) in message


def _write_cifar(root: Path, name: str, n_train: int = 4, n_test: int = 6) -> dict[str, np.ndarray]:
    """A synthetic CIFAR copy in the real on-disk format: pickled dicts of uint8 rows (n, 3072) and labels.

    Each image is constant per channel: red = 20 * label, green = 100, blue = 255 - 20 * label.
    """
    classes = 10 if name == "cifar10" else 100
    folder = root / ("cifar-10-batches-py" if name == "cifar10" else "cifar-100-python")
    folder.mkdir(parents=True)
    label_key = "labels" if name == "cifar10" else "fine_labels"
    batches = [f"data_batch_{i}" for i in range(1, 6)] if name == "cifar10" else ["train"]
    rng = np.random.default_rng(0)
    written: dict[str, np.ndarray] = {}

    def dump(filename: str, n: int) -> None:
        labels = rng.integers(0, min(classes, 12), n)
        planes = np.stack([20 * labels, np.full(n, 100), 255 - 20 * labels], axis=1)  # (n, 3)
        data = np.repeat(planes, 1024, axis=1).astype(np.uint8)  # (n, 3072): R plane, G plane, B plane
        with open(folder / filename, "wb") as f:
            pickle.dump({"data": data, label_key: labels.tolist(), "batch_label": filename}, f)
        written[filename] = labels

    for b in batches:
        dump(b, n_train)
    dump("test_batch" if name == "cifar10" else "test", n_test)
    meta_name, meta_key = ("batches.meta", "label_names") if name == "cifar10" else ("meta", "fine_label_names")
    with open(folder / meta_name, "wb") as f:
        pickle.dump({meta_key: [f"class{i}" for i in range(classes)]}, f)
    return written


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_a_synthetic_cifar_loads_through_torchvision_with_right_shapes_and_labels(tmp_path: Path, name: str) -> None:
    written = _write_cifar(tmp_path, name)
    data = load_dataset(name, str(tmp_path), verify_md5=False)
    train_files = [f for f in written if f not in ("test_batch", "test")]
    n_train = 4 * len(train_files)
    assert data.train.x.shape == (n_train, 3, 32, 32)  # type: ignore[union-attr]  # a TensorSplit
    assert data.test.x.shape == (6, 3, 32, 32)  # type: ignore[union-attr]  # a TensorSplit
    assert (data.num_classes, data.channels, data.image_size) == ((10 if name == "cifar10" else 100), 3, 32)
    labels = np.concatenate([written[f] for f in train_files])
    assert data.train.y.tolist() == labels.tolist()  # type: ignore[union-attr]  # a TensorSplit
    x = data.train.x  # type: ignore[union-attr]  # a TensorSplit
    # Channels in the right place: each plane is constant, red rises and blue falls with the label.
    assert torch.all(x.flatten(2).std(dim=2) == 0)
    red, blue = x[:, 0, 0, 0].numpy(), x[:, 2, 0, 0].numpy()
    order = np.argsort(labels, kind="stable")
    assert np.all(np.diff(red[order]) >= 0) and np.all(np.diff(blue[order]) <= 0)
    assert abs(float(x[:, 0].mean())) < 1e-5  # normalised per channel on the training split
    # The raw pixels are what torchvision's own reader (md5 sums dropped, nothing else changed) returns.
    from torchvision.datasets import CIFAR10, CIFAR100

    raw = files_only(CIFAR10 if name == "cifar10" else CIFAR100)(str(tmp_path), train=False)
    assert raw.data.shape == (6, 32, 32, 3)
    assert raw.targets == written["test_batch" if name == "cifar10" else "test"].tolist()


def test_a_cifar_copy_that_fails_the_md5_check_says_so(tmp_path: Path) -> None:
    _write_cifar(tmp_path, "cifar10")
    with pytest.raises(DatasetCorruptError, match=r"fail torchvision's md5 check.*data.verify_md5=false"):
        load_dataset("cifar10", str(tmp_path))


def test_a_partial_cifar_lists_the_missing_files(tmp_path: Path) -> None:
    _write_cifar(tmp_path, "cifar10")
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(DatasetNotFoundError, match=r"\(missing: data_batch_3\)"):
        load_dataset("cifar10", str(tmp_path), verify_md5=False)


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_tiny_imagenet_needs_its_val_split_in_class_folders(tmp_path: Path) -> None:
    from PIL import Image

    base = tmp_path / "tiny-imagenet-200"
    wnids = ["n01443537", "n01629819"]
    for k, wnid in enumerate(wnids):
        (base / "train" / wnid / "images").mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (64, 64), (100 * k, 50, 0)).save(base / "train" / wnid / "images" / f"{wnid}_{i}.JPEG")
    (base / "val" / "images").mkdir(parents=True)
    lines = []
    for i in range(4):
        Image.new("RGB", (64, 64), (0, 0, 60 * i)).save(base / "val" / "images" / f"val_{i}.JPEG")
        lines.append(f"val_{i}.JPEG\t{wnids[i % 2]}\t0\t0\t63\t63")
    (base / "val" / "val_annotations.txt").write_text("\n".join(lines) + "\n")

    with pytest.raises(DatasetNotFoundError, match=r"validation split is not organised by class.*val_annotations.txt"):
        load_dataset("tiny_imagenet", str(tmp_path))
    # The README's shell command does what the function does (on a copy).
    by_shell = tmp_path / "by-shell"
    shutil.copytree(base, by_shell / "tiny-imagenet-200")
    command = documented('cd <data.root>/tiny-imagenet-200/val && while read -r f c _; do mkdir -p "$c" && '
                         'mv "images/$f" "$c/"; done < val_annotations.txt && rmdir images')
    subprocess.run(["bash", "-c", command.replace("<data.root>", str(by_shell))], check=True)
    assert reorganise_tiny_imagenet_val(tmp_path) == 4
    assert _tree(by_shell / "tiny-imagenet-200") == _tree(base)
    data = load_dataset("tiny_imagenet", str(tmp_path))
    assert (data.num_classes, data.channels, data.image_size) == (2, 3, 64)
    assert len(data.train) == 6 and len(data.test) == 4  # type: ignore[arg-type]  # torch's Dataset has no __len__
    annotated = {f"val_{i}.JPEG": i % 2 for i in range(4)}
    assert {Path(p).name: label
            for p, label in data.test.samples} == annotated  # type: ignore[union-attr]  # an ImageFolder
    image, label = data.test[0]  # type: ignore[index]  # an ImageFolder
    assert image.shape == (3, 64, 64) and image.dtype == torch.float32
