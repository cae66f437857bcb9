"""Train one classifier and measure it after every epoch.

:func:`train` runs plain mini-batch training with cross-entropy: SGD with (heavy-ball)
momentum or Adam (with its ``eps``, the knob case study 1 of Bell et al. 2022 sweeps), a
constant learning rate, optional AMP. After every epoch it evaluates the test split and
calls ``on_epoch`` with the epoch's metrics (the task streams them to MLflow with
``sweeper.log_metrics``).

- ``train_acc`` / ``train_loss`` are averaged over the epoch's mini-batches as they were
  trained (train mode, augmented if ``augment``), so measuring them costs no extra pass.
  The filter ``train_acc >= 0.99`` of case study 2 reads the last epoch's value.
- ``test_acc`` / ``test_loss`` come from a pass over the whole test split in eval mode.
- A training loss that becomes NaN or inf raises :class:`TrainingDiverged` at the end of
  that epoch (losses are summed on the device, so there is no host sync per step); the
  sweeper records the trial as FAILED with this message, and its point is conditioned on
  but not modelled. Chance-level accuracy would be a number the GP could model, but it is
  not what the configuration measured.
- ``amp``: on CUDA, float16 autocast with a gradient scaler. On the CPU it is a no-op
  (logged once): CPU float16 kernels are slow, and bfloat16 changes the numbers the CPU
  experiments compare across seeds and threads.

Data order and augmentation draw from generators seeded by ``seed``, so two trainings with
the same seed see the same batches (the paired SGD/Adam comparison relies on it).

``on_checkpoint`` receives the loop's whole state after every epoch (:func:`loop_state`):
model, optimizer, AMP scaler, the data-order and augmentation generators, every global RNG
(torch CPU and CUDA, NumPy, Python) and the epoch's metrics; ``resume_from`` continues from
such a state. Under deterministic algorithms an interrupted training continued this way
ends bit-identical to one that never stopped (tests/unit/test_train_resume.py).
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from .data import Split, TensorSplit

log = logging.getLogger(__name__)
OPTIMIZERS = ("sgd", "adam")


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite."""


@dataclass(frozen=True)
class OptimizerSpec:
    """What to optimise with: ``name`` sgd | adam, learning rate, SGD momentum, Adam eps."""

    name: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.9
    eps: float = 1e-8
    weight_decay: float = 0.0


def make_optimizer(params: Iterator[nn.Parameter], spec: OptimizerSpec) -> torch.optim.Optimizer:
    """SGD with momentum, or Adam with ``eps``, at a constant learning rate.

    Raises:
        ValueError: an unknown ``spec.name``.
    """
    if spec.name == "sgd":
        return torch.optim.SGD(params, lr=spec.lr, momentum=spec.momentum, weight_decay=spec.weight_decay)
    if spec.name == "adam":
        return torch.optim.Adam(params, lr=spec.lr, eps=spec.eps, weight_decay=spec.weight_decay)
    raise ValueError(f"optimizer.name={spec.name!r} is not an optimizer here: use one of {', '.join(OPTIMIZERS)} "
                     f"(e.g. optimizer.name=sgd).")


