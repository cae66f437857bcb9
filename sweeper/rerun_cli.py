"""``sweeper rerun``: the best configurations of a sweep, run again over new seeds as a sweep of their own.

    sweeper rerun --experiment noisy --top 3 --seeds 5                  # the latest sweep's best 3, 5 seeds each
    sweeper rerun --experiment noisy --top 2 --seeds 3 --env env.threads=1,2 --dry-run

Which configurations (:mod:`sweeper.analysis.top_configurations`), which seed key, and the rerun's command
(:mod:`sweeper.run.rerun_command`) are decided here, and said; then the command takes this process's place, in
the first sweep's directory, as ``sweeper resume`` does. ``sweeper report`` on the new sweep adds the ranking's
stability to QRA (:mod:`sweeper.report.ranking`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from sweeper.cli import DEFAULT_TRACKING_URI

USAGE, FAILURE = 2, 1


class _Stop(Exception):
    """Stop with ``status``, ``message`` printed to stderr."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def add_rerun_parser(sub: Any) -> None:
    """Register ``sweeper rerun``; its handler is ``args.handler``."""
    p = sub.add_parser(
        "rerun", help="run the best configurations of a sweep again over new seeds, as a new sweep linked to it",
        description="Take the --top K configurations of a sweep (by its metric and mode), run each over --seeds N new "
                    "seeds (and the --env conditions) as a grid sweep of the same task, recorded in the same "
                    "experiment and linked to the first (tags sweeper.rerun_of, sweeper.rerun_by). Then `sweeper "
                    "report` on it gives QRA per configuration and how stable their ranking is.")
    p.add_argument("--experiment", required=True, help="MLflow experiment name (mlflow.experiment_name)")
    p.add_argument("--run", default=None, help="the sweep's parent run id (default: the latest sweep)")
    p.add_argument("--tracking-uri", default=DEFAULT_TRACKING_URI, help=f"default: {DEFAULT_TRACKING_URI}")
    p.add_argument("--top", type=int, required=True, metavar="K", help="how many of the best configurations")
    p.add_argument("--seeds", type=int, required=True, metavar="N",
                   help="seeds per configuration (and condition), at least 2: integers none of the sweep's trials "
                        "ran with, after the largest it used")
    p.add_argument("--seed-key", default=None, metavar="KEY",
                   help="the config key the task seeds itself with (default: the sweep's seed dim, else env.seed "
                        "or seed where the trials' configs hold one); +KEY for a key the config lacks")
    p.add_argument("--env", action="append", default=[], metavar="KEY=V1,V2",
                   help="an environment condition to cross with the seeds, e.g. env.threads=1,2 (repeatable)")
    p.add_argument("--sweep-dir", default=None, metavar="DIR",
                   help="the rerun's sweep dir (default: the first sweep's, with -rerun-<date>-<time> added)")
    p.add_argument("--dry-run", action="store_true", help="say what would run, and the command; run nothing")
    p.set_defaults(handler=run_rerun)


def run_rerun(args: argparse.Namespace) -> int:
    """Choose, say, and run the rerun (exec); 2 for a request this sweep cannot answer, 1 for a failure."""
    try:
        command, cwd = _plan(args)
    except _Stop as stop:
        print(f"sweeper rerun: {stop}", file=sys.stderr)
        return stop.status
    if args.dry_run:
        return 0
    import os

    # The sweep takes this process's place: a signal reaches it once, and its exit status is this command's.
    os.chdir(cwd)
    os.execv(command[0], command)
    return FAILURE  # not reached


def _plan(args: argparse.Namespace) -> tuple[list[str], str]:
    """The rerun's command and directory, after printing what it runs and why."""
    from sweeper.analysis.runs import SweepNotFoundError, load_sweep
    from sweeper.analysis.top_configurations import (
        RerunRefusal,
        choose_seed_key,
        configuration_dims,
        top_configurations,
    )
    from sweeper.run.rerun_command import rerun_command

    if args.top < 1:
        raise _Stop(USAGE, f"--top {args.top}: give 1 or more configurations to run again.")
    if args.seeds < 2:
        raise _Stop(USAGE, f"--seeds {args.seeds}: give 2 or more seeds, the fewest a spread (QRA) or a ranking "
                           f"over seeds can be measured on, e.g. --seeds 5.")
    env = _env_arguments(args.env)
    try:
        records = load_sweep(args.experiment, args.tracking_uri, args.run)
    except SweepNotFoundError as exc:
        raise _Stop(FAILURE, str(exc)) from None
    if records.unfinished:
        print(f"sweeper rerun: note: {records.unfinished}; its finished trials are ranked", file=sys.stderr)
    try:
        seed = choose_seed_key(records, args.seed_key)
        _check_env(records, env, seed.key)
        top = top_configurations(records, configuration_dims(records, seed, [k for k, _, _ in env]), args.top)
    except RerunRefusal as exc:
        raise _Stop(USAGE, str(exc)) from None
    manifest, first_dir = _manifest(records.parent_run_id, records.tracking_uri)
    sweep_dir = Path(args.sweep_dir or f"{first_dir}-rerun-{time.strftime('%Y%m%d-%H%M%S')}").absolute()
    if sweep_dir.exists():
        raise _Stop(USAGE, f"--sweep-dir {sweep_dir} exists: a rerun is a new sweep; give a new folder.")
    seeds = seed.fresh(args.seeds)
    command = rerun_command(manifest, configurations=[c.values for c in top.chosen], seed_key=seed.override_key,
                            seeds=seeds, env=[(k, v) for k, v, _ in env], sweep_dir=sweep_dir,
                            first_run_id=records.parent_run_id)
    _say(records, top, seed, seeds, env, sweep_dir, command, manifest.cwd, dry=args.dry_run)
    return command, manifest.cwd


