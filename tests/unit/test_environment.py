"""sweeper.environment: settings put in force in this process, read back, and validated."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from sweeper import environment
from sweeper.environment import EnvironmentSettingError, EnvSettings, apply_environment, env_problems, read_environment
from sweeper.record.conditions import capture_conditions, installed_packages, measurement_record, packages_hash
from sweeper.search.grammar import parse_specs


@pytest.fixture(autouse=True)
def restore_process_state():
    """apply_environment changes process-wide state: put it back for the other tests."""
    threads = torch.get_num_threads()
    pools = {p["user_api"]: p["num_threads"] for p in threadpool_info()}
    precision = torch.get_float32_matmul_precision()
    env = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                          "CUBLAS_WORKSPACE_CONFIG")}
    yield
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(False)
    torch.backends.cudnn.deterministic = False
    torch.backends.cudnn.benchmark = False
    torch.set_float32_matmul_precision(precision)
    threadpool_limits(limits=pools)
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def draws() -> tuple[float, float, list[float]]:
    return random.random(), float(np.random.random()), torch.randn(3).tolist()


def test_one_seed_seeds_python_numpy_and_torch() -> None:
    apply_environment({"seed": 7})
    first = draws()
    apply_environment({"seed": 7})
    assert draws() == first
    apply_environment({"seed": 8})
    second = draws()
    assert all(a != b for a, b in zip(first[:2], second[:2], strict=True)) and first[2] != second[2]


@pytest.mark.parametrize("threads", [1, 2])
def test_threads_are_read_back_from_every_pool_and_torch(threads: int) -> None:
    in_force = apply_environment({"threads": threads})
    assert in_force.torch_threads == threads == torch.get_num_threads()
    assert {int(p.split("=")[1]) for p in in_force.blas_threads.split(",")} == {threads}
    assert {p["num_threads"] for p in threadpool_info()} == {threads}
    assert os.environ["OMP_NUM_THREADS"] == str(threads)
    conditions = in_force.as_conditions()
    assert conditions["env_in_force.torch_threads"] == str(threads)


def test_each_pools_thread_count_is_recorded_once_however_many_copies_are_loaded() -> None:
    # numpy's and scipy's OpenBLAS, torch's and scikit-learn's OpenMP: a worker that ran a trial importing them
    # holds more pools than a fresh one, and both must record the same conditions (seen on a GPU sweep).
    import scipy.linalg  # noqa: F401 - loads SciPy's own OpenBLAS
    import sklearn.svm  # noqa: F401 - loads scikit-learn's own OpenMP

    apply_environment({"threads": 2})
    apis = [p["internal_api"] for p in threadpool_info()]
    assert len(apis) > len(set(apis)), apis  # the case itself: some library is loaded twice
    in_force = read_environment(0, "cpu")
    assert in_force.blas_threads == ",".join(sorted(f"{api}=2" for api in set(apis)))


def test_deterministic_turns_on_every_switch_and_the_autotuner_off() -> None:
    in_force = apply_environment({"deterministic": True, "cudnn_benchmark": True, "matmul_precision": "high"})
    assert torch.are_deterministic_algorithms_enabled() and in_force.deterministic is True
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8" == in_force.cublas_workspace
    assert in_force.cudnn_deterministic is True and in_force.cudnn_benchmark is False
    assert in_force.matmul_precision == "high" == torch.get_float32_matmul_precision()
    apply_environment({"deterministic": False, "cudnn_benchmark": True})
    assert not torch.are_deterministic_algorithms_enabled() and torch.backends.cudnn.benchmark


def test_same_environment_gives_bit_identical_training() -> None:
    def train() -> list[float]:
        model = torch.nn.Linear(16, 4)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        X = torch.randn(64, 16)
        for _ in range(5):
            loss = model(X).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return [float(p.detach().sum()) for p in model.parameters()]

    env = {"seed": 3, "threads": 1, "deterministic": True}
    apply_environment(env)
    a = train()
    apply_environment(env)
    assert train() == a
    apply_environment({**env, "seed": 4})
    assert train() != a


def test_device_auto_follows_the_hardware_and_cuda_without_gpu_says_what_to_do() -> None:
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert apply_environment({"device": "auto"}).device == expected
    assert apply_environment({"device": "cpu"}).device == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(EnvironmentSettingError, match=r"env.device=cuda but torch sees no GPU.*"
                                                          r"ray.resources_per_trial.gpu=1.*env.device=auto"):
            apply_environment({"device": "cuda"})


def test_bad_settings_are_all_reported() -> None:
    with pytest.raises(EnvironmentSettingError) as info:
        EnvSettings.from_config({"seed": -1, "threads": 0, "device": "tpu", "matmul_precision": "low", "x": 1})
    text = str(info.value)
    for part in ("env.x is not an environment setting", "env.seed=-1", "env.threads=0", "env.device='tpu'",
                 "env.matmul_precision='low'"):
        assert part in text


def test_swept_env_values_are_checked_before_the_sweep() -> None:
    space = parse_specs({"env.device": "choice(cpu, gpu)", "env.threads": "choice(1, 2)", "lr": "0.1,0.2"})
    problems = env_problems({"seed": 0, "device": "cpu", "threads": 1}, space)
    assert problems == ["env.device='gpu' must be one of auto, cpu, cuda (swept by env.device=choice(cpu, gpu))"]
    assert env_problems({"seed": 0, "threads": 1, "bogus": 1}, parse_specs({"lr": "0.1,0.2"})) == [
        "env.bogus is not an environment setting (known: cudnn, cudnn_benchmark, deterministic, device, "
        "matmul_precision, seed, threads)"]


def test_conditions_hold_packages_code_and_cpu() -> None:
    c = capture_conditions()
    assert c["packages.sha256"] == packages_hash() and int(c["packages.count"]) == len(installed_packages())
    assert any(p.startswith("torch==2.14.1") for p in installed_packages())
    assert c["pkg.torch"].startswith("2.14.1") and c["cpu.count"] == str(os.cpu_count())
    assert "cuda.version" in c  # torch is loaded in this process


def test_measurement_record_follows_belz_structure() -> None:
    config = {"lr": 0.1, "model": "mlp", "env.seed": 3, "env.threads": 1, "data.name": "digits"}
    conditions = {"host": "h", "git.commit": "abc", "pkg.torch": "2.14.1", "env_in_force.torch_threads": "1",
                  "threads.numpy.openblas": "1"}
    rec = measurement_record("test_acc", {"test_acc": 0.9, "train_acc": 1.0}, config, conditions)
    assert rec["object"] == {"lr": 0.1, "model": "mlp"}
    assert rec["measurand"] == {"name": "test_acc", "value": 0.9, "other_metrics": {"train_acc": 1.0}}
    assert rec["object_conditions"] == {"environment_requested": {"env.seed": 3, "env.threads": 1},
                                        "git.commit": "abc", "pkg.torch": "2.14.1"}
    assert rec["measurement_method"] == {"metric": "test_acc", "data.name": "digits"}
    assert rec["measurement_procedure"] == {"host": "h", "env_in_force.torch_threads": "1",
                                            "threads.numpy.openblas": "1"}


def test_a_later_trial_without_settings_gets_the_process_state_back() -> None:
    apply_environment({})  # the first call records the process's own state
    before = (torch.get_num_threads(), {p["num_threads"] for p in threadpool_info()},
              os.environ.get("OMP_NUM_THREADS"), os.environ.get("CUBLAS_WORKSPACE_CONFIG"))
    other = 2 if before[0] == 1 else 1  # not the process's own count, or a failed restore would pass unseen
    apply_environment({"threads": other, "deterministic": True})  # a trial in a reused worker
    after = apply_environment({"threads": None, "deterministic": False})  # the next trial
    assert (torch.get_num_threads(), {p["num_threads"] for p in threadpool_info()},
            os.environ.get("OMP_NUM_THREADS"), os.environ.get("CUBLAS_WORKSPACE_CONFIG")) == before
    assert after.cublas_workspace == before[3] and not after.deterministic


@pytest.mark.parametrize("precision, tf32", [("highest", False), ("high", True), ("medium", True)])
def test_convolutions_follow_the_matmul_precision(precision: str, tf32: bool) -> None:
    # cuDNN's TF32 convolutions are on by default; at "highest" they must be off too (docs/gpu.md).
    in_force = apply_environment({"seed": 0, "matmul_precision": precision})
    assert torch.backends.cudnn.allow_tf32 is tf32
    assert in_force.cudnn_allow_tf32 is tf32
    assert in_force.as_conditions()["env_in_force.cudnn_allow_tf32"] == str(tf32).lower()
    apply_environment({"seed": 0})


# A task that has not imported torch (an sklearn model with a seed) does not load it; its torch settings wait for
# the task's own `import torch`. Each check runs in a fresh interpreter: this module has torch loaded.
WAITS_FOR_TORCH = """
import json, os, sys
from sweeper.environment import apply_environment, last_environment
first = apply_environment({"seed": 7, "threads": 1})
in_force = apply_environment({"seed": 5, "threads": 2, "deterministic": True})  # the later request wins
out = {"loaded_before": "torch" in sys.modules, "threads_before": in_force.torch_threads, "device": in_force.device}
import torch
seed, draws = torch.initial_seed(), torch.randn(3).tolist()
torch.manual_seed(5)
last = last_environment()
out.update(seed=seed, same_draws=draws == torch.randn(3).tolist(), threads=torch.get_num_threads(),
           deterministic=torch.are_deterministic_algorithms_enabled(), precision=torch.get_float32_matmul_precision(),
           recorded=last.as_conditions(), loader=type(torch.__spec__.loader).__name__,
           hooks=[type(f).__name__ for f in sys.meta_path if "Torch" in type(f).__name__])
