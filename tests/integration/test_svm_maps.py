"""The figure command of docs/reports.md, ``experiments/svm_maps.py``, runs (it had imported a helper that was gone).

The command as written, with a coarser ground-truth grid (``--grid 6``, 36 SVC fits
instead of 625), one GP batch per sweep (``--num-trials 16``: the 8 shared Sobol points and
8 chosen by each strategy, instead of three batches), the output in a temporary folder and the
sweeps on the session's Ray head (Hydra overrides after the options): two 16-trial SVM sweeps
through the Hydra command line, the bounded multiverse fits, the figure and its JSON.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.documented import documented, run_documented
from tests.integration.conftest import LIVE_MAPS, ONE_AT_A_TIME, SHARED_RAY, Sweep

pytestmark = pytest.mark.integration


def test_the_readmes_figure_command_writes_its_figure_and_numbers(tmp_path: Path) -> None:
    command = documented(".venv/bin/python experiments/svm_maps.py --out docs/figures")
    # Written elsewhere than the committed figure, on a coarser truth grid and with one GP batch per sweep; the
    # sweeps (a local Ray each, as written) join the session's Ray head instead, draw no live maps, as run_cli's
    # do, and run one trial at a time (an SVC fit takes milliseconds: one Ray worker starts instead of two).
    ray, ray_env = SHARED_RAY.join()
    overrides = shlex.join([*ray, f"{LIVE_MAPS}=false", ONE_AT_A_TIME])
    uri = f"sqlite:///{tmp_path / 'mlruns.db'}"
    proc = run_documented(f"{command.replace('docs/figures', str(tmp_path))} --grid 6 --num-trials 16 "
                          f"--tracking-uri {uri} {overrides}", REPO, env=ray_env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    for strategy in ("ivr", "ucb"):  # each sweep took the overrides, and ran 16 trials
        parent, trials = Sweep(proc, tmp_path, uri).runs(f"svm-{strategy}")
        assert parent.data.tags["sweeper.command"].endswith(overrides), parent.data.tags["sweeper.command"]
        assert [r.data.tags["sweeper.phase"] for r in trials] == ["sobol"] * 8 + [strategy] * 8
    numbers = json.loads((tmp_path / "svm_ivr_vs_ucb.json").read_text())
    assert (tmp_path / "svm_ivr_vs_ucb.png").stat().st_size > 10_000
    assert numbers["sobol_points_identical"] is True and numbers["sweep"]["num_trials"] == 16
    for strategy in ("ivr", "ucb"):
        st = numbers["strategies"][strategy]
        assert st["gp_points"] == 8 and 0.0 < st["rmse"] < 0.2
        low, high = st["mean_range"]
        assert 0.0 <= low < high <= 1.0  # the sweep's declared bounds hold in the map