def train(model: nn.Module, train_split: Split, test_split: Split, *, optimizer: OptimizerSpec, batch_size: int,
          epochs: int, device: str = "cpu", amp: bool = False, augment: bool = False, seed: int = 0,
          num_workers: int = 0, on_epoch: Callable[[int, dict[str, float]], None] | None = None,
          on_checkpoint: Callable[[dict[str, Any]], None] | None = None,
          resume_from: dict[str, Any] | None = None) -> dict[str, float]:
    """Train ``model`` in place for ``epochs`` epochs; return the last epoch's metrics.

    Args:
        model: the classifier, on the CPU or already on ``device``.
        train_split, test_split: in-memory tensors or torchvision datasets.
        optimizer: which optimizer and its settings.
        batch_size: examples per step (the last batch of an epoch may be smaller).
        epochs: passes over the training split (0 only evaluates).
        device: ``cpu`` or ``cuda`` (as resolved by ``sweeper.environment``).
        amp: float16 autocast and loss scaling on CUDA; ignored on the CPU.
        augment: random 4-pixel-shift crops and horizontal flips of each batch (CIFAR-style).
        seed: seed of the data order and the augmentation.
        num_workers: loader processes for on-disk datasets.
        on_epoch: called after each epoch with (epoch, metrics).
        on_checkpoint: called after ``on_epoch`` with the loop's state (:func:`loop_state`).
        resume_from: a state ``on_checkpoint`` received: continue after its epoch.

    Returns:
        ``train_acc``, ``train_loss``, ``test_acc``, ``test_loss`` of the last epoch, and
        ``epoch_s`` (mean seconds per epoch, evaluation included).

    Raises:
        TrainingDiverged: the training loss became NaN or inf.
        ValueError: bad ``batch_size`` or ``epochs``.
    """
    if batch_size < 1 or epochs < 0:
        raise ValueError(f"batch_size={batch_size} and epochs={epochs} must be >= 1 and >= 0.")
    use_amp = amp and device.startswith("cuda")
    if amp and not use_amp:
        log.warning("amp=true has no effect on device %s: training in float32", device)
    model.to(device)
    opt = make_optimizer(model.parameters(), optimizer)
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp)
    order = torch.Generator().manual_seed(seed)
    shifts = torch.Generator(device=device).manual_seed(seed + 1)
    train_split, test_split = _placed(train_split, device), _placed(test_split, device)
    generators = {"order": order, "shifts": shifts}
    if resume_from is None:
        start, elapsed_s = 0, 0.0
        metrics = {"train_acc": math.nan, "train_loss": math.nan,
                   **evaluate(model, test_split, batch_size, device, use_amp, num_workers)}
    else:
        start, elapsed_s, metrics = _restore(resume_from, model, opt, scaler, generators)
        log.info("continuing after epoch %d of %d", start - 1, epochs)
    started = time.perf_counter() - elapsed_s
    for epoch in range(start, epochs):
        model.train()
        loss_sum = torch.zeros((), device=device)  # summed on the device: no sync per step
        correct = torch.zeros((), dtype=torch.int64, device=device)
        seen = 0
        for x, y in _batches(train_split, batch_size, order, device, num_workers):
            if augment:
                x = augment_batch(x, shifts)
            with torch.autocast("cuda", dtype=torch.float16, enabled=use_amp):
                logits = model(x)
                loss = nn.functional.cross_entropy(logits, y)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            loss_sum += loss.detach() * len(y)
            correct += (logits.argmax(1) == y).sum()
            seen += len(y)
        train_loss = loss_sum.item() / seen
        if not math.isfinite(train_loss):
            raise TrainingDiverged(
                f"training diverged: the training loss became {train_loss} in epoch {epoch} "
                f"(optimizer={optimizer.name}, lr={optimizer.lr:g}, batch_size={batch_size}); try a smaller "
                f"optimizer.lr. The sweeper records this trial as FAILED."
            )
        metrics = {"train_acc": correct.item() / seen, "train_loss": train_loss,
                   **evaluate(model, test_split, batch_size, device, use_amp, num_workers)}
        if on_epoch is not None:
            on_epoch(epoch, metrics)
        if on_checkpoint is not None:
            on_checkpoint(loop_state(epoch, model, opt, scaler, generators, metrics, time.perf_counter() - started))
    metrics = dict(metrics)
    metrics["epoch_s"] = (time.perf_counter() - started) / max(epochs, 1)
    return metrics


def loop_state(epoch: int, model: nn.Module, opt: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
               generators: dict[str, torch.Generator], metrics: dict[str, float], elapsed_s: float) -> dict[str, Any]:
    """Everything the loop needs to continue after ``epoch`` as if it had not stopped."""
    return {"epoch": epoch, "model": model.state_dict(), "optimizer": opt.state_dict(), "scaler": scaler.state_dict(),
            "generators": {name: g.get_state() for name, g in generators.items()}, "rng": rng_state(),
            "metrics": dict(metrics), "elapsed_s": elapsed_s}


