"""The image classifiers and the training loop of experiments/train.py (CPU, no Ray, no MLflow)."""

from __future__ import annotations

import math
import sys

import pytest
import torch

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "experiments"))  # experiments/ is not a package: import its vision/ directly

from vision import (
    MODELS,
    OptimizerSpec,
    TensorSplit,
    TrainingDiverged,
    build_model,
    make_optimizer,
    train,
)
from vision.loop import augment_batch


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("size", [8, 16, 32])
@pytest.mark.parametrize("num_classes", [10, 100])
def test_every_model_builds_for_small_inputs_and_gives_one_logit_per_class(name: str, size: int,
                                                                           num_classes: int) -> None:
    channels = 1 if size == 8 else 3  # digits are one channel, CIFAR three
    torch.manual_seed(0)
    model = build_model(name, num_classes, channels, size).eval()
    assert not any(p.is_meta for p in model.parameters()) and not any(b.is_meta for b in model.buffers())
    with torch.no_grad():
        out = model(torch.randn(2, channels, size, size))
    assert out.shape == (2, num_classes)
    assert torch.isfinite(out).all()


def test_the_resnet_has_a_small_input_stem() -> None:
    model = build_model("resnet18", 10, 3, 32)
    assert model.conv1.kernel_size == (3, 3) and model.conv1.stride == (1, 1)
    assert isinstance(model.maxpool, torch.nn.Identity)


def test_unknown_model_names_the_choices() -> None:
    with pytest.raises(ValueError, match=r"model='resnet50' is not a model here: use one of alexnet, .*logreg"):
        build_model("resnet50", 10)


@pytest.mark.parametrize("name", ["resnet18", "vgg16_bn", "alexnet", "mlp"])
def test_the_same_seed_builds_the_same_weights(name: str) -> None:
    def weights(seed: int) -> dict[str, torch.Tensor]:
        torch.manual_seed(seed)
        return build_model(name, 10, 3, 16).state_dict()

    a, b, c = weights(0), weights(0), weights(1)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a if a[k].is_floating_point())


@pytest.mark.parametrize("name", ["logreg", "mlp", "cnn", "resnet18"])
@pytest.mark.parametrize("optimizer", [OptimizerSpec("sgd", lr=0.01, momentum=0.9), OptimizerSpec("adam", lr=1e-3)])
def test_one_training_step_decreases_the_loss_on_a_tiny_batch(name: str, optimizer: OptimizerSpec) -> None:
    torch.manual_seed(0)
    x, y = torch.randn(8, 1, 8, 8), torch.arange(8) % 4
    model = build_model(name, 4, 1, 8).train()
    opt = make_optimizer(model.parameters(), optimizer)
    before = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    before.backward()
    opt.step()
    after = torch.nn.functional.cross_entropy(model(x), y)
    assert after.item() < before.item()


def test_optimizers_carry_momentum_and_eps() -> None:
    params = [torch.nn.Parameter(torch.zeros(2))]
    sgd = make_optimizer(iter(params), OptimizerSpec("sgd", lr=0.1, momentum=0.8))
    adam = make_optimizer(iter(params), OptimizerSpec("adam", lr=0.1, eps=1e-11))
    assert isinstance(sgd, torch.optim.SGD) and sgd.defaults["momentum"] == 0.8
    assert isinstance(adam, torch.optim.Adam) and adam.defaults["eps"] == 1e-11
    with pytest.raises(ValueError, match=r"optimizer.name='rmsprop' is not an optimizer here: use one of sgd, adam"):
        make_optimizer(iter(params), OptimizerSpec("rmsprop"))


def _blobs(n: int, seed: int) -> TensorSplit:
    """Four well-separated classes of 1x8x8 images."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 4
    x = torch.randn(n, 1, 8, 8, generator=g) * 0.3 + y.float()[:, None, None, None]
    return TensorSplit(x, y)


def test_train_reports_every_epoch_and_the_same_seed_gives_identical_numbers() -> None:
    def run(seed: int, augment: bool = False) -> tuple[dict[str, float], list[tuple[int, dict[str, float]]]]:
        epochs: list[tuple[int, dict[str, float]]] = []
        torch.manual_seed(seed)
        model = build_model("mlp", 4, 1, 8)
        out = train(model, _blobs(64, 0), _blobs(32, 1), optimizer=OptimizerSpec("sgd", lr=0.05), batch_size=8,
                    epochs=3, seed=seed, augment=augment, on_epoch=lambda e, m: epochs.append((e, dict(m))))
        return out, epochs

    (out, epochs), (again, _), (other, _) = run(0), run(0), run(1)
    (shifted, _), (shifted_again, _) = run(0, augment=True), run(0, augment=True)
    assert [e for e, _ in epochs] == [0, 1, 2]
    assert set(out) == {"train_acc", "train_loss", "test_acc", "test_loss", "epoch_s"}
    assert epochs[-1][1]["test_acc"] == out["test_acc"] > 0.5  # chance is 0.25
    assert epochs[-1][1]["train_loss"] < epochs[0][1]["train_loss"]
    for key in ("train_acc", "train_loss", "test_acc", "test_loss"):
        assert again[key] == out[key]  # bit-identical on the CPU
        assert shifted_again[key] == shifted[key]  # the augmentation is seeded too
    assert other["train_loss"] != out["train_loss"]


def test_a_diverging_training_raises_with_the_settings() -> None:
    model = build_model("logreg", 4, 1, 8)
    with torch.no_grad():
        model[1].weight.fill_(math.inf)
    with pytest.raises(TrainingDiverged, match=r"training diverged: the training loss became nan in epoch 0 "
                                               r"\(optimizer=adam, lr=0\.5, batch_size=16\)"):
        train(model, _blobs(32, 0), _blobs(8, 1), optimizer=OptimizerSpec("adam", lr=0.5), batch_size=16, epochs=2)


def test_amp_on_the_cpu_is_a_no_op() -> None:
    def run(amp: bool) -> dict[str, float]:
        torch.manual_seed(0)
        return train(build_model("mlp", 4, 1, 8), _blobs(32, 0), _blobs(8, 1), optimizer=OptimizerSpec("sgd"),
                     batch_size=8, epochs=1, amp=amp)

    a, b = run(False), run(True)
    assert a["train_loss"] == b["train_loss"] and a["test_loss"] == b["test_loss"]


def test_augmentation_shifts_and_flips_but_keeps_the_pixels() -> None:
    x = torch.arange(2 * 3 * 8 * 8, dtype=torch.float32).reshape(2, 3, 8, 8) + 1
    a = augment_batch(x, torch.Generator().manual_seed(0))
    b = augment_batch(x, torch.Generator().manual_seed(0))
    assert a.shape == x.shape and torch.equal(a, b)
    for i in range(2):  # every nonzero pixel is one of the image's own (zeros are the shift's fill)
        assert set(a[i][a[i] != 0].tolist()) <= set(x[i].flatten().tolist())
