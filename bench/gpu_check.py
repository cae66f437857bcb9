"""Check the CUDA code paths on a real GPU and measure them: environment, cuDNN determinism, AMP, Ray GPUs.

    python bench/gpu_check.py --out results.json            # everything (~11 min on one H100)
    python bench/gpu_check.py --out results.json --workloads cnn-digits   # ~5 min
    python bench/gpu_check.py --out results.json --quick    # fewer repeats and epochs (still ~10 min)
    python bench/gpu_check.py --markdown results.json       # the tables of a results file
    python bench/gpu_check.py --out dry.json --device cpu   # a dry run of this script without a GPU

Most of the time is process start-up: each job runs in a fresh interpreter, and on the H100
machine where this was run one cost 12-16 s (imports, CUDA set-up) against 1-3 s of training.
``--budget-s`` stops starting jobs after that many seconds (what was skipped says so).

Without a GPU visible to torch it writes ``{"gpu": null, "reason": ...}``, says why, and
exits with status 2 (``--device cpu`` runs the same jobs on the CPU, to test the script).

What it runs, each job in a fresh Python process (a trial's worker starts fresh, and cuDNN's
autotuner caches its choices per process), repo root and ``experiments/`` on ``PYTHONPATH``
(no Hydra, OmegaConf or MLflow needed; Ray only for the last section):

1. ``environment``: ``sweeper.environment.apply_environment`` with ``device=auto`` and
   ``cuda`` and the ``reproducible``/``fast`` presets (``hydra_plugins/multiverse_sweeper/
   config.py``'s ``ENV_PRESETS``, copied below), the ``as_conditions()`` read-back, the TF32
   flags torch holds beside it, the float32 error of a matmul and a convolution against
   float64 (what precision is really in force), whether a CUDA op without a deterministic
   kernel raises, ``device=auto``/``cuda`` with ``CUDA_VISIBLE_DEVICES=""``, and
   ``sweeper.record.conditions.capture_conditions()`` (GPU name, driver, memory, CUDA, cuDNN).
2. ``models``: one epoch of every model of ``experiments/vision`` through
   ``vision.train`` on CUDA, deterministic with and without AMP and fast with AMP, with
   augmentation: which ops raise under deterministic algorithms, and AMP's numbers.
3. ``determinism``: ``vision.train`` on three workloads (the small ``cnn`` and ``resnet18``
   on scikit-learn's digits as the experiments load them, ``resnet18`` on generated
   3x32x32 images), under ``reproducible``, ``default``, ``fast``, and both presets with
   AMP; two processes per setting, ``--reps`` trainings in each. Final weights (and BN
   buffers) and losses are compared bitwise within and across processes; the largest
   weight difference is reported where they differ. Seconds per epoch: the first epoch
   of a process (cuDNN autotuning, lazy CUDA set-up) apart, the median of the others.
   Also a "reused worker": ``fast`` first, then ``reproducible`` in the same process,
   compared with a fresh ``reproducible`` process.
4. ``ray``: Ray Tune with ``{"CPU": 1, "GPU": 0.25}`` per trial (the sweeper's
   ``PlacementGroupFactory`` bundle for ``ray.resources_per_trial.gpu=0.25``), 8 trials,
   ``reuse_actors=True``: ``CUDA_VISIBLE_DEVICES``, ``ray.get_gpu_ids()``, the device
   ``apply_environment(device=auto)`` resolves to, and how many trials overlapped in time.
   Skipped, with the reason, when ``ray`` cannot be imported.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import itertools
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for _p in (str(REPO / "experiments"), str(REPO)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

#: The env presets of hydra_plugins/multiverse_sweeper/config.py (ENV_PRESETS), copied so
#: that no Hydra is needed; ``device`` is set by --device.
PRESETS: dict[str, dict[str, Any]] = {
    "default": {"seed": 0, "threads": None, "deterministic": False, "cudnn": True, "cudnn_benchmark": False,
                "matmul_precision": "highest"},
    "reproducible": {"seed": 0, "threads": 1, "deterministic": True, "cudnn": True, "cudnn_benchmark": False,
                     "matmul_precision": "highest"},
    "fast": {"seed": 0, "threads": None, "deterministic": False, "cudnn": True, "cudnn_benchmark": True,
             "matmul_precision": "high"},
}

#: (name, model, data, batch size, epochs): data ``digits`` is vision.load_dataset's,
#: ``synth32`` is generated (10 classes, 3x32x32, 8192 train / 1024 test) and augmented.
WORKLOADS: dict[str, dict[str, Any]] = {
    "cnn-digits": {"model": "cnn", "data": "digits", "batch_size": 64, "epochs": 5, "augment": False},
    "resnet18-digits": {"model": "resnet18", "data": "digits", "batch_size": 64, "epochs": 3, "augment": False},
    "resnet18-synth32": {"model": "resnet18", "data": "synth32", "batch_size": 128, "epochs": 3, "augment": True},
}

#: (label, preset, amp) of the determinism section.
MODES = [("reproducible", "reproducible", False), ("default", "default", False), ("fast", "fast", False),
         ("reproducible+amp", "reproducible", True), ("fast+amp", "fast", True)]

# --------------------------------------------------------------------------- helpers (any process)
def _err(exc: BaseException) -> dict[str, str]:
    return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}


def _env(preset: str, device: str, **extra: Any) -> dict[str, Any]:
    return {**PRESETS[preset], "device": device, **extra}


def _load(data: str, seed: int = 0) -> Any:
    import torch
    from vision import ImageData, TensorSplit, load_dataset

    if data == "digits":
        return load_dataset("digits", split_seed=0, image_size=16)
    if data == "synth32":  # class prototypes plus noise: learnable, nothing downloaded
        g = torch.Generator().manual_seed(1234 + seed)
        protos = torch.randn(10, 3, 8, 8, generator=g)
        protos = torch.nn.functional.interpolate(protos, size=(32, 32), mode="bilinear", align_corners=False)

        def split(n: int) -> Any:
            y = torch.arange(n) % 10
            return TensorSplit(protos[y] + 1.5 * torch.randn(n, 3, 32, 32, generator=g), y)

        return ImageData("synth32", split(8192), split(1024), 10, 3, 32)
    raise ValueError(data)


def _digest(state: dict[str, Any]) -> str:
    import torch

    h = hashlib.sha256()
    for k in sorted(state):
        t = state[k].detach().cpu().contiguous()
        h.update(k.encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _max_diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Largest absolute difference over the floating tensors, and how many tensors differ at all."""
    import torch

    worst, differing = 0.0, 0
    for k in a:
        x, y = a[k].detach().cpu(), b[k].detach().cpu()
        if not torch.equal(x, y):
            differing += 1
        if x.is_floating_point():
            worst = max(worst, float((x.double() - y.double()).abs().max()) if x.numel() else 0.0)
    return {"max_abs_diff": worst, "tensors_differing": differing, "tensors": len(a)}


