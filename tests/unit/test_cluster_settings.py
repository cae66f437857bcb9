"""The ``ray`` block's cluster settings: addresses, the code each node gets, storage, typing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra import compose, initialize
from omegaconf import OmegaConf

import hydra_plugins.multiverse_sweeper.config  # noqa: F401 - registers sweeper_defaults
from sweeper.run.cluster import address_problem, module_path, runtime_env, storage_path
from tests.conftest import REPO


def ray_block(**given) -> dict:
    from hydra_plugins.multiverse_sweeper.config import RayConf

    merged = OmegaConf.merge(OmegaConf.structured(RayConf), given)
    return OmegaConf.to_container(merged)  # type: ignore[return-value]  # a DictConfig gives a dict


@pytest.mark.parametrize("address", [None, "auto", "local", "10.0.0.5:6379", "head-node:6379", "ray://head:10001",
                                     "ray://10.1.2.3"])
def test_usable_addresses_pass(address) -> None:
    assert address_problem(address) is None


@pytest.mark.parametrize("address", ["", "http://head:6379", "head", "head:port", "ray:/head:10001", "a b:1"])
def test_malformed_addresses_are_named_with_the_forms_that_work(address) -> None:
    problem = address_problem(address)
    assert problem is not None and repr(address) in problem and "ray://HOST:10001" in problem


def test_local_ray_uploads_nothing_and_imports_from_where_the_code_lies(tmp_path) -> None:
    env = runtime_env(ray_block(), code_dir=str(tmp_path / "app"), launch_dir=str(tmp_path))
    assert "working_dir" not in env
    assert env["env_vars"]["PYTHONPATH"].split(os.pathsep)[:2] == [str(tmp_path / "app"), str(tmp_path)]
    assert env["env_vars"]["RAY_CHDIR_TO_TRIAL_DIR"] == "0"


def test_the_drivers_mlflow_retry_waits_reach_the_workers_where_it_sets_them(tmp_path, monkeypatch) -> None:
    """Through Ray Client the sweep's MLflow writer runs in a Ray task on the head: it must wait as set."""
    monkeypatch.delenv("SWEEPER_MLFLOW_RETRY_DELAYS_S", raising=False)
    env = runtime_env(ray_block(address="ray://head:10001"), code_dir=None, launch_dir=str(tmp_path))
    assert "SWEEPER_MLFLOW_RETRY_DELAYS_S" not in env["env_vars"]
    monkeypatch.setenv("SWEEPER_MLFLOW_RETRY_DELAYS_S", "1,2,4,8,16,32")
    env = runtime_env(ray_block(address="ray://head:10001"), code_dir=None, launch_dir=str(tmp_path))
    assert env["env_vars"]["SWEEPER_MLFLOW_RETRY_DELAYS_S"] == "1,2,4,8,16,32"


def test_joining_a_cluster_uploads_the_launch_dir_with_the_script_folder_on_the_path(tmp_path) -> None:
    (tmp_path / "app").mkdir()
    env = runtime_env(ray_block(address="auto"), code_dir=str(tmp_path / "app"), launch_dir=str(tmp_path))
    assert env["working_dir"] == str(tmp_path.resolve())
    assert env["env_vars"]["PYTHONPATH"] == "app"  # relative to the unpacked working_dir
    assert ".venv" in env["excludes"] and "mlruns.db" in env["excludes"]


def test_a_script_at_the_root_of_the_upload_needs_no_path_entry(tmp_path) -> None:
    env = runtime_env(ray_block(address="auto"), code_dir=str(tmp_path), launch_dir=str(tmp_path))
    assert "PYTHONPATH" not in env["env_vars"]


def test_a_script_outside_the_upload_is_refused_with_the_fix(tmp_path) -> None:
    (tmp_path / "launch").mkdir()
    with pytest.raises(ValueError, match=r"outside ray.working_dir.*launch the sweep from a folder"):
        runtime_env(ray_block(address="auto"), code_dir=str(tmp_path / "elsewhere"),
                    launch_dir=str(tmp_path / "launch"))


