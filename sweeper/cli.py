"""The ``sweeper`` command: look at sweeps recorded in MLflow.

    sweeper trials --experiment svm-breast-cancer            # the latest sweep's trials
    sweeper trials --experiment svm-breast-cancer --run ID   # a given sweep (parent run id)
    sweeper report --experiment svm-breast-cancer            # ./report-svm-breast-cancer-<run8>/, and in MLflow
    sweeper report --experiment train --group-by model --filter "train_acc >= 0.99" --out report-train
    sweeper multiverse --experiment svm-breast-cancer          # GP maps, Bayes factors, sensitivity
    sweeper multiverse --experiment train --filter "train_acc >= 0.99" --kernel rbf-ard
    sweeper resume multirun/2026-11-22/10-00-00                # continue a sweep whose driver died
    sweeper resume multirun/slurm-123 ray.address=10.0.0.5:6379  # ... on another cluster
    sweeper sync multirun/2026-11-22/10-00-00                  # send writes spooled during an MLflow outage
    sweeper compare --experiment svm-rbf --experiment logreg   # whose expected best is ahead at each budget
    sweeper rerun --experiment svm-breast-cancer --top 3 --seeds 5 --seed-key data.split_seed  # the best again
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

DEFAULT_TRACKING_URI = "sqlite:///mlruns.db"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sweeper", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    trials = sub.add_parser("trials", help="list the trials of a sweep recorded in MLflow")
    trials.add_argument("--experiment", required=True, help="MLflow experiment name (mlflow.experiment_name)")
    trials.add_argument("--tracking-uri", default=DEFAULT_TRACKING_URI, help=f"default: {DEFAULT_TRACKING_URI}")
    trials.add_argument("--run", default=None, help="the sweep's parent run id (default: the latest sweep)")
    _add_report_parser(sub)
    _add_multiverse_parser(sub)
    resume = sub.add_parser("resume", help="continue a sweep whose driver died or was stopped",
                            description="Run the sweep's own command again with hydra.sweeper.resume=true, in its "
                                        "directory: finished trials are kept, trials in flight run again.")
    resume.add_argument("sweep", help="the sweep's directory (tag sweeper.sweep_dir) or its MLflow parent run id")
    resume.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="settings that replace the original command's, e.g. ray.address=<a new cluster's head>")
    resume.add_argument("--tracking-uri", default=DEFAULT_TRACKING_URI,
                        help=f"where to look up a parent run id (default: {DEFAULT_TRACKING_URI})")
    sync = sub.add_parser("sync", help="send MLflow writes a sweep spooled while the tracking server was away",
                          description="Send the writes waiting in <sweep dir>/mlflow_spool.jsonl to the tracking "
                                      "server recorded in it, in order.")
    sync.add_argument("sweep_dir", help="the sweep's directory")
    from sweeper.compare_cli import add_compare_parser
    from sweeper.rerun_cli import add_rerun_parser

    add_compare_parser(sub)
    add_rerun_parser(sub)
    args = parser.parse_args(argv)
    if args.version:
        from sweeper import __version__

        print(__version__)
        return 0
    reading = ("trials", "report", "multiverse", "compare", "rerun")
    problem = _store_problem(args.tracking_uri) if args.command in reading else None
    if problem:
        print(f"sweeper {args.command}: {problem}", file=sys.stderr)
        return 2
    if args.command == "trials":
        return _trials(args.experiment, args.tracking_uri, args.run)
    if args.command == "report":
        return _report(args)
    if args.command == "multiverse":
        return _multiverse(args)
    if args.command == "resume":
        return _resume(args.sweep, args.tracking_uri, args.overrides)
    if args.command == "sync":
        return _sync(args.sweep_dir)
    if args.command in ("compare", "rerun"):
        return int(args.handler(args))
    parser.print_help()
    return 2


def _store_problem(uri: str | None) -> str | None:
    """What is wrong with a --tracking-uri to read from (a bad form, or a SQLite file that is not there)."""
    if uri is None:
        return None
    from sweeper.record.tracking_uri import absolute_tracking_uri, sqlite_path, tracking_uri_problem

    problem = tracking_uri_problem(uri)
    if problem:
        return f"--tracking-uri {uri!r} is invalid: {problem}."
    file = sqlite_path(absolute_tracking_uri(uri))
    if file is not None:
        from pathlib import Path

        path = Path(file)
        if not path.is_file():
            return (f"--tracking-uri {uri!r}: there is no MLflow store at {path}. Give the sweep's store, e.g. "
                    f"--tracking-uri sqlite:////path/to/mlruns.db (its mlflow.tracking_uri).")
    return None


def _resume(ref: str, tracking_uri: str, overrides: list[str]) -> int:
    import os
    from pathlib import Path

    from sweeper.errors import SweeperConfigError
    from sweeper.run.resume import SweepManifest, find_sweep_dir

    problem = None if Path(ref).expanduser().is_dir() else _store_problem(tracking_uri)
    if problem and ref.isalnum():  # a run id, to be looked up in a store that is not there
        print(f"sweeper resume: {problem}", file=sys.stderr)
        return 2
    try:
        sweep_dir = find_sweep_dir(ref, tracking_uri)
        manifest = SweepManifest.load(sweep_dir)
    except SweeperConfigError as exc:
        print(f"sweeper resume: {exc}", file=sys.stderr)
        return 2
    command = manifest.resume_command(sweep_dir, overrides)
    print(f"Resuming {sweep_dir} (MLflow run {manifest.parent_run_id}) in {manifest.cwd}:\n  {' '.join(command)}",
          flush=True)
    # The sweep takes this process's place: a signal to it (Ctrl-C, a batch system's SIGTERM, which it answers
    # by stopping in order) reaches the sweep once, and its exit status (130, 75, ...) is this command's.
    os.chdir(manifest.cwd)
    os.execv(command[0], command)
    return 1  # not reached


def _sync(sweep_dir: str) -> int:
    from pathlib import Path

    from sweeper.record.spool import SPOOL_FILE, read_spool, sync
    from sweeper.record.tracking import MLflowTracker

    path = Path(sweep_dir) / SPOOL_FILE
    if not path.is_file():
        print(f"sweeper sync: nothing to send: {path} does not exist (every write of that sweep reached MLflow)")
        return 0
    waiting = len(read_spool(path)[1])
    try:
        left, failures = sync(Path(sweep_dir), MLflowTracker)
    except Exception as exc:  # noqa: BLE001 - the tracking server is still away, most likely
        print(f"sweeper sync: cannot reach the tracking server: {exc}", file=sys.stderr)
        return 1
    for failure in failures:
        print(f"sweeper sync: dropped (refused by MLflow): {failure}", file=sys.stderr)
    print(f"sweeper sync: sent {waiting - left - len(failures)} of {waiting} spooled writes"
          + (f"; {left} still wait in {path} (is the tracking server up?)" if left else ""))
    return 1 if left else 0


def _add_sweep_arguments(parser: argparse.ArgumentParser, verb: str) -> None:
    """The options naming a sweep in MLflow and its metric, shared by the analysis commands."""
    parser.add_argument("--experiment", required=True, help="MLflow experiment name (mlflow.experiment_name)")
    parser.add_argument("--tracking-uri", default=DEFAULT_TRACKING_URI, help=f"default: {DEFAULT_TRACKING_URI}")
    parser.add_argument("--run", default=None, help="the sweep's parent run id (default: the latest sweep)")
    parser.add_argument("--metric", default=None, help=f"the metric to {verb} (default: the sweep's metric)")
    parser.add_argument("--bounds", nargs=2, default=None, metavar=("LOW", "HIGH"),
                        help="the metric's bounds, either null (e.g. 0 1 for an accuracy, 0 null for a loss): the "
                             "GP models it inside them. Default: hydra.sweeper.metric_bounds as the sweep "
                             "recorded them; 'null null' models the raw values")


def parse_bounds(args: argparse.Namespace) -> Any:
    """``--bounds`` as MetricBounds (None for 'null null'), or the sweep's own when not given."""
    from sweeper.report.request import SWEEP_BOUNDS, ReportError
    from sweeper.search.warping import MetricBounds

    if args.bounds is None:
        return SWEEP_BOUNDS
    try:
        return MetricBounds.parse(args.bounds)
    except ValueError as exc:
        raise ReportError(f"--bounds {' '.join(args.bounds)}: {exc}. Give LOW < HIGH, null for an open side, "
                          f"e.g. --bounds 0 1 for an accuracy, --bounds 0 null for a loss") from None