def _flags(torch: Any) -> dict[str, str]:
    """TF32 / fp32-precision flags that torch holds beside what apply_environment reads back."""
    out: dict[str, str] = {}
    getters = {
        "torch.backends.cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
        "torch.backends.cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
        "torch.backends.fp32_precision": lambda: torch.backends.fp32_precision,
        "torch.backends.cuda.matmul.fp32_precision": lambda: torch.backends.cuda.matmul.fp32_precision,
        "torch.backends.cudnn.fp32_precision": lambda: torch.backends.cudnn.fp32_precision,
        "torch.backends.cudnn.conv.fp32_precision": lambda: torch.backends.cudnn.conv.fp32_precision,
    }
    for name, get in getters.items():
        try:
            out[name] = str(get())
        except Exception as exc:  # noqa: BLE001 - a getter that raises is itself a finding
            out[name] = f"{type(exc).__name__}: {exc}"
    return out


def _precision_probe(torch: Any, device: str) -> dict[str, float]:
    """Relative error of a float32 matmul and a conv2d against float64: ~1e-7 is fp32, ~1e-4 TF32."""
    g = torch.Generator(device="cpu").manual_seed(0)
    a, b = torch.randn(512, 512, generator=g), torch.randn(512, 512, generator=g)
    x, w = torch.randn(16, 64, 16, 16, generator=g), torch.randn(64, 64, 3, 3, generator=g)
    ref_mm = a.double() @ b.double()
    ref_conv = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
    mm = (a.to(device) @ b.to(device)).double().cpu()
    conv = torch.nn.functional.conv2d(x.to(device), w.to(device), padding=1).double().cpu()
    return {"matmul_rel_err": float((mm - ref_mm).norm() / ref_mm.norm()),
            "conv2d_rel_err": float((conv - ref_conv).norm() / ref_conv.norm())}


def _deterministic_probes(torch: Any, device: str) -> dict[str, str]:
    """Ops torch documents as having no deterministic CUDA kernel: 'raised' shows the guard in force.

    AdaptiveAvgPool2d to 1x1 is routed by ATen to ``mean`` (deterministic), so it runs either way;
    to 2x2 it takes the pooling kernel, whose CUDA backward has no deterministic version.
    """
    def pool(size: int) -> None:
        x = torch.randn(4, 8, 5, 5, device=device, requires_grad=True)
        torch.nn.AdaptiveAvgPool2d(size)(x).sum().backward()

    def bincount() -> None:
        torch.bincount(torch.arange(10, device=device) % 3, weights=torch.ones(10, device=device))

    out = {}
    for name, probe in {"AdaptiveAvgPool2d(1) backward": lambda: pool(1),
                        "AdaptiveAvgPool2d(2) backward": lambda: pool(2),
                        "bincount(weights=...)": bincount}.items():
        try:
            probe()
            out[name] = "ran"
        except RuntimeError as exc:
            out[name] = f"raised: {str(exc).splitlines()[0][:160]}"
    return out


