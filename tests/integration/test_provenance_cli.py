"""Provenance through the real command line (issue 35): a task script left untracked in a git repository makes the
sweep dirty and is named; outside git the script's SHA-256 identifies the code, and the report's checklist says so."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.record.shared_conditions import merged_tags, shared_from_tags
from tests.conftest import REPO
from tests.integration.conftest import ONE_AT_A_TIME, TOY_APP, run_cli

pytestmark = pytest.mark.integration

#: Two random trials: what is recorded about the code does not depend on how many.
FEW_TRIALS = ("hydra.sweeper.strategy=random", "hydra.sweeper.num_trials=2", ONE_AT_A_TIME)
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]


def copied_toy(folder: Path) -> Path:
    """The toy app and its config folder, copied into ``folder``; returns the script."""
    shutil.copytree(TOY_APP.parent / "conf", folder / "conf")
    return Path(shutil.copy(TOY_APP, folder / "toy.py"))


def test_an_untracked_script_in_git_makes_the_sweep_dirty_and_is_named(tmp_path: Path) -> None:
    script = copied_toy(tmp_path)
    subprocess.run([*GIT, "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*GIT, "add", "conf"], cwd=tmp_path, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "config only"], cwd=tmp_path, check=True)
    sweep = run_cli(script, tmp_path, *FEW_TRIALS)  # its multirun/ and mlruns.db land in the repository too
    assert sweep.proc.returncode == 0, sweep.output
    parent, trials = sweep.runs("toy")
    assert parent.data.tags["sweeper.driver.git.dirty"] == "true"
    assert parent.data.tags["sweeper.driver.git.untracked"] == "toy.py"  # the sweep's own outputs are not counted
    digest = hashlib.sha256(script.read_bytes()).hexdigest()
    shared = shared_from_tags(parent.data.tags)  # what every trial recorded alike is on the sweep's run, once
    assert shared is not None and shared["code.script_sha256"] == digest
    for trial in trials:
        tags = merged_tags(trial.data.tags, shared)
        assert (tags["sweeper.git.dirty"], tags["sweeper.git.untracked"]) == ("true", "toy.py")
        assert tags["sweeper.code.script_sha256"] == digest
        assert tags["sweeper.code.config_dir"] == str(tmp_path / "conf")


def test_outside_git_the_script_hash_is_recorded_and_the_checklist_shows_it(tmp_path: Path) -> None:
    if subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True).returncode == 0:
        pytest.skip("the temporary folder is inside a git checkout")
    script = copied_toy(tmp_path)
    sweep = run_cli(script, tmp_path, *FEW_TRIALS)
    assert sweep.proc.returncode == 0, sweep.output
    digest = hashlib.sha256(script.read_bytes()).hexdigest()
    parent, runs = sweep.runs("toy")
    trials = [merged_tags(t.data.tags, shared_from_tags(parent.data.tags)) for t in runs]
    assert {t["sweeper.code.script_sha256"] for t in trials} == {digest}
    assert parent.data.tags["sweeper.driver.code.script_sha256"] == digest  # the sweep's run, as the driver read it
    assert "cannot be identified" not in sweep.output  # a hashed script identifies the code
    assert not any("sweeper.git.commit" in t for t in trials)
    report = subprocess.run([sys.executable, "-m", "sweeper.cli", "report", "--experiment", "toy", "--tracking-uri",
                             sweep.tracking_uri, "--out", str(tmp_path / "report")],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stdout + report.stderr
    checklist = json.loads((tmp_path / "report" / "summary.json").read_text())["checklist"]
    code = checklist["Code version (git commit or file hashes)"]
    assert code.startswith(f"script `{script}` sha256 {digest}; config folder `{tmp_path / 'conf'}` sha256 ")
    assert checklist["Hardware: GPU"] == "none (CPU only)" or shutil.which("nvidia-smi")