apply_environment({"seed": 5})  # a later trial leaves threads alone: torch's own count comes back
out["threads_after"] = torch.get_num_threads()
from threadpoolctl import threadpool_info
out["pools_after"] = {p["user_api"]: p["num_threads"] for p in threadpool_info()}
print(json.dumps(out))
"""


def _fresh_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_a_task_without_torch_does_not_load_it_and_its_settings_apply_when_it_does() -> None:
    # CUDA_VISIBLE_DEVICES="" hides every GPU, so device=auto needs no torch on any machine.
    proc = _fresh_python(WAITS_FOR_TORCH, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not out["loaded_before"] and out["threads_before"] is None and out["device"] == "cpu"
    assert out["seed"] == 5 and out["same_draws"] and out["threads"] == 2 and out["deterministic"]
    assert out["precision"] == "highest"
    assert {"env_in_force.torch_threads": "2", "env_in_force.deterministic": "true",
            "env_in_force.cudnn_deterministic": "true"}.items() <= out["recorded"].items()
    assert out["loader"] != "_ThenApplySettings" and out["hooks"] == []  # torch keeps its loader; the hook is gone
    # torch loaded under the process's own OMP_NUM_THREADS, not the trial's: its count and pools come back
    assert out["threads_after"] == 1 and set(out["pools_after"].values()) == {1}, out["pools_after"]


def test_cuda_asks_torch_even_before_the_task_imports_it() -> None:
    code = ("import sys\nfrom sweeper.environment import apply_environment\n"
            "try:\n    apply_environment({'device': 'cuda'})\nexcept Exception as exc:\n    print(exc)\n"
            "print('torch' in sys.modules)")
    proc = _fresh_python(code, CUDA_VISIBLE_DEVICES="")
    assert proc.stdout.split()[-1] == "True" and "env.device=cuda but torch sees no GPU" in proc.stdout, proc.stderr


def test_gpu_possible_is_answered_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(environment.sys, "platform", "linux")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setattr(environment.os.path, "exists", lambda path: path == "/dev/nvidiactl")
    assert environment.gpu_possible()
    monkeypatch.setattr(environment.os.path, "exists", lambda path: False)
    assert not environment.gpu_possible()  # no driver's device file: torch would see no GPU
    monkeypatch.setattr(environment.os.path, "exists", lambda path: True)
    for hidden in ("", "-1"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)
        assert not environment.gpu_possible()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert environment.gpu_possible()
    monkeypatch.setattr(environment.sys, "platform", "darwin")
    assert not environment.gpu_possible()
    monkeypatch.setattr(environment.sys, "platform", "win32")
    assert environment.gpu_possible()  # no cheap answer there: torch decides