# --------------------------------------------------------------------------- jobs (worker processes)
def job_environment(p: dict[str, Any]) -> dict[str, Any]:
    """apply_environment in one process, one setting after another, as a reused worker would."""
    import torch

    from sweeper.environment import EnvironmentSettingError, apply_environment
    from sweeper.record.conditions import capture_conditions

    out: dict[str, Any] = {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "unset"), "settings": []}
    for label, env in p["settings"]:
        row: dict[str, Any] = {"label": label, "requested": env}
        try:
            in_force = apply_environment(env)
            row["in_force"] = in_force.as_conditions()
            row["torch_flags"] = _flags(torch)
            row["cuda_initialised"] = bool(torch.cuda.is_initialized())
            if in_force.device != "cpu" or p.get("probe_cpu"):
                row["precision"] = _precision_probe(torch, in_force.device)
                row["deterministic_probes"] = _deterministic_probes(torch, in_force.device)
        except EnvironmentSettingError as exc:
            row["raised"] = f"EnvironmentSettingError: {exc}"
        except Exception as exc:  # noqa: BLE001 - any failure of a setting is recorded as its finding
            row.update(_err(exc))
        out["settings"].append(row)
    if p.get("conditions"):
        try:
            out["conditions"] = capture_conditions(str(REPO))
        except Exception as exc:  # noqa: BLE001 - a failed capture is recorded as its finding
            out["conditions"] = _err(exc)
    return out


def job_models(p: dict[str, Any]) -> dict[str, Any]:
    """One epoch of every model, on digits subset, under each (preset, amp)."""
    import torch
    from torch.utils.data import TensorDataset
    from vision import MODELS, OptimizerSpec, build_model, train

    from sweeper.environment import apply_environment

    data = _load("digits")
    rows = []
    for name in MODELS:
        for preset, amp in p["modes"]:
            row: dict[str, Any] = {"model": name, "preset": preset, "amp": amp}
            try:
                env = apply_environment(_env(preset, p["device"]))
                torch.manual_seed(0)
                model = build_model(name, data.num_classes, data.channels, data.image_size)
                t0 = time.perf_counter()
                m = train(model, data.train, data.test, optimizer=OptimizerSpec("sgd", lr=0.01), batch_size=64,
                          epochs=1, device=env.device, amp=amp, augment=True, seed=0)
                row.update({k: m[k] for k in ("train_loss", "test_loss", "test_acc")},
                           seconds=time.perf_counter() - t0,
                           param_dtype=str(next(model.parameters()).dtype),
                           param_device=str(next(model.parameters()).device))
            except Exception as exc:  # noqa: BLE001 - a failed training run is recorded as its finding
                row.update(_err(exc))
            rows.append(row)
    # The on-disk path (tiny_imagenet's ImageFolder): a torch Dataset goes through a DataLoader with
    # pin_memory=True and non_blocking copies on CUDA. The DataLoader draws its own order (RandomSampler),
    # so it is compared with itself, twice, not with the in-memory path.
    loader: dict[str, Any] = {}
    for kind in ("TensorSplit", "Dataset", "Dataset again"):
        try:
            env = apply_environment(_env("reproducible", p["device"]))
            torch.manual_seed(0)
            model = build_model("cnn", data.num_classes, data.channels, data.image_size)
            train_split = data.train if kind == "TensorSplit" else TensorDataset(data.train.x, data.train.y)
            test_split = data.test if kind == "TensorSplit" else TensorDataset(data.test.x, data.test.y)
            m = train(model, train_split, test_split, optimizer=OptimizerSpec("sgd", lr=0.05), batch_size=64,
                      epochs=2, device=env.device, seed=0, num_workers=2)
            loader[kind] = {**m, "weights_sha256": _digest(model.state_dict())}
        except Exception as exc:  # noqa: BLE001 - a failed loader run is recorded as its finding
            loader[kind] = _err(exc)
    if all("weights_sha256" in v for v in loader.values()):
        loader["identical"] = loader["Dataset again"]["weights_sha256"] == loader["Dataset"]["weights_sha256"]
    return {"rows": rows, "loader": loader}


def job_train(p: dict[str, Any]) -> dict[str, Any]:
    """``reps`` trainings of one workload under one setting, in this process."""
    import torch
    from vision import OptimizerSpec, build_model, train

    from sweeper.environment import apply_environment

    w = WORKLOADS[p["workload"]]
    data = _load(w["data"])
    out: dict[str, Any] = {"reps": []}
    plan = [(p["before"], False)] if p.get("before") else []
    plan += [(p["preset"], True)] * p["reps"]
    first_state = None
    for preset, kept in plan:
        env = apply_environment(_env(preset, p["device"]))
        torch.manual_seed(0)  # as experiments/train.py's _fresh_model does
        model = build_model(w["model"], data.num_classes, data.channels, data.image_size)
        marks: list[float] = []
        m = train(model, data.train, data.test, optimizer=OptimizerSpec("sgd", lr=0.05, momentum=0.9),
                  batch_size=w["batch_size"], epochs=p["epochs"] or w["epochs"], device=env.device,
                  amp=p["amp"], augment=w["augment"], seed=0,
                  on_epoch=lambda _e, _m, marks=marks: marks.append(time.perf_counter()))
        if env.device == "cuda":
            torch.cuda.synchronize()
        epochs = len(marks)
        later = [b - a for a, b in itertools.pairwise(marks)]
        first = m["epoch_s"] * epochs - sum(later)
        if not kept:
            out["before"] = {"preset": preset, "train_loss": m["train_loss"]}
            continue
        state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
        rep = {"train_loss": m["train_loss"], "train_loss_hex": float(m["train_loss"]).hex(),
               "test_loss": m["test_loss"], "test_acc": m["test_acc"], "train_acc": m["train_acc"],
               "epoch_times": [first, *later], "weights_sha256": _digest(state)}
        if first_state is None:
            first_state = state
            torch.save(state, p["save"])
        else:
            rep["vs_first_rep"] = _max_diff(first_state, state)
        out["reps"].append(rep)
    out["in_force"] = apply_environment(_env(p["preset"], p["device"])).as_conditions()
    out["torch_flags"] = _flags(torch)
    out["max_memory_allocated"] = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else None
    return out


