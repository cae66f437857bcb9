"""``sweeper compare``: the expected-max curves of two or more sweeps on one axis, and who is ahead at each budget.

    sweeper compare --experiment resnet-sgd --experiment resnet-adam       # the latest sweep of each
    sweeper compare --run 3f2a9c1d... --run 8b7e0a11... --out compare-ab   # sweeps named by their run ids

Each sweep's curve is the one ``sweeper report`` chooses (empirical for a random sweep, the GP
surrogate's otherwise); at each budget the command says which sweep's expected best is most likely
the highest, with that probability, and where the order changes (:mod:`sweeper.report.compare`).
It writes ``compare.md``, ``compare.html``, ``compare.png`` and the numbers (``compare.csv``,
``ahead.csv``, ``budget_to_reach.csv``, ``summary.json``) to a folder replaced as a whole, and logs
them to MLflow as a run of its own that links the sweeps (:mod:`sweeper.report.compare_log`).

Exit status: 0 done; 1 a sweep not found, without two finished trials, or files an MLflow store
kept; 2 a usage error (fewer than two sweeps, one named twice, sweeps that differ in metric, mode
or bounds).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from sweeper.cli import DEFAULT_TRACKING_URI


class _Sweep(argparse.Action):
    """``--experiment`` and ``--run`` append ``(kind, value)`` to ``args.sweeps``, in command-line order."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        namespace.sweeps = [*getattr(namespace, "sweeps", []), (self.dest, values)]


def add_compare_parser(sub: Any) -> None:
    """Register ``sweeper compare``; its handler is ``args.handler``."""
    p = sub.add_parser(
        "compare", help="compare the expected-max curves of two or more sweeps: who is ahead at each budget",
        description="Put the expected-max curves of two or more sweeps (same metric, mode and bounds) on one axis; "
                    "say at each budget which is ahead and how sure; write compare.md, compare.html, compare.png, "
                    "compare.csv and the other numbers to --out, and log them to MLflow as a run of its own that "
                    "links the sweeps.")
    p.add_argument("--experiment", action=_Sweep, metavar="NAME",
                   help="a sweep: the latest one of this MLflow experiment (give two or more sweeps in all)")
    p.add_argument("--run", action=_Sweep, metavar="ID", help="a sweep: its parent run id (any experiment)")
    p.add_argument("--tracking-uri", default=DEFAULT_TRACKING_URI, help=f"default: {DEFAULT_TRACKING_URI}")
    p.add_argument("--metric", default=None, help="the metric to compare (default: the sweeps' own, which must agree)")
    p.add_argument("--mode", choices=("max", "min"), default=None,
                   help="which is better (default: the sweeps' own, which must agree)")
    p.add_argument("--bounds", nargs=2, default=None, metavar=("LOW", "HIGH"),
                   help="the metric's bounds for the GP surrogate curves, either null (default: what the sweeps "
                        "declared, which must agree; 'null null' for none)")
    p.add_argument("--surrogate", choices=("auto", "always", "never"), default="auto",
                   help="GP surrogate curves: auto = for sweeps whose strategy is not random, as sweeper report")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output folder, replaced as a whole (default: ./compare-<run8>-<run8>..., run8 = each "
                        "sweep's run id's first 8 characters; -<metric>-<mode> added when not the sweeps' own)")
    p.add_argument("--log-experiment", default=None, metavar="NAME",
                   help="the MLflow experiment of the comparison's run (default: the first sweep's)")
    p.add_argument("--no-log", action="store_true", help="write the files only; log nothing to MLflow")
    p.set_defaults(handler=run_compare, sweeps=[])


def run_compare(args: argparse.Namespace) -> int:
    """Load the sweeps, compare them, write the folder, log it; the exit status (module docstring)."""
    from pathlib import Path

    from sweeper.analysis.runs import SweepNotFoundError
    from sweeper.cli import parse_bounds
    from sweeper.report.compare import CompareError, CompareUsageError, compare_sweeps
    from sweeper.report.compare_page import write_comparison
    from sweeper.report.document import OutputDirError, check_replaceable
    from sweeper.report.request import ReportError

    try:
        _check_names(args.sweeps)
        if args.out:
            check_replaceable(Path(args.out).resolve())
        sweeps = [_load(kind, value, args.tracking_uri) for kind, value in args.sweeps]
        surrogate = {"auto": None, "always": True, "never": False}[args.surrogate]
        comparison = compare_sweeps(sweeps, metric=args.metric, mode=args.mode, bounds=parse_bounds(args),
                                    surrogate=surrogate)
        out = Path(args.out or compare_folder(comparison)).resolve()
        written = write_comparison(comparison, out)
    except (CompareUsageError, ReportError) as exc:
        print(f"sweeper compare: {exc}", file=sys.stderr)
        return 2
    except (SweepNotFoundError, CompareError, OutputDirError) as exc:
        print(f"sweeper compare: {exc}", file=sys.stderr)
        return 1
    _print(comparison, written.out_dir)
    if args.no_log:
        return 0
    return _log(written, args)


