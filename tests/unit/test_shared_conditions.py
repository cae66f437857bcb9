"""The conditions every trial shares, recorded once on the sweep's run, on a real MLflow SQLite store.

Trials are closed as the recorder closes them (sweeper.run.recorder: ``SharedConditions.trial_tags``
then the trial's own log, through one DurableWriter, in order). Each sweep is also written the way
trials were recorded before, every condition on every trial, and ``load_sweep`` must give the same
trial table from both. A resumed sweep (``SharedConditions.load``, what ``TrialRecorder.adopt`` calls)
keeps the shared set on its run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sweeper.analysis.runs import load_sweep
from sweeper.record.shared_conditions import (
    ARTIFACT,
    POINTER,
    SharedConditions,
    merged_tags,
    shared_from_tags,
    storable,
)
from sweeper.record.spool import DurableWriter
from sweeper.record.tracking import MLflowTracker
from tests.integration.conftest import STORE_TEMPLATE

BASE = {"host": "node-a", "os": "Linux-6", "python": "3.11.7", "pkg.numpy": "2.4.6", "cpu.count": "8",
        "packages.sha256": "ab" * 32, "threads.numpy.openblas": "1", "cuda.version": "12.4"}
#: Per trial: what differs from BASE (None: the trial lacks that condition). Trial 3 closes without conditions.
CHANGES: list[dict[str, str | None] | None] = [
    {"pid": "101", "seed": "0"},
    {"pid": "102", "seed": "1"},
    {"pid": "101", "seed": "2", "threads.numpy.openblas": "2", "gpu.visible": "0"},
    None,
    {"pid": "102", "seed": "3", "cuda.version": None},
]


def conditions(change: Mapping[str, str | None] | None) -> dict[str, str]:
    if change is None:
        return {}
    return {k: v for k, v in {**BASE, **change}.items() if v is not None}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One SQLite store for the module, a copy of the test process's migrated empty store."""
    db = tmp_path_factory.mktemp("shared") / "mlruns.db"
    STORE_TEMPLATE.copy_to(db)
    return f"sqlite:///{db}"


def new_sweep(uri: str, experiment: str) -> tuple[MLflowTracker, str, DurableWriter]:
    tracker = MLflowTracker(uri, experiment)
    return tracker, tracker.start_run("sweep", tags={"role": "sweep"}), DurableWriter(tracker, None,
                                                                                      retry_delays_s=())


def close_trial(writer: DurableWriter, parent: str, index: int, found: dict[str, str],
                shared: SharedConditions | None) -> str:
    """A trial's run, created then closed as the recorder does; ``shared`` None: every condition as a tag."""
    run = writer.start_run(f"trial #{index}", f"trial-{index:04d}", parent_run_id=parent, params={"x": index},
                           tags={"trial_index": index, "status": "RUNNING"})
    tags: dict[str, Any] = dict(found) if shared is None else shared.trial_tags(writer, parent, run, index, found)
    writer.log(f"closing trial #{index}", run, tags={**tags, "status": "FINISHED"})
    writer.finish(f"closing trial #{index}", run, "FINISHED")
    return run


def written_both_ways(uri: str, name: str, trials: list[dict[str, str]]) -> tuple[MLflowTracker, str, str]:
    """The trials as one sweep with a shared set and one with every condition on every trial."""
    ids = []
    for shared in (SharedConditions(), None):
        tracker, parent, writer = new_sweep(uri, f"{name}-{'full' if shared is None else 'shared'}")
        for index, found in enumerate(trials):
            close_trial(writer, parent, index, found, shared)
        writer.close()
        assert not writer.failures, writer.failures
        ids.append((tracker, parent))
    return ids[0][0], ids[0][1], ids[1][1]


def same_table(uri: str, name: str, parent: str, reference: str) -> pd.DataFrame:
    """load_sweep's trial table of the sweep with the shared set, checked equal to the reference's."""
    drop = ["run_id", "start_time", "end_time", "tag.writer_handle"]
    got = load_sweep(f"{name}-shared", uri, parent).trials
    want = load_sweep(f"{name}-full", uri, reference).trials
    pd.testing.assert_frame_equal(got.drop(columns=drop), want.drop(columns=drop))
    return got


def test_trials_keep_what_differs_and_the_sweeps_run_what_all_share(store: str, tmp_path: Path) -> None:
    trials = [conditions(c) for c in CHANGES]
    tracker, parent, reference = written_both_ways(store, "mixed", trials)
    sweep = tracker.client.get_run(parent)
    shared = shared_from_tags(sweep.data.tags)
    # Shared: what every trial with conditions recorded alike; never the pid; the others left it, named.
    assert shared == {k: v for k, v in BASE.items() if k not in ("threads.numpy.openblas", "cuda.version")}
    assert sweep.data.tags["sweeper.varied_conditions"] == "cuda.version, seed, threads.numpy.openblas"
    for key, value in shared.items():
        assert all(t[key] == value for t in trials if t), key
    artifact = Path(tracker.client.download_artifacts(parent, ARTIFACT, str(tmp_path)))
    assert json.loads(artifact.read_text()) == {"shared": shared,
                                                "varied": ["cuda.version", "seed", "threads.numpy.openblas"]}
    # Each trial: only its own conditions (those that varied written back on the trials that had relied on
    # the shared value) and the pointer; the trial without conditions records none.
    runs = sorted(tracker.child_runs(parent), key=lambda r: int(r.data.tags["sweeper.trial_index"]))
    for run, found in zip(runs, trials, strict=True):
        own = {k.removeprefix("sweeper."): v for k, v in run.data.tags.items()
               if k.removeprefix("sweeper.") in {*BASE, *found, "shared_conditions"}}
        expected = {k: v for k, v in found.items() if k not in shared}
        assert own == ({**expected, "shared_conditions": POINTER} if found else {}), run.data.tags
    frame = same_table(store, "mixed", parent, reference)
    assert "tag.shared_conditions" not in frame
    assert frame["tag.host"].isna().tolist() == [False, False, False, True, False]