def job_ray(p: dict[str, Any]) -> dict[str, Any]:
    """Fractional GPUs with Ray Tune: 8 trials of {CPU: 1, GPU: 0.25} on one GPU."""
    import ray
    from ray import tune

    for k, v in {"TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1", "TUNE_DISABLE_STRICT_METRIC_CHECKING": "1",
                 "RAY_CHDIR_TO_TRIAL_DIR": "0", "RAY_AIR_NEW_OUTPUT": "0", "RAY_USAGE_STATS_ENABLED": "0"}.items():
        os.environ.setdefault(k, v)
    t0 = time.time()
    ray.init(num_cpus=p["num_cpus"], num_gpus=p["num_gpus"], include_dashboard=False, log_to_driver=True,
             object_store_memory=500 * 1024 * 1024, logging_level="WARNING")
    started_s = time.time() - t0
    bundle = {"CPU": 1.0, "GPU": p["gpu"]}
    available = ray.cluster_resources()
    fitting = max(1, min(math.floor(available.get(k, 0) / v + 1e-9) for k, v in bundle.items()))  # _fitting_trials

    def trainable(config: dict[str, Any]) -> None:
        import time as _t

        start = _t.time()
        import torch
        from vision import OptimizerSpec, build_model, train

        from sweeper.environment import apply_environment
        from sweeper.record.conditions import capture_conditions

        env = apply_environment({"device": "auto", "seed": int(config["i"])})
        cond = capture_conditions()
        data = _load("digits")
        torch.manual_seed(int(config["i"]))
        model = build_model(str(config["model"]), data.num_classes, data.channels, data.image_size)
        m = train(model, data.train, data.test, optimizer=OptimizerSpec("sgd", lr=0.05), batch_size=64,
                  epochs=int(config["epochs"]), device=env.device, seed=int(config["i"]))
        tune.report({"test_acc": m["test_acc"], "start": start, "end": _t.time(), "pid": os.getpid(),
                     "cvd": os.environ.get("CUDA_VISIBLE_DEVICES", "unset"),
                     "gpu_ids": ",".join(str(g) for g in ray.get_gpu_ids()), "device": env.device,
                     "torch_device_count": torch.cuda.device_count(),
                     "cuda_devices": cond.get("cuda.devices", ""), "gpu_visible": cond.get("gpu.visible", ""),
                     "max_memory_allocated": torch.cuda.max_memory_allocated() if env.device == "cuda" else 0})

    try:
        tuner = tune.Tuner(
            tune.with_resources(trainable, tune.PlacementGroupFactory([bundle])),
            param_space={"i": tune.grid_search(list(range(p["trials"]))), "epochs": p["epochs"], "model": p["model"]},
            tune_config=tune.TuneConfig(max_concurrent_trials=fitting, reuse_actors=True),
            run_config=tune.RunConfig(storage_path=p["storage"], name="gpu_check", verbose=0, log_to_file=False),
        )
        grid = tuner.fit()
        trials = []
        for r in grid:
            if r.error:
                trials.append({"error": str(r.error)[:2000]})
            else:
                trials.append({k: r.metrics.get(k) for k in ("start", "end", "pid", "cvd", "gpu_ids", "device",
                                                            "torch_device_count", "cuda_devices", "gpu_visible",
                                                            "test_acc", "max_memory_allocated")})
    finally:
        ray.shutdown()
    ok = [t for t in trials if "start" in t and t["start"] is not None]
    events = sorted([(t["start"], 1) for t in ok] + [(t["end"], -1) for t in ok], key=lambda e: (e[0], e[1]))
    running = peak = 0
    for _, d in events:
        running += d
        peak = max(peak, running)
    t_first = min((t["start"] for t in ok), default=0.0)
    for t in ok:
        t["start_rel_s"], t["end_rel_s"] = t["start"] - t_first, t["end"] - t_first
    return {"ray_version": ray.__version__, "ray_init_s": started_s, "cluster_resources": available,
            "bundle": bundle, "max_concurrent_trials": fitting, "peak_overlap": peak,
            "distinct_pids": len({t["pid"] for t in ok}), "trials": trials}


JOBS = {"environment": job_environment, "models": job_models, "train": job_train, "ray": job_ray}