def _add_report_parser(sub: Any) -> None:
    report = sub.add_parser(
        "report", help="write a sweep's report (expected max vs budget, QRA, environment statistics, checklist) "
                       "and log it to MLflow",
        description="Write report.md, report.html, figures and CSV/JSON of every number to --out, and log them as "
                    "artifacts of the sweep's parent run under report/ (a filtered report under "
                    "report-filtered-<hash>/), each folder replaced as a whole.")
    _add_sweep_arguments(report, "report")
    report.add_argument("--mode", choices=("max", "min"), default=None, help="default: the sweep's mode")
    report.add_argument("--group-by", default=None, metavar="PARAM",
                        help="one expected-max curve per value of this param, e.g. model")
    report.add_argument("--filter", default=None, metavar="EXPR",
                        help='keep only finished trials satisfying "<metric> <op> <number>", e.g. "train_acc >= 0.99"'
                             "; the others are marked filtered and left out of the statistics")
    report.add_argument("--surrogate", choices=("auto", "always", "never"), default="auto",
                        help="GP surrogate-based expected-max curve: auto = when the strategy is not random")
    report.add_argument("--scale-min", type=float, default=0.0, metavar="LOW",
                        help="lowest possible score of the metrics, subtracted before QRA's CV* (Belz et al. 2022): "
                             "0 for an accuracy (default), 1 for a 1..7 rating")
    report.add_argument("--out", default=None, metavar="DIR",
                        help="output folder, replaced as a whole (default: ./report-<experiment>-<run8>[-<filter "
                             "hash>], run8 = the sweep run id's first 8 characters)")
    report.add_argument("--no-log", action="store_true", help="write the files only; log nothing to MLflow")