def test_a_sweep_whose_trials_all_agree_records_them_once(store: str) -> None:
    # A value the tracker would shorten, and one it would redact, stay on each trial as before.
    long, secret = "p" * 1001, "https://user:hunter2@example.com/repo"
    assert storable("os", "Linux") and not storable("git.untracked", long) and not storable("code.script", secret)
    alike = {**BASE, "seed": "7", "git.untracked": long, "code.script": secret}
    tracker, parent, reference = written_both_ways(store, "alike", [alike] * 3)
    tags = tracker.client.get_run(parent).data.tags
    assert shared_from_tags(tags) == {**BASE, "seed": "7"} and "sweeper.varied_conditions" not in tags
    for run in tracker.child_runs(parent):
        assert set(run.data.tags) & {f"sweeper.{k}" for k in alike} == {"sweeper.git.untracked",
                                                                          "sweeper.code.script"}
    frame = same_table(store, "alike", parent, reference)
    assert frame["tag.seed"].tolist() == ["7"] * 3
    assert frame["tag.code.script"].tolist() == ["https://user:***@example.com/repo"] * 3


def test_a_resumed_sweep_keeps_the_shared_set_on_its_run(store: str) -> None:
    tracker, parent, writer = new_sweep(store, "resumed")
    first = SharedConditions()
    for index in (0, 1):
        close_trial(writer, parent, index, BASE, first)
    writer.close()
    before = tracker.client.get_run(parent).data.tags["sweeper.shared_conditions"]
    # The resumed process (TrialRecorder.adopt): its trials ran on another host, and its first trial would
    # fix another set.
    resumed, writer = SharedConditions(), DurableWriter(tracker, None, retry_delays_s=())
    resumed.load(tracker, parent)
    assert resumed.shared == json.loads(before) and len(resumed.relying) == 2
    close_trial(writer, parent, 2, {**BASE, "host": "node-b", "os": "Linux-7"}, resumed)
    close_trial(writer, parent, 3, BASE, resumed)
    writer.close()
    tags = tracker.client.get_run(parent).data.tags
    assert json.loads(tags["sweeper.shared_conditions"]) == {k: v for k, v in BASE.items() if k not in ("host", "os")}
    assert tags["sweeper.varied_conditions"] == "host, os"
    trials = load_sweep("resumed", store, parent).trials
    assert trials["tag.host"].tolist() == ["node-a", "node-a", "node-b", "node-a"]
    assert trials["tag.os"].tolist() == ["Linux-6", "Linux-6", "Linux-7", "Linux-6"]
    assert trials["tag.pkg.numpy"].tolist() == ["2.4.6"] * 4


def test_a_resumed_sweep_whose_trials_recorded_every_condition_shares_what_they_agree_on(store: str) -> None:
    tracker, parent, writer = new_sweep(store, "upgraded")
    close_trial(writer, parent, 0, {**BASE, "host": "node-z"}, None)  # recorded before the shared set existed
    writer.close()
    resumed, writer = SharedConditions(), DurableWriter(tracker, None, retry_delays_s=())
    resumed.load(tracker, parent)
    close_trial(writer, parent, 1, BASE, resumed)
    writer.close()
    tags = tracker.client.get_run(parent).data.tags
    assert shared_from_tags(tags) == {k: v for k, v in BASE.items() if k != "host"}
    assert tags["sweeper.varied_conditions"] == "host"
    assert load_sweep("upgraded", store, parent).trials["tag.host"].tolist() == ["node-z", "node-a"]


def test_readers_put_back_the_shared_set_only_where_a_trial_points_to_it() -> None:
    shared = {"host": "node-a", "seed": "1"}
    pointing = {"sweeper.shared_conditions": POINTER, "sweeper.seed": "2", "sweeper.trial_index": "0"}
    assert merged_tags(pointing, shared) == {"sweeper.host": "node-a", "sweeper.seed": "2",
                                             "sweeper.trial_index": "0"}
    old = {"sweeper.trial_index": "1", "sweeper.host": "node-b"}
    assert merged_tags(old, shared) == old and merged_tags(old, None) == old
    assert merged_tags(pointing, None) == {"sweeper.seed": "2", "sweeper.trial_index": "0"}
    assert shared_from_tags({}) is None
    assert shared_from_tags({"sweeper.shared_conditions": '{"host": "node-a", "se'}) == {}
