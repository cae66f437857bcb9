"""Provenance that never lies (issue 35): untracked files make a checkout dirty, the task's script and config
folder are hashed with or without git, and the checklist's code, GPU and data rows say what the records hold."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from sweeper.analysis.runs import SweepRecords
from sweeper.record import conditions
from sweeper.record.conditions import (
    _git_state,
    code_identity,
    config_dir_sha256,
    parse_porcelain,
    unidentified_code_warning,
    untracked_tags,
)
from sweeper.report.checklist import code_text, data_keys, data_text, gpu_text
from sweeper.run.code_identity import code_warning, config_dir, task_script

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]


def git_repo(root: Path, committed: dict[str, str], untracked: dict[str, str]) -> Path:
    """A git repository at ``root`` with ``committed`` files in its one commit and ``untracked`` files beside."""
    for name, text in {**committed, **untracked}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    subprocess.run([*GIT, "init", "-q"], cwd=root, check=True)
    subprocess.run([*GIT, "add", *committed], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "c"], cwd=root, check=True)
    return root


def test_an_untracked_script_makes_the_checkout_dirty_and_is_listed(tmp_path: Path) -> None:
    repo = git_repo(tmp_path, {"conf/app.yaml": "x: 1\n"}, {"app.py": "print(1)\n", "multirun/a/b.yaml": "",
                                                            "mlruns.db": "", "__pycache__/app.cpython-311.pyc": ""})
    state = _git_state(str(repo / "conf"))
    assert state["git.dirty"] == "true"
    assert state["git.untracked"] == "app.py" and state["git.untracked_count"] == "1"  # the sweep's outputs are not
    assert "git.diff_sha256" not in state  # no tracked file changed


def test_a_clean_checkout_is_clean_and_a_changed_file_is_hashed(tmp_path: Path) -> None:
    repo = git_repo(tmp_path, {"app.py": "print(1)\n"}, {})
    assert _git_state(str(repo)) == {"git.commit": _git_state(str(repo))["git.commit"], "git.dirty": "false"}
    (repo / "app.py").write_text("print(2)\n")
    state = _git_state(str(repo))
    assert state["git.dirty"] == "true" and len(state["git.diff_sha256"]) == 64 and "git.untracked" not in state


def test_porcelain_parsing_skips_rename_sources_and_tool_outputs() -> None:
    status = ("R  new.py\0old.py\0 M a.py\0?? b.py\0?? sub/multirun/\0?? report-toy/\0?? dir/\0!! ignored\0"
              "?? __pycache__/\0?? pkg/__pycache__/\0")
    assert parse_porcelain(status) == (["new.py", "a.py"], ["b.py", "dir/"])


def test_untracked_paths_are_capped_with_a_count() -> None:
    tags = untracked_tags([f"f{i}.py" for i in range(25)])
    assert tags["git.untracked_count"] == "25"
    assert tags["git.untracked"].startswith("f0.py, f1.py") and tags["git.untracked"].endswith("f19.py, ... (5 more)")


def test_the_config_hash_depends_on_paths_and_contents_only(tmp_path: Path) -> None:
    for root in (tmp_path / "a", tmp_path / "b"):
        (root / "model").mkdir(parents=True)
        (root / "app.yaml").write_text("x: 1\n")
        (root / "model" / "small.yaml").write_text("w: 2\n")
    (tmp_path / "b" / "notes.txt").write_text("not a config")  # Hydra reads YAML only
    (tmp_path / "b" / "multirun").mkdir()
    (tmp_path / "b" / "multirun" / "multirun.yaml").write_text("a sweep's output")
    (tmp_path / "b" / "__pycache__").mkdir()  # Python's, skipped as a tool output
    (tmp_path / "b" / "__pycache__" / "stray.yaml").write_text("not the app's")
    assert config_dir_sha256(tmp_path / "a") == config_dir_sha256(tmp_path / "b")
    assert config_dir_sha256(tmp_path / "a")[1] == 2  # type: ignore[index]  # not None: the folder exists
    (tmp_path / "b" / "model" / "small.yaml").write_text("w: 3\n")
    assert config_dir_sha256(tmp_path / "a") != config_dir_sha256(tmp_path / "b")
    (tmp_path / "b" / "model" / "small.yaml").rename(tmp_path / "b" / "model" / "big.yaml")
    (tmp_path / "b" / "model" / "big.yaml").write_text("w: 2\n")
    assert config_dir_sha256(tmp_path / "a") != config_dir_sha256(tmp_path / "b")  # a renamed file is a change
    assert config_dir_sha256(tmp_path / "missing") is None


def test_code_identity_hashes_the_script_and_config_without_git(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "app.yaml").write_text("x: 1\n")
    (tmp_path / "app.py").write_text("print(1)\n")
    identity = code_identity(str(tmp_path / "app.py"), str(tmp_path / "conf"))
    assert identity["code.script_sha256"] == hashlib.sha256(b"print(1)\n").hexdigest()
    assert identity["code.config_sha256"] == (
        config_dir_sha256(tmp_path / "conf")[0])  # type: ignore[index]  # the folder exists
    assert identity["code.config_files"] == "1" and identity["code.script"] == str(tmp_path / "app.py")
    assert code_identity(str(tmp_path / "gone.py"), None) == {}


def test_code_that_cannot_be_identified_is_said_once_in_one_line(tmp_path: Path) -> None:
    assert unidentified_code_warning({"git.commit": "abc"}) is None
    assert unidentified_code_warning({"code.script_sha256": "0" * 64}) is None
    warning = unidentified_code_warning({"host": "h"})
    assert warning is not None and "\n" not in warning and "cannot be identified" in warning
    not_git = tmp_path / "nogit"
    not_git.mkdir()
    if _git_state(str(not_git)):
        pytest.skip("the temporary folder is inside a git checkout")
    exec(compile("def task(cfg): pass", "<typed in>", "exec"), namespace := {})  # no file to read
    assert code_warning(namespace["task"], None, str(not_git)) == warning
    assert code_warning(test_code_identity_hashes_the_script_and_config_without_git, None, str(not_git)) is None


def test_the_config_folder_is_hydras_main_search_path_entry(tmp_path: Path) -> None:
    entries = [SimpleNamespace(provider="hydra", path="pkg://hydra.conf"),
               SimpleNamespace(provider="main", path=f"file://{tmp_path}/my conf")]
    context = SimpleNamespace(config_loader=SimpleNamespace(
        get_search_path=lambda: SimpleNamespace(get_path=lambda: entries)))
    assert config_dir(context) == f"{tmp_path}/my conf"
    entries[1] = SimpleNamespace(provider="main", path=str(tmp_path))  # how Hydra keeps an app's config_path
    assert config_dir(context) == str(tmp_path)
    entries[1] = SimpleNamespace(provider="main", path="pkg://my_app.conf")
    assert config_dir(context) is None
    assert config_dir(None) is None
    assert task_script(test_the_config_folder_is_hydras_main_search_path_entry) == __file__


def test_a_machine_without_gpu_records_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conditions.shutil, "which", lambda name: None)
    monkeypatch.setattr(conditions, "_nvidia_present", lambda: False)
    assert dict(conditions._gpu_conditions.__wrapped__(False)) == {"gpu.count": "0"}


def frame(**columns: list[object]) -> pd.DataFrame:
    return pd.DataFrame({k.replace("__", "."): v for k, v in columns.items()})


def records(trials: pd.DataFrame, parent_tags: dict[str, str] | None = None) -> SweepRecords:
    return SweepRecords(experiment="e", tracking_uri="sqlite:///x.db", parent_run_id="p", settings={}, space=None,
                        metric="m", mode="max", strategy="random", trials=trials, parent_tags=parent_tags or {})


def test_the_gpu_row_says_cpu_only_when_the_trials_saw_no_gpu() -> None:
    assert gpu_text(frame(tag__gpu__count=["0", "0"])) == "none (CPU only)"
    assert gpu_text(frame(tag__gpu__count=["0"], tag__cuda__version=["12.8"])) == \
        "none (CPU only); torch built for CUDA 12.8"
    assert gpu_text(frame(tag__gpu__count=["1"], tag__gpu__name=["H100"])) == "gpu.count 1, gpu.name H100"
    assert gpu_text(frame(tag__gpu__count=["0", "1"], tag__gpu__name=[None, "H100"])).startswith("gpu.count 0 (1")
    assert gpu_text(frame(tag__host=["h"])) is None  # old records: nothing says
    assert gpu_text(frame(tag__host=["h"]), {"sweeper.gpu.count": "0"}) == "none (CPU only)"  # on the sweep's run
    assert gpu_text(frame(tag__host=["h"]), {"sweeper.driver.gpu.count": "0"}) is None  # the driver's machine


def test_the_code_row_uses_git_and_the_hashes_or_the_hashes_alone() -> None:
    sha = "a" * 64
    with_git = frame(tag__git__commit=["c0ffee"], tag__git__dirty=["true"], tag__git__untracked=["app.py"],
                     tag__code__script=["/w/app.py"], tag__code__script_sha256=[sha])
    assert code_text(records(with_git)) == (f"git c0ffee (dirty: true; untracked: app.py); "
                                            f"script `/w/app.py` sha256 {sha}")
    without_git = frame(tag__code__script=["/w/app.py"], tag__code__script_sha256=[sha],
                        tag__code__config_dir=["/w/conf"], tag__code__config_sha256=["b" * 64])
    assert code_text(records(without_git)) == (f"script `/w/app.py` sha256 {sha}; "
                                               f"config folder `/w/conf` sha256 {'b' * 64}")
    assert code_text(records(frame(tag__host=["h"]))) is None
    from_the_sweep_run = records(frame(tag__host=["h"]), {"sweeper.driver.code.script_sha256": sha})
    assert code_text(from_the_sweep_run) == f"script sha256 {sha}"


def test_the_data_row_names_the_split_and_dataset_keys_of_the_config() -> None:
    trials = frame(param__data__split_seed=[0, 1], param__data__test_size=[0.3, 0.3], param__data__name=["wine"] * 2,
                   param__data__batch_size=[32, 32], param__model__C=[1.0, 2.0], param__cv__n_folds=[5, 5],
                   param__dataset__version=["v2", "v2"], tag__data__name=["x", "x"])
    assert data_keys(trials.columns) == ["cv.n_folds", "data.name", "data.split_seed", "data.test_size",
                                         "dataset.version"]
    assert data_text(trials) == ("from the config: `cv.n_folds` = 5; `data.name` = wine; `data.split_seed` varies: "
                                 "0, 1; `data.test_size` = 0.3; `dataset.version` = v2")
    assert data_text(frame(param__model__C=[1.0])) is None