def rng_state() -> dict[str, Any]:
    """Every global random state: torch's CPU and CUDA generators, NumPy's and Python's."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    return {"torch": torch.get_rng_state(), "cuda": cuda, "numpy": np.random.get_state(), "python": random.getstate()}


def set_rng_state(state: dict[str, Any]) -> None:
    """Put back what :func:`rng_state` read."""
    torch.set_rng_state(state["torch"])
    if state["cuda"]:
        torch.cuda.set_rng_state_all(state["cuda"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def _restore(state: dict[str, Any], model: nn.Module, opt: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
             generators: dict[str, torch.Generator]) -> tuple[int, float, dict[str, float]]:
    """Load a :func:`loop_state` into the loop's objects; return the next epoch, the time spent, the metrics."""
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    if state["scaler"]:
        scaler.load_state_dict(state["scaler"])
    for name, generator in generators.items():
        generator.set_state(state["generators"][name])
    set_rng_state(state["rng"])
    return int(state["epoch"]) + 1, float(state["elapsed_s"]), dict(state["metrics"])


@torch.no_grad()
def evaluate(model: nn.Module, split: Split, batch_size: int, device: str = "cpu", amp: bool = False,
             num_workers: int = 0) -> dict[str, float]:
    """``test_acc`` and mean ``test_loss`` of ``model`` (eval mode) on ``split``."""
    model.eval()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    seen = 0
    for x, y in _batches(split, max(batch_size, 256), None, device, num_workers):
        with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
            logits = model(x)
        loss_sum += nn.functional.cross_entropy(logits.float(), y, reduction="sum")
        correct += (logits.argmax(1) == y).sum()
        seen += len(y)
    return {"test_acc": correct.item() / seen, "test_loss": loss_sum.item() / seen}


def augment_batch(x: torch.Tensor, generator: torch.Generator, pad: int = 4) -> torch.Tensor:
    """Shift each image by up to ``pad`` pixels (zero fill) and flip half of them left-right."""
    n, c, h, w = x.shape
    flip = torch.rand(n, generator=generator, device=x.device) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(3), x)
    padded = nn.functional.pad(x, (pad, pad, pad, pad))
    dy = torch.randint(0, 2 * pad + 1, (n,), generator=generator, device=x.device)
    dx = torch.randint(0, 2 * pad + 1, (n,), generator=generator, device=x.device)
    rows = (dy[:, None] + torch.arange(h, device=x.device))[:, None, :, None]  # (n, 1, h, 1)
    cols = (dx[:, None] + torch.arange(w, device=x.device))[:, None, None, :]  # (n, 1, 1, w)
    batch = torch.arange(n, device=x.device)[:, None, None, None]
    channel = torch.arange(c, device=x.device)[None, :, None, None]
    return padded[batch, channel, rows, cols]


def _placed(split: Split, device: str) -> Split:
    """In-memory splits move to the device once; on-disk ones stream batch by batch."""
    return split.to(device) if isinstance(split, TensorSplit) else split


def _batches(split: Split, batch_size: int, order: torch.Generator | None, device: str,
             num_workers: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Mini-batches on ``device``, shuffled by ``order`` (None: in order)."""
    if isinstance(split, TensorSplit):
        n = len(split)
        index = torch.randperm(n, generator=order) if order is not None else torch.arange(n)
        index = index.to(split.x.device)
        for start in range(0, n, batch_size):
            i = index[start:start + batch_size]
            yield split.x[i], split.y[i]
        return
    loader = DataLoader(split, batch_size=batch_size, shuffle=order is not None, generator=order,
                        num_workers=num_workers, pin_memory=device.startswith("cuda"))
    for x, y in loader:
        yield x.to(device, non_blocking=True), y.to(device, non_blocking=True)
