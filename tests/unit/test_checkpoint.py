"""Checkpoints of a task (sweeper.checkpoint): the format, what counts as complete, outside a sweep (issue 18)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper import load_checkpoint, log_metrics, save_checkpoint
from sweeper.checkpoint import (
    META_FILE,
    CheckpointCorrupt,
    LocalCheckpoints,
    read_checkpoint,
    write_checkpoint,
)
from sweeper.run.tune_checkpoints import CheckpointSettings, checkpoints_in, delete_checkpoints, newest_checkpoint
from tests.conftest import REPO

EPOCHS_APP = REPO / "tests" / "integration" / "apps" / "epochs.py"


def test_a_state_with_tensors_and_state_dicts_comes_back_equal(tmp_path: Path) -> None:
    import torch

    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.ones(4, 3)).sum().backward()
    opt.step()
    state = {"epoch": 3, "model": model.state_dict(), "optimizer": opt.state_dict(), "rng": torch.get_rng_state()}
    write_checkpoint(tmp_path, state, step=3, seq=5)

    back, info = read_checkpoint(tmp_path)
    assert (tmp_path / "state.pt").is_file() and (info.step, info.seq) == (3, 5)
    assert json.loads((tmp_path / META_FILE).read_text())["files"]["state.pt"]["size"] > 0
    assert back["epoch"] == 3 and torch.equal(back["rng"], state["rng"])
    assert all(torch.equal(back["model"][k], v) for k, v in state["model"].items())
    restored = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    restored.load_state_dict(back["optimizer"])
    assert torch.equal(restored.state_dict()["state"][0]["momentum_buffer"],
                       opt.state_dict()["state"][0]["momentum_buffer"])


def test_without_torch_the_state_is_pickled(tmp_path: Path) -> None:
    code = ("import sys; from sweeper.checkpoint import write_checkpoint, read_checkpoint; "
            f"write_checkpoint({str(tmp_path)!r}, {{'a': [1, 2.5]}}, 7); "
            f"assert read_checkpoint({str(tmp_path)!r})[0] == {{'a': [1, 2.5]}}; assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
    assert (tmp_path / "state.pkl").is_file() and not (tmp_path / "state.pt").exists()


def test_a_copy_cut_short_is_incomplete_and_a_changed_one_is_corrupt(tmp_path: Path) -> None:
    for name in ("whole", "short", "no_meta", "changed"):
        write_checkpoint(tmp_path / f"checkpoint_{name}", {"x": list(range(1000))}, step=1)
    state = next((tmp_path / "checkpoint_short").glob("state.*"))
    state.write_bytes(state.read_bytes()[:-10])  # the upload stopped before the end
    (tmp_path / "checkpoint_no_meta" / META_FILE).unlink()  # ... or before checkpoint.json
    changed = next((tmp_path / "checkpoint_changed").glob("state.*"))
    data = bytearray(changed.read_bytes())
    data[-20] ^= 0xFF  # same size, other content
    changed.write_bytes(bytes(data))

    assert read_checkpoint(tmp_path / "checkpoint_whole")[0] == {"x": list(range(1000))}
    for name in ("short", "no_meta"):
        with pytest.raises(FileNotFoundError, match="holds no complete checkpoint"):
            read_checkpoint(tmp_path / f"checkpoint_{name}")
    with pytest.raises(CheckpointCorrupt, match="differs from the SHA-256 in its checkpoint.json"):
        read_checkpoint(tmp_path / "checkpoint_changed")


def test_the_storage_scan_takes_the_newest_complete_checkpoint_and_deletion_takes_all(tmp_path: Path) -> None:
    """Newest by sequence number: a second training phase (optimizer_gap's adam) starts again at step 0."""
    import pyarrow.fs

    fs = pyarrow.fs.LocalFileSystem()
    trial, previous = tmp_path / "trial_0001", tmp_path / "trial_0001_before"
    write_checkpoint(previous / "checkpoint_000004", {"phase": "adam", "epoch": 0}, step=0, seq=4)
    write_checkpoint(trial / "checkpoint_000000", {"phase": "sgd", "epoch": 2}, step=2, seq=2)
    write_checkpoint(trial / "checkpoint_000001", {"phase": "adam", "epoch": 1}, step=1, seq=5)
    (trial / "checkpoint_000001" / META_FILE).unlink()  # incomplete: the newest is seq 4, in the other folder
    (trial / "result.json").write_text("{}")

    found = checkpoints_in(fs, [str(trial), str(previous), str(tmp_path / "absent"), None])
    assert [(c.seq, c.step) for c in found] == [(2, 2), (4, 0)]
    newest = newest_checkpoint(fs, [str(trial), str(previous)])
    assert newest is not None and newest.path == str(previous / "checkpoint_000004")
    assert newest_checkpoint(fs, [str(tmp_path / "absent")]) is None

    assert delete_checkpoints(fs, [str(trial), str(previous)]) == 3
    assert sorted(p.name for p in trial.iterdir()) == ["result.json"] and not list(previous.iterdir())


def test_outside_a_sweep_checkpoints_go_to_the_working_directory_and_the_newest_is_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_checkpoint() is None
    for epoch in range(3):
        log_metrics({"loss": 1.0 / (epoch + 1)}, step=epoch)
        save_checkpoint({"epoch": epoch})
    kept = LocalCheckpoints(tmp_path / "checkpoints").complete()
    assert [(c.step, c.seq) for c in kept] == [(2, 2)]  # the step of the last log_metrics; older ones deleted
    assert load_checkpoint() == {"epoch": 2}
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [Path(kept[0].path).name]


def test_a_task_run_without_the_sweeper_continues_in_its_job_directory(tmp_path: Path) -> None:
    """`python app.py hydra.run.dir=X` twice: the second run continues from the first one's last checkpoint."""
    executions = tmp_path / "executions.log"

    def run(epochs: int) -> str:
        proc = subprocess.run([sys.executable, str(EPOCHS_APP), f"hydra.run.dir={tmp_path / 'job'}", f"epochs={epochs}",
                               "epoch_s=0", f"executions_log={executions}"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout + proc.stderr

    run(2)
    run(4)
    epochs = [int(line.split()[1]) for line in executions.read_text().splitlines()]
    assert epochs == [0, 1, 2, 3]  # epochs 0 and 1 ran once, in the first run
    assert [c.step for c in LocalCheckpoints(tmp_path / "job" / "checkpoints").complete()] == [3]


def test_bad_checkpoint_settings_name_the_key_and_the_fix() -> None:
    problems = CheckpointSettings(keep_checkpoints=0, preempt_grace_s=-1.0).problems()
    assert problems == [
        "hydra.sweeper.keep_checkpoints=0 is invalid: a running trial keeps at least its newest checkpoint. "
        "Try hydra.sweeper.keep_checkpoints=1.",
        "hydra.sweeper.preempt_grace_s=-1.0 is invalid: the seconds trials get to save a checkpoint after SIGTERM, "
        "a number >= 0. Try hydra.sweeper.preempt_grace_s=120.",
    ]
    assert CheckpointSettings().problems() == []