def _report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from sweeper.analysis.runs import SweepNotFoundError, load_sweep
    from sweeper.report import FilterError, ReportError, build_report, parse_filter
    from sweeper.report.document import OutputDirError, check_replaceable
    from sweeper.report.outputs import report_folder

    try:  # the arguments first, then the store: a typo is answered before seconds of reading
        rule = parse_filter(args.filter) if args.filter is not None else None
        bounds = parse_bounds(args)
        if args.out:
            check_replaceable(Path(args.out).resolve())
        records = load_sweep(args.experiment, args.tracking_uri, args.run)
        out = Path(args.out or report_folder(records.experiment, records.parent_run_id, rule)).resolve()
        surrogate = {"auto": None, "always": True, "never": False}[args.surrogate]
        report = build_report(records, metric=args.metric, mode=args.mode, group_by=args.group_by,
                              trial_filter=rule, out_dir=out, surrogate=surrogate, bounds=bounds,
                              scale_min=args.scale_min)
    except (SweepNotFoundError, FilterError, ReportError, OutputDirError) as exc:
        print(f"sweeper report: {exc}", file=sys.stderr)
        return 1
    if records.unfinished:
        print(f"sweeper report: note: {records.unfinished}", file=sys.stderr)
    print(f"Report of sweep {records.parent_run_id} ({len(records.trials)} trials of experiment "
          f"{records.experiment!r}): {report.html}")
    print(f"  also {report.markdown.name} and {len(report.files) - 2} figure/CSV/JSON files in {report.out_dir}")
    if report.biased:
        print(f"  note: the trials came from {report.strategy!r}, not random search: the empirical expected-max "
              f"curve is biased; see the surrogate-based curve ({report.surrogate_note or 'computed'}).")
    if report.surrogate is not None:
        _print_calibration("sweeper report", "the surrogate curve", report.surrogate.calibration)
    if args.no_log:
        return 0
    from sweeper.report import log_report

    return _log_output("sweeper report", records, report, log_report, "report.html")


