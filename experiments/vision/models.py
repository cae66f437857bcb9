"""Image classifiers for the experiments, adapted to small inputs (8x8 to 64x64).

The paper-scale case studies of Bell et al. (2022) sweep ``model`` over torchvision
architectures; torchvision builds them for 224x224 ImageNet images, which a 32x32 CIFAR
image (or an 8x8 digit) would shrink to nothing. :func:`build_model` keeps torchvision's
layers and changes only what the input size forces:

- ``resnet18``: a 3x3 stride-1 stem convolution and no max-pool (the usual CIFAR ResNet);
- ``vgg16_bn``, ``alexnet``: the first convolution takes ``in_channels`` (AlexNet's 11x11
  stride-4 stem becomes 3x3 stride 1, stride 2 from 64 pixels up); a max-pool that would
  shrink a map below 1 pixel is dropped (or made 2x2); global average pooling and a
  three-layer classifier 512 wide replace the 4096-wide one sized for 6x6/7x7 maps;
- ``cnn`` (two conv blocks, a linear layer), ``mlp`` (two hidden layers of 128) and ``logreg`` (one linear
  layer): small families for the CPU-scale sweeps and the budget study of Dodge et al.
  (2019, §4.2), where a simple and a flexible family are compared.

Weights are never downloaded (``weights=None``): every model starts from the random
initialisation drawn from torch's global generator, so the same ``env.seed`` builds the
same weights.

Global average pooling is a ``mean`` over the spatial axes. (``nn.AdaptiveAvgPool2d``
has no deterministic CUDA backward for general output sizes; for a 1x1 output PyTorch
computes a plain mean and it ran under ``env.deterministic=true`` on an H100 (docs/gpu.md),
so the explicit mean is a precaution, not a necessity.)

References:
    Bell, Kampman, Dodge, Lawrence (2022). Modeling the Machine Learning Multiverse. NeurIPS.
    Dodge, Gururangan, Card, Schwartz, Smith (2019). Show Your Work. EMNLP.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

MODELS = ("alexnet", "vgg16_bn", "resnet18", "cnn", "mlp", "logreg")
HIDDEN = 512  # width of the alexnet/vgg classifiers
MLP_HIDDEN = 128


class GlobalAvgPool(nn.Module):
    """Mean over the spatial axes, keeping ``(N, C, 1, 1)``; deterministic on CUDA."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3), keepdim=True)


def build_model(name: str, num_classes: int, in_channels: int = 3, image_size: int = 32) -> nn.Module:
    """Build an untrained classifier for ``(N, in_channels, image_size, image_size)`` inputs.

    Args:
        name: one of :data:`MODELS`.
        num_classes: outputs (logits) per example.
        in_channels: channels of the input images (1 for digits, 3 for CIFAR).
        image_size: height = width of the input images, in pixels.

    Returns:
        The model, in training mode, on the CPU; ``model(x)`` has shape ``(N, num_classes)``.

    Raises:
        ValueError: an unknown ``name``.
    """
    builders: dict[str, Callable[[int, int, int], nn.Module]] = {
        "alexnet": _alexnet, "vgg16_bn": _vgg16_bn, "resnet18": _resnet18,
        "cnn": _cnn, "mlp": _mlp, "logreg": _logreg,
    }
    if name not in builders:
        raise ValueError(f"model={name!r} is not a model here: use one of {', '.join(MODELS)} (e.g. model=resnet18).")
    return builders[name](num_classes, in_channels, image_size)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _resnet18(num_classes: int, in_channels: int, image_size: int) -> nn.Module:
    from torchvision.models import resnet18

    model = resnet18(weights=None, num_classes=num_classes)
    model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
    nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")  # as torchvision does
    model.maxpool = nn.Identity()
    model.avgpool = GlobalAvgPool()
    return model


def _vgg16_bn(num_classes: int, in_channels: int, image_size: int) -> nn.Module:
    from torchvision.models import vgg16_bn

    def build() -> nn.Module:
        model = vgg16_bn(weights=None, num_classes=num_classes)
        model.features[0] = nn.Conv2d(in_channels, 64, kernel_size=3, padding=1)
        _fit_pools(model.features, image_size)
        model.avgpool = GlobalAvgPool()
        model.classifier = _classifier(512, num_classes)
        return model

    return _materialise(build, _vgg_init)