def _check_names(sweeps: Sequence[tuple[str, str]]) -> None:
    """Two or more sweeps, each named once, before anything is read."""
    from sweeper.report.compare import CompareUsageError

    if len(sweeps) < 2:
        raise CompareUsageError(f"a comparison needs two or more sweeps; got {len(sweeps)}. Name each with "
                                f"--experiment NAME (its latest sweep) or --run ID (a sweep's parent run id), e.g. "
                                f"sweeper compare --experiment A --experiment B")
    seen = set()
    for kind, value in sweeps:
        if (kind, value) in seen:
            raise CompareUsageError(f"--{kind} {value} is given twice: a sweep compared with itself says nothing. "
                                    f"Name each sweep once (--run ID names a sweep other than an experiment's latest)")
        seen.add((kind, value))


def _load(kind: str, value: str, tracking_uri: str) -> Any:
    """The sweep ``--experiment NAME`` (its latest) or ``--run ID`` names."""
    from sweeper.analysis.runs import SweepNotFoundError, load_sweep
    from sweeper.record.tracking import get_run, read_client

    if kind == "experiment":
        return load_sweep(value, tracking_uri)
    try:
        run = get_run(tracking_uri, value)
    except LookupError:
        raise SweepNotFoundError(f"--run {value}: no such run at {tracking_uri}. Give a sweep's parent run id "
                                 f"(`sweeper trials --experiment NAME` shows it first).") from None
    experiment = read_client(tracking_uri).get_experiment(run.info.experiment_id).name
    return load_sweep(experiment, tracking_uri, value)


def compare_folder(comparison: Any) -> str:
    """The default folder: ``compare-<run8>-<run8>...``, with ``-<metric>-<mode>`` when not the first sweep's own."""
    from sweeper.report.outputs import slug

    first = comparison.curves[0].records
    name = "compare-" + "-".join(c.records.parent_run_id[:8] for c in comparison.curves)
    own = comparison.metric == first.metric and comparison.mode == first.mode
    return name if own else f"{name}-{slug(comparison.metric)}-{comparison.mode}"


def _print(comparison: Any, out_dir: Any) -> None:
    """What was compared, who is ahead where, the cautions (on stderr), and where the files are."""
    from sweeper.report.compare_page import verdict_lines

    print(f"Comparison of {len(comparison.curves)} sweeps on {comparison.metric} ({comparison.mode}): {out_dir}")
    for c in comparison.curves:
        print(f"  {c.label}: sweep {c.records.parent_run_id} ({c.records.strategy}, {c.n_trials} finished trials, "
              f"{c.kind} curve)")
    for line in verdict_lines(comparison):
        print(f"  {line}")
    for caution in comparison.cautions:
        print(f"sweeper compare: warning: {caution}", file=sys.stderr)


def _log(written: Any, args: argparse.Namespace) -> int:
    """Log the comparison as a run of its own; 1 when the store kept files of an earlier one."""
    from sweeper.report.compare_log import MAIN_FILE, log_comparison

    logged = log_comparison(written, experiment=args.log_experiment, command=_command(args),
                            local_dir=str(written.out_dir))
    if logged.stale:
        print(f"sweeper compare: {logged.stale}", file=sys.stderr)
    tracker = logged.tracker
    browse = [] if tracker.tracking_uri.startswith("http") else [tracker.ui_command()]
    print(f"Logged {len(logged.artifacts)} files to MLflow run {logged.run_id} (experiment "
          f"{tracker.experiment_name!r}) under {written.artifact_dir}/ ({MAIN_FILE} linked from its description, "
          f"with each sweep's run). Browse them:\n  "
          + "\n  ".join([*browse, f"the comparison's run: {tracker.run_url(logged.run_id)}"]))
    return 1 if logged.stale else 0


def _command(args: argparse.Namespace) -> str:
    """The command as given (its options in a fixed order)."""
    parts = ["sweeper", "compare", *(f"--{kind} {value}" for kind, value in args.sweeps)]
    for option in ("metric", "mode", "surrogate", "out", "log_experiment"):
        value = getattr(args, option)
        if value is not None and not (option == "surrogate" and value == "auto"):
            parts.append(f"--{option.replace('_', '-')} {value}")
    if args.bounds:
        parts.append(f"--bounds {' '.join(args.bounds)}")
    if args.tracking_uri != DEFAULT_TRACKING_URI:
        parts.append(f"--tracking-uri {args.tracking_uri}")
    return " ".join(parts)