def worker(spec: str, result_file: str) -> None:
    p = json.loads(spec)
    try:
        result = {"ok": True, **JOBS[p["job"]](p)}
    except Exception as exc:  # noqa: BLE001 - the worker reports any failure back to the driver
        result = {"ok": False, **_err(exc)}
    Path(result_file).write_text(json.dumps(result, default=str))


# --------------------------------------------------------------------------- driver
class Driver:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.started = time.perf_counter()
        self.tmp = Path(tempfile.mkdtemp(prefix="gpu_check_"))
        self.results: dict[str, Any] = {"command": " ".join([sys.executable, *sys.argv]),
                                        "started": datetime.datetime.now(datetime.UTC).isoformat(),
                                        "device_arg": args.device, "quick": args.quick, "sections": {}}

    def save(self) -> None:
        self.results["elapsed_s"] = time.perf_counter() - self.started
        Path(self.args.out).write_text(json.dumps(self.results, indent=1, default=str))

    def over_budget(self) -> bool:
        return self.args.budget_s is not None and time.perf_counter() - self.started > self.args.budget_s

    def run(self, p: dict[str, Any], env: dict[str, str] | None = None, timeout: float = 300) -> dict[str, Any]:
        """Run one job in a fresh interpreter; its result dict (``ok`` False with the reason on failure)."""
        if self.over_budget():
            return {"ok": False, "error": f"skipped: --budget-s {self.args.budget_s} spent"}
        result_file = self.tmp / f"r{time.monotonic_ns()}.json"
        child_env = {**os.environ, **(env or {})}
        child_env["PYTHONPATH"] = os.pathsep.join(
            x for x in (str(REPO), str(REPO / "experiments"), child_env.get("PYTHONPATH", "")) if x)
        t0 = time.perf_counter()
        # its own process group, so that a timeout also ends what it started (Ray's raylet, workers)
        proc = subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(p), "--result-file",
                                 str(result_file)], env=child_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            _, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, stderr = proc.communicate()
            print(f"  {p['job']} {p.get('label', '')}: timed out after {timeout} s", flush=True)
            return {"ok": False, "error": f"timed out after {timeout} s", "stderr_tail": stderr[-4000:]}
        wall = time.perf_counter() - t0
        if result_file.exists():
            res = json.loads(result_file.read_text())
        else:
            res = {"ok": False, "error": f"worker exited {proc.returncode} without a result"}
        res["wall_s"] = wall
        if not res.get("ok"):
            res["stderr_tail"] = stderr[-4000:]
        print(f"  [{time.perf_counter() - self.started:6.1f}s] {p['job']} {p.get('workload', '')} "
              f"{p.get('label', '')}: {'ok' if res.get('ok') else 'FAILED ' + str(res.get('error'))[:300]} "
              f"({wall:.1f}s)", flush=True)
        return res

    # -------------------------------------------------------------- sections
    def system(self) -> None:
        info: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform(),
                                "cpu_count": os.cpu_count()}
        smi = shutil.which("nvidia-smi")
        if smi:
            q = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total,compute_cap,pci.bus_id",
                                "--format=csv,noheader"], capture_output=True, text=True)
            info["nvidia_smi"] = q.stdout.strip() or q.stderr.strip()
            v = subprocess.run([smi], capture_output=True, text=True)
            info["nvidia_smi_cuda"] = next((" ".join(line.replace("|", " ").split()) for line in v.stdout.splitlines()
                                            if "CUDA Version" in line), "")
        import torch

        info.update(torch=torch.__version__, torch_cuda=torch.version.cuda, cuda_available=torch.cuda.is_available())
        try:
            import torchvision

            info["torchvision"] = torchvision.__version__
        except ImportError:
            info["torchvision"] = None
        if torch.cuda.is_available():
            prop = torch.cuda.get_device_properties(0)
            info.update(device_name=prop.name, capability=f"{prop.major}.{prop.minor}",
                        multiprocessors=prop.multi_processor_count, total_memory=prop.total_memory,
                        cudnn=torch.backends.cudnn.version(), device_count=torch.cuda.device_count())
        self.results["system"] = info

    def environment(self) -> None:
        d = self.args.device
        settings = [
            ["auto (defaults)", {"device": "auto"}],
            ["cuda (defaults)", {"device": d}],
            ["reproducible", _env("reproducible", d)],
            ["fast", _env("fast", d)],
            ["reproducible again", _env("reproducible", d)],
            ["defaults again", {"device": d}],
        ]
        sec = {"in_one_process": self.run({"job": "environment", "settings": settings, "conditions": True,
                                           "probe_cpu": d == "cpu"})}
        sec["no_gpu_visible"] = self.run(
            {"job": "environment", "settings": [["auto", {"device": "auto"}], ["cuda", {"device": "cuda"}]],
             "conditions": True}, env={"CUDA_VISIBLE_DEVICES": ""})
        self.results["sections"]["environment"] = sec

    def models(self) -> None:
        modes = [["reproducible", False], ["reproducible", True], ["fast", True]]
        self.results["sections"]["models"] = self.run({"job": "models", "modes": modes, "device": self.args.device})

    def determinism(self) -> None:
        a = self.args
        sec: dict[str, Any] = {}
        self.results["sections"]["determinism"] = sec
        for wname in a.workloads:
            wsec: dict[str, Any] = {}
            sec[wname] = wsec
            for label, preset, amp in MODES:
                if label not in a.modes:
                    continue
                procs = []
                for k in range(2):
                    save = str(self.tmp / f"{wname}-{label}-{k}.pt")
                    res = self.run({"job": "train", "workload": wname, "label": f"{label} #{k}", "preset": preset,
                                    "amp": amp, "reps": a.reps, "epochs": a.epochs, "device": a.device,
                                    "save": save})
                    res["save"] = save
                    procs.append(res)
                wsec[label] = self._summarise(procs)
                self.save()
            reused = self.run({"job": "train", "workload": wname, "label": "fast then reproducible",
                               "preset": "reproducible", "before": "fast", "amp": False, "reps": 1,
                               "epochs": a.epochs, "device": a.device, "save": str(self.tmp / f"{wname}-reused.pt")})
            wsec["reused_worker"] = self._compare_files(str(self.tmp / f"{wname}-reused.pt"),
                                                        str(self.tmp / f"{wname}-reproducible-0.pt"))
            wsec["reused_worker"]["run"] = reused
            wsec["reproducible_vs_fast"] = self._compare_files(str(self.tmp / f"{wname}-reproducible-0.pt"),
                                                               str(self.tmp / f"{wname}-fast-0.pt"))
            wsec["reproducible_vs_default"] = self._compare_files(str(self.tmp / f"{wname}-reproducible-0.pt"),
                                                                  str(self.tmp / f"{wname}-default-0.pt"))
            self.save()

    def _compare_files(self, a: str, b: str) -> dict[str, Any]:
        import torch

        if not (Path(a).exists() and Path(b).exists()):
            return {"error": "a run failed: nothing to compare"}
        sa, sb = torch.load(a), torch.load(b)
        return {"bitwise_identical": all(torch.equal(sa[k], sb[k]) for k in sa), **_max_diff(sa, sb)}

    def _summarise(self, procs: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"processes": procs}
        if not all(p.get("ok") for p in procs):
            out["error"] = "; ".join(str(p.get("error")) for p in procs if not p.get("ok"))
            return out
        reps = [r for p in procs for r in p["reps"]]
        out["in_process_identical"] = all(r["weights_sha256"] == p["reps"][0]["weights_sha256"]
                                          and r["train_loss_hex"] == p["reps"][0]["train_loss_hex"]
                                          for p in procs for r in p["reps"])
        out["across_processes"] = self._compare_files(procs[0]["save"], procs[1]["save"])
        out["across_processes"]["train_loss_identical"] = (
            procs[0]["reps"][0]["train_loss_hex"] == procs[1]["reps"][0]["train_loss_hex"])
        out["all_identical"] = out["in_process_identical"] and out["across_processes"]["bitwise_identical"] and \
            len({r["weights_sha256"] for r in reps}) == 1
        in_proc = [r["vs_first_rep"]["max_abs_diff"] for r in reps if "vs_first_rep" in r]
        out["max_abs_weight_diff"] = max([*in_proc, out["across_processes"]["max_abs_diff"]])
        losses = [r["train_loss"] for r in reps]
        out["train_loss"] = {"min": min(losses), "max": max(losses), "spread": max(losses) - min(losses)}
        accs = [r["test_acc"] for r in reps]
        out["test_acc"] = {"min": min(accs), "max": max(accs)}
        out["distinct_weight_hashes"] = len({r["weights_sha256"] for r in reps})
        firsts = [p["reps"][0]["epoch_times"][0] for p in procs]
        steady = [t for p in procs for i, r in enumerate(p["reps"]) for j, t in enumerate(r["epoch_times"])
                  if (i, j) != (0, 0)]
        out["first_epoch_s"] = statistics.median(firsts)
        out["epoch_s_median"] = statistics.median(steady) if steady else math.nan
        out["epoch_s_min"], out["epoch_s_max"] = (min(steady), max(steady)) if steady else (math.nan, math.nan)
        out["epochs_timed"] = len(steady)
        out["in_force"] = procs[0].get("in_force")
        return out

    def ray(self) -> None:
        try:
            import ray  # noqa: F401 - only checks that Ray imports
        except ImportError as exc:
            self.results["sections"]["ray"] = {"ok": False, "error": f"skipped: ray cannot be imported ({exc})"}
            return
        self.results["sections"]["ray"] = self.run(
            {"job": "ray", "label": "gpu=0.25 x 8 trials", "num_cpus": 8, "num_gpus": 1, "gpu": 0.25, "trials": 8,
             # resnet18 on the GPU; the small cnn for a CPU dry run, where resnet18 would take minutes
             "model": "resnet18" if self.args.device == "cuda" else "cnn",
             "epochs": (3 if self.args.quick else 5) if self.args.device == "cuda" else 1,
             "storage": str(self.tmp / "ray_results")}, timeout=self.args.ray_timeout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="gpu_check.json", help="results file (JSON), rewritten after every job")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="env.device of the jobs; cpu only to dry-run this script on a machine without a GPU")
    ap.add_argument("--sections", default="environment,models,determinism,ray",
                    help="comma-separated: environment, models, determinism, ray")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help=f"of {', '.join(WORKLOADS)}")
    ap.add_argument("--modes", default=",".join(m[0] for m in MODES),
                    help="settings of the determinism section (the reused-worker check compares with reproducible)")
    ap.add_argument("--reps", type=int, default=3, help="trainings per process (default 3; --quick 2)")
    ap.add_argument("--epochs", type=int, default=None, help="epochs per training (default: each workload's)")
    ap.add_argument("--quick", action="store_true", help="2 trainings per process, 2 epochs")
    ap.add_argument("--budget-s", type=float, default=None, help="start no job after this many seconds")
    ap.add_argument("--ray-timeout", type=float, default=400, help="seconds the Ray section may take")
    ap.add_argument("--markdown", metavar="RESULTS_JSON", help="print the tables of a results file and exit")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--result-file", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.result_file)
        return 0
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return 0
    if args.quick:
        args.reps, args.epochs = 2, args.epochs or 2
    args.workloads = [w for w in args.workloads.split(",") if w]
    unknown = [w for w in args.workloads if w not in WORKLOADS]
    if unknown:
        ap.error(f"unknown workloads {unknown}: use {', '.join(WORKLOADS)}")
    args.modes = [m for m in args.modes.split(",") if m]
    if set(args.modes) - {m[0] for m in MODES}:
        ap.error(f"unknown modes {sorted(set(args.modes) - {m[0] for m in MODES})}: "
                 f"use {', '.join(m[0] for m in MODES)}")
    sections = [s for s in args.sections.split(",") if s]

    d = Driver(args)
    try:
        import torch
    except ImportError:
        d.results.update(gpu=None, reason="torch is not installed")
        d.save()
        print("gpu_check: torch is not installed: nothing to check.", file=sys.stderr)
        return 2
    d.system()
    if args.device == "cuda" and not torch.cuda.is_available():
        reason = (f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU "
                  f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')!r}, "
                  f"nvidia-smi {'found' if shutil.which('nvidia-smi') else 'not found'}): nothing was checked. "
                  f"Run it on a machine with an NVIDIA GPU, or with --device cpu to dry-run the script.")
        d.results.update(gpu=None, reason=reason)
        d.save()
        print(f"gpu_check: {reason}", file=sys.stderr)
        return 2
    d.results["gpu"] = d.results["system"].get("device_name", "cpu dry run")
    print(f"gpu_check: {d.results['gpu']} torch {torch.__version__} CUDA {torch.version.cuda} -> {args.out}",
          flush=True)
    d.save()
    for name in sections:
        print(f"== {name}", flush=True)
        try:
            getattr(d, name)()
        except Exception as exc:  # noqa: BLE001 - one failed section must not stop the others
            d.results["sections"][name] = {"ok": False, **_err(exc)}
        d.save()
    print(markdown(d.results))
    return 0


