"""A Hydra task for the environment tests: a few SGD steps of a small torch MLP on seeded data.

The data are fixed (seed 1234); the weights' initialisation and the batch order follow
``env.seed``, which :mod:`sweeper.environment` puts in force before the task runs (the task
applies it again, as a stand-alone run would). The returned loss and weight checksum are
exact functions of the seed and the kernels used, so equal environments must give
bit-identical numbers.

torch is imported inside the task, as a task may: a worker's first trial has its torch
settings put in force as that import completes (no GPU here, so the worker had not loaded
torch), a reused worker's later trials have them at once, and both must give the same numbers.
"""

from __future__ import annotations

import hydra
import numpy as np
from omegaconf import DictConfig

from sweeper.environment import apply_environment


@hydra.main(config_path="conf", config_name="torchy", version_base="1.3")
def main(cfg: DictConfig) -> dict[str, float]:
    in_force = apply_environment(cfg.env)
    import torch

    data = np.random.default_rng(1234)
    X = torch.tensor(data.standard_normal((512, 32)), dtype=torch.float32)
    y = torch.tensor((data.standard_normal(512) > 0).astype(np.int64))
    model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 2))
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=0.9)
    for _ in range(cfg.steps):
        batch = torch.randperm(512)[:64]
        loss = torch.nn.functional.cross_entropy(model(X[batch]), y[batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        final = torch.nn.functional.cross_entropy(model(X), y).item()
        checksum = float(sum(p.double().sum().item() for p in model.parameters()))
    return {"loss": final, "weight_sum": checksum, "torch_threads": float(torch.get_num_threads()),
            "on_cuda": float(in_force.device == "cuda")}


if __name__ == "__main__":
    main()
