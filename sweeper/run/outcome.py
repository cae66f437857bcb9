"""What a sweep found: per-trial records, the best trial, failures, and their written forms.

Pure bookkeeping (no Ray, no MLflow): the recorder fills :class:`TrialRecord` objects as
trials end, and :class:`SweepOutcome` turns them into ``optimization_results.yaml``,
``trials.csv`` and the failure summary.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from typing import Any

#: Most trial indices a grouped failure line lists; more are elided (``#0, #1, … #9``).
MOST_INDICES = 8
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{4,}\b")


@dataclass
class TrialRecord:
    """What the sweep knows about one trial once it ended."""

    index: int
    phase: str
    batch: int
    params: dict[str, Any]
    run_id: str | None = None  # set by the MLflow writer thread once the run exists
    status: str = "RUNNING"
    value: float = math.nan
    metrics: dict[str, float] = field(default_factory=dict)
    duration_s: float = math.nan
    error: str | None = None


def error_key(error: str | None) -> str:
    """An error's text with memory addresses masked: two trials that failed alike give the same key.

    Only addresses (``<Model object at 0x7f3a...>`` differs in every process) are masked, not
    numbers: an error that quotes the trial's own values (``x=0.72 is above 0.7``) differs from
    point to point, and failures that depend on the point are not one bug repeated.
    """
    return _ADDRESS.sub("0x…", str(error))


def format_params(params: dict[str, Any]) -> str:
    """``C=12.35 gamma=0.004121`` (4 significant digits for floats)."""
    return " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())


@dataclass(frozen=True)
class SweepOutcome:
    """The ended trials of one sweep, in index order."""

    records: list[TrialRecord]
    metric: str
    mode: str  # max | min

    @property
    def finished(self) -> list[TrialRecord]:
        return [r for r in self.records if r.status == "FINISHED"]

    @property
    def failed(self) -> list[TrialRecord]:
        return [r for r in self.records if r.status != "FINISHED"]

    @property
    def best(self) -> TrialRecord | None:
        """The finished trial with the best value (the first of equals), or None."""
        sign = 1.0 if self.mode == "max" else -1.0
        return max(self.finished, key=lambda r: sign * r.value, default=None)

    def results(self, **extra: Any) -> dict[str, Any]:
        """The content of ``optimization_results.yaml`` (plus ``extra`` keys)."""
        best = self.best
        return {
            "name": "multiverse",
            "metric": self.metric,
            "mode": self.mode,
            "best_trial": best.index if best else None,
            "best_params": best.params if best else None,
            "best_value": best.value if best else None,
            "num_trials": len(self.records),
            "num_finished": len(self.finished),
            "num_failed": len(self.failed),
            "failures": {r.index: r.error for r in self.failed},
            **extra,
        }

    def trials_csv(self) -> str:
        """One row per trial: index, phase, batch, the point, the metric, status, duration, error."""
        names = sorted({k for r in self.records for k in r.params})
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["index", "phase", "batch", *names, self.metric, "status", "duration_s", "error"])
        for r in self.records:
            writer.writerow([r.index, r.phase, r.batch, *[r.params.get(n) for n in names], r.value, r.status,
                             r.duration_s, r.error or ""])
        return out.getvalue()

    def failure_lines(self) -> str:
        """The failures, one entry per distinct error, in order of first appearance.

        An error of one trial reads ``  #3 C=10 kernel=rbf: ValueError: boom``; one that several
        trials share is written once, with their count and indices:
        ``  10 × KeyError: 'lr' (trials #0, #1, #2, #3, #4, #5, #6, … #9)``, so that a bug every
        trial hits does not fill the summary.
        """
        groups: dict[str, list[TrialRecord]] = {}
        for r in self.failed:
            groups.setdefault(error_key(r.error), []).append(r)
        return "\n".join(_failure_entry(group) for group in groups.values())


def _failure_entry(group: list[TrialRecord]) -> str:
    """One failure summary entry: a trial with its point, or the shared error with its trials."""
    first = group[0]
    if len(group) == 1:
        return f"  #{first.index} {format_params(first.params)}: {first.error}"
    head, newline, rest = str(first.error).partition("\n")  # a multi-line error keeps its other lines below
    return f"  {len(group)} × {head} (trials {index_list([r.index for r in group])}){newline}{rest}"


def index_list(indices: list[int], most: int = MOST_INDICES) -> str:
    """``#0, #1, #2`` up to ``most`` indices; beyond, the first ``most - 1``, ``…`` and the last."""
    shown = [f"#{i}" for i in indices]
    if len(shown) > most:
        return f"{', '.join(shown[:most - 1])}, … {shown[-1]}"
    return ", ".join(shown)


_TRIAL_IN_WRITE = re.compile(r"\btrial #(\d+)")


def records_gap(dropped: list[str], waiting: list[str], sweep_dir: Any) -> str | None:
    """What of a sweep's records is not in MLflow when it ends, as one message naming the fix (None: all is).

    Args:
        dropped: the MLflow writes refused for good, each ``"<what it was about>: <error>"``.
        waiting: what each write left in the sweep's spool was about (``"closing the run of trial #3"``).
        sweep_dir: the sweep's directory, which holds the spool and the results.
    """
    if not dropped and not waiting:
        return None
    about = [*dropped, *waiting]
    trials = sorted({int(i) for text in about for i in _TRIAL_IN_WRITE.findall(text)})
    whose = [f"{len(trials)} trial(s) ({index_list(trials)})"] if trials else []
    if any(not _TRIAL_IN_WRITE.search(text) for text in about):
        whose.append("the sweep's run")
    parts = []
    if waiting:
        parts.append(f"{len(waiting)} write(s) wait in {sweep_dir}/mlflow_spool.jsonl: send them with "
                     f"`sweeper sync {sweep_dir}` once the store takes writes again")
    if dropped:
        shown = "\n    ".join(dropped[:MOST_INDICES]) + ("\n    …" if len(dropped) > MOST_INDICES else "")
        parts.append(f"{len(dropped)} write(s) were refused and are lost (every trial's result is in "
                     f"{sweep_dir}/optimization_results.yaml and trials.csv):\n    {shown}")
    return f"the MLflow records of {' and '.join(whose)} are incomplete: " + "; ".join(parts)