def _log_output(command: str, records: Any, report: Any, log: Any, main_file: str) -> int:
    """Log a report or maps to the sweep's run (replacing its artifact folder), link them from the run's note,
    and say where they went; 1 when files of an earlier one stayed in the store (it cannot delete)."""
    from sweeper.record.tracking import MLflowTracker
    from sweeper.report.build_report import ArtifactsNotReplaced

    tracker = MLflowTracker(records.tracking_uri, records.experiment)
    status = 0
    try:
        written = log(report, tracker, records.parent_run_id)
    except ArtifactsNotReplaced as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        written, status = report.files, 1
    tracker.link_output(records.parent_run_id, report.artifact_dir, main_file, str(report.out_dir))
    print(f"Logged {len(written)} files to MLflow run {records.parent_run_id} under {report.artifact_dir}/ "
          f"(linked from the run's description). {tracker.browse_text(records.parent_run_id)}")
    return status


def _add_multiverse_parser(sub: Any) -> None:
    from sweeper.search.kernels import KERNELS

    p = sub.add_parser(
        "multiverse", help="map a sweep with its GP: contour maps, Bayes-factor interaction tests, Sobol "
                           "sensitivity, coregionalization matrices (Bell et al. 2022); logged to MLflow",
        description="Write PNGs and the numbers behind them (CSV/JSON) to --out and log them as artifacts of the "
                    "sweep's parent run under multiverse/<kernel>/ (filtered: multiverse/<kernel>-filtered-<hash>/), "
                    "each folder replaced as a whole.")
    _add_sweep_arguments(p, "model")
    p.add_argument("--filter", default=None, metavar="EXPR",
                   help='keep only finished trials satisfying "<metric> <op> <number>", e.g. "train_acc >= 0.99"; '
                        "the others are drawn as crosses and left out of the fit")
    p.add_argument("--kernel", choices=KERNELS, default="matern52-ard",
                   help="stationary kernel over the continuous dims (refit with another to check robustness)")
    p.add_argument("--others", choices=("centre", "marginal"), default="centre",
                   help="in a map of two dims, the other continuous dims at their centre or averaged over them")
    p.add_argument("--resolution", type=int, default=40, help="grid points per map axis (default 40)")
    p.add_argument("--seed", type=int, default=0, help="seed of the GP restarts and Monte Carlo estimates")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output folder, replaced as a whole (default: ./multiverse-<experiment>-<run8>-<kernel>"
                        "[-<filter hash>], run8 = the sweep run id's first 8 characters)")
    p.add_argument("--no-log", action="store_true", help="write the files only; log nothing to MLflow")


def _multiverse(args: argparse.Namespace) -> int:
    from pathlib import Path

    from sweeper.analysis.runs import SweepNotFoundError, load_sweep
    from sweeper.report import FilterError, ReportError, parse_filter
    from sweeper.report.build_multiverse import build_multiverse, log_multiverse
    from sweeper.report.document import OutputDirError, check_replaceable
    from sweeper.report.outputs import multiverse_folder

    try:  # the arguments first, then the store (as in _report)
        rule = parse_filter(args.filter) if args.filter is not None else None
        bounds = parse_bounds(args)
        if args.out:
            check_replaceable(Path(args.out).resolve())
        records = load_sweep(args.experiment, args.tracking_uri, args.run)
        default = multiverse_folder(records.experiment, records.parent_run_id, args.kernel, rule)
        out = Path(args.out or default).resolve()
        report = build_multiverse(records, out_dir=out, metric=args.metric, trial_filter=rule,
                                  kernel=args.kernel, others=args.others, resolution=args.resolution, seed=args.seed,
                                  bounds=bounds)
    except (SweepNotFoundError, FilterError, ReportError, OutputDirError) as exc:
        print(f"sweeper multiverse: {exc}", file=sys.stderr)
        return 1
    s = report.summary
    print(f"Multiverse analysis of sweep {records.parent_run_id} ({s['trials']['kept']} of {s['trials']['run']} "
          f"trials modelled, kernel {args.kernel}): {report.out_dir}")
    print(f"  effect of any choice: log10 K = {s['effect']['log10_K']:.2f} ({s['effect']['verdict']})")
    for row in s["interaction"].get("tests", []):
        print(f"  interaction {row['dims']}: log10 K = {row['log10_K']:.2f} ({row['verdict']})")
    for row in s["sensitivity"]:
        print(f"  sensitivity {row['name']}: main {row['main']:.3f}, total {row['total']:.3f}")
    _print_calibration("sweeper multiverse", "the maps", report.calibration)
    if chains := s["chains"]:
        print(f"  chains of the GP's hyperparameter sampler: {'one map' if chains['agree'] else 'different maps'} "
              f"(potential scale reduction {chains['rhat']:.2f}, limit {chains['rhat_limit']})")
    for caution in (s["effect"]["caution"], s["chains"] and s["chains"]["caution"]):
        if caution:
            print(f"sweeper multiverse: warning: {caution}", file=sys.stderr)
    return 0 if args.no_log else _log_output("sweeper multiverse", records, report, log_multiverse, "multiverse.md")


