"""sweeper.environment: settings put in force in this process, read back, and validated."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from sweeper.environment import EnvironmentSettingError, EnvSettings, apply_environment, env_problems
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
    assert all(a != b for a, b in zip(first[:2], second[:2])) and first[2] != second[2]


@pytest.mark.parametrize("threads", [1, 2])
def test_threads_are_read_back_from_every_pool_and_torch(threads: int) -> None:
    in_force = apply_environment({"threads": threads})
    assert in_force.torch_threads == threads == torch.get_num_threads()
    assert {int(p.split("=")[1]) for p in in_force.blas_threads.split(",")} == {threads}
    assert {p["num_threads"] for p in threadpool_info()} == {threads}
    assert os.environ["OMP_NUM_THREADS"] == str(threads)
    conditions = in_force.as_conditions()
    assert conditions["env_in_force.torch_threads"] == str(threads)


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