def _alexnet(num_classes: int, in_channels: int, image_size: int) -> nn.Module:
    from torchvision.models import alexnet

    def build() -> nn.Module:
        model = alexnet(weights=None, num_classes=num_classes)
        model.features[0] = nn.Conv2d(in_channels, 64, kernel_size=3, stride=1 if image_size <= 32 else 2, padding=1)
        _fit_pools(model.features, image_size)
        model.avgpool = GlobalAvgPool()
        model.classifier = _classifier(256, num_classes)
        return model

    return _materialise(build, _default_init)


def _cnn(num_classes: int, in_channels: int, image_size: int) -> nn.Module:
    """Two 3x3 conv blocks (32, 64 channels, each max-pooled) and a linear layer on the flattened maps."""
    features = nn.Sequential(
        nn.Conv2d(in_channels, 32, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
    )
    size = _fit_pools(features, image_size)
    return nn.Sequential(features, nn.Flatten(), nn.Linear(64 * size * size, num_classes))


def _mlp(num_classes: int, in_channels: int, image_size: int) -> nn.Module:
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(in_channels * image_size * image_size, MLP_HIDDEN), nn.ReLU(inplace=True),
        nn.Linear(MLP_HIDDEN, MLP_HIDDEN), nn.ReLU(inplace=True),
        nn.Linear(MLP_HIDDEN, num_classes),
    )


def _logreg(num_classes: int, in_channels: int, image_size: int) -> nn.Module:
    """Multinomial logistic regression: one linear layer on the flattened pixels."""
    return nn.Sequential(nn.Flatten(), nn.Linear(in_channels * image_size * image_size, num_classes))


def _classifier(in_features: int, num_classes: int) -> nn.Sequential:
    """torchvision's AlexNet/VGG head (two hidden layers, dropout) at 512 wide for 1x1 maps."""
    return nn.Sequential(
        nn.Dropout(0.5), nn.Linear(in_features, HIDDEN), nn.ReLU(inplace=True),
        nn.Dropout(0.5), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(inplace=True),
        nn.Linear(HIDDEN, num_classes),
    )


def _materialise(build: Callable[[], nn.Module], init: Callable[[nn.Module], None]) -> nn.Module:
    """Build on the meta device, then allocate and initialise every layer once.

    torchvision sizes AlexNet's and VGG's heads for 224-pixel inputs (VGG's first linear
    layer alone has 103M weights); drawing and discarding them would cost seconds per
    trial. On the meta device nothing is allocated; ``init`` then draws each layer that
    is actually used, as torchvision's own initialisation would.
    """
    with torch.device("meta"):
        model = build()
    model.to_empty(device="cpu")
    for module in model.modules():
        init(module)
    return model


def _vgg_init(m: nn.Module) -> None:
    """torchvision's ``VGG._initialize_weights``."""
    if isinstance(m, nn.Conv2d):
        nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.BatchNorm2d):
        m.reset_parameters()  # weight 1, bias 0, fresh running statistics
    elif isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, 0, 0.01)
        nn.init.zeros_(m.bias)


def _default_init(m: nn.Module) -> None:
    """PyTorch's default initialisation of each layer (what torchvision's AlexNet uses)."""
    if isinstance(m, (nn.Conv2d, nn.Linear, nn.BatchNorm2d)):
        m.reset_parameters()


def _fit_pools(features: nn.Sequential, image_size: int) -> int:
    """Follow the map size through ``features``; shrink or drop the max-pools it cannot afford.

    A pool whose kernel is larger than the map becomes 2x2 (map >= 2 pixels) or the
    identity (a 1-pixel map), so no input size from 1 pixel up makes an empty map.

    Returns:
        The side of the maps ``features`` outputs.
    """
    size = image_size
    for i, layer in enumerate(features):
        if isinstance(layer, nn.Conv2d):
            size = _out_size(size, layer.kernel_size[0], layer.stride[0],
                             layer.padding[0])  # type: ignore[arg-type]  # may be 'same' in torch's types; ours: ints
        elif isinstance(layer, nn.MaxPool2d):
            kernel, stride = _pair(layer.kernel_size), _pair(layer.stride)
            if size >= kernel:
                size = _out_size(size, kernel, stride, _pair(layer.padding))
            elif size >= 2:
                features[i] = nn.MaxPool2d(2)
                size //= 2
            else:
                features[i] = nn.Identity()
    return size


def _out_size(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def _pair(value: int | tuple[int, ...]) -> int:
    return value if isinstance(value, int) else int(value[0])
