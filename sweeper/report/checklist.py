"""Dodge et al.'s reporting checklist, filled from what MLflow recorded about a sweep.

Each item is answered from the records or marked *not recorded*; nothing is guessed.
Items the sweeper cannot know (the data splits) are listed as not recorded too, so the
author sees what the paper must still say.

References:
    Dodge, J., Gururangan, S., Card, D., Schwartz, R., & Smith, N. A. (2019). Show Your
    Work: Improved Reporting of Experimental Results. EMNLP-IJCNLP 2019 (Figure 1 and
    the reproducibility checklist in its appendix).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from sweeper.analysis.runs import SweepRecords

GPU_TAG_PREFIXES = ("gpu", "cuda", "cudnn", "nvidia", "device")


@dataclass(frozen=True)
class ChecklistItem:
    """One line of the checklist: ``value`` is None when the records lack it."""

    item: str
    value: str | None

    @property
    def recorded(self) -> bool:
        return self.value is not None


def _tag_values(trials: pd.DataFrame, key: str) -> str | None:
    """``value`` or ``a (3 trials), b (2 trials)`` for a ``tag.<key>`` column; None when absent."""
    column = f"tag.{key}"
    if column not in trials:
        return None
    counts = Counter(v for v in trials[column] if isinstance(v, str) and v)
    if not counts:
        return None
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{v} ({n} trials)" for v, n in counts.most_common())


def _tags_with_prefix(trials: pd.DataFrame, prefixes: tuple[str, ...]) -> dict[str, str]:
    keys = sorted(c[4:] for c in trials.columns if c.startswith("tag.") and c[4:].startswith(prefixes))
    found = {k: _tag_values(trials, k) for k in keys}
    return {k: v for k, v in found.items() if v is not None}


def fill_checklist(records: SweepRecords, *, metric: str, mode: str, kept: pd.DataFrame, n_filtered: int,
                   best: dict[str, Any] | None, figure: str | None) -> list[ChecklistItem]:
    """Answer each checklist item from the records.

    Args:
        records: The sweep.
        metric: The reported metric.
        mode: ``max`` or ``min``.
        kept: Finished trials with a finite metric that passed the filter.
        n_filtered: Finished trials the filter excluded.
        best: The best kept trial (``index``, ``run_id``, ``value``, ``params``), or None.
        figure: File name of the expected-max figure, or None if there is none.

    Returns:
        The items, in the checklist's order.
    """
    s, trials = records.settings, records.trials
    strategy = f"{records.strategy} (searcher seed {s.get('seed', '?')})"
    if records.strategy in ("ivr", "ucb"):
        strategy += f", {s.get('n_initial', '?')} Sobol points first, batches of {s.get('batch_size', '?')}"
    bounds = None
    if records.space is not None:
        bounds = "; ".join(f"`{k}`: `{v}`" for k, v in records.space.describe().items()) or "no search dimension"
        fixed = s.get("fixed_overrides") or " ".join(records.space.fixed_overrides)
        if fixed:
            bounds += f"; fixed: `{fixed}`"
    failed = int(records.failed().shape[0])
    counts = (f"{s.get('num_trials', '?')} planned, {len(trials)} run: {len(kept)} finished and kept, "
              f"{failed} failed, {n_filtered} filtered")
    values = kept[f"metric.{metric}"].to_numpy(dtype=np.float64) if len(kept) else np.array([])
    spread = (f"{values.mean():.6g} ± {values.std(ddof=1):.6g} (mean ± sd, n = {values.size})" if values.size > 1
              else f"{values[0]:.6g} (one trial)" if values.size else None)
    best_text = None
    if best is not None:
        point = ", ".join(f"{k}={v}" for k, v in best["params"].items())
        best_text = f"trial #{best['index']}: {point} → {metric} = {best['value']:.6g} (run `{best['run_id']}`)"
    durations = kept["duration_s"].to_numpy(dtype=np.float64) if len(kept) else np.array([])
    durations = durations[np.isfinite(durations)]
    runtime = (f"{durations.mean():.4g} s per trial (total {durations.sum():.4g} s over {durations.size} trials)"
               if durations.size else None)
    cpu = _tag_values(trials, "cpu.model")
    if cpu is not None:
        cores = _tag_values(trials, "cpu.count")
        hosts = _tag_values(trials, "host")
        cpu = f"{cpu}; {cores or '?'} cores; host {hosts or 'not recorded'}"
    gpu = _tags_with_prefix(trials, GPU_TAG_PREFIXES)
    software = {"python": _tag_values(trials, "python"), **_tags_with_prefix(trials, ("pkg.",))}
    software_text = ", ".join(f"{k.removeprefix('pkg.')} {v}" for k, v in software.items() if v) or None
    commit = _tag_values(trials, "git.commit")
    if commit is not None:
        commit += f" (dirty: {_tag_values(trials, 'git.dirty') or 'not recorded'})"
    return [
        ChecklistItem("Search strategy and seed", strategy),
        ChecklistItem("Selection criterion", f"{mode} `{metric}` on the trials' returned value"),
        ChecklistItem("Bounds of every hyperparameter", bounds),
        ChecklistItem("Number of trials", counts),
        ChecklistItem("Best configuration and its score", best_text),
        ChecklistItem(f"Mean ± sd of {metric} over finished trials", spread),
        ChecklistItem("Expected validation performance vs budget",
                      f"figure `{figure}` and the table above" if figure else None),
        ChecklistItem("Average run time per trial", runtime),
        ChecklistItem("Hardware: CPU", cpu),
        ChecklistItem("Hardware: GPU", ", ".join(f"{k} {v}" for k, v in gpu.items()) or None),
        ChecklistItem("Software versions", software_text),
        ChecklistItem("Code version (git commit)", commit),
        ChecklistItem("Data splits and dataset version", None),
    ]