def _print_calibration(command: str, what: str, calibration: Any) -> None:
    """One line with the verdict of the GP's predictive checks; a warning on stderr when it failed."""
    if calibration is None:
        return
    each = ", ".join(f"{c.kind} {c.verdict()}" for c in calibration.checks)
    print(f"  predictive checks of the GP behind {what}: {calibration.verdict()} ({each})")
    if calibration.verdict() == "failed":
        failed = ", ".join(f"{c.kind}: {c.coverage95:.0%} of {c.n} inside their 95 % intervals"
                           for c in calibration.judged if not c.ok)
        print(f"{command}: warning: the GP behind {what} is overconfident ({failed}); do not trust {what} as "
              f"drawn. {calibration.advice()}", file=sys.stderr)


def _trials(experiment: str, tracking_uri: str, run_id: str | None) -> int:
    from sweeper.analysis.runs import unfinished_note
    from sweeper.record.tracking import MLflowTracker, read_client
    from sweeper.record.tracking_uri import absolute_tracking_uri

    uri = absolute_tracking_uri(tracking_uri)
    exp = read_client(uri).get_experiment_by_name(experiment)
    if exp is None:
        print(f"sweeper: no experiment {experiment!r} at {uri}. Check --experiment and --tracking-uri.",
              file=sys.stderr)
        return 1
    tracker = MLflowTracker(uri, experiment)
    if run_id is None:
        sweeps = tracker.client.search_runs([exp.experiment_id], "tags.`sweeper.role` = 'sweep'",
                                            order_by=["attributes.start_time DESC"], max_results=1)
        if not sweeps:
            print(f"sweeper: experiment {experiment!r} holds no sweep.", file=sys.stderr)
            return 1
        run_id = sweeps[0].info.run_id
    rows = sorted(tracker.child_runs(run_id), key=lambda r: int(r.data.tags.get("sweeper.trial_index", -1)))
    sweep_params = tracker.client.get_run(run_id).data.params
    metric = sweep_params.get("metric", "")
    dims = sorted(k[len("space."):] for k in sweep_params if k.startswith("space."))
    print(f"sweep {run_id} ({len(rows)} trials) in {experiment!r} at {uri}")
    for r in rows:
        print(_row(r, metric, dims))
    parent = tracker.client.get_run(run_id)
    ended = sum(r.info.status in ("FINISHED", "FAILED") for r in rows)
    note = unfinished_note(parent.data.tags, parent.info.status, ended, sweep_params.get("num_trials", "?"), run_id)
    if note:
        print(f"Note: {note}")
    return 0


def _row(run: Any, metric: str, dims: list[str]) -> str:
    tags, params, metrics = run.data.tags, run.data.params, run.data.metrics
    value = metrics.get(metric)
    shown = f"{metric}={value:.6g}" if value is not None else tags.get("sweeper.error", run.info.status)
    return (f"#{tags.get('sweeper.trial_index', '?'):>4} {tags.get('sweeper.phase', '?'):<6} "
            f"{run.info.status:<9} {' '.join(f'{k}={params.get(k)}' for k in dims)}  {shown}")


if __name__ == "__main__":
    raise SystemExit(main())