def test_working_dir_null_on_a_cluster_means_the_nodes_have_the_code(tmp_path) -> None:
    env = runtime_env(ray_block(address="auto", working_dir=None), code_dir=str(tmp_path), launch_dir=str(tmp_path))
    assert "working_dir" not in env and str(tmp_path) in env["env_vars"]["PYTHONPATH"]


def test_a_missing_working_dir_is_named(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"ray.working_dir=.*not a directory"):
        runtime_env(ray_block(working_dir=str(tmp_path / "nope")), code_dir=None, launch_dir=str(tmp_path))


def test_py_modules_take_package_names_and_folders(tmp_path) -> None:
    (tmp_path / "mylib").mkdir()
    env = runtime_env(ray_block(py_modules=["sweeper", str(tmp_path / "mylib")]), code_dir=None,
                      launch_dir=str(tmp_path))
    assert env["py_modules"] == [str(REPO / "sweeper"), str(tmp_path / "mylib")]
    with pytest.raises(ValueError, match="neither a path nor an importable package"):
        module_path("no_such_package_xyz")
    with pytest.raises(ValueError, match="single-file module"):
        module_path("shlex")


def test_runtime_env_passes_through_and_env_vars_merge(tmp_path) -> None:
    extra = {"pip": ["einops==0.8.0"], "env_vars": {"WANDB_MODE": "offline"}}
    env = runtime_env(ray_block(runtime_env=extra), code_dir=None, launch_dir=str(tmp_path))
    assert env["pip"] == ["einops==0.8.0"]
    assert env["env_vars"]["WANDB_MODE"] == "offline" and env["env_vars"]["RAY_CHDIR_TO_TRIAL_DIR"] == "0"


def test_storage_path_defaults_to_the_sweep_dir_and_keeps_uris(tmp_path) -> None:
    assert storage_path(ray_block(), tmp_path) == str(tmp_path)
    assert storage_path(ray_block(storage_path="s3://bucket/sweeps"), tmp_path) == "s3://bucket/sweeps"
    assert storage_path(ray_block(storage_path="~/shared"), tmp_path) == str(Path("~/shared").expanduser().resolve())


def test_custom_resources_and_runtime_env_take_new_keys_on_the_command_line() -> None:
    # Hydra's struct mode would refuse unknown keys; these two maps stay open and typed.
    with initialize(version_base="1.3", config_path=None):
        cfg = compose("sweeper_defaults", overrides=[
            "ray.resources_per_trial.custom={large_gpu: 1}", "ray.runtime_env={env_vars: {A: b}}",
            "ray.py_modules=[sweeper]", "ray.storage_path=/nfs/sweeps",
        ])
        assert cfg.ray.resources_per_trial.custom == {"large_gpu": 1.0}
        assert cfg.ray.runtime_env.env_vars.A == "b"
        assert list(cfg.ray.py_modules) == ["sweeper"]
        with pytest.raises(Exception, match="custom"):
            compose("sweeper_defaults", overrides=["ray.resources_per_trial.custom={large_gpu: many}"])


def test_inside_a_ray_job_that_shipped_the_code_auto_uploads_nothing(tmp_path, monkeypatch) -> None:
    # `ray job submit --working-dir .` ran us: a second working_dir would be refused by Ray.
    (tmp_path / "app").mkdir()
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", '{"runtime_env": {"working_dir": "gcs://_ray_pkg_1.zip"}}')
    env = runtime_env(ray_block(address="auto"), code_dir=str(tmp_path / "app"), launch_dir=str(tmp_path))
    assert "working_dir" not in env
    assert env["env_vars"]["PYTHONPATH"] == "app"  # relative to the job's unpacked working_dir
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", '{"runtime_env": {}}')
    env = runtime_env(ray_block(address="auto"), code_dir=str(tmp_path / "app"), launch_dir=str(tmp_path))
    assert env["working_dir"] == str(tmp_path.resolve())
