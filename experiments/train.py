"""Image classification with torchvision models: the task of the deep-learning experiments.

One call trains one configuration and returns its numbers; the experiments under
``conf/experiment/`` sweep it (``+experiment=<name>/cpu`` or ``/paper``):

- ``task=train``: train ``model`` with ``optimizer`` on ``data`` for ``epochs``; returns
  ``test_acc``, ``train_acc``, ``test_loss``, ``train_loss``, ``duration_s``, ``epochs``
  (also ``epoch_s`` and ``n_params``). The ``batch_size``, ``seeds`` and ``budget``
  experiments use it.
- ``task=optimizer_gap``: the evaluation function of case study 1 of Bell et al. (2022):
  test accuracy of SGD with momentum minus that of Adam at the same learning rate
  (``optimizer.lr``; ``optimizer.momentum`` for SGD, ``optimizer.eps`` for Adam). Both
  start from the same initial weights and see the same batches, so ``gap`` is a paired
  difference. Returns ``gap`` plus every metric of both runs prefixed ``sgd_``/``adam_``.

Per-epoch metrics stream to the trial's MLflow run through ``sweeper.log_metrics`` (step =
epoch). After every epoch the whole training state (model, optimizer, AMP scaler, data-order
and augmentation generators, every RNG; ``vision.loop.loop_state``) is saved with
``sweeper.save_checkpoint``, and a trial that restarts (its worker died, the sweep was
resumed or preempted) continues after its last saved epoch; under ``env=reproducible`` it
ends bit-identical to one that never stopped. Outside a sweep the checkpoints go to the job's
output directory (``hydra.run.dir``), so running the same command with the same
``hydra.run.dir`` continues an interrupted run. ``checkpoint=false`` saves none. The
environment (seed, threads, deterministic algorithms, device) is applied
first, by ``sweeper.environment.apply_environment``: the sweeper has already applied it
in the worker, and applying it again is harmless, so a single run without the sweeper
behaves the same. A training whose loss becomes NaN raises ``TrainingDiverged``: the
trial is FAILED with that message (see ``vision.loop``).

    python experiments/train.py                                   # resnet18 on digits, 5 epochs: ~80 s on 2 cores
    python experiments/train.py model=mlp epochs=3 optimizer.name=adam optimizer.lr=1e-3
    python experiments/train.py --multirun +experiment=optimizer_gap/cpu

References:
    Bell, Kampman, Dodge, Lawrence (2022). Modeling the Machine Learning Multiverse. NeurIPS.
    Crane (2018). Questionable Answers in Question Answering Research. TACL.
    Dodge, Gururangan, Card, Schwartz, Smith (2019). Show Your Work. EMNLP.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from typing import Any

import hydra
import torch
from hydra.utils import to_absolute_path
from omegaconf import DictConfig
from vision import ImageData, OptimizerSpec, build_model, count_parameters, load_dataset, train

from sweeper import load_checkpoint, log_metrics, save_checkpoint
from sweeper.environment import apply_environment

log = logging.getLogger(__name__)
TASKS = ("train", "optimizer_gap")


@hydra.main(config_path="../conf", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, float]:
    """Apply the environment, load the data, run ``cfg.task``; return its metrics."""
    env = apply_environment(cfg.env)
    started = time.perf_counter()
    if cfg.task not in TASKS:
        raise ValueError(f"task={cfg.task!r} is not a task here: use one of {', '.join(TASKS)} (e.g. task=train).")
    data = load_dataset(cfg.data.name, to_absolute_path(cfg.data.root), split_seed=cfg.data.split_seed,
                        subset=cfg.data.subset, image_size=cfg.data.image_size, verify_md5=cfg.data.verify_md5)
    log.info("%s: %d train / %d test examples, %d classes, %dx%dx%d, device %s, seed %d",
             data.name, len(data.train), len(data.test),  # type: ignore[arg-type]  # torch's Dataset has no __len__
             data.num_classes, data.channels, data.image_size, data.image_size, env.device, env.seed)
    if cfg.task == "train":
        result = train_once(cfg, data, env.device, env.seed)
    else:
        result = optimizer_gap(cfg, data, env.device, env.seed)
    return {**result, "duration_s": time.perf_counter() - started, "epochs": float(cfg.epochs)}


def train_once(cfg: DictConfig, data: ImageData, device: str, seed: int) -> dict[str, float]:
    """Train ``cfg.model`` with ``cfg.optimizer``; per-epoch metrics go to MLflow unprefixed."""
    model = _fresh_model(cfg, data, seed)
    saved = _saved(cfg, "train")
    metrics = _train(cfg, model, data, device, seed, _optimizer(cfg, cfg.optimizer.name), prefix="",
                     resume_from=saved["loop"] if saved else None, keep=lambda loop: {"task": "train", "loop": loop})
    return {**metrics, "n_params": float(count_parameters(model))}


def optimizer_gap(cfg: DictConfig, data: ImageData, device: str, seed: int) -> dict[str, float]:
    """SGD-with-momentum test accuracy minus Adam's, same lr, same initial weights, same batches."""
    model = _fresh_model(cfg, data, seed)
    initial = copy.deepcopy(model.state_dict())
    saved = _saved(cfg, "optimizer_gap") or {"done": {}, "phase": None, "loop": None}
    out: dict[str, float] = {}
    for name in ("sgd", "adam"):
        if name in saved["done"]:  # trained before the restart
            out.update(saved["done"][name])
            continue
        model.load_state_dict(initial)
        torch.manual_seed(seed)  # the same dropout draws in both runs
        done = dict(saved["done"])
        metrics = _train(cfg, model, data, device, seed, _optimizer(cfg, name), prefix=f"{name}_",
                         resume_from=saved["loop"] if saved["phase"] == name else None,
                         keep=lambda loop, n=name, d=done: {"task": "optimizer_gap", "done": d, "phase": n,
                                                            "loop": loop})
        saved["done"][name] = {f"{name}_{k}": v for k, v in metrics.items()}
        out.update(saved["done"][name])
    out["gap"] = out["sgd_test_acc"] - out["adam_test_acc"]
    log.info("gap = sgd %.4f - adam %.4f = %+.4f", out["sgd_test_acc"], out["adam_test_acc"], out["gap"])
    return out