# --------------------------------------------------------------------------- report
def markdown(r: dict[str, Any]) -> str:
    lines: list[str] = []
    s = r.get("system", {})
    lines += ["| | |", "| --- | --- |"]
    for k in ("device_name", "nvidia_smi", "nvidia_smi_cuda", "capability", "multiprocessors", "torch", "torch_cuda",
              "cudnn", "torchvision", "python", "platform", "cpu_count"):
        if k in s:
            lines.append(f"| {k} | {s[k]} |")
    sec = r.get("sections", {})
    env = sec.get("environment", {})
    one = env.get("in_one_process", {})
    if one.get("ok"):
        rows = one["settings"]
        keys = sorted({k for row in rows for k in row.get("in_force", {})})
        lines += ["", "apply_environment, read back (one process, in this order):", "",
                  "| setting | " + " | ".join(k.removeprefix("env_in_force.") for k in keys) + " |",
                  "| --- |" + " --- |" * len(keys)]
        for row in rows:
            lines.append(f"| {row['label']} | " + " | ".join(row.get("in_force", {}).get(k, "-") for k in keys) + " |")
        flag_keys = sorted({k for row in rows for k in row.get("torch_flags", {})})
        lines += ["", "| setting | matmul rel. err | conv2d rel. err | "
                  + " | ".join(k.removeprefix("torch.backends.") for k in flag_keys) + " |",
                  "| --- | --- | --- |" + " --- |" * len(flag_keys)]
        for row in rows:
            pr = row.get("precision", {})
            lines.append(f"| {row['label']} | {pr.get('matmul_rel_err', float('nan')):.2e} | "
                         f"{pr.get('conv2d_rel_err', float('nan')):.2e} | "
                         + " | ".join(row.get("torch_flags", {}).get(k, "-")[:40] for k in flag_keys) + " |")
        probe_keys = sorted({k for row in rows for k in row.get("deterministic_probes", {})})
        if probe_keys:
            lines += ["", "| setting | " + " | ".join(probe_keys) + " |", "| --- |" + " --- |" * len(probe_keys)]
            for row in rows:
                lines.append(f"| {row['label']} | " + " | ".join(
                    row.get("deterministic_probes", {}).get(k, "-")[:90] for k in probe_keys) + " |")
        cond = one.get("conditions", {})
        gk = {k: v for k, v in cond.items() if k.startswith(("gpu.", "cuda.", "cudnn."))}
        lines += ["", "capture_conditions() (GPU keys):", "", "| key | value |", "| --- | --- |"]
        lines += [f"| {k} | {v} |" for k, v in sorted(gk.items())]
    ng = env.get("no_gpu_visible", {})
    if ng.get("ok"):
        lines += ["", 'With CUDA_VISIBLE_DEVICES="":', ""]
        for row in ng["settings"]:
            got = row.get("in_force", {}).get("env_in_force.device") or row.get("raised") or row.get("error")
            lines.append(f"- device={row['requested']['device']}: {got}")
    mod = sec.get("models", {})
    if mod.get("ok"):
        lines += ["", "One epoch of each model on CUDA (digits 16x16, augment on):", "",
                  "| model | preset | amp | result | train_loss | test_acc | s |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for row in mod["rows"]:
            res = "ok" if "error" not in row else row["error"].splitlines()[0][:120]
            lines.append(f"| {row['model']} | {row['preset']} | {row['amp']} | {res} | "
                         f"{row.get('train_loss', float('nan')):.4f} | {row.get('test_acc', float('nan')):.3f} | "
                         f"{row.get('seconds', float('nan')):.2f} |")
    ld = mod.get("loader") if mod.get("ok") else None
    if ld:
        lines += ["", "cnn, reproducible, 2 epochs: in-memory TensorSplit, and twice a torch Dataset through the "
                      "DataLoader (pin_memory, 2 workers, its own shuffle order):", ""]
        for kind in ("TensorSplit", "Dataset", "Dataset again"):
            v = ld.get(kind, {})
            lines.append(f"- {kind}: " + (v["error"] if "error" in v else
                                          f"train_loss {v['train_loss']:.6f}, test_acc {v['test_acc']:.4f}, "
                                          f"weights {v['weights_sha256'][:12]}"))
        lines.append(f"- Dataset runs bitwise identical: {ld.get('identical')}")
    det = sec.get("determinism", {})
    if det:
        lines += ["", "Determinism and time per epoch (2 processes x reps trainings per setting):", "",
                  "| workload | setting | bitwise identical (in-process / across) | max abs weight diff | "
                  "train_loss spread | test_acc min-max | first epoch s | epoch s median (min-max) |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for wname, wsec in det.items():
            for label, _, _ in MODES:
                x = wsec.get(label)
                if not x:
                    continue
                if "error" in x:
                    lines.append(f"| {wname} | {label} | FAILED: {x['error'][:150]} | | | | | |")
                    continue
                lines.append(
                    f"| {wname} | {label} | {x['in_process_identical']} / {x['across_processes']['bitwise_identical']}"
                    f" | {x['max_abs_weight_diff']:.3g} | {x['train_loss']['spread']:.3g} | "
                    f"{x['test_acc']['min']:.4f}-{x['test_acc']['max']:.4f} | {x['first_epoch_s']:.3f} | "
                    f"{x['epoch_s_median']:.4f} ({x['epoch_s_min']:.4f}-{x['epoch_s_max']:.4f}) |")
        lines += ["", "| workload | comparison | bitwise identical | max abs weight diff | tensors differing |",
                  "| --- | --- | --- | --- | --- |"]
        for wname, wsec in det.items():
            for key in ("reused_worker", "reproducible_vs_default", "reproducible_vs_fast"):
                x = wsec.get(key)
                if x and "error" not in x:
                    lines.append(f"| {wname} | {key} | {x['bitwise_identical']} | {x['max_abs_diff']:.3g} | "
                                 f"{x['tensors_differing']}/{x['tensors']} |")
                elif x:
                    lines.append(f"| {wname} | {key} | {x['error']} | | |")
    ray = sec.get("ray")
    if ray:
        if ray.get("ok"):
            lines += ["", f"Ray {ray['ray_version']}: bundle {ray['bundle']}, max_concurrent_trials "
                          f"{ray['max_concurrent_trials']}, peak overlap {ray['peak_overlap']}, "
                          f"{ray['distinct_pids']} worker processes, ray.init {ray['ray_init_s']:.1f} s", "",
                      "| trial | start s | end s | pid | CUDA_VISIBLE_DEVICES | gpu_ids | device | torch devices | "
                      "max mem MiB | test_acc |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
            for i, t in enumerate(ray["trials"]):
                if "error" in t:
                    lines.append(f"| {i} | FAILED {t['error'][:200]} | | | | | | | | |")
                    continue
                lines.append(f"| {i} | {t['start_rel_s']:.1f} | {t['end_rel_s']:.1f} | {t['pid']} | {t['cvd']} | "
                             f"{t['gpu_ids']} | {t['device']} | {t['torch_device_count']} | "
                             f"{(t['max_memory_allocated'] or 0) / 2**20:.0f} | {t['test_acc']:.3f} |")
        else:
            lines += ["", f"Ray: {ray.get('error')}"]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