def _env_arguments(given: list[str]) -> list[tuple[str, str, int]]:
    """``--env KEY=V1,V2`` as (key, values text, how many values), each key once, each a grid in Hydra's grammar."""
    from sweeper.errors import SweeperConfigError
    from sweeper.search.grammar import parse_search_space
    from sweeper.search.settings import grid_size

    env: list[tuple[str, str, int]] = []
    for text in given:
        key, _, values = text.partition("=")
        if not key.strip() or not values.strip():
            raise _Stop(USAGE, f"--env {text!r}: write KEY=V1,V2, e.g. --env env.threads=1,2.")
        if any(k == key for k, _, _ in env):
            raise _Stop(USAGE, f"--env {key}: given twice; give each condition once, with all its values.")
        try:
            space = parse_search_space({}, [text], params_key="")
        except SweeperConfigError as exc:
            raise _Stop(USAGE, f"--env {text!r}: {'; '.join(exc.problems)}") from None
        size = grid_size(space) if space.d else 1
        if size is None:
            raise _Stop(USAGE, f"--env {text!r}: a condition takes listed values (V1,V2 or choice/range), not an "
                               f"interval: the rerun is a grid.")
        env.append((key, values, size))
    return env


def _check_env(records: Any, env: list[tuple[str, str, int]], seed_key: str) -> None:
    """Refuse an ``--env`` key the sweep's trials do not have, the seed key, or a dim of the configurations."""
    import difflib

    from sweeper.analysis.runs import is_environment_param
    from sweeper.analysis.top_configurations import RerunRefusal

    columns = sorted(c[len("param."):] for c in records.trials.columns if c.startswith("param."))
    dims = records.space.names if records.space is not None else []
    for key, _, _ in env:
        name = key.lstrip("+")
        if name == seed_key:
            raise RerunRefusal(f"--env {key}: it is the seed key; --seeds gives its values.")
        if name in dims and not is_environment_param(name):
            raise RerunRefusal(f"--env {key}: it is a dim of the sweep's configurations, which the rerun takes from "
                               f"the best trials; --env varies a condition they share (e.g. env.threads).")
        if name not in columns and not key.startswith("+"):
            close = difflib.get_close_matches(name, columns, n=1) or [c for c in columns if c.startswith("env.")][:1]
            hint = f" Did you mean --env {close[0]}=...?" if close else ""
            raise RerunRefusal(f"--env {key}: unknown key: the sweep's trials have no {name} in their config.{hint} "
                               f"(+{name}=... adds a key the config lacks.)")


def _manifest(run_id: str, tracking_uri: str) -> tuple[Any, Path]:
    """The first sweep's manifest (its command and directory) and its sweep dir."""
    from sweeper.errors import SweeperConfigError
    from sweeper.run.resume import SweepManifest, find_sweep_dir

    try:
        sweep_dir = find_sweep_dir(run_id, tracking_uri)
        return SweepManifest.load(sweep_dir), sweep_dir
    except SweeperConfigError as exc:
        raise _Stop(FAILURE, f"the first sweep's command cannot be read: {exc}") from None


def _say(records: Any, top: Any, seed: Any, seeds: list[int], env: list[tuple[str, str, int]], sweep_dir: Path,
         command: list[str], cwd: str, *, dry: bool) -> None:
    """What the rerun runs, and why: the configurations with their scores, the seed key, the notes, the command."""
    from sweeper.analysis.runs import is_environment_param

    trials = len(top.chosen) * len(seeds)
    for _, _, size in env:
        trials *= size
    print(f"Re-running the best {len(top.chosen)} of {top.candidates} configurations of sweep {records.parent_run_id} "
          f"(experiment {records.experiment!r}, by {records.metric}, mode {records.mode}):")
    for c in top.chosen:
        runs = f", {c.n} trials" if c.n > 1 else ""
        failed = f", {c.failed} failed" if c.failed else ""
        print(f"  #{c.rank}  {records.metric}={c.score:.6g}{runs}{failed}  {c.text()}")
    for note in top.notes:
        print(f"  note: {note}")
    print(f"Seed key: {seed.override_key} ({seed.reason}); seeds {', '.join(map(str, seeds))}"
          + (f" (new: the sweep ran {_values(seed.used)})" if seed.used else ""))
    if env:
        print("Conditions: " + " ".join(f"{k}={v}" for k, v, _ in env))
    given = {k.lstrip("+") for k, _, _ in env} | {seed.key}
    dropped = [d.override_key for d in (records.space.dims if records.space else ()) if d.name not in given
               and is_environment_param(d.name)]
    if dropped:
        print(f"  note: the sweep also swept {', '.join(dropped)}; the rerun runs each at the config's value "
              f"(--env KEY=V1,V2 varies one again)")
    print(f"{trials} trials as a grid sweep in {sweep_dir}, run in {cwd}" + (" (not run: --dry-run)" if dry else "")
          + f":\n  {shlex.join(command)}", flush=True)


def _values(used: tuple[int, ...]) -> str:
    return f"{used[0]}..{used[-1]}" if len(used) > 3 else ", ".join(map(str, used))