def _fresh_model(cfg: DictConfig, data: ImageData, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)  # the same seed builds the same weights, whatever ran before
    return build_model(cfg.model, data.num_classes, data.channels, data.image_size)


def _optimizer(cfg: DictConfig, name: str) -> OptimizerSpec:
    o = cfg.optimizer
    return OptimizerSpec(name=name, lr=float(o.lr), momentum=float(o.momentum), eps=float(o.eps),
                         weight_decay=float(o.weight_decay))


def _saved(cfg: DictConfig, task: str) -> dict[str, Any] | None:
    """The checkpoint this task continues from (None: a fresh start, or ``checkpoint=false``)."""
    saved = load_checkpoint() if cfg.checkpoint else None
    if saved is not None and saved.get("task") != task:
        raise ValueError(f"the checkpoint to continue from is of task={saved.get('task')!r}, not task={task!r}: "
                         f"start in a new output directory (hydra.run.dir) or with the task it was saved by.")
    return saved


def _train(cfg: DictConfig, model: torch.nn.Module, data: ImageData, device: str, seed: int, spec: OptimizerSpec,
           prefix: str, resume_from: dict[str, Any] | None,
           keep: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, float]:
    """Train; after each epoch, log its metrics and save ``keep(loop state)`` as the checkpoint."""
    def on_epoch(epoch: int, metrics: dict[str, Any]) -> None:
        log.info("%sepoch %d: train_acc %.4f train_loss %.4f test_acc %.4f test_loss %.4f", prefix, epoch,
                 metrics["train_acc"], metrics["train_loss"], metrics["test_acc"], metrics["test_loss"])
        log_metrics({prefix + k: v for k, v in metrics.items()}, step=epoch)

    def on_checkpoint(loop: dict[str, Any]) -> None:
        save_checkpoint(keep(loop), step=int(loop["epoch"]))

    return train(model, data.train, data.test, optimizer=spec, batch_size=int(cfg.batch_size), epochs=int(cfg.epochs),
                 device=device, amp=bool(cfg.amp), augment=bool(cfg.data.augment), seed=seed,
                 num_workers=int(cfg.data.num_workers), on_epoch=on_epoch,
                 on_checkpoint=on_checkpoint if cfg.checkpoint else None, resume_from=resume_from)


if __name__ == "__main__":
    main()
