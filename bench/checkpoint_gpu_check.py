"""The paper-scale path of issue 18 on a GPU: ResNet-18, checkpoints, a kill and a resume, GPU utilisation.

    python bench/checkpoint_gpu_check.py --out ckpt.json                     # on a GPU machine (~8 min)
    python bench/checkpoint_gpu_check.py --out dry.json --device cpu --quick  # a dry run without a GPU

Everything runs through the user's command: ``python experiments/train.py --multirun
hydra/sweeper=multiverse ...`` (Hydra -> the sweeper -> Ray Tune -> MLflow in a SQLite file),
on data generated in CIFAR-10's on-disk format (3x32x32, 10 classes; the device has no
datasets), read by torchvision's own CIFAR10 class with ``data.verify_md5=false``.

1. ``utilisation``: the same 4 trials (ResNet-18, ``data.augment=true``, ``batch_size=128``)
   with ``ray.resources_per_trial.gpu=1`` (one trial on the GPU at a time) and ``gpu=0.25``
   (four at once). ``nvidia-smi`` samples utilisation and memory every 0.5 s while each sweep
   runs; reported: mean and median utilisation while trials ran, peak memory, wall time.
2. ``kill``: 4 trials with ``gpu=0.25``; once every trial has saved its second checkpoint, the
   sweep's whole process group (driver, Ray, workers) is SIGKILLed, then ``sweeper resume``
   finishes it. Per trial: the epochs it had finished at the kill (its MLflow history), the
   checkpoint it continued from (``sweeper.resumed_from_step``), the epochs lost (finished but
   not in a checkpoint, so done again), duplicate steps in its history (0), and whether it
   kept its run.

Without ``--device cpu`` and without a GPU it writes ``{"gpu": null, "reason": ...}`` and exits 2.
``--device cpu`` runs the same commands on the CPU with ``gpu=0`` (``--quick``: model ``cnn``,
small data, few epochs, 2 trials: two cores hold two), to test this script.

What the device needs beyond torch/torchvision: this repository's requirements (hydra-core,
omegaconf, ray, mlflow with SQLAlchemy and alembic, scipy, GPy is not needed by a trial) and
``pip install --no-deps -e .``; carry what its image lacks as a wheelhouse (``pip download
--only-binary=:all: --python-version <device's> -d wheelhouse -r requirements.lock`` filtered
to the missing names), then ``pip install --no-index --find-links wheelhouse``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import pickle
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO / "experiments" / "train.py"
BIN = Path(sys.executable).parent


def write_cifar_shaped(root: Path, n_train: int, n_test: int, seed: int = 0) -> None:
    """CIFAR-10's files (pickled dicts of uint8 rows (n, 3072) and labels) with learnable generated images."""
    import numpy as np

    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    prototypes = rng.uniform(0, 255, size=(10, 3072))

    def dump(name: str, n: int) -> None:
        labels = rng.integers(0, 10, size=n)
        data = np.clip(prototypes[labels] + rng.normal(0, 60, size=(n, 3072)), 0, 255).astype(np.uint8)
        with open(folder / name, "wb") as f:
            pickle.dump({"data": data, "labels": labels.tolist(), "batch_label": name}, f)

    per_batch = max(1, n_train // 5)
    for i in range(1, 6):
        dump(f"data_batch_{i}", per_batch)
    dump("test_batch", n_test)
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump({"label_names": [f"c{i}" for i in range(10)]}, f)


class GpuSampler:
    """``nvidia-smi`` every 0.5 s in a thread: (time, utilisation %, memory MiB)."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> GpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu,memory.used",
                                      "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=5)
                util, mem = (float(v) for v in out.stdout.splitlines()[0].split(","))
                self.samples.append((time.monotonic(), util, mem))
            except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
                continue


def sweep_command(args: argparse.Namespace, tmp: Path, name: str, gpu: float, epochs: int) -> list[str]:
    model = "cnn" if args.quick else "resnet18"
    return [sys.executable, str(TRAIN), "--multirun", "hydra/sweeper=multiverse", f"model={model}",
            "data.name=cifar10", f"data.root={tmp / 'data'}", "data.verify_md5=false", "data.augment=true",
            f"batch_size={args.batch_size}", f"epochs={epochs}", "hydra.sweeper.strategy=grid",
            f"hydra.sweeper.num_trials={args.trials}", f"env.seed=range(0,{args.trials})",
            f"ray.resources_per_trial.gpu={gpu}", "ray.resources_per_trial.cpu=1",
            f"ray.num_cpus={max(4, os.cpu_count() or 4)}",
            f"hydra.sweep.dir={tmp / name}", f"mlflow.tracking_uri=sqlite:///{tmp / 'mlruns.db'}",
            f"mlflow.experiment_name={name}", f"env.device={'cpu' if args.device == 'cpu' else 'auto'}"]


def runs_of(tmp: Path, experiment: str) -> list[Any]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp / 'mlruns.db'}")
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=100) if exp else []
    return [r for r in runs if "sweeper.trial_index" in r.data.tags]


def utilisation(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, gpu in (("1 trial per GPU", 1.0), ("4 trials per GPU", 0.25)):
        gpu = 0.0 if args.device == "cpu" else gpu
        name = f"util{int(gpu * 100)}" if gpu else f"util-cpu-{len(out)}"
        started = time.monotonic()
        with GpuSampler() if args.device != "cpu" else _Nothing() as sampler:
            proc = subprocess.run(sweep_command(args, tmp, name, gpu, args.epochs), cwd=tmp, capture_output=True,
                                  text=True, timeout=args.timeout)
        wall = time.monotonic() - started
        row: dict[str, Any] = {"gpu_per_trial": gpu, "returncode": proc.returncode, "wall_s": round(wall, 1)}
        if proc.returncode != 0:
            row["error"] = (proc.stdout + proc.stderr)[-3000:]
        runs = runs_of(tmp, name)
        row["trials_finished"] = sum(r.info.status == "FINISHED" for r in runs)
        row["epoch_s"] = [round(r.data.metrics.get("epoch_s", float("nan")), 3) for r in runs]
        samples = getattr(sampler, "samples", [])
        util = [u for _, u, _ in samples]
        if util:
            # While trials ran: from the first sample with the GPU in use to the last (Ray's start,
            # the imports and the MLflow records before and after are not the trials' share).
            used = [i for i, u in enumerate(util) if u > 0]
            running = util[used[0]:used[-1] + 1] if used else []
            row.update(util_mean=round(statistics.fmean(util), 1), util_median=statistics.median(util),
                       util_mean_while_running=round(statistics.fmean(running), 1) if running else 0.0,
                       util_median_while_running=statistics.median(running) if running else 0.0,
                       running_s=round(samples[used[-1]][0] - samples[used[0]][0], 1) if used else 0.0,
                       mem_peak_mib=max(m for _, _, m in samples), samples=len(samples))
        out[label] = row
    return out


class _Nothing:
    def __enter__(self) -> _Nothing:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def kill_and_resume(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    name = "kill"
    gpu = 0.0 if args.device == "cpu" else 0.25
    log = tmp / "kill.log"
    with open(log, "w") as f:
        proc = subprocess.Popen(sweep_command(args, tmp, name, gpu, args.kill_epochs), cwd=tmp, stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + args.timeout
    while True:  # every trial has saved two checkpoints (steps 0 and 1) on storage
        steps = collections.defaultdict(lambda: -1)
        for meta in (tmp / name).glob("tune/trial_*/checkpoint_*/checkpoint.json"):
            with contextlib.suppress(OSError, ValueError):
                steps[meta.parts[-3]] = max(steps[meta.parts[-3]], json.loads(meta.read_text())["step"])
        if len(steps) == args.trials and min(steps.values()) >= 1:
            break
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            return {"error": "no kill: the sweep ended or never checkpointed", "log": log.read_text()[-3000:]}
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(60)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp / 'mlruns.db'}")
    before = {}
    for r in runs_of(tmp, name):
        steps_done = [m.step for m in client.get_metric_history(r.info.run_id, "train_loss")]
        before[int(r.data.tags["sweeper.trial_index"])] = (r.info.run_id, max(steps_done, default=-1))
    started = time.monotonic()
    resumed = subprocess.run([str(BIN / "sweeper"), "resume", str(tmp / name)], cwd=tmp, capture_output=True,
                             text=True, timeout=args.timeout)
    result: dict[str, Any] = {"resume_returncode": resumed.returncode,
                              "resume_wall_s": round(time.monotonic() - started, 1)}
    if resumed.returncode != 0:
        result["error"] = (resumed.stdout + resumed.stderr)[-3000:]
    said = re.search(r"\d+ trials in flight continue from their checkpoints", resumed.stdout + resumed.stderr)
    result["resume_said"] = said.group(0) if said else None
    # Ended trials' checkpoints are deleted from storage (hydra.sweeper.checkpoints.keep_finished_checkpoints).
    result["checkpoints_left"] = sorted(str(p.relative_to(tmp / name)) for p in (tmp / name).rglob("checkpoint_*"))
    trials = {}
    for r in runs_of(tmp, name):
        index = int(r.data.tags["sweeper.trial_index"])
        history = [m.step for m in client.get_metric_history(r.info.run_id, "train_loss")]
        run_id, done_at_kill = before.get(index, (None, -1))
        from_step = int(r.data.tags.get("sweeper.resumed_from_step", -1))
        trials[index] = {"status": r.info.status, "same_run": r.info.run_id == run_id,
                         "epochs_done_at_kill": done_at_kill + 1, "resumed_from_step": from_step,
                         "epochs_lost": max(0, done_at_kill - from_step),
                         "duplicate_steps": len(history) - len(set(history)),
                         "steps_complete": sorted(set(history)) == list(range(args.kill_epochs)),
                         "test_acc": r.data.metrics.get("test_acc")}
    result["trials"] = dict(sorted(trials.items()))
    lost = [t["epochs_lost"] for t in trials.values()]
    result["epochs_lost_per_kill"] = {"max": max(lost, default=None), "sum": sum(lost), "trials": len(lost)}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--quick", action="store_true",
                        help="cnn, 2048/512 images, 2 (kill: 4) epochs, 2 trials (a dry run)")
    parser.add_argument("--trials", type=int, default=None, help="trials per sweep (default 4; --quick: 2)")
    parser.add_argument("--sections", default="utilisation,kill")
    parser.add_argument("--epochs", type=int, default=None, help="epochs of the utilisation sweeps")
    parser.add_argument("--kill-epochs", type=int, default=None, help="epochs of the kill-and-resume sweep")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--train-images", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args(argv)
    args.epochs = args.epochs or (2 if args.quick else 4)
    args.trials = args.trials or (2 if args.quick else 4)
    args.kill_epochs = args.kill_epochs or (4 if args.quick else 6)
    n_train = args.train_images or (2048 if args.quick else 20_000)
    result: dict[str, Any] = {"argv": sys.argv[1:], "sections": {}}
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            Path(args.out).write_text(json.dumps({"gpu": None, "reason": "torch sees no CUDA device"}))
            print("no GPU: torch sees no CUDA device (use --device cpu for a dry run)", file=sys.stderr)
            return 2
        result["gpu"] = torch.cuda.get_device_name(0)
    with tempfile.TemporaryDirectory(prefix="ckpt-gpu-") as folder:
        tmp = Path(folder)
        write_cifar_shaped(tmp / "data", n_train, max(512, n_train // 5))
        for section in args.sections.split(","):
            started = time.monotonic()
            run = {"utilisation": utilisation, "kill": kill_and_resume}[section]
            result["sections"][section] = {**run(args, tmp), "section_s": round(time.monotonic() - started, 1)}
            Path(args.out).write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps(result["sections"], indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
