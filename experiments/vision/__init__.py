"""Image classification for the experiments: models, datasets and the training loop.

``experiments/`` is not a package: ``experiments/train.py`` imports this as ``vision``
(its own folder is on ``sys.path``, and the sweeper puts it on the Ray workers'
``PYTHONPATH``). Modules:

- :mod:`vision.models`: torchvision's alexnet, vgg16_bn and resnet18 adapted to small
  inputs, and small cnn / mlp / logreg families;
- :mod:`vision.data`: ``load_dataset`` for digits, breast_cancer (bundled with
  scikit-learn), CIFAR-10/100 and Tiny ImageNet;
- :mod:`vision.files`: the on-disk datasets, read by torchvision's classes, and the errors
  that say what to download when they are absent;
- :mod:`vision.loop`: ``train`` with SGD or Adam, per-epoch metrics, divergence detection.
"""

from .data import DATASETS, ImageData, TensorSplit, load_dataset
from .files import DatasetCorruptError, DatasetNotFoundError
from .loop import OPTIMIZERS, OptimizerSpec, TrainingDiverged, evaluate, make_optimizer, train
from .models import MODELS, build_model, count_parameters

__all__ = [
    "DATASETS", "MODELS", "OPTIMIZERS", "DatasetCorruptError", "DatasetNotFoundError", "ImageData", "OptimizerSpec",
    "TensorSplit", "TrainingDiverged", "build_model", "count_parameters", "evaluate", "load_dataset",
    "make_optimizer", "train",
]
