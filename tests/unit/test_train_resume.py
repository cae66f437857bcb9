"""The training loop continues from a checkpoint as if it had not stopped (issue 18; CPU, no Ray, no MLflow).

A training of 4 epochs is interrupted after epoch 1: its state goes through the checkpoint
format (torch.save, sweeper.checkpoint), a new process-like start builds a fresh model, the
global RNGs are disturbed, and the loop continues from the state. The per-epoch metrics and
the final weights (BatchNorm buffers included) must equal the uninterrupted training's bit
for bit; dropout (global torch RNG), shuffling and augmentation (the loop's generators) and
SGD momentum all take part.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

from sweeper.checkpoint import read_checkpoint, write_checkpoint
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "experiments"))

from vision import OptimizerSpec, TensorSplit, train

EPOCHS = 4


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                         nn.Dropout(0.3), nn.Linear(4 * 8 * 8, 3))


def _data() -> tuple[TensorSplit, TensorSplit]:
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(96, 1, 8, 8, generator=g), torch.arange(96) % 3
    return TensorSplit(x[:64], y[:64]), TensorSplit(x[64:], y[64:])


def _train(model: nn.Module, **kwargs) -> tuple[dict[int, dict[str, float]], dict[str, float]]:
    seen: dict[int, dict[str, float]] = {}
    final = train(model, *_data(), optimizer=OptimizerSpec("sgd", lr=0.05, momentum=0.9), batch_size=16,
                  epochs=EPOCHS, augment=True, seed=3, on_epoch=lambda e, m: seen.__setitem__(e, dict(m)), **kwargs)
    final.pop("epoch_s")
    return seen, final


def test_an_interrupted_training_continued_from_its_checkpoint_is_bit_identical(tmp_path: Path) -> None:
    torch.use_deterministic_algorithms(True)
    try:
        straight = _model()
        seen_straight, final_straight = _train(straight)

        states: dict[int, Path] = {}

        def keep(state: dict) -> None:
            states[state["epoch"]] = tmp_path / f"checkpoint_{state['epoch']}"
            write_checkpoint(states[state["epoch"]], state, step=state["epoch"])

        _train(_model(), on_checkpoint=keep)
        state, info = read_checkpoint(states[1])
        torch.manual_seed(12345)  # a new worker: other RNG states than at the checkpoint
        np.random.seed(6789)
        random.seed(42)
        resumed = _model()
        seen_resumed, final_resumed = _train(resumed, resume_from=state)
    finally:
        torch.use_deterministic_algorithms(False)

    assert info.step == 1 and sorted(seen_resumed) == [2, 3]  # only the epochs after the checkpoint ran
    assert {e: seen_straight[e] for e in (2, 3)} == seen_resumed
    assert final_resumed == final_straight
    for key, tensor in straight.state_dict().items():
        assert torch.equal(tensor, resumed.state_dict()[key]), key
    assert not torch.equal(straight[0].weight, _model()[0].weight)  # it did train
